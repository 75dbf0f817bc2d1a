// The build configuration: compiler macros, CMake's build type and flags (passed to this file
// only, as FLB_BUILD_TYPE and FLB_CXX_FLAGS), Highway's compiled targets and OpenBLAS's config.
#include "flambeau/kernels/cpu/build_config.h"

#include <cblas.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

namespace flambeau::backends::cpu {

BuildConfig build_config() {
  BuildConfig b;
#if defined(__clang__)
  b.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  b.compiler = "GCC " __VERSION__;
#endif
  b.build_type = FLB_BUILD_TYPE;
  b.cxx_flags = FLB_CXX_FLAGS;
#ifdef _OPENMP
  b.openmp = std::to_string(_OPENMP);
#endif
  b.highway = std::to_string(HWY_MAJOR) + "." + std::to_string(HWY_MINOR) + "." + std::to_string(HWY_PATCH);
  for (int64_t t = HWY_TARGETS; t; t &= t - 1)  // lowest bit first: the best target first
    b.highway_targets += (b.highway_targets.empty() ? "" : " ") + std::string(hwy::TargetName(t & -t));
  b.blas = openblas_get_config();
  return b;
}

}  // namespace flambeau::backends::cpu
