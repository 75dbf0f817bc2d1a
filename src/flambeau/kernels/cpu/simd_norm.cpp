// LayerNorm / RMSNorm row kernels: forward (statistics, then the normalised row) and
// backward (two row sums, then dx and the weight/bias contributions), as declared in
// simd_norm.h. Sums run in a fixed order: blocks of 512 elements in four vector
// accumulators, each block's lanes folded into double accumulators.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <algorithm>

#include "flambeau/kernels/cpu/simd_common-inl.h"
#include "flambeau/kernels/cpu/simd_norm.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {
namespace {

// Lanes [0, count) of p, the others zero (count <= the lane count).
template <class D, class T>
HWY_INLINE auto load_n(D d, const T* p, int64_t count) {
  if (count == int64_t(hn::Lanes(d))) return hn::LoadU(d, p);
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)] = {};
  std::memcpy(buf, p, size_t(count) * sizeof(T));
  return hn::Load(d, buf);
}

template <class D, class V, class T>
HWY_INLINE void store_n(V v, D d, T* p, int64_t count) {
  if (count == int64_t(hn::Lanes(d))) return hn::StoreU(v, d, p);
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, size_t(count) * sizeof(T));
}

// The sum over i in [0, n) of term(d, i, count): a vector of the terms at i .. i + count
// (lanes past count are ignored).
template <class T, class Term>
HWY_INLINE double sum_terms(int64_t n, const Term& term) {
  constexpr int64_t kBlock = 512;
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  HWY_ALIGN T lanes[HWY_MAX_BYTES / sizeof(T)];
  double total[HWY_MAX_BYTES / sizeof(T)] = {};
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = b;
    for (; i + 4 * N <= e; i += 4 * N) {
      a0 = hn::Add(a0, term(d, i, N));
      a1 = hn::Add(a1, term(d, i + N, N));
      a2 = hn::Add(a2, term(d, i + 2 * N, N));
      a3 = hn::Add(a3, term(d, i + 3 * N, N));
    }
    for (; i < e; i += N) {
      const int64_t count = std::min(N, e - i);
      a0 = hn::Add(a0, hn::IfThenElseZero(hn::FirstN(d, size_t(count)), term(d, i, count)));
    }
    hn::Store(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), d, lanes);
    for (int64_t k = 0; k < N; ++k) total[k] += double(lanes[k]);
  }
  double s = 0;
  for (int64_t k = 0; k < N; ++k) s += total[k];
  return s;
}

template <class T>
void forward_impl(const T* x, const T* w, const T* b, T* y, int64_t n, bool rms, double eps, T* mean_out,
                  T* rstd_out) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  T mean = 0;
  if (!rms) mean = T(sum_terms<T>(n, [&](auto dd, int64_t i, int64_t c) { return load_n(dd, x + i, c); }) / double(n));
  const auto vm = hn::Set(d, mean);
  const double var = sum_terms<T>(n, [&](auto dd, int64_t i, int64_t c) {
                       const auto v = hn::Sub(load_n(dd, x + i, c), vm);
                       return hn::Mul(v, v);
                     }) / double(n);
  const T rstd = T(1.0 / std::sqrt(var + eps));
  *mean_out = mean;
  *rstd_out = rstd;
  const auto vr = hn::Set(d, rstd);
  for (int64_t i = 0; i < n; i += N) {
    const int64_t c = std::min(N, n - i);
    auto v = hn::Mul(hn::Sub(load_n(d, x + i, c), vm), vr);
    if (w) v = hn::Mul(v, load_n(d, w + i, c));
    if (b) v = hn::Add(v, load_n(d, b + i, c));
    store_n(v, d, y + i, c);
  }
}

