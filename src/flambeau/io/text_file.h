// Writing a text file atomically: a temporary file next to it, renamed over it, so readers
// see the old file or the whole new one, never a torn one.
#pragma once
#include <string>

namespace flambeau::io {

// Writes `text` to `path`; on failure nothing at `path` changes and Error names `op`, the
// path and why.
void write_text_file(const std::string& path, const std::string& text, const char* op);

}  // namespace flambeau::io
