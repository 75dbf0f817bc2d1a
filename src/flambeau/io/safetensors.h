// safetensors: reading (memory-mapped, validated) and writing (atomic) the format of
// https://github.com/huggingface/safetensors, and flambeau's load/save built on it.
//
// Every file is untrusted: a bad file raises flambeau::ValueError
// "[safetensors] <path>: <what is wrong>" and nothing is read outside the file.
// See Note [safetensors dtypes] in safetensors_header.cpp for the dtype mapping.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::io {

// Name -> tensor, in the order of the file's header (or of the caller, for save).
using TensorList = std::vector<std::pair<std::string, Tensor>>;
// __metadata__: string -> string, in header order.
using Metadata = std::vector<std::pair<std::string, std::string>>;

// One tensor's entry in a header, after validation.
struct TensorInfo {
  std::string name;
  std::string format_dtype;  // as in the file: "F32", "U16", "F8_E4M3" ...
  Dims shape;                // the shape in the file
  uint64_t begin = 0, end = 0;  // byte range inside the data section
  DType dtype;               // the flambeau dtype it loads as
  Dims load_shape;           // shape it loads with (raw dtypes add a byte dimension)
};

struct Header {
  std::vector<TensorInfo> tensors;  // header order
  Metadata metadata;
  bool has_metadata = false;  // __metadata__ present (possibly empty)
};

inline constexpr uint64_t kMaxHeaderSize = 100'000'000;

// Parses and validates the JSON header `json` of a file whose data section is
// `data_size` bytes. `path` only appears in error messages.
Header parse_header(std::string_view json, uint64_t data_size, const std::string& path);

// Parses and validates a whole file held in memory (the 8-byte length, header, data).
Header parse_buffer(std::string_view file, const std::string& path);

// True if the file's first bytes look like safetensors (length prefix in range, then '{'
// after optional whitespace). Never throws for unreadable or short files (false).
bool is_safetensors(const std::string& path);

// Lazy access to one file: opening reads only the header (the file stays open). The first
// get_tensor maps it private (copy-on-write), so tensors view it without copies and
// writes to them never reach the file. The mapping lives while any tensor from it does.
class SafeOpen {
 public:
  explicit SafeOpen(const std::string& path);
  ~SafeOpen();
  SafeOpen(SafeOpen&&) noexcept;
  SafeOpen& operator=(SafeOpen&&) noexcept;

  const std::string& path() const;
  std::vector<std::string> keys() const;  // header order
  const Metadata& metadata() const;
  const Header& header() const;
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // ValueError if absent
  // A tensor viewing the mapping (zero-copy), or an owned copy if `copy`. A tensor whose
  // bytes are not aligned to its element size is always copied.
  Tensor get_tensor(const std::string& name, bool copy = false) const;
  // Rows [start, end) of dim 0 (Python-style clamping, negative from the end), copied
  // into owned memory: only those rows' bytes are read.
  Tensor get_rows(const std::string& name, int64_t start, int64_t end) const;
  // Address range of the file's mapping, [begin, end) (for tests of zero-copy).
  std::pair<const void*, const void*> mapping_range() const;

 private:
  struct State;
  std::shared_ptr<State> s_;
};

struct LoadOptions {
  bool copy = false;  // owned memory instead of views of the mapping
};

// Loads a safetensors file (recognised by content), a sharded checkpoint's
// `*.safetensors.index.json`, or a directory holding one index (or exactly one
// .safetensors file). Shards are opened lazily: only their headers are read.
TensorList load(const std::string& path, const LoadOptions& options = {});
// The same, plus the metadata of the file (for an index: its "metadata" strings).
TensorList load(const std::string& path, Metadata* metadata_out, const LoadOptions& options = {});

// Writes `tensors` as safetensors: header padded with spaces to a multiple of 8, tensors
// laid out contiguously (largest element size first, so each is aligned), written to a
// temporary file in the same directory, fsync'ed and renamed over `path`. Every check
// runs before anything is written; on failure the old file is left untouched.
void save(const TensorList& tensors, const std::string& path, const Metadata& metadata = {});

// The 8-byte float types (loaded as uint8 bytes) as float32: format_dtype is "F8_E4M3"
// or "F8_E5M2".
Tensor float8_to_float32(const Tensor& bytes, const std::string& format_dtype);

}  // namespace flambeau::io

namespace flambeau {
// flambeau::load / flambeau::save, as torch.load / torch.save (safetensors only).
using io::load;
using io::save;
}  // namespace flambeau
