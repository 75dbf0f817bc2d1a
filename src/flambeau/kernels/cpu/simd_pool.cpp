// The channels-last max pooling kernel (simd_pool.h): the window's positions one after the
// other, the channels in whole vectors and then one lane at a time, the winning positions
// kept in integer lanes as wide as the values.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_pool.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <limits>

#include "flambeau/kernels/cpu/simd_common-inl.h"
#include "flambeau/kernels/cpu/simd_pool.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {
namespace {

// Channels [c, c + Lanes(d)).
template <class D, class T>
HWY_INLINE void max_lanes(D d, const T* x, const int64_t* positions, int64_t count, int64_t first, int64_t channels,
                          int64_t c, T* y, int64_t* idx) {
  using TI = hwy::MakeSigned<T>;
  const hn::RebindToSigned<D> di;
  auto m = hn::Set(d, -std::numeric_limits<T>::infinity());
  auto best = hn::Set(di, TI(first));
  for (int64_t k = 0; k < count; ++k) {
    const auto v = hn::LoadU(d, x + positions[k] * channels + c);
    const auto take = hn::Or(hn::Gt(v, m), hn::IsNaN(v));
    m = hn::IfThenElse(take, v, m);
    best = hn::IfThenElse(hn::RebindMask(di, take), hn::Set(di, TI(positions[k])), best);
  }
  hn::StoreU(m, d, y + c);
  HWY_ALIGN TI b[HWY_MAX_BYTES / sizeof(TI)];
  hn::Store(best, di, b);
  for (size_t j = 0; j < hn::Lanes(d); ++j) idx[c + int64_t(j)] = b[j];
}

template <class T>
void output_impl(const T* x, const int64_t* positions, int64_t count, int64_t first, int64_t channels, T* y,
                 int64_t* idx) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t c = 0;
  for (; c + N <= channels; c += N) max_lanes(d, x, positions, count, first, channels, c, y, idx);
  const hn::CappedTag<T, 1> d1;
  for (; c < channels; ++c) max_lanes(d1, x, positions, count, first, channels, c, y, idx);
}

}  // namespace

void output_f32(const float* x, const int64_t* p, int64_t count, int64_t first, int64_t C, float* y, int64_t* i) {
  output_impl(x, p, count, first, C, y, i);
}
void output_f64(const double* x, const int64_t* p, int64_t count, int64_t first, int64_t C, double* y, int64_t* i) {
  output_impl(x, p, count, first, C, y, i);
}

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flambeau::kernels {
HWY_EXPORT(output_f32);
HWY_EXPORT(output_f64);

void max_pool_channels_last_output(const float* x, const int64_t* positions, int64_t count, int64_t first,
                                   int64_t channels, float* y, int64_t* idx) {
  HWY_DYNAMIC_DISPATCH(output_f32)(x, positions, count, first, channels, y, idx);
}
void max_pool_channels_last_output(const double* x, const int64_t* positions, int64_t count, int64_t first,
                                   int64_t channels, double* y, int64_t* idx) {
  HWY_DYNAMIC_DISPATCH(output_f64)(x, positions, count, first, channels, y, idx);
}
}  // namespace flambeau::kernels
#endif
