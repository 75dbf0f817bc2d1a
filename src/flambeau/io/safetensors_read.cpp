// Reading safetensors files: SafeOpen reads and validates the header with pread; the first
// tensor asked for maps the file private and copy-on-write, so tensors are zero-copy views
// that writes never carry back to the file (rows are read with pread, without mapping). Also content sniffing and float8 decoding.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "flambeau/io/safetensors.h"
#include "flambeau/io/safetensors_internal.h"
#include "flambeau/ops/ops.h"

namespace flambeau::io {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

// A file descriptor closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly n bytes at `offset`; false on error or end of file.
bool pread_all(int fd, char* out, size_t n, uint64_t offset) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, out, n, off_t(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    out += r, n -= size_t(r), offset += uint64_t(r);
  }
  return true;
}

// Opens a regular file for reading; returns its size.
uint64_t open_regular(const std::string& path, Fd& f) {
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) fail(path, "cannot open (", std::strerror(errno), ")");
  struct stat st;
  if (::fstat(f.fd, &st) != 0) fail(path, "cannot stat (", std::strerror(errno), ")");
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  return uint64_t(st.st_size);
}

// The whole file, mapped private: PROT_WRITE makes writes copy-on-write (never written
// back); the file itself is opened read-only.
struct Mapping {
  void* base = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (base) ::munmap(base, size);
  }
};

void release_mapping(void*, size_t, void* ctx) { delete static_cast<std::shared_ptr<Mapping>*>(ctx); }

}  // namespace

struct SafeOpen::State {
  std::string path;
  Header header;
  std::unordered_map<std::string, size_t> index;
  Fd file;  // kept open: the mapping is made on first use, so opening costs the header only
  uint64_t size = 0, data_start = 0;
  std::once_flag mapped;
  std::shared_ptr<Mapping> map;

  const std::shared_ptr<Mapping>& mapping() {
    std::call_once(mapped, [&] {
      void* p = ::mmap(nullptr, size_t(size), PROT_READ | PROT_WRITE, MAP_PRIVATE, file.fd, 0);
      if (p == MAP_FAILED) fail(path, "cannot map the file (", std::strerror(errno), ")");
      auto m = std::make_shared<Mapping>();
      m->base = p, m->size = size_t(size);
      map = std::move(m);
    });
    return map;
  }
  const char* data(const TensorInfo& t) { return static_cast<const char*>(mapping()->base) + data_start + t.begin; }
};

SafeOpen::SafeOpen(const std::string& path) : s_(std::make_shared<State>()) {
  s_->path = path;
  const uint64_t size = open_regular(path, s_->file);
  char prefix[8];
  const size_t got = size < 8 ? size_t(size) : 8;
  if (!pread_all(s_->file.fd, prefix, got, 0)) fail(path, "cannot read the header length");
  const uint64_t n = check_prefix(std::string_view(prefix, got), size, path);
  std::string text(n, '\0');
  if (!pread_all(s_->file.fd, text.data(), n, 8)) fail(path, "cannot read the header");
  s_->header = parse_header(text, size - 8 - n, path);
  s_->size = size;
  s_->data_start = 8 + n;
  for (size_t i = 0; i < s_->header.tensors.size(); ++i) s_->index.emplace(s_->header.tensors[i].name, i);
}

SafeOpen::~SafeOpen() = default;
SafeOpen::SafeOpen(SafeOpen&&) noexcept = default;
SafeOpen& SafeOpen::operator=(SafeOpen&&) noexcept = default;

const std::string& SafeOpen::path() const { return s_->path; }
const Metadata& SafeOpen::metadata() const { return s_->header.metadata; }
const Header& SafeOpen::header() const { return s_->header; }
bool SafeOpen::contains(const std::string& name) const { return s_->index.count(name) > 0; }

std::vector<std::string> SafeOpen::keys() const {
  std::vector<std::string> k;
  for (const auto& t : s_->header.tensors) k.push_back(t.name);
  return k;
}

const TensorInfo& SafeOpen::info(const std::string& name) const {
  auto it = s_->index.find(name);
  if (it == s_->index.end()) fail(s_->path, "no tensor named '", name, "'");
  return s_->header.tensors[it->second];
}

std::pair<const void*, const void*> SafeOpen::mapping_range() const {
  const Mapping& m = *s_->mapping();
  const char* b = static_cast<const char*>(m.base);
  return {b, b + m.size};
}

