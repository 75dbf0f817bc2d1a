// Helpers shared by the safetensors sources (not public API).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "flambeau/core/error.h"

namespace flambeau::io {

// Throws ValueError "[safetensors] <path>: <parts...>".
template <class... A>
[[noreturn]] void fail(const std::string& path, const A&... parts) {
  throw ValueError(detail::str_cat("[safetensors] ", path, ": ", parts...));
}

// Checks the 8-byte little-endian header length (in `first8`) against the limit and
// the file size; returns it.
uint64_t check_prefix(std::string_view first8, uint64_t file_size, const std::string& path);

}  // namespace flambeau::io
