// safetensors load/save: round trips of every dtype and layout, zero-copy views that
// never write back, atomic save, raw (uint8) dtypes, lazy rows, sharded indexes, and one
// hand-made broken file per validation rule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_util.h"

using namespace flambeau;
using flambeau::testing::bitwise_equal;
using flambeau::testing::contains;
using flambeau::testing::error_of;
using flambeau::testing::Layout;
using flambeau::testing::random_tensor;
using flambeau::testing::values;
namespace fs = std::filesystem;

namespace {

const DType kAll[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

// A fresh directory per test, removed at the end.
class Safetensors : public ::testing::Test {
 protected:
  fs::path dir;
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir = fs::temp_directory_path() / ("flb_st_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file with the given header text and `data_size` zero bytes of data; `n` overrides
// the length prefix.
std::string raw_file(const std::string& header, size_t data_size, std::optional<uint64_t> n = {}) {
  const uint64_t len = n.value_or(header.size());
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((len >> (8 * i)) & 0xFF);
  return s + header + std::string(data_size, '\0');
}

// The message of loading `bytes` written to `path` (must be a ValueError).
std::string load_error(const std::string& path, const std::string& bytes) {
  write_bytes(path, bytes);
  std::string open_msg = error_of<ValueError>([&] { io::SafeOpen f(path); });
  std::string load_msg = error_of<ValueError>([&] { load(path); });
  EXPECT_EQ(open_msg, load_msg);
  EXPECT_TRUE(open_msg.rfind("[safetensors] " + path + ": ", 0) == 0) << open_msg;
  return open_msg;
}

}  // namespace

TEST_F(Safetensors, RoundTripEveryDtypeAndLayout) {
  io::TensorList in;
  uint64_t seed = 1;
  for (DType dt : kAll) {
    for (Layout l : flambeau::testing::kAllLayouts)
      in.emplace_back(std::string(dtype_name(dt)) + "." + flambeau::testing::layout_name(l),
                      random_tensor({3, 5}, dt, l, seed++));
    in.emplace_back(std::string(dtype_name(dt)) + ".scalar", random_tensor({}, dt, Layout::Contiguous, seed++));
    in.emplace_back(std::string(dtype_name(dt)) + ".empty", empty({0, 4}, dt));
  }
  const std::string p = file("all.safetensors");
  save(in, p, {{"format", "pt"}, {"note", "héllo"}});
  io::Metadata meta;
  const io::TensorList out = load(p, &meta);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(in[i].first);
    EXPECT_EQ(out[i].first, in[i].first);  // order kept
    EXPECT_TRUE(bitwise_equal(out[i].second, in[i].second));
  }
  EXPECT_EQ(meta, (io::Metadata{{"format", "pt"}, {"note", "héllo"}}));
  const io::TensorList copied = load(p, {.copy = true});
  for (size_t i = 0; i < in.size(); ++i) EXPECT_TRUE(bitwise_equal(copied[i].second, in[i].second));
}

TEST_F(Safetensors, SharedStorageSavedAsSeparateTensors) {
  Tensor base = arange(12, kFloat32).reshape({3, 4});
  const std::string p = file("shared.safetensors");
  save({{"a", base}, {"row", base[1]}, {"col", base.slice(1, 1, 3)}}, p);
  const auto out = load(p);
  EXPECT_EQ(values(out[1].second), (std::vector<double>{4, 5, 6, 7}));
  EXPECT_EQ(values(out[2].second), (std::vector<double>{1, 2, 5, 6, 9, 10}));
}

TEST_F(Safetensors, HeaderPaddedAndTensorsAligned) {
  const std::string p = file("layout.safetensors");
  save({{"b", ones({3}, kBool)}, {"h", ones({3}, kFloat16)}, {"d", ones({3}, kFloat64)}}, p);
  const std::string bytes = read_bytes(p);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 3 + 6 + 24);
  io::SafeOpen f(p);
  EXPECT_EQ(f.keys(), (std::vector<std::string>{"b", "h", "d"}));
  for (const auto& t : f.header().tensors) EXPECT_EQ(t.begin % itemsize(t.dtype), 0u) << t.name;
  EXPECT_EQ(f.info("d").begin, 0u);  // largest element first
}

TEST_F(Safetensors, ZeroCopyViewsOfTheMapping) {
  const std::string p = file("z.safetensors");
  save({{"w", arange(64, kFloat32)}, {"i", arange(5, kInt64)}}, p);
  io::SafeOpen f(p);
  const auto [lo, hi] = f.mapping_range();
  for (const std::string name : {"w", "i"}) {
    const Tensor view = f.get_tensor(name);
    const char* d = static_cast<const char*>(view.data_ptr());
    EXPECT_TRUE(d >= lo && d + view.numel() * view.element_size() <= hi) << name;
    const Tensor copy = f.get_tensor(name, /*copy=*/true);
    const char* c = static_cast<const char*>(copy.data_ptr());
    EXPECT_FALSE(c >= lo && c < hi) << name;
    EXPECT_TRUE(bitwise_equal(view, copy));
  }
  // The mapping outlives the SafeOpen while a tensor views it.
  Tensor kept;
  {
    io::SafeOpen g(p);
    kept = g.get_tensor("w");
  }
  EXPECT_EQ(values(kept)[63], 63.0);
}

TEST_F(Safetensors, WritesToLoadedTensorsDoNotChangeTheFile) {
  const std::string p = file("w.safetensors");
  save({{"w", arange(1024, kFloat32)}}, p);
  const std::string before = read_bytes(p);
  {
    io::TensorList t = load(p);
    t[0].second.fill_(7);
    EXPECT_EQ(values(t[0].second)[0], 7.0);
    EXPECT_EQ(values(load(p)[0].second)[0], 0.0);  // another load sees the file
  }
  EXPECT_EQ(read_bytes(p), before);
}

TEST_F(Safetensors, FailedSaveLeavesTheOldFileIntact) {
  const std::string p = file("keep.safetensors");
  save({{"a", ones({4})}}, p);
  const std::string before = read_bytes(p);
  EXPECT_TRUE(contains(error_of<ValueError>([&] { save({{"a", ones({2})}, {"a", ones({3})}}, p); }),
                       "duplicate tensor name 'a'"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { save({{"x", ones({2})}, {"y", Tensor()}}, p); }),
                       "tensor 'y' is undefined"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { save({{"__metadata__", ones({2})}}, p); }), "reserved"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { save({{"x", ones({2})}}, p, {{"k", "1"}, {"k", "2"}}); }),
                       "duplicate metadata key 'k'"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { save({{std::string("\xff\xfe"), ones({2})}}, p); }), "UTF-8"));
  EXPECT_EQ(read_bytes(p), before);
  // A write that fails at the OS level (missing directory) raises and leaves nothing.
  EXPECT_TRUE(contains(error_of<Error>([&] { save({{"a", ones({2})}}, file("no/such/dir.safetensors")); }),
                       "cannot create"));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().filename() != "keep.safetensors" ? 100 : 1;
  EXPECT_EQ(files, 1);  // no temporary left behind
}

