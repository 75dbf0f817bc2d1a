// SIMD kernels for attention tiles: a fast exp-and-sum of score rows, row dot products for
// decoding, and a small float32 GEMM (a few hundred rows/columns, k <= a few hundred):
// register-blocked (6 or 12) x (2 vectors) micro-kernels over a row-major B (the last columns
// through a zero-padded copy), with A read through arbitrary strides (so A or A^T), no packing. Fixed summation order
// (k ascending), so results do not depend on how callers split the work.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_gemm_small.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cmath>
#include <algorithm>
#include <utility>
#include <vector>

#include "flambeau/kernels/cpu/simd_gemm_small.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rows per micro-tile: 12 where the target has 32 vector registers (AVX-512, NEON, SVE: 24
// accumulators), 6 on x86 targets with 16 (AVX2, SSE4: 12 accumulators).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr int kMaxRows = 6;
#else
constexpr int kMaxRows = 12;
#endif

// c[MR x NV vectors] (+)= alpha * a[MR x k] b[k x NV vectors].
template <int MR, int NV, class D>
HWY_INLINE void micro(D d, int64_t k, float alpha, const float* a, int64_t ars, int64_t aks, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc) {
  const size_t N = hn::Lanes(d);
  using V = hn::Vec<D>;
  V acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = hn::Zero(d);
  for (int64_t e = 0; e < k; ++e) {
    V bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = hn::LoadU(d, b + e * ldb + v * N);
    for (int r = 0; r < MR; ++r) {
      const V av = hn::Set(d, a[r * ars + e * aks]);
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(av, bv[v], acc[r][v]);
    }
  }
  const V va = hn::Set(d, alpha), vb = hn::Set(d, beta);
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      float* cr = c + r * ldc + v * N;
      V o = hn::Mul(acc[r][v], va);
      if (beta != 0.f) o = hn::MulAdd(hn::LoadU(d, cr), vb, o);
      hn::StoreU(o, d, cr);
    }
}

// All m rows of one column block: kMaxRows at a time, then one micro-tile of the rest.
template <int NV, class D, int... R>
HWY_INLINE void column_block(D d, int64_t m, int64_t k, float alpha, const float* a, int64_t ars, int64_t aks,
                             const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                             std::integer_sequence<int, R...>) {
  using Fn = void (*)(D, int64_t, float, const float*, int64_t, int64_t, const float*, int64_t, float, float*, int64_t);
  static constexpr Fn kRest[] = {&micro<R + 1, NV, D>...};
  int64_t r = 0;
  for (; r + kMaxRows <= m; r += kMaxRows)
    micro<kMaxRows, NV>(d, k, alpha, a + r * ars, ars, aks, b, ldb, beta, c + r * ldc, ldc);
  if (r < m) kRest[m - r - 1](d, k, alpha, a + r * ars, ars, aks, b, ldb, beta, c + r * ldc, ldc);
}

void gemm_small_f32_impl(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t ars, int64_t aks,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto rows = std::make_integer_sequence<int, kMaxRows - 1>();
  int64_t j = 0;
  for (; j + 2 * N <= n; j += 2 * N) column_block<2>(d, m, k, alpha, a, ars, aks, b + j, ldb, beta, c + j, ldc, rows);
  if (j + N <= n) column_block<1>(d, m, k, alpha, a, ars, aks, b + j, ldb, beta, c + j, ldc, rows), j += N;
  if (j == n) return;
  // The last w < N columns: B's and C's copied into zero-padded blocks N wide, so that every
  // lane takes the same vector path (and nothing is read or written past the matrices).
  const int64_t w = n - j;
  std::vector<float> bt(size_t(k * N), 0.f), ct(size_t(m * N), 0.f);
  for (int64_t e = 0; e < k; ++e) std::copy_n(b + e * ldb + j, w, bt.data() + e * N);
  if (beta != 0.f)
    for (int64_t r = 0; r < m; ++r) std::copy_n(c + r * ldc + j, w, ct.data() + r * N);
  column_block<1>(d, m, k, alpha, a, ars, aks, bt.data(), N, beta, ct.data(), N, rows);
  for (int64_t r = 0; r < m; ++r) std::copy_n(ct.data() + r * N, w, c + r * ldc + j);
}

