// The BLAS GEMMs as flambeau calls them (OpenBLAS; oneDNN's sgemm for float32 where built in,
// Note [float32 GEMM]). gemm_1t runs on the calling thread; gemm_f32/f64 split C into tiles
// for flambeau's threads (Note [Deterministic GEMM]), so every element comes from the same
// single-threaded code path whatever the thread count.
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

// Whether float32 GEMMs and convolutions take oneDNN: built in, and not turned off with
// FLAMBEAU_ONEDNN_F32=0 in the environment (read once; for measuring the two side by side).
bool onednn_f32();
// gemm_1t's float32 product through oneDNN's sgemm on the calling thread; false (nothing
// written) without oneDNN or for an empty problem (sgemm_onednn.cpp).
bool sgemm_onednn_1t(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace flambeau::kernels
