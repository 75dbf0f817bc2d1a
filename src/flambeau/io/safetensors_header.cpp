// The safetensors header: parsing the JSON and validating it as strictly as the reference
// reader (dtypes, shapes vs byte ranges with overflow checks, offsets tiling the data
// section, duplicate names, string-only metadata). The JSON is read by a SAX handler that
// fills the Header directly (no JSON tree: opening a file costs little more than reading
// its header). Works on bytes only, no file access, so it is what the fuzzer drives.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "flambeau/io/safetensors.h"
#include "flambeau/io/safetensors_internal.h"

namespace flambeau::io {
namespace {

// Note [safetensors dtypes]
// The ten format dtypes flambeau has load as themselves. The byte-aligned ones it lacks
// (U16 U32 U64, the 8-bit floats, C64) load as raw uint8 bytes: an element of size 1
// keeps the shape, a wider one adds a last dimension of its size in bytes (U32 (3, 4)
// loads as uint8 (3, 4, 4), little-endian). float8_to_float32 converts F8_E4M3/F8_E5M2.
// Sub-byte types (F4, F6_*) are refused with a clear error, as is any unknown name.
struct FormatDType {
  const char* name;
  uint64_t size;  // bytes per element
  bool native;
  DType dtype;  // the flambeau dtype (native) or kUInt8 (raw bytes)
};
constexpr FormatDType kFormatDTypes[] = {
    {"BOOL", 1, true, kBool},      {"U8", 1, true, kUInt8},          {"I8", 1, true, kInt8},
    {"I16", 2, true, kInt16},      {"I32", 4, true, kInt32},         {"I64", 8, true, kInt64},
    {"F16", 2, true, kFloat16},    {"BF16", 2, true, kBFloat16},     {"F32", 4, true, kFloat32},
    {"F64", 8, true, kFloat64},    {"U16", 2, false, kUInt8},        {"U32", 4, false, kUInt8},
    {"U64", 8, false, kUInt8},     {"F8_E4M3", 1, false, kUInt8},    {"F8_E5M2", 1, false, kUInt8},
    {"F8_E8M0", 1, false, kUInt8}, {"F8_E4M3FNUZ", 1, false, kUInt8}, {"F8_E5M2FNUZ", 1, false, kUInt8},
    {"C64", 8, false, kUInt8},
};
constexpr const char* kSubByteDTypes[] = {"F4", "F6_E2M3", "F6_E3M2"};

const FormatDType* find_dtype(std::string_view name) {
  for (const auto& d : kFormatDTypes)
    if (name == d.name) return &d;
  return nullptr;
}

// Strict UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* e = p + s.size();
  while (p < e) {
    const unsigned c = *p;
    int n;
    uint32_t cp;
    if (c < 0x80) { ++p; continue; }
    if ((c & 0xE0) == 0xC0) n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) n = 3, cp = c & 0x07;
    else return false;
    if (e - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    p += n + 1;
  }
  return true;
}

std::string json_list(const std::vector<uint64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  return s + "]";
}

// Turns an entry's raw fields into a TensorInfo: dtype known, byte size of the shape
// without overflow and equal to the span of data_offsets.
TensorInfo make_info(std::string name, std::string dtype, const std::vector<uint64_t>& shape,
                     const std::vector<uint64_t>& offsets, const std::string& path) {
  TensorInfo t;
  t.name = std::move(name);
  t.format_dtype = std::move(dtype);
  const FormatDType* f = find_dtype(t.format_dtype);
  if (!f) {
    for (const char* s : kSubByteDTypes)
      if (t.format_dtype == s) fail(path, "tensor '", t.name, "': dtype ", s, " (sub-byte) is not supported by flambeau");
    fail(path, "tensor '", t.name, "': unknown dtype '", t.format_dtype, "'");
  }
  constexpr uint64_t kMax = uint64_t(std::numeric_limits<int64_t>::max());
  uint64_t numel = 1;
  bool overflow = false;
  for (uint64_t n : shape) {
    overflow = __builtin_mul_overflow(numel, n, &numel) || n > kMax || overflow;
    t.shape.push_back(int64_t(std::min(n, kMax)));
  }
  uint64_t nbytes = 0;
  overflow = __builtin_mul_overflow(numel, f->size, &nbytes) || overflow;
  // A zero-sized tensor can still carry a huge dimension; flambeau sizes are int64.
  if (overflow || nbytes > kMax) fail(path, "tensor '", t.name, "': shape ", json_list(shape), " overflows the byte size");
  if (offsets.size() != 2) fail(path, "tensor '", t.name, "': data_offsets must be [begin, end], got ", json_list(offsets));
  t.begin = offsets[0], t.end = offsets[1];
  if (t.end < t.begin) fail(path, "tensor '", t.name, "': data_offsets ", json_list(offsets), " end before begin");
  if (t.end - t.begin != nbytes)
    fail(path, "tensor '", t.name, "': ", t.format_dtype, " shape ", json_list(shape), " needs ", nbytes,
         " bytes but data_offsets ", json_list(offsets), " span ", t.end - t.begin);
  t.dtype = f->dtype;
  t.load_shape = t.shape;
  if (!f->native && f->size > 1) t.load_shape.push_back(int64_t(f->size));
  return t;
}

// SAX handler for {"__metadata__": {str: str}, name: {"dtype": str, "shape": [u64...],
// "data_offsets": [u64, u64]}, ...}: every event is checked against where it occurs, and
// anything else raises ValueError naming the tensor and what it got.
class HeaderReader {
 public:
  using Json = nlohmann::json;
  HeaderReader(Header& h, const std::string& path) : h_(h), path_(path) {}