TEST_F(Safetensors, RecognisedByContentNotExtension) {
  const std::string p = file("weights.bin");
  save({{"a", ones({2})}}, p);
  EXPECT_TRUE(io::is_safetensors(p));
  EXPECT_EQ(values(load(p)[0].second), (std::vector<double>{1, 1}));
  const std::string q = file("pickle.pt");
  write_bytes(q, std::string("\x80\x02}q\x00.", 6) + std::string(32, 'x'));
  EXPECT_FALSE(io::is_safetensors(q));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { load(q); }), "not a safetensors file"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { load(file("missing.safetensors")); }), "no such file"));
}

TEST_F(Safetensors, LeadingWhitespaceEmptyAndScalarTensors) {
  const std::string h = R"(  {"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                        R"("e":{"dtype":"I64","shape":[2,0],"data_offsets":[4,4]}}  )";
  std::string bytes = raw_file(h, 4);
  const float v = 2.5f;
  std::memcpy(&bytes[bytes.size() - 4], &v, 4);
  write_bytes(file("ws.safetensors"), bytes);
  const auto out = load(file("ws.safetensors"));
  EXPECT_EQ(out[0].second.dim(), 0);
  EXPECT_EQ(out[0].second.item<float>(), 2.5f);  // unaligned data start: copied, still right
  EXPECT_EQ(out[1].second.sizes().vec(), (std::vector<int64_t>{2, 0}));
  write_bytes(file("none.safetensors"), raw_file("{}", 0));
  EXPECT_TRUE(load(file("none.safetensors")).empty());
}

