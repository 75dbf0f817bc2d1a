// Channels-last batch_norm kernels (simd_batch_norm.h): each row's channels in double
// vectors, the channels a vector does not fill one by one in one-lane vectors (the same
// arithmetic). Built with -ffp-contract=off (CMakeLists.txt): no product is fused into an
// add, as in the row-major loops of nn/batch_norm.cpp.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_batch_norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <type_traits>
#include <vector>

#include "flambeau/kernels/cpu/simd_batch_norm.h"
#include "flambeau/kernels/cpu/simd_common-inl.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {
namespace {

template <class D, class T>
HWY_INLINE hn::VFromD<D> load_double(D d, const T* p) {
  if constexpr (std::is_same_v<T, double>) return hn::LoadU(d, p);
  else return hn::PromoteTo(d, hn::LoadU(hn::Rebind<T, D>(), p));
}

template <class D, class T>
HWY_INLINE void store_double(D d, hn::VFromD<D> v, T* p) {
  if constexpr (std::is_same_v<T, double>) hn::StoreU(v, d, p);
  else hn::StoreU(hn::DemoteTo(hn::Rebind<T, D>(), v), hn::Rebind<T, D>(), p);
}

// body(d, c) over channels [c0, c1): whole double vectors, then one lane at a time.
template <class Body>
HWY_INLINE void over_channels(int64_t c0, int64_t c1, const Body& body) {
  const hn::ScalableTag<double> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t c = c0;
  for (; c + N <= c1; c += N) body(d, c);
  const hn::CappedTag<double, 1> d1;
  for (; c < c1; ++c) body(d1, c);
}

// body(offset of the row's channel 0, c) over the rows, each row's channels as over_channels.
template <class Body>
HWY_INLINE void over_values(int64_t rows, int64_t channels, const Body& body) {
  for (int64_t r = 0; r < rows; ++r)
    over_channels(0, channels, [&](auto d, int64_t c) { body(d, r * channels + c, c); });
}

// out_t[c] = the sum of term_t(d, value offset, c) for t < terms (1 or 2), in 8 lanes.
template <class Term0, class Term1>
void sums(int64_t rows, int64_t channels, int terms, const Term0& term0, const Term1& term1, double* out0,
          double* out1) {
  const int64_t set = 8 * channels;
  std::vector<double> acc(size_t(terms * set));  // lane l of channel c at l * channels + c
  for (int64_t r = 0; r < rows; ++r) {
    double* a = acc.data() + (r % 8) * channels;
    over_channels(0, channels, [&](auto d, int64_t c) {
      const int64_t i = r * channels + c;
      hn::StoreU(hn::Add(hn::LoadU(d, a + c), term0(d, i, c)), d, a + c);
      if (terms == 2) hn::StoreU(hn::Add(hn::LoadU(d, a + set + c), term1(d, i, c)), d, a + set + c);
    });
  }
  for (int t = 0; t < terms; ++t)
    for (int64_t c = 0; c < channels; ++c) {
      const double* l = acc.data() + t * set + c;
      const int64_t w = channels;
      (t == 0 ? out0 : out1)[c] = ((l[0] + l[w]) + (l[2 * w] + l[3 * w])) + ((l[4 * w] + l[5 * w]) + (l[6 * w] + l[7 * w]));
    }
}

template <class T>
void sums_impl(const T* x, int64_t rows, int64_t channels, const double* centre, double* out) {
  auto term = [&](auto d, int64_t i, int64_t c) {
    const auto v = load_double(d, x + i);
    if (!centre) return v;
    const auto e = hn::Sub(v, hn::LoadU(d, centre + c));
    return hn::Mul(e, e);
  };
  sums(rows, channels, 1, term, term, out, nullptr);
}

template <class T>
void grad_sums_impl(const T* x, const T* dy, int64_t rows, int64_t channels, const double* centre, double* sum_dy,
                    double* sum_dy_xc) {
  sums(
      rows, channels, 2, [&](auto d, int64_t i, int64_t) { return load_double(d, dy + i); },
      [&](auto d, int64_t i, int64_t c) {
        return hn::Mul(load_double(d, dy + i), hn::Sub(load_double(d, x + i), hn::LoadU(d, centre + c)));
      },
      sum_dy, sum_dy_xc);
}

template <class T>
void affine_impl(const T* x, int64_t rows, int64_t channels, const double* scale, const double* shift, T* y) {
  over_values(rows, channels, [&](auto d, int64_t i, int64_t c) {
    const auto v = hn::Mul(load_double(d, x + i), hn::LoadU(d, scale + c));
    store_double(d, hn::Add(v, hn::LoadU(d, shift + c)), y + i);
  });
}

template <class T>
void dx_impl(const T* x, const T* dy, int64_t rows, int64_t channels, const BatchNormGradCoefficients& q, T* dx) {
  over_values(rows, channels, [&](auto d, int64_t i, int64_t c) {
    const auto xhat = hn::Mul(hn::Sub(load_double(d, x + i), hn::LoadU(d, q.mean + c)), hn::LoadU(d, q.rstd + c));
    const auto g = hn::Sub(hn::Sub(load_double(d, dy + i), hn::LoadU(d, q.a + c)), hn::Mul(xhat, hn::LoadU(d, q.k + c)));
    store_double(d, hn::Mul(g, hn::LoadU(d, q.scale + c)), dx + i);
  });
}

}  // namespace

