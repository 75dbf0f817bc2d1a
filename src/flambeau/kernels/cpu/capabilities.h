// What this CPU has and which kernel each path uses: the one place kernels, tests and users
// ask (`flambeau.backends.cpu.capabilities()` in Python).
#pragma once
#include <string>

#include "flambeau/core/cpu_info.h"

namespace flambeau::backends::cpu {

struct Capabilities {
  CpuInfo cpu;
  std::string simd_target;  // the Highway target the elementwise kernels dispatch to ("AVX3_ZEN4", "AVX2", ...)
  std::string gemm_f32, gemm_f64, gemm_bf16, gemm_f16;  // the kernel behind each matmul dtype
};

Capabilities capabilities();

// One line for logs: "cpu: AMD EPYC 9B14 (2 threads; avx2 ... avx512_bf16) | simd AVX3_ZEN4 | gemm f32 ... bf16 ...".
std::string capabilities_line();

// PyTorch's torch.backends.cpu.get_cpu_capability(): "AVX512", "AVX2" or "DEFAULT".
std::string get_cpu_capability();

}  // namespace flambeau::backends::cpu
