// How this library was built: compiler, flags, the SIMD targets compiled in, BLAS and OpenMP
// (flambeau.utils.collect_env prints it).
#pragma once
#include <string>

namespace flambeau::backends::cpu {

struct BuildConfig {
  std::string compiler;         // "GCC 12.2.0", "clang 16.0.6"
  std::string build_type;       // CMake's: "Release", "Debug", ...
  std::string cxx_flags;        // CMAKE_CXX_FLAGS with the build type's flags
  std::string openmp;           // the OpenMP version the compiler implements ("201511"), "" without
  std::string highway;          // "1.0.3"
  std::string highway_targets;  // the SIMD targets compiled in, best first ("AVX3_ZEN4 AVX3 AVX2 SSE4")
  std::string blas;             // openblas_get_config()
};
BuildConfig build_config();

}  // namespace flambeau::backends::cpu
