// bfloat16 GEMM through oneDNN's matmul primitive, used only for AMX (Note [16-bit GEMM
// paths] in gemm16.cpp). Without oneDNN (no_onednn.cpp) onednn_built() is false.
#pragma once
#include <cstdint>

#include "flambeau/core/half.h"

namespace flambeau::kernels {

// True when flambeau was built with oneDNN.
bool onednn_built();

// c[m, n] (float32, row-major) = a[m, k] @ b[k, n] with float32 accumulation; a and b are
// bfloat16 with element strides (row, column); m, n, k > 0. Returns false, leaving c
// untouched, when oneDNN has no implementation for this problem on this CPU.
bool bf16_gemm_onednn(const BFloat16* a, int64_t a_row, int64_t a_col, const BFloat16* b, int64_t b_row,
                      int64_t b_col, float* c, int64_t m, int64_t k, int64_t n);

}  // namespace flambeau::kernels
