// Capabilities: the CPU (core/cpu_info), the Highway target chosen at run time, and the GEMM
// kernel per dtype (oneDNN's sgemm or OpenBLAS's core for float32, OpenBLAS for float64,
// kernels::gemm16 for 16-bit).
#include "flambeau/kernels/cpu/capabilities.h"

#include <cblas.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/kernels/cpu/gemm16.h"


namespace flambeau::backends::cpu {

Capabilities capabilities() {
  Capabilities c;
  c.cpu = cpu_info();
  const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;
  c.simd_target = targets ? hwy::TargetName(targets & -targets) : "scalar";  // lowest bit: the best target
  const std::string blas = std::string("OpenBLAS (") + openblas_get_corename() + ")";
  c.gemm_f32 = kernels::onednn_f32() ? "oneDNN sgemm (matrix-vector: " + blas + ")" : blas;
  c.gemm_f64 = blas;
  c.gemm_bf16 = kernels::gemm16_backend(true);
  c.gemm_f16 = kernels::gemm16_backend(false);
  return c;
}

std::string capabilities_line() {
  const Capabilities c = capabilities();
  return "cpu: " + (c.cpu.model.empty() ? c.cpu.vendor : c.cpu.model) + " (" + std::to_string(c.cpu.logical_cpus) +
         " threads; " + cpu_isa_string(c.cpu) + ") | simd " + c.simd_target + " | gemm f32 " + c.gemm_f32 +
         ", bf16 " + c.gemm_bf16 + ", f16 " + c.gemm_f16;
}

std::string get_cpu_capability() {
  const CpuInfo& c = cpu_info();
  return c.has_avx512_core() ? "AVX512" : c.avx2 && c.fma ? "AVX2" : "DEFAULT";
}

}  // namespace flambeau::backends::cpu