// exp(x) for x <= 0: 2^n * p(r), x = n ln2 + r, |r| <= ln2 / 2, p of degree 6 (rel. error
// ~2e-7); exactly 0 below -87 (and for -inf).
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V x0) {
  const hn::RebindToSigned<D> di;
  V x = x0;
  const V lo = hn::Set(d, -87.0f);
  const auto dead = hn::Lt(x, lo);
  x = hn::Max(x, lo);
  const V n = hn::Round(hn::Mul(x, hn::Set(d, 1.44269504088896341f)));
  V r = hn::MulAdd(n, hn::Set(d, -0.693359375f), x);
  r = hn::MulAdd(n, hn::Set(d, 2.12194440e-4f), r);
  V p = hn::Set(d, 1.0f / 720);
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 120));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 24));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f / 6));
  p = hn::MulAdd(p, r, hn::Set(d, 0.5f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  const auto bits = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  const V y = hn::IfThenZeroElse(dead, hn::Mul(p, hn::BitCast(d, bits)));
  return hn::IfThenElse(hn::IsNaN(x0), x0, y);  // NaN stays NaN
}

float exp_shift_sum_fast_f32_impl(float* x, int64_t n, float shift) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vs = hn::Set(d, shift);
  auto acc = hn::Zero(d);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto y = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i), vs));
    hn::StoreU(y, d, x + i);
    acc = hn::Add(acc, y);
  }
  float s = hn::GetLane(hn::SumOfLanes(d, acc));
  if (i < n) {  // the tail through a padded vector, so every element gets the same exp
    HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)];
    for (int64_t j = 0; j < N; ++j) buf[j] = i + j < n ? x[i + j] - shift : -INFINITY;
    hn::Store(ExpNonPositive(d, hn::Load(d, buf)), d, buf);
    for (int64_t j = 0; i + j < n; ++j) s += (x[i + j] = buf[j]);
  }
  return s;
}

void dot_rows_f32_impl(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                       int64_t ldb, float* c, int64_t ldc) {
  const hn::ScalableTag<float> d;
  const int64_t N = int64_t(hn::Lanes(d));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float* x = a + i * lda;
      const float* y = b + j * ldb;
      auto s0 = hn::Zero(d), s1 = hn::Zero(d);
      int64_t e = 0;
      for (; e + 2 * N <= k; e += 2 * N) {
        s0 = hn::MulAdd(hn::LoadU(d, x + e), hn::LoadU(d, y + e), s0);
        s1 = hn::MulAdd(hn::LoadU(d, x + e + N), hn::LoadU(d, y + e + N), s1);
      }
      float s = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
      for (; e < k; ++e) s += x[e] * y[e];
      c[i * ldc + j] = alpha * s;
    }
}

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flambeau::kernels {
HWY_EXPORT(gemm_small_f32_impl);
HWY_EXPORT(dot_rows_f32_impl);
HWY_EXPORT(exp_shift_sum_fast_f32_impl);
float exp_shift_sum_fast_f32(float* x, int64_t n, float shift) {
  return HWY_DYNAMIC_DISPATCH(exp_shift_sum_fast_f32_impl)(x, n, shift);
}
void dot_rows_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                  int64_t ldb, float* c, int64_t ldc) {
  HWY_DYNAMIC_DISPATCH(dot_rows_f32_impl)(m, n, k, alpha, a, lda, b, ldb, c, ldc);
}
void gemm_small_f32(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_row_stride,
                    int64_t a_col_stride, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  HWY_DYNAMIC_DISPATCH(gemm_small_f32_impl)(m, n, k, alpha, a, a_row_stride, a_col_stride, b, ldb, beta, c, ldc);
}
}  // namespace flambeau::kernels
#endif
