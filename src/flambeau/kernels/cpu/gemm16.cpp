// 16-bit GEMM: placeholder that converts to float32 and runs the float32 GEMM on the calling
// thread (correct, not yet fast); the native kernels replace it.
#include "flambeau/kernels/cpu/gemm16.h"

#include <vector>

#include "flambeau/kernels/cpu/blas.h"

namespace flambeau::kernels {
namespace {

template <class T>
std::vector<float> widen(bool trans, int64_t rows, int64_t cols, const T* x, int64_t ld) {
  // op(x) is [rows, cols]; stored as [cols, rows] when transposed.
  const int64_t r = trans ? cols : rows, c = trans ? rows : cols;
  std::vector<float> out(size_t(r * c));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) out[size_t(i * c + j)] = float(x[i * ld + j]);
  return out;
}

}  // namespace

template <class T, class Out>
void gemm16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
            const T* b, int64_t ldb, float beta, Out* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  const std::vector<float> af = widen(trans_a, m, k, a, lda), bf = widen(trans_b, k, n, b, ldb);
  std::vector<float> cf(size_t(m * n), 0.f);
  if (beta != 0.f)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) cf[size_t(i * n + j)] = float(c[i * ldc + j]);
  if (k > 0)
    gemm_1t(trans_a, trans_b, m, n, k, alpha, af.data(), trans_a ? m : k, bf.data(), trans_b ? k : n, beta,
            cf.data(), n);
  else
    for (float& v : cf) v *= beta;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = Out(cf[size_t(i * n + j)]);
}

const char* gemm16_backend(bool) { return "float32 (placeholder)"; }

#define FLB_GEMM16(T, Out)                                                                                   \
  template void gemm16<T, Out>(bool, bool, int64_t, int64_t, int64_t, float, const T*, int64_t, const T*, \
                               int64_t, float, Out*, int64_t);
FLB_GEMM16(BFloat16, float)
FLB_GEMM16(BFloat16, BFloat16)
FLB_GEMM16(Half, float)
FLB_GEMM16(Half, Half)
#undef FLB_GEMM16

}  // namespace flambeau::kernels