TEST_F(Safetensors, RawDtypesLoadAsBytes) {
  const std::string h = R"({"u":{"dtype":"U16","shape":[2,3],"data_offsets":[0,12]},)"
                        R"("f":{"dtype":"F8_E4M3","shape":[4],"data_offsets":[12,16]},)"
                        R"("g":{"dtype":"F8_E5M2","shape":[3],"data_offsets":[16,19]}})";
  std::string bytes = raw_file(h, 19);
  const size_t d = bytes.size() - 19;
  bytes[d] = 1, bytes[d + 1] = 2;  // u[0, 0] = 0x0201
  const char f8[] = {0x38, 0x7E, char(0xFF), char(0xB8)}, e5[] = {0x3C, 0x7C, 0x01};
  std::memcpy(&bytes[d + 12], f8, 4);
  std::memcpy(&bytes[d + 16], e5, 3);
  const std::string p = file("raw.safetensors");
  write_bytes(p, bytes);
  io::SafeOpen f(p);
  const Tensor u = f.get_tensor("u");
  EXPECT_EQ(u.dtype(), kUInt8);
  EXPECT_EQ(u.sizes().vec(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(values(u)[0], 1.0);
  EXPECT_EQ(values(u)[1], 2.0);
  EXPECT_EQ(f.info("u").format_dtype, "U16");
  const Tensor fv = f.get_tensor("f");
  EXPECT_EQ(fv.sizes().vec(), (std::vector<int64_t>{4}));
  const auto x = values(io::float8_to_float32(fv, "F8_E4M3"));
  EXPECT_EQ(x[0], 1.0);
  EXPECT_EQ(x[1], 448.0);
  EXPECT_TRUE(std::isnan(x[2]));
  EXPECT_EQ(x[3], -1.0);
  const auto y = values(io::float8_to_float32(f.get_tensor("g"), "F8_E5M2"));
  EXPECT_EQ(y[0], 1.0);
  EXPECT_TRUE(std::isinf(y[1]));
  EXPECT_EQ(y[2], std::ldexp(1.0, -16));  // smallest subnormal
  EXPECT_TRUE(contains(error_of<ValueError>([&] { io::float8_to_float32(fv, "F16"); }), "F8_E4M3 or F8_E5M2"));
}

TEST_F(Safetensors, GetRowsReadsASliceOfDim0) {
  const std::string p = file("rows.safetensors");
  save({{"m", arange(20, kInt32).reshape({5, 4})}, {"s", scalar_tensor(1.0)}}, p);
  io::SafeOpen f(p);
  const Tensor r = f.get_rows("m", 1, 3);
  EXPECT_EQ(r.sizes().vec(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values(r), (std::vector<double>{4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(values(f.get_rows("m", -1, 100)), (std::vector<double>{16, 17, 18, 19}));
  EXPECT_EQ(f.get_rows("m", 4, 2).numel(), 0);
  EXPECT_TRUE(contains(error_of<ValueError>([&] { f.get_rows("s", 0, 1); }), "0-dim"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { f.get_tensor("nope"); }), "no tensor named 'nope'"));
}

TEST_F(Safetensors, ShardedIndex) {
  fs::create_directories(dir / "ckpt");
  save({{"a", arange(3, kFloat32)}, {"b", ones({2}, kInt64)}}, file("ckpt/model-1.safetensors"));
  save({{"c", full({2}, 5.0, kFloat64)}}, file("ckpt/model-2.safetensors"));
  write_bytes(file("ckpt/model.safetensors.index.json"),
              R"({"metadata": {"total_size": 52}, "weight_map": {"c": "model-2.safetensors",)"
              R"( "a": "model-1.safetensors", "b": "model-1.safetensors"}})");
  io::Metadata meta;
  for (const std::string p : {file("ckpt/model.safetensors.index.json"), file("ckpt")}) {
    const auto out = load(p, &meta);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].first, "c");
    EXPECT_EQ(values(out[0].second), (std::vector<double>{5, 5}));
    EXPECT_EQ(values(out[1].second), (std::vector<double>{0, 1, 2}));
    EXPECT_EQ(out[2].second.dtype(), kInt64);
    EXPECT_EQ(meta, (io::Metadata{{"total_size", "52"}}));
  }
  const std::string bad = file("ckpt/bad.json");
  write_bytes(bad, R"({"weight_map": {"z": "model-1.safetensors"}})");
  EXPECT_TRUE(contains(error_of<ValueError>([&] { load(bad); }), "tensor 'z' is not in its shard"));
  write_bytes(bad, R"({"weight_map": {"a": "../x.safetensors"}})");
  EXPECT_TRUE(contains(error_of<ValueError>([&] { load(bad); }), "not a path inside"));
  write_bytes(bad, R"({"weight_map": {"a": "model-1.safetensors", "a": "model-1.safetensors"}})");
  EXPECT_TRUE(contains(error_of<ValueError>([&] { load(bad); }), "duplicate key 'a'"));
  write_bytes(bad, R"({"weights": {}})");
  EXPECT_TRUE(contains(error_of<ValueError>([&] { load(bad); }), "\"weight_map\""));
}

// ---- one hand-made broken file per validation rule ----------------------------------

namespace {
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, uint64_t b,
                  uint64_t e) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(e) + "]}";
}
}  // namespace

TEST_F(Safetensors, RejectsBadLengthPrefix) {
  const std::string p = file("bad");
  EXPECT_TRUE(contains(load_error(p, std::string(5, '\0')), "file too small (5 bytes)"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{}", 0, 100'000'001)), "exceeds the limit of 100000000"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{}", 0, 3)), "runs past the end of the file"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{}", 0, ~uint64_t(0))), "exceeds the limit"));
}

TEST_F(Safetensors, RejectsBadJson) {
  const std::string p = file("bad");
  EXPECT_TRUE(contains(load_error(p, raw_file("{\"a\xff\": 1}", 0)), "not valid UTF-8"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{\"\xed\xa0\x80\": 1}", 0)), "not valid UTF-8"));  // surrogate
  EXPECT_TRUE(contains(load_error(p, raw_file("{\"a\": ", 0)), "not valid JSON"));
  EXPECT_TRUE(contains(load_error(p, raw_file("[1, 2]", 0)), "must be a JSON object"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{\"a\": {\"shape\": [[[1]]]}}", 0)), "nests deeper"));
}

