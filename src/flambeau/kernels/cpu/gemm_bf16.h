// bfloat16 GEMM on CPUs with AVX512-BF16, through oneDNN's matmul primitive. Elsewhere (or
// when flambeau is built without oneDNN) bf16_gemm_native() is false and matmul falls back
// to converting to float32 and running OpenBLAS sgemm.
#pragma once
#include <cstdint>

#include "flambeau/core/half.h"

namespace flambeau::kernels {

// True when bf16 GEMMs run natively here: oneDNN is built in and the CPU has AVX512-BF16.
bool bf16_gemm_native();

// c[m, n] (float32, row-major) = a[m, k] @ b[k, n] with float32 accumulation; a and b are
// bfloat16 with element strides (row, column). Returns false, leaving c untouched, when
// oneDNN has no implementation for this problem on this CPU.
bool bf16_gemm_onednn(const BFloat16* a, int64_t a_row, int64_t a_col, const BFloat16* b, int64_t b_row,
                      int64_t b_col, float* c, int64_t m, int64_t k, int64_t n);

}  // namespace flambeau::kernels