template <class T>
void backward_impl(const T* x, const T* dy, const T* w, T mean, T rstd, int64_t n, bool rms, T* dx, T* dw_acc,
                   T* db_acc) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const auto vm = hn::Set(d, mean), vr = hn::Set(d, rstd);
  auto xhat = [&](auto dd, int64_t i, int64_t c) { return hn::Mul(hn::Sub(load_n(dd, x + i, c), vm), vr); };
  auto g = [&](auto dd, int64_t i, int64_t c) {
    const auto v = load_n(dd, dy + i, c);
    return w ? hn::Mul(v, load_n(dd, w + i, c)) : v;
  };
  if (dx) {
    const T gx = T(sum_terms<T>(n, [&](auto dd, int64_t i, int64_t c) { return hn::Mul(g(dd, i, c), xhat(dd, i, c)); }) /
                   double(n));
    const T gm = rms ? T(0) : T(sum_terms<T>(n, g) / double(n));
    const auto vgx = hn::Set(d, gx), vgm = hn::Set(d, gm);
    for (int64_t i = 0; i < n; i += N) {
      const int64_t c = std::min(N, n - i);
      store_n(hn::Mul(hn::NegMulAdd(xhat(d, i, c), vgx, hn::Sub(g(d, i, c), vgm)), vr), d, dx + i, c);
    }
  }
  for (int64_t i = 0; i < n && (dw_acc || db_acc); i += N) {
    const int64_t c = std::min(N, n - i);
    const auto vdy = load_n(d, dy + i, c);
    if (dw_acc) store_n(hn::MulAdd(vdy, xhat(d, i, c), load_n(d, dw_acc + i, c)), d, dw_acc + i, c);
    if (db_acc) store_n(hn::Add(vdy, load_n(d, db_acc + i, c)), d, db_acc + i, c);
  }
}

}  // namespace

void forward_f32(const float* x, const float* w, const float* b, float* y, int64_t n, bool rms, double eps, float* m,
                 float* r) {
  forward_impl(x, w, b, y, n, rms, eps, m, r);
}
void forward_f64(const double* x, const double* w, const double* b, double* y, int64_t n, bool rms, double eps,
                 double* m, double* r) {
  forward_impl(x, w, b, y, n, rms, eps, m, r);
}
void backward_f32(const float* x, const float* dy, const float* w, float m, float r, int64_t n, bool rms, float* dx,
                  float* dw, float* db) {
  backward_impl(x, dy, w, m, r, n, rms, dx, dw, db);
}
void backward_f64(const double* x, const double* dy, const double* w, double m, double r, int64_t n, bool rms,
                  double* dx, double* dw, double* db) {
  backward_impl(x, dy, w, m, r, n, rms, dx, dw, db);
}

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flambeau::kernels {
HWY_EXPORT(forward_f32);
HWY_EXPORT(forward_f64);
HWY_EXPORT(backward_f32);
HWY_EXPORT(backward_f64);

void norm_row_forward(const float* x, const float* w, const float* b, float* y, int64_t n, bool rms, double eps,
                      float* mean, float* rstd) {
  HWY_DYNAMIC_DISPATCH(forward_f32)(x, w, b, y, n, rms, eps, mean, rstd);
}
void norm_row_forward(const double* x, const double* w, const double* b, double* y, int64_t n, bool rms,
                      double eps, double* mean, double* rstd) {
  HWY_DYNAMIC_DISPATCH(forward_f64)(x, w, b, y, n, rms, eps, mean, rstd);
}
void norm_row_backward(const float* x, const float* dy, const float* w, float mean, float rstd, int64_t n, bool rms,
                       float* dx, float* dw_acc, float* db_acc) {
  HWY_DYNAMIC_DISPATCH(backward_f32)(x, dy, w, mean, rstd, n, rms, dx, dw_acc, db_acc);
}
void norm_row_backward(const double* x, const double* dy, const double* w, double mean, double rstd, int64_t n,
                       bool rms, double* dx, double* dw_acc, double* db_acc) {
  HWY_DYNAMIC_DISPATCH(backward_f64)(x, dy, w, mean, rstd, n, rms, dx, dw_acc, db_acc);
}
}  // namespace flambeau::kernels
#endif