void sums_f32(const float* x, int64_t r, int64_t c, const double* centre, double* s) { sums_impl(x, r, c, centre, s); }
void sums_f64(const double* x, int64_t r, int64_t c, const double* centre, double* s) { sums_impl(x, r, c, centre, s); }
void grad_sums_f32(const float* x, const float* dy, int64_t r, int64_t c, const double* centre, double* s0,
                   double* s1) {
  grad_sums_impl(x, dy, r, c, centre, s0, s1);
}
void grad_sums_f64(const double* x, const double* dy, int64_t r, int64_t c, const double* centre, double* s0,
                   double* s1) {
  grad_sums_impl(x, dy, r, c, centre, s0, s1);
}
void affine_f32(const float* x, int64_t r, int64_t c, const double* scale, const double* shift, float* y) {
  affine_impl(x, r, c, scale, shift, y);
}
void affine_f64(const double* x, int64_t r, int64_t c, const double* scale, const double* shift, double* y) {
  affine_impl(x, r, c, scale, shift, y);
}
void dx_f32(const float* x, const float* dy, int64_t r, int64_t c, const BatchNormGradCoefficients& q, float* dx) {
  dx_impl(x, dy, r, c, q, dx);
}
void dx_f64(const double* x, const double* dy, int64_t r, int64_t c, const BatchNormGradCoefficients& q, double* dx) {
  dx_impl(x, dy, r, c, q, dx);
}

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flambeau::kernels {
HWY_EXPORT(sums_f32);
HWY_EXPORT(sums_f64);
HWY_EXPORT(grad_sums_f32);
HWY_EXPORT(grad_sums_f64);
HWY_EXPORT(affine_f32);
HWY_EXPORT(affine_f64);
HWY_EXPORT(dx_f32);
HWY_EXPORT(dx_f64);

void batch_norm_cl_sums(const float* x, int64_t rows, int64_t channels, const double* centre, double* sums) {
  HWY_DYNAMIC_DISPATCH(sums_f32)(x, rows, channels, centre, sums);
}
void batch_norm_cl_sums(const double* x, int64_t rows, int64_t channels, const double* centre, double* sums) {
  HWY_DYNAMIC_DISPATCH(sums_f64)(x, rows, channels, centre, sums);
}
void batch_norm_cl_grad_sums(const float* x, const float* dy, int64_t rows, int64_t channels, const double* centre,
                             double* sum_dy, double* sum_dy_xc) {
  HWY_DYNAMIC_DISPATCH(grad_sums_f32)(x, dy, rows, channels, centre, sum_dy, sum_dy_xc);
}
void batch_norm_cl_grad_sums(const double* x, const double* dy, int64_t rows, int64_t channels, const double* centre,
                             double* sum_dy, double* sum_dy_xc) {
  HWY_DYNAMIC_DISPATCH(grad_sums_f64)(x, dy, rows, channels, centre, sum_dy, sum_dy_xc);
}
void batch_norm_cl_affine(const float* x, int64_t rows, int64_t channels, const double* scale, const double* shift,
                          float* y) {
  HWY_DYNAMIC_DISPATCH(affine_f32)(x, rows, channels, scale, shift, y);
}
void batch_norm_cl_affine(const double* x, int64_t rows, int64_t channels, const double* scale, const double* shift,
                          double* y) {
  HWY_DYNAMIC_DISPATCH(affine_f64)(x, rows, channels, scale, shift, y);
}
void batch_norm_cl_dx(const float* x, const float* dy, int64_t rows, int64_t channels,
                      const BatchNormGradCoefficients& q, float* dx) {
  HWY_DYNAMIC_DISPATCH(dx_f32)(x, dy, rows, channels, q, dx);
}
void batch_norm_cl_dx(const double* x, const double* dy, int64_t rows, int64_t channels,
                      const BatchNormGradCoefficients& q, double* dx) {
  HWY_DYNAMIC_DISPATCH(dx_f64)(x, dy, rows, channels, q, dx);
}
}  // namespace flambeau::kernels
#endif
