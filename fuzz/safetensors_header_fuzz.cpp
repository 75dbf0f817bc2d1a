// libFuzzer target for the safetensors header parser and validator (io::parse_buffer):
// any input must either raise ValueError or give a header whose tensors tile the data
// section exactly. Built by scripts/fuzz.sh with clang and ASan + UBSan.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "flambeau/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  flambeau::io::Header h;
  try {
    h = flambeau::io::parse_buffer(file, "fuzz");
  } catch (const flambeau::ValueError&) {
    return 0;
  }
  // Accepted: every byte range lies inside the data section and they sum to its size.
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  const uint64_t data_size = size - 8 - header_len;
  uint64_t covered = 0;
  for (const auto& t : h.tensors) {
    if (t.begin > t.end || t.end > data_size) std::abort();
    covered += t.end - t.begin;
  }
  if (covered != data_size) std::abort();
  return 0;
}
