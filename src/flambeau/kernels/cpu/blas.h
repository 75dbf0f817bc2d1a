// OpenBLAS GEMMs as flambeau calls them. gemm_1t runs on the calling thread; gemm_f32/f64
// split C into tiles for flambeau's threads (Note [Deterministic GEMM]), so every element comes
// from the same single-threaded code path whatever the thread count.
#pragma once
#include <cstdint>

namespace flambeau::kernels {

// c[m, n] = alpha * op(a) @ op(b) + beta * c, row-major; op(x) = x^T when its flag is set.
void gemm_1t(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm_1t(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
             const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// The same product on flambeau's threads (serial inside a parallel region); bitwise the same
// for any thread count. m, n, k >= 0 (k == 0 scales c by beta).
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
              int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

}  // namespace flambeau::kernels