  bool null() { return scalar("null"); }
  bool boolean(bool b) { return scalar(b ? "true" : "false"); }
  bool number_integer(int64_t v) { return scalar(std::to_string(v)); }
  bool number_float(double, const std::string& text) { return scalar(text); }
  bool binary(Json::binary_t&) { return scalar("binary"); }
  bool number_unsigned(uint64_t v) {
    if (field_ == kShape && depth_ == 3) return shape_.push_back(v), true;
    if (field_ == kOffsets && depth_ == 3) return offsets_.push_back(v), true;
    return scalar(std::to_string(v));
  }
  bool string(std::string& v) {
    if (depth_ == 2 && in_meta_) return h_.metadata.emplace_back(key_, std::move(v)), true;
    if (depth_ == 2 && field_ == kDtype) return dtype_ = std::move(v), true;
    return scalar('"' + v + '"');
  }
  bool start_object(size_t) { return open("object"); }
  bool start_array(size_t) { return open("array"); }
  bool end_object() {
    if (depth_ == 2 && !in_meta_) end_entry();
    return close();
  }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (depth_ == 1) {
      if (!names_.insert(k).second) fail(path_, "duplicate key '", k, "' in the header");
      in_meta_ = k == "__metadata__";
      if (in_meta_) h_.has_metadata = true;
      name_ = std::move(k);
    } else if (in_meta_) {
      if (!meta_keys_.insert(k).second) fail(path_, "duplicate key '", k, "' in the header");
      key_ = std::move(k);
    } else {
      const int f = k == "dtype" ? kDtype : k == "shape" ? kShape : k == "data_offsets" ? kOffsets : -1;
      if (f < 0) fail(path_, "tensor '", name_, "': unknown field '", k, "'");
      if (seen_ & (1 << f)) fail(path_, "duplicate key '", k, "' in the header");
      seen_ |= 1 << f, field_ = f;
    }
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    fail(path_, "not valid JSON (", e.what(), ")");
  }

 private:
  enum { kDtype, kShape, kOffsets, kNone };