TEST_F(Safetensors, RejectsUnknownDtypes) {
  const std::string p = file("bad");
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("w", "F33", "[1]", 0, 4) + "}", 4)), "unknown dtype 'F33'"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("w", "F4", "[2]", 0, 1) + "}", 1)), "F4 (sub-byte)"));
  EXPECT_TRUE(contains(load_error(p, raw_file(R"({"w":{"dtype":5,"shape":[],"data_offsets":[0,0]}})", 0)),
                       "dtype must be a string"));
}

TEST_F(Safetensors, RejectsBadEntries) {
  const std::string p = file("bad");
  EXPECT_TRUE(contains(load_error(p, raw_file(R"({"w":{"dtype":"F32","shape":[1]}})", 0)),
                       "missing field 'data_offsets'"));
  EXPECT_TRUE(contains(load_error(p, raw_file(R"({"w":{"dtype":"F32","shape":[],"data_offsets":[0,4],"x":1}})", 4)),
                       "unknown field 'x'"));
  EXPECT_TRUE(contains(load_error(p, raw_file(R"({"w":[1]})", 0)), "entry must be an object"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("w", "F32", "[-1]", 0, 4) + "}", 4)),
                       "non-negative integers"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("w", "F32", "[1.5]", 0, 4) + "}", 4)),
                       "non-negative integers"));
  EXPECT_TRUE(contains(load_error(p, raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4)),
                       "must be [begin, end]"));
}

TEST_F(Safetensors, RejectsShapeNotMatchingOffsets) {
  const std::string p = file("bad");
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("w", "F32", "[2,3]", 0, 20) + "}", 20)),
                       "F32 shape [2,3] needs 24 bytes but data_offsets [0,20] span 20"));
  // 2^32 * 2^32 elements overflow u64; 2^62 F64 elements overflow the byte count.
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("w", "F32", "[4294967296,4294967296]", 0, 0) + "}", 0)),
                       "overflows the byte size"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("w", "F64", "[4611686018427387904]", 0, 0) + "}", 0)),
                       "overflows the byte size"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("w", "F32", "[9223372036854775808,0]", 0, 0) + "}", 0)),
                       "overflows the byte size"));
}

TEST_F(Safetensors, RejectsOffsetsThatDoNotTileTheData) {
  const std::string p = file("bad");
  const std::string a = entry("a", "F32", "[1]", 0, 4);
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("a", "F32", "[1]", 4, 8) + "}", 8)),
                       "tensor 'a': data_offsets [4, 8] leave a gap"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + a + "," + entry("b", "F32", "[1]", 8, 12) + "}", 12)),
                       "tensor 'b': data_offsets [8, 12] leave a gap"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + a + "," + entry("b", "F32", "[1]", 2, 6) + "}", 6)),
                       "overlap the previous tensor"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + entry("a", "F32", "[0]", 4, 0) + "}", 4)), "end before begin"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + a + "}", 6)), "cover 4 bytes of the data section but it holds 6"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + a + "}", 2)), "(file truncated)"));
  EXPECT_TRUE(contains(load_error(p, raw_file("{}", 3)), "trailing bytes"));
}

TEST_F(Safetensors, RejectsDuplicateNamesAndBadMetadata) {
  const std::string p = file("bad");
  const std::string a = entry("a", "F32", "[1]", 0, 4);
  EXPECT_TRUE(contains(load_error(p, raw_file("{" + a + "," + a + "}", 4)), "duplicate key 'a'"));
  EXPECT_TRUE(contains(load_error(p, raw_file(R"({"__metadata__":{"k":1},)" + a + "}", 4)),
                       "__metadata__ value of 'k' must be a string, got 1"));
  EXPECT_TRUE(contains(load_error(p, raw_file(R"({"__metadata__":[1],)" + a + "}", 4)),
                       "__metadata__ must be an object"));
  EXPECT_TRUE(contains(load_error(p, raw_file(R"({"__metadata__":{"k":"x","k":"y"},)" + a + "}", 4)),
                       "duplicate key 'k'"));
}
