// The safetensors header: parsing the JSON and validating it as strictly as the reference
// reader (dtypes, shapes vs byte ranges with overflow checks, offsets tiling the data
// section, duplicate names, string-only metadata). Works on bytes only, no file access,
// so it is what a fuzzer drives.
#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "flambeau/io/safetensors.h"
#include "flambeau/io/safetensors_internal.h"

namespace flambeau::io {
namespace {

using Json = nlohmann::ordered_json;

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

// Thrown from the JSON parser's callback; caught in parse_json.
struct DuplicateKey {
  std::string key;
};
struct TooDeep {};

}  // namespace

Json parse_json(std::string_view text, const std::string& path, int max_depth) {
  // Keys seen in each open object, to reject duplicates (the JSON library keeps the last).
  std::vector<std::unordered_set<std::string>> open;
  int depth = 0;
  auto cb = [&](int, Json::parse_event_t ev, Json& parsed) {
    switch (ev) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (++depth > max_depth) throw TooDeep{};
        if (ev == Json::parse_event_t::object_start) open.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        open.pop_back();
        --depth;
        break;
      case Json::parse_event_t::array_end:
        --depth;
        break;
      case Json::parse_event_t::key:
        if (!open.back().insert(parsed.get<std::string>()).second) throw DuplicateKey{parsed.get<std::string>()};
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), cb);
  } catch (const DuplicateKey& d) {
    fail(path, "duplicate key '", d.key, "' in the header");
  } catch (const TooDeep&) {
    fail(path, "JSON nests deeper than the format allows");
  } catch (const nlohmann::json::exception& e) {
    fail(path, "not valid JSON (", e.what(), ")");
  }
}

namespace {

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

uint64_t get_u64(const Json& v, const std::string& path, const std::string& name, const char* what) {
  if (!v.is_number_unsigned())
    fail(path, "tensor '", name, "': ", what, " must be non-negative integers, got ", v.dump());
  return v.get<uint64_t>();
}

TensorInfo parse_entry(const std::string& name, const Json& e, const std::string& path) {
  if (!e.is_object()) fail(path, "tensor '", name, "': entry must be an object, got ", e.type_name());
  for (const auto& [k, v] : e.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets") fail(path, "tensor '", name, "': unknown field '", k, "'");
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!e.contains(k)) fail(path, "tensor '", name, "': missing field '", k, "'");
  TensorInfo t;
  t.name = name;
  const Json& dt = e["dtype"];
  if (!dt.is_string()) fail(path, "tensor '", name, "': dtype must be a string, got ", dt.dump());
  t.format_dtype = dt.get<std::string>();
  const FormatDType* f = find_dtype(t.format_dtype);
  if (!f) {
    for (const char* s : kSubByteDTypes)
      if (t.format_dtype == s) fail(path, "tensor '", name, "': dtype ", s, " (sub-byte) is not supported by flambeau");
    fail(path, "tensor '", name, "': unknown dtype '", t.format_dtype, "'");
  }
  const Json& shape = e["shape"];
  if (!shape.is_array()) fail(path, "tensor '", name, "': shape must be an array, got ", shape.dump());
  uint64_t numel = 1;
  bool overflow = false;
  for (const Json& d : shape) {
    const uint64_t n = get_u64(d, path, name, "shape entries");
    if (n > uint64_t(std::numeric_limits<int64_t>::max())) overflow = true;
    overflow = __builtin_mul_overflow(numel, n, &numel) || overflow;
    t.shape.push_back(int64_t(std::min<uint64_t>(n, std::numeric_limits<int64_t>::max())));
  }
  uint64_t nbytes = 0;
  overflow = __builtin_mul_overflow(numel, f->size, &nbytes) || overflow;
  // A zero-sized tensor can still carry a huge dimension; flambeau sizes are int64.
  if (overflow || nbytes > uint64_t(std::numeric_limits<int64_t>::max()))
    fail(path, "tensor '", name, "': shape ", shape.dump(), " overflows the byte size");
  const Json& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2)
    fail(path, "tensor '", name, "': data_offsets must be [begin, end], got ", off.dump());
  t.begin = get_u64(off[0], path, name, "data_offsets");
  t.end = get_u64(off[1], path, name, "data_offsets");
  if (t.end < t.begin) fail(path, "tensor '", name, "': data_offsets ", off.dump(), " end before begin");
  if (t.end - t.begin != nbytes)
    fail(path, "tensor '", name, "': ", t.format_dtype, " shape ", shape.dump(), " needs ", nbytes,
         " bytes but data_offsets ", off.dump(), " span ", t.end - t.begin);
  t.dtype = f->dtype;
  t.load_shape = t.shape;
  if (!f->native && f->size > 1) t.load_shape.push_back(int64_t(f->size));
  return t;
}

}  // namespace

Header parse_header(std::string_view text, uint64_t data_size, const std::string& path) {
  if (!valid_utf8(text)) fail(path, "header is not valid UTF-8");
  const Json root = parse_json(text, path, 3);  // {name: {"shape": [...]}}
  if (!root.is_object()) fail(path, "header must be a JSON object, got ", root.type_name());
  Header h;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      h.has_metadata = true;
      if (value.is_null()) continue;
      if (!value.is_object()) fail(path, "__metadata__ must be an object of strings, got ", value.type_name());
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(path, "__metadata__ value of '", k, "' must be a string, got ", v.dump());
        h.metadata.emplace_back(k, v.get<std::string>());
      }
      continue;
    }
    h.tensors.push_back(parse_entry(key, value, path));
  }
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
