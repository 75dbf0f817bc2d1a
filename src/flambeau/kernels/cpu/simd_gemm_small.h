// SIMD kernels for attention tiles (exp of score rows, dot products, a small GEMM), picked at
// run time for the CPU's SIMD width.
#pragma once
#include <cstdint>

namespace flambeau::kernels {

// c[m, n] = alpha * A @ b + beta * c, with A[i, e] = a[i * a_row_stride + e * a_col_stride]
// (A or A^T of a row-major matrix), b row-major [k, n] with row stride ldb, c row-major.
// beta == 0 never reads c. The sum over k runs in ascending order.
void gemm_small_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_row_stride,
                    int64_t a_col_stride, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// x = exp(x - shift) in place for x <= shift (scores minus their max or logsumexp), returning
// the sum (float, fixed order). Relative error ~2e-7; exactly 0 where x - shift < -87.
float exp_shift_sum_fast_f32(float* x, int64_t n, float shift);

// c[i, j] = alpha * dot(a row i, b row j) over k (a @ b^T for a few rows of a: decoding).
void dot_rows_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc);

}  // namespace flambeau::kernels