  bool open(const char* type) {
    if (++depth_ > 3) fail(path_, "JSON nests deeper than the format allows");
    if (depth_ == 1 && type[0] != 'o') fail(path_, "header must be a JSON object, got ", type);
    if (depth_ == 2 && in_meta_ && type[0] != 'o') fail(path_, "__metadata__ must be an object of strings, got ", type);
    if (depth_ == 2 && !in_meta_) {
      if (type[0] != 'o') fail(path_, "tensor '", name_, "': entry must be an object, got ", type);
      seen_ = 0, field_ = kNone, dtype_.clear(), shape_.clear(), offsets_.clear();
    }
    if (depth_ == 3) {
      if (in_meta_) fail(path_, "__metadata__ value of '", key_, "' must be a string, got ", type);
      if (field_ == kDtype) fail(path_, "tensor '", name_, "': dtype must be a string, got ", type);
      if (type[0] != 'a') fail(path_, "tensor '", name_, "': ", field_name(), " must be an array, got ", type);
    }
    return true;
  }
  bool close() {
    if (depth_ == 2) meta_keys_.clear();
    if (depth_ == 2 && in_meta_) in_meta_ = false;
    --depth_;
    return true;
  }
  // A scalar where it does not belong; `text` is how it was written.
  bool scalar(const std::string& text) {
    if (depth_ == 0) fail(path_, "header must be a JSON object, got ", text);
    if (depth_ == 1 && name_ == "__metadata__" && text == "null") return true;  // "__metadata__": null
    if (depth_ == 1 && in_meta_) fail(path_, "__metadata__ must be an object of strings, got ", text);
    if (depth_ == 1) fail(path_, "tensor '", name_, "': entry must be an object, got ", text);
    if (in_meta_) fail(path_, "__metadata__ value of '", key_, "' must be a string, got ", text);
    if (depth_ == 2 && field_ == kDtype) fail(path_, "tensor '", name_, "': dtype must be a string, got ", text);
    if (depth_ == 2) fail(path_, "tensor '", name_, "': ", field_name(), " must be an array, got ", text);
    fail(path_, "tensor '", name_, "': ", field_name(), " must be non-negative integers, got ", text);
  }
  const char* field_name() const { return field_ == kShape ? "shape" : "data_offsets"; }
  void end_entry() {
    for (int f : {kDtype, kShape, kOffsets})
      if (!(seen_ & (1 << f)))
        fail(path_, "tensor '", name_, "': missing field '",
             f == kDtype ? "dtype" : f == kShape ? "shape" : "data_offsets", "'");
    h_.tensors.push_back(make_info(name_, dtype_, shape_, offsets_, path_));
  }

  Header& h_;
  const std::string& path_;
  int depth_ = 0;
  bool in_meta_ = false;  // inside the value of "__metadata__"
  std::unordered_set<std::string> names_, meta_keys_;
  std::string name_, key_;  // current top-level key; current metadata key
  // The entry being read: fields seen (bit per field), the one whose value comes next.
  int seen_ = 0, field_ = kNone;
  std::string dtype_;
  std::vector<uint64_t> shape_, offsets_;
};

}  // namespace

Header parse_header(std::string_view text, uint64_t data_size, const std::string& path) {
  if (!valid_utf8(text)) fail(path, "header is not valid UTF-8");
  Header h;
  HeaderReader reader(h, path);
  nlohmann::json::sax_parse(text.begin(), text.end(), &reader);
  // The byte ranges, in offset order, must tile [0, data_size) with no gap or overlap.
  std::vector<const TensorInfo*> order;
  for (const auto& t : h.tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  for (const TensorInfo* t : order) {
    if (t->begin != at)
      fail(path, "tensor '", t->name, "': data_offsets [", t->begin, ", ", t->end, "] ",
           t->begin < at ? "overlap the previous tensor" : "leave a gap after the previous tensor", " (expected begin ", at,
           ")");
    at = t->end;
  }
  if (at != data_size)
    fail(path, "tensors cover ", at, " bytes of the data section but it holds ", data_size,
         at < data_size ? " (trailing bytes)" : " (file truncated)");
  return h;
}

Header parse_buffer(std::string_view file, const std::string& path) {
  const uint64_t n = check_prefix(file, file.size(), path);
  return parse_header(file.substr(8, n), file.size() - 8 - n, path);
}

uint64_t check_prefix(std::string_view first8, uint64_t file_size, const std::string& path) {
  if (file_size < 8 || first8.size() < 8) fail(path, "file too small (", file_size, " bytes) for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(first8[size_t(i)]);
  if (n > kMaxHeaderSize) fail(path, "header length ", n, " exceeds the limit of ", kMaxHeaderSize, " bytes");
  if (n > file_size - 8) fail(path, "header length ", n, " runs past the end of the file (", file_size, " bytes)");
  return n;
}

}  // namespace flambeau::io
