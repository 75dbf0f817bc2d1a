// Reduction SIMD kernels on contiguous rows: sum, max/min (NaN-propagating) and the
// softmax / log_softmax of a row. Each uses a fixed accumulation order, so a given row
// always gives the same bits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_reduce.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "flambeau/kernels/cpu/simd_common-inl.h"
#include "flambeau/kernels/cpu/simd.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {

// Two levels, for accuracy with a fixed order: blocks of kBlock (512) elements are summed
// with eight vector accumulators (the tail zero-padded) folded as a tree, and each block's
// lanes are added to per-lane double accumulators, summed in lane order at the end. f maps
// each loaded vector first (the squares: the same bits as summing the stored squares).
struct Identity {
  template <class V>
  HWY_INLINE V operator()(V v) const { return v; }
};
template <class T, class F = Identity>
double sum_impl(const T* x, int64_t n, F f = {}) {
  constexpr int64_t kBlock = 512;
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  HWY_ALIGN T lanes[HWY_MAX_BYTES / sizeof(T)];
  double total[HWY_MAX_BYTES / sizeof(T)] = {};
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    int64_t i = b;
    for (; i + 8 * N <= e; i += 8 * N) {
      a0 = hn::Add(a0, f(hn::LoadU(d, x + i)));
      a1 = hn::Add(a1, f(hn::LoadU(d, x + i + N)));
      a2 = hn::Add(a2, f(hn::LoadU(d, x + i + 2 * N)));
      a3 = hn::Add(a3, f(hn::LoadU(d, x + i + 3 * N)));
      a4 = hn::Add(a4, f(hn::LoadU(d, x + i + 4 * N)));
      a5 = hn::Add(a5, f(hn::LoadU(d, x + i + 5 * N)));
      a6 = hn::Add(a6, f(hn::LoadU(d, x + i + 6 * N)));
      a7 = hn::Add(a7, f(hn::LoadU(d, x + i + 7 * N)));
    }
    for (; i + N <= e; i += N) a0 = hn::Add(a0, f(hn::LoadU(d, x + i)));
    if (i < e) {
      HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)] = {};
      std::memcpy(buf, x + i, (e - i) * sizeof(T));
      a1 = hn::Add(a1, f(hn::Load(d, buf)));
    }
    const auto s = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
    hn::Store(s, d, lanes);
    for (int64_t k = 0; k < N; ++k) total[k] += double(lanes[k]);
  }
  double s = 0;
  for (int64_t k = 0; k < N; ++k) s += total[k];
  return s;
}

template <class T, bool kMax>
T extreme_impl(const T* x, int64_t n) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  const T init = kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  auto m0 = hn::Set(d, init), m1 = m0, m2 = m0, m3 = m0;
  auto nan = hn::Zero(d);  // any lane NaN once a NaN was seen
  auto step = [&](auto m, auto v) {
    nan = hn::Or(nan, hn::VecFromMask(d, hn::IsNaN(v)));
    return kMax ? hn::Max(m, v) : hn::Min(m, v);
  };
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    m0 = step(m0, hn::LoadU(d, x + i));
    m1 = step(m1, hn::LoadU(d, x + i + N));
    m2 = step(m2, hn::LoadU(d, x + i + 2 * N));
    m3 = step(m3, hn::LoadU(d, x + i + 3 * N));
  }
  m0 = kMax ? hn::Max(m0, m2) : hn::Min(m0, m2);
  m1 = kMax ? hn::Max(m1, m3) : hn::Min(m1, m3);
  for (; i + 2 * N <= n; i += 2 * N) {
    m0 = step(m0, hn::LoadU(d, x + i));
    m1 = step(m1, hn::LoadU(d, x + i + N));
  }
  HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)];
  for (int64_t k = 0; k < N; ++k) buf[k] = init;
  std::memcpy(buf, x + i, std::min<int64_t>(n - i, N) * sizeof(T));
  m0 = step(m0, hn::Load(d, buf));
  if (i + N < n) {
    for (int64_t k = 0; k < N; ++k) buf[k] = init;
    std::memcpy(buf, x + i + N, (n - i - N) * sizeof(T));
    m1 = step(m1, hn::Load(d, buf));
  }
  const auto m = kMax ? hn::Max(m0, m1) : hn::Min(m0, m1);
  if (!hn::AllFalse(d, hn::MaskFromVec(nan))) return std::numeric_limits<T>::quiet_NaN();
  return hn::GetLane(kMax ? hn::MaxOfLanes(d, m) : hn::MinOfLanes(d, m));
}

