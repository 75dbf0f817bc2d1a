// SIMD kernels for attention tiles: a fast exp-and-sum of score rows, row dot products for
// decoding, and a small float32 GEMM (a few hundred rows/columns, k <= a few hundred):
// register-blocked 6 x (2 vectors) micro-kernels over a row-major B, with A read through
// arbitrary strides (so A or A^T), no packing and no call overhead. Fixed summation order
// (k ascending), so results do not depend on how callers split the work.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_gemm_small.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

#include <cmath>

#include "flambeau/kernels/cpu/simd_gemm_small.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// c[MR x 2N] (+)= alpha * a[MR x k] b[k x 2N].
template <int MR, class D>
HWY_INLINE void micro(D d, int64_t k, float alpha, const float* a, int64_t ars, int64_t aks, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc) {
  const size_t N = hn::Lanes(d);
  using V = hn::Vec<D>;
  V c0[MR], c1[MR];
  for (int r = 0; r < MR; ++r) c0[r] = hn::Zero(d), c1[r] = hn::Zero(d);
  for (int64_t e = 0; e < k; ++e) {
    const V b0 = hn::LoadU(d, b + e * ldb), b1 = hn::LoadU(d, b + e * ldb + N);
    for (int r = 0; r < MR; ++r) {
      const V av = hn::Set(d, a[r * ars + e * aks]);
      c0[r] = hn::MulAdd(av, b0, c0[r]);
      c1[r] = hn::MulAdd(av, b1, c1[r]);
    }
  }
  const V va = hn::Set(d, alpha);
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
    V o0 = hn::Mul(c0[r], va), o1 = hn::Mul(c1[r], va);
    if (beta != 0.f) {
      const V vb = hn::Set(d, beta);
      o0 = hn::MulAdd(hn::LoadU(d, cr), vb, o0);
      o1 = hn::MulAdd(hn::LoadU(d, cr + N), vb, o1);
    }
    hn::StoreU(o0, d, cr);
    hn::StoreU(o1, d, cr + N);
  }
}

void gemm_small_f32_impl(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t ars, int64_t aks,
                         const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const hn::ScalableTag<float> d;
  const int64_t NR = 2 * int64_t(hn::Lanes(d));
  int64_t j = 0;
  for (; j + NR <= n; j += NR) {
    int64_t r = 0;
    for (; r + 6 <= m; r += 6) micro<6>(d, k, alpha, a + r * ars, ars, aks, b + j, ldb, beta, c + r * ldc + j, ldc);
    const float* ar = a + r * ars;
    float* cr = c + r * ldc + j;
    switch (m - r) {
      case 5: micro<5>(d, k, alpha, ar, ars, aks, b + j, ldb, beta, cr, ldc); break;
      case 4: micro<4>(d, k, alpha, ar, ars, aks, b + j, ldb, beta, cr, ldc); break;
      case 3: micro<3>(d, k, alpha, ar, ars, aks, b + j, ldb, beta, cr, ldc); break;
      case 2: micro<2>(d, k, alpha, ar, ars, aks, b + j, ldb, beta, cr, ldc); break;
      case 1: micro<1>(d, k, alpha, ar, ars, aks, b + j, ldb, beta, cr, ldc); break;
      default: break;
    }
  }
  for (int64_t r = 0; r < m && j < n; ++r)  // column tail, scalar (same k order)
    for (int64_t jj = j; jj < n; ++jj) {
      float s = 0;
      for (int64_t e = 0; e < k; ++e) s += a[r * ars + e * aks] * b[e * ldb + jj];
      float& o = c[r * ldc + jj];
      o = beta != 0.f ? s * alpha + beta * o : s * alpha;
    }
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
