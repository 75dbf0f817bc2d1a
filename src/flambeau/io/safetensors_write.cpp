// Writing safetensors: every check first, then the header (padded with spaces to a
// multiple of 8) and the tensors' bytes go to a temporary file in the target directory,
// which is fsync'ed and renamed over the target, so a crash never leaves a torn file.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "flambeau/io/safetensors.h"
#include "flambeau/io/safetensors_internal.h"

namespace flambeau::io {
namespace {

const char* format_dtype(DType t) {
  switch (t) {
    case kBool: return "BOOL";
    case kUInt8: return "U8";
    case kInt8: return "I8";
    case kInt16: return "I16";
    case kInt32: return "I32";
    case kInt64: return "I64";
    case kFloat16: return "F16";
    case kBFloat16: return "BF16";
    case kFloat32: return "F32";
    case kFloat64: return "F64";
  }
  return "?";
}

[[noreturn]] void fail_io(const std::string& path, const char* what) {
  throw Error(detail::str_cat("[safetensors] ", path, ": cannot ", what, " (", std::strerror(errno), ")"));
}

// Writes a file sequentially and starts its writeback as it goes (sync_file_range), waiting
// for a chunk only once two more have been written: the fsync at the end then finds little
// left to flush, and dirty pages stay bounded, so disk and memcpy overlap.
class StreamingWriter {
 public:
  StreamingWriter(int fd, const std::string& path) : fd_(fd), path_(path) {}
  void write(const char* p, size_t n) {
    while (n > 0) {
      const size_t step = std::min(n, kChunk - (written_ - started_));
      write_all(p, step);
      p += step, n -= step;
      if (written_ - started_ == kChunk) flush_chunk();
    }
  }
  void fsync() {
    if (::fsync(fd_) != 0) fail_io(path_, "fsync");
  }

 private:
  static constexpr size_t kChunk = size_t(32) << 20;
  void write_all(const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail_io(path_, "write");
      p += w, n -= size_t(w), written_ += size_t(w);
    }
  }
  void flush_chunk() {
    ::sync_file_range(fd_, off_t(started_), off_t(kChunk), SYNC_FILE_RANGE_WRITE);
    if (started_ >= 2 * kChunk)
      ::sync_file_range(fd_, off_t(started_ - 2 * kChunk), off_t(kChunk),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    started_ = written_;
  }
  int fd_;
  const std::string& path_;
  size_t written_ = 0, started_ = 0;  // bytes written; start of the chunk being filled
};

// The header text, padded with spaces so that 8 + its length is a multiple of 8.
std::string header_text(const TensorList& tensors, const std::vector<size_t>& layout, const Metadata& metadata,
                        const std::string& path) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = h["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
  }
  std::vector<uint64_t> begin(tensors.size());
  uint64_t at = 0;
  for (size_t i : layout) {
    begin[i] = at;
    at += uint64_t(tensors[i].second.numel()) * tensors[i].second.element_size();
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i].second;
    const uint64_t nbytes = uint64_t(t.numel()) * t.element_size();
    h[tensors[i].first] = {{"dtype", format_dtype(t.dtype())},
                           {"shape", std::vector<int64_t>(t.sizes().begin(), t.sizes().end())},
                           {"data_offsets", {begin[i], begin[i] + nbytes}}};
  }
  std::string s;
  try {
    s = h.dump();
  } catch (const nlohmann::json::exception&) {
    fail(path, "tensor names and metadata must be valid UTF-8");
  }
  s.append((8 - s.size() % 8) % 8, ' ');
  return s;
}

std::string temp_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return detail::str_cat(path, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
}

}  // namespace

void save(const TensorList& tensors, const std::string& path, const Metadata& metadata) {
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(path, "'__metadata__' is reserved and cannot name a tensor");
    if (!names.insert(name).second) fail(path, "duplicate tensor name '", name, "'");
    if (!t.defined()) fail(path, "tensor '", name, "' is undefined");
    if (!t.device().is_cpu()) fail(path, "tensor '", name, "' is on ", t.device().str(), "; move it to the CPU first");
  }
  std::set<std::string> keys;
  for (const auto& [k, v] : metadata)
    if (!keys.insert(k).second) fail(path, "duplicate metadata key '", k, "'");
  // Largest element first (stable: ties keep the caller's order), so every tensor starts
  // at a multiple of its element size and loads as an aligned view.
  std::vector<size_t> layout(tensors.size());
  for (size_t i = 0; i < layout.size(); ++i) layout[i] = i;
  std::stable_sort(layout.begin(), layout.end(), [&](size_t a, size_t b) {
    return tensors[a].second.element_size() > tensors[b].second.element_size();
  });
  const std::string header = header_text(tensors, layout, metadata, path);
  if (header.size() > kMaxHeaderSize) fail(path, "header would be ", header.size(), " bytes, over the format's limit");

  const std::string tmp = temp_name(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail_io(tmp, "create");
  bool closed = false;
  try {
    char prefix[8];
    for (int i = 0; i < 8; ++i) prefix[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xFF);
    StreamingWriter out(fd, tmp);
    out.write(prefix, 8);
    out.write(header.data(), header.size());
    for (size_t i : layout) {
      const Tensor c = tensors[i].second.contiguous();
      out.write(static_cast<const char*>(c.data_ptr()), size_t(c.numel()) * c.element_size());
    }
    out.fsync();
    closed = true;
    if (::close(fd) != 0) fail_io(tmp, "close");
  } catch (...) {
    if (!closed) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    errno = e;
    fail_io(path, "rename the temporary file over");
  }
  // Make the rename itself durable.
  std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace flambeau::io