template <class T>
void softmax_impl(const T* x, T* y, int64_t n, bool log) {
  const hn::ScalableTag<T> d;
  const T mx = extreme_impl<T, true>(x, n);
  const auto vmax = hn::Set(d, mx);
  if (log) {
    // y = (x - max) - log(sum(exp(x - max))); y holds exp(x - max) while summing. Never
    // x - (max + log sum): for large x that sum rounds away log sum's low bits.
    map_unary(x, y, n, [&](auto dd, auto v) { return ExpIeee(dd, hn::Sub(v, vmax)); });
    const auto vl = hn::Set(d, T(std::log(sum_impl(y, n))));
    map_unary(x, y, n, [&](auto, auto v) { return hn::Sub(hn::Sub(v, vmax), vl); });
  } else {
    map_unary(x, y, n, [&](auto dd, auto v) { return ExpIeee(dd, hn::Sub(v, vmax)); });
    const auto inv = hn::Set(d, T(1.0 / sum_impl(y, n)));
    map_unary(y, y, n, [&](auto, auto v) { return hn::Mul(v, inv); });
  }
}

// x = exp(x - shift) in place; returns the sum of the new values.
template <class T>
double exp_shift_sum_impl(T* x, int64_t n, T shift) {
  const hn::ScalableTag<T> d;
  const auto vs = hn::Set(d, shift);
  map_unary(x, x, n, [&](auto dd, auto v) { return ExpIeee(dd, hn::Sub(v, vs)); });
  return sum_impl(x, n);
}

double sum_f32_impl(const float* x, int64_t n) { return sum_impl(x, n); }
double sum_sq_f32_impl(const float* x, int64_t n) {
  return sum_impl(x, n, [](auto v) { return hn::Mul(v, v); });
}
double exp_shift_sum_f32_impl(float* x, int64_t n, float shift) { return exp_shift_sum_impl(x, n, shift); }
double exp_shift_sum_f64_impl(double* x, int64_t n, double shift) { return exp_shift_sum_impl(x, n, shift); }
double sum_f64_impl(const double* x, int64_t n) { return sum_impl(x, n); }
float max_f32_impl(const float* x, int64_t n) { return extreme_impl<float, true>(x, n); }
double max_f64_impl(const double* x, int64_t n) { return extreme_impl<double, true>(x, n); }
float min_f32_impl(const float* x, int64_t n) { return extreme_impl<float, false>(x, n); }
double min_f64_impl(const double* x, int64_t n) { return extreme_impl<double, false>(x, n); }
void softmax_f32_impl(const float* x, float* y, int64_t n, bool log) { softmax_impl(x, y, n, log); }
void softmax_f64_impl(const double* x, double* y, int64_t n, bool log) { softmax_impl(x, y, n, log); }

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flambeau::kernels {
HWY_EXPORT(sum_f32_impl);
HWY_EXPORT(sum_sq_f32_impl);
HWY_EXPORT(sum_f64_impl);
HWY_EXPORT(max_f32_impl);
HWY_EXPORT(max_f64_impl);
HWY_EXPORT(min_f32_impl);
HWY_EXPORT(min_f64_impl);
HWY_EXPORT(softmax_f32_impl);
HWY_EXPORT(exp_shift_sum_f32_impl);
HWY_EXPORT(exp_shift_sum_f64_impl);
HWY_EXPORT(softmax_f64_impl);
double sum_f32(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(sum_f32_impl)(x, n); }
double sum_sq_f32(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(sum_sq_f32_impl)(x, n); }
double sum_f64(const double* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(sum_f64_impl)(x, n); }
float max_f32(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(max_f32_impl)(x, n); }
double max_f64(const double* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(max_f64_impl)(x, n); }
float min_f32(const float* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(min_f32_impl)(x, n); }
double min_f64(const double* x, int64_t n) { return HWY_DYNAMIC_DISPATCH(min_f64_impl)(x, n); }
double exp_shift_sum_f32(float* x, int64_t n, float shift) {
  return HWY_DYNAMIC_DISPATCH(exp_shift_sum_f32_impl)(x, n, shift);
}
double exp_shift_sum_f64(double* x, int64_t n, double shift) {
  return HWY_DYNAMIC_DISPATCH(exp_shift_sum_f64_impl)(x, n, shift);
}
void softmax_row_f32(const float* x, float* y, int64_t n, bool log) {
  HWY_DYNAMIC_DISPATCH(softmax_f32_impl)(x, y, n, log);
}
void softmax_row_f64(const double* x, double* y, int64_t n, bool log) {
  HWY_DYNAMIC_DISPATCH(softmax_f64_impl)(x, y, n, log);
}
}  // namespace flambeau::kernels
#endif