Tensor SafeOpen::get_tensor(const std::string& name, bool copy) const {
  const TensorInfo& t = info(name);
  const char* src = s_->data(t);
  const size_t nbytes = size_t(t.end - t.begin);
  // Views need element-aligned addresses (the reference writer aligns; others may not).
  if (copy || reinterpret_cast<uintptr_t>(src) % itemsize(t.dtype) != 0) {
    auto storage = Storage::allocate(nbytes, kCPU);
    if (nbytes) std::memcpy(storage->data, src, nbytes);
    return make_tensor(storage, t.dtype, t.load_shape);
  }
  auto storage = std::make_shared<Storage>();
  storage->data = const_cast<char*>(src);
  storage->nbytes = nbytes;
  storage->ctx = new std::shared_ptr<Mapping>(s_->mapping());
  storage->deleter = release_mapping;
  return make_tensor(storage, t.dtype, t.load_shape);
}

Tensor SafeOpen::get_rows(const std::string& name, int64_t start, int64_t end) const {
  const TensorInfo& t = info(name);
  if (t.load_shape.empty()) fail(s_->path, "tensor '", name, "' is 0-dim and has no rows");
  const int64_t rows = t.load_shape[0];
  auto clamp = [rows](int64_t i) { return i < 0 ? std::max<int64_t>(i + rows, 0) : std::min(i, rows); };
  start = clamp(start), end = std::max(clamp(end), start);
  const uint64_t row_bytes = rows ? (t.end - t.begin) / uint64_t(rows) : 0;
  Dims shape = t.load_shape;
  shape[0] = end - start;
  const size_t nbytes = size_t(row_bytes * uint64_t(end - start));
  auto storage = Storage::allocate(nbytes, kCPU);
  const uint64_t offset = s_->data_start + t.begin + row_bytes * uint64_t(start);
  if (nbytes && !pread_all(s_->file.fd, static_cast<char*>(storage->data), nbytes, offset))
    fail(s_->path, "cannot read tensor '", name, "' (", std::strerror(errno), ")");
  return make_tensor(storage, t.dtype, shape);
}

bool is_safetensors(const std::string& path) {
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 8) return false;
  char prefix[8];
  if (!pread_all(f.fd, prefix, 8, 0)) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(prefix[i]);
  if (n > kMaxHeaderSize || n > uint64_t(st.st_size) - 8) return false;
  // The header may start with JSON whitespace (writers pad to align the data).
  std::string head(size_t(std::min<uint64_t>(n, 1 << 16)), '\0');
  if (!pread_all(f.fd, head.data(), head.size(), 8)) return false;
  const size_t i = head.find_first_not_of(" \t\r\n");
  return i != std::string::npos && head[i] == '{';
}

Tensor float8_to_float32(const Tensor& bytes, const std::string& format_dtype) {
  FLB_CHECK(bytes.dtype() == kUInt8, TypeError, "[float8_to_float32] expected uint8 bytes, got ",
            dtype_name(bytes.dtype()));
  const bool e4m3 = format_dtype == "F8_E4M3";
  FLB_CHECK(e4m3 || format_dtype == "F8_E5M2", ValueError,
            "[float8_to_float32] format_dtype must be F8_E4M3 or F8_E5M2, got '", format_dtype, "'");
  float table[256];
  for (int b = 0; b < 256; ++b) {
    const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, emax = e4m3 ? 15 : 31;
    const int e = (b & 0x7F) >> mbits, m = b & ((1 << mbits) - 1);
    float v;
    if (e4m3 && e == emax && m == (1 << mbits) - 1) v = NAN;  // E4M3FN: no inf, one NaN
    else if (!e4m3 && e == emax) v = m ? NAN : INFINITY;
    else if (e == 0) v = std::ldexp(float(m), 1 - bias - mbits);
    else v = std::ldexp(float(m + (1 << mbits)), e - bias - mbits);
    table[b] = (b & 0x80) ? -v : v;
  }
  const Tensor src = bytes.contiguous();
  Tensor out = empty(src.sizes(), kFloat32);
  const uint8_t* p = src.data<uint8_t>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < src.numel(); ++i) o[i] = table[p[i]];
  return out;
}

}  // namespace flambeau::io
