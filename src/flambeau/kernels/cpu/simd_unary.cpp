// Unary elementwise SIMD kernels (float32 and float64). Ops with a vector form use
// Highway (float32 sin, cos, tanh and erf: polynomial forms in simd_common-inl.h); the
// others (tan, the inverse and hyperbolic functions, exp2, expm1, log2, log10, log1p, and
// float64 sin / cos / tanh) call libm per lane for accuracy, and the special functions
// (erfinv, lgamma, digamma, i0) special_functions.h.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_unary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "flambeau/kernels/cpu/simd_common-inl.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/kernels/cpu/special_functions.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {

template <class T, class F>
HWY_INLINE void map_libm(const T* x, T* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

template <class T>
void unary_impl(UnaryOp op, const T* x, T* y, int64_t n) {
  constexpr bool f32 = sizeof(T) == 4;
  auto one = [](auto d) { return hn::Set(d, T(1)); };
  auto sigmoid = [&](auto d, auto v) { return hn::Div(one(d), hn::Add(one(d), ExpIeee(d, hn::Neg(v)))); };
  // silu and gelu tend to 0 at -inf, where their formulas give -inf * 0 = NaN.
  auto zero_at_minus_inf = [](auto d, auto v, auto r) {
    return hn::IfThenZeroElse(hn::Eq(v, hn::Set(d, -std::numeric_limits<T>::infinity())), r);
  };
  switch (op) {
    case UnaryOp::neg: return map_unary(x, y, n, [](auto, auto v) { return hn::Neg(v); });
    case UnaryOp::abs: return map_unary(x, y, n, [](auto, auto v) { return hn::Abs(v); });
    case UnaryOp::sign:
      return map_unary(x, y, n, [&](auto d, auto v) {
        const auto z = hn::Zero(d);
        return hn::Sub(hn::IfThenElseZero(v > z, one(d)), hn::IfThenElseZero(v < z, one(d)));
      });
    case UnaryOp::exp: return map_unary(x, y, n, [](auto d, auto v) { return ExpIeee(d, v); });
    case UnaryOp::exp2: return map_libm(x, y, n, [](T v) { return std::exp2(v); });
    case UnaryOp::expm1: return map_libm(x, y, n, [](T v) { return std::expm1(v); });
    case UnaryOp::log: return map_unary(x, y, n, [](auto d, auto v) { return LogIeee(d, v); });
    case UnaryOp::log2: return map_libm(x, y, n, [](T v) { return std::log2(v); });
    case UnaryOp::log10: return map_libm(x, y, n, [](T v) { return std::log10(v); });
    case UnaryOp::log1p: return map_libm(x, y, n, [](T v) { return std::log1p(v); });
    case UnaryOp::sqrt: return map_unary(x, y, n, [](auto, auto v) { return hn::Sqrt(v); });
    case UnaryOp::rsqrt:
      return map_unary(x, y, n, [&](auto d, auto v) { return hn::Div(one(d), hn::Sqrt(v)); });
    case UnaryOp::reciprocal:
      return map_unary(x, y, n, [&](auto d, auto v) { return hn::Div(one(d), v); });
    case UnaryOp::sin:
      if constexpr (f32) return map_unary(x, y, n, [](auto d, auto v) { return SinCosF32(d, v, false); });
      else return map_libm(x, y, n, [](T v) { return std::sin(v); });
    case UnaryOp::cos:
      if constexpr (f32) return map_unary(x, y, n, [](auto d, auto v) { return SinCosF32(d, v, true); });
      else return map_libm(x, y, n, [](T v) { return std::cos(v); });
    case UnaryOp::tan: return map_libm(x, y, n, [](T v) { return std::tan(v); });
    case UnaryOp::asin: return map_libm(x, y, n, [](T v) { return std::asin(v); });
    case UnaryOp::acos: return map_libm(x, y, n, [](T v) { return std::acos(v); });
    case UnaryOp::atan: return map_libm(x, y, n, [](T v) { return std::atan(v); });
    case UnaryOp::sinh: return map_libm(x, y, n, [](T v) { return std::sinh(v); });
    case UnaryOp::cosh: return map_libm(x, y, n, [](T v) { return std::cosh(v); });
    case UnaryOp::asinh: return map_libm(x, y, n, [](T v) { return std::asinh(v); });
    case UnaryOp::acosh: return map_libm(x, y, n, [](T v) { return std::acosh(v); });
    case UnaryOp::atanh: return map_libm(x, y, n, [](T v) { return std::atanh(v); });
    case UnaryOp::tanh:
      if constexpr (f32) return map_unary(x, y, n, [](auto d, auto v) { return TanhF32(d, v); });
      else return map_libm(x, y, n, [](T v) { return std::tanh(v); });
    case UnaryOp::sigmoid: return map_unary(x, y, n, sigmoid);
    case UnaryOp::relu:
      return map_unary(x, y, n, [](auto d, auto v) { return hn::IfThenZeroElse(v < hn::Zero(d), v); });
    case UnaryOp::silu:
      return map_unary(x, y, n, [&](auto d, auto v) {
        return zero_at_minus_inf(d, v, hn::Div(v, hn::Add(one(d), ExpIeee(d, hn::Neg(v)))));
      });
    case UnaryOp::erf:
      if constexpr (f32) return map_unary(x, y, n, [](auto d, auto v) { return ErfF32(d, v); });
      else return map_libm(x, y, n, [](T v) { return std::erf(v); });
    // Special functions: computed in double (special_functions.h), rounded once.
    case UnaryOp::erfinv: return map_libm(x, y, n, [](T v) { return T(special::erfinv(v)); });
    case UnaryOp::lgamma: return map_libm(x, y, n, [](T v) { return T(special::log_gamma(v)); });
    case UnaryOp::digamma: return map_libm(x, y, n, [](T v) { return T(special::digamma(v)); });
    case UnaryOp::i0: return map_libm(x, y, n, [](T v) { return T(special::i0(v)); });
    case UnaryOp::floor: return map_unary(x, y, n, [](auto, auto v) { return hn::Floor(v); });
    case UnaryOp::ceil: return map_unary(x, y, n, [](auto, auto v) { return hn::Ceil(v); });
    case UnaryOp::round: return map_unary(x, y, n, [](auto, auto v) { return hn::Round(v); });
    case UnaryOp::trunc: return map_unary(x, y, n, [](auto, auto v) { return hn::Trunc(v); });
    case UnaryOp::gelu_erf:
      // 0.5 * x * (1 + erf(x / sqrt(2)))
      if constexpr (f32) {
        return map_unary(x, y, n, [&](auto d, auto v) {
          const auto e = ErfF32(d, hn::Mul(v, hn::Set(d, T(0.70710678118654752440))));
          return zero_at_minus_inf(d, v, hn::Mul(hn::Mul(v, hn::Set(d, T(0.5))), hn::Add(one(d), e)));
        });
      } else {
        return map_libm(x, y, n, [](T v) {
          return std::isinf(v) && v < 0 ? T(0) : T(0.5) * v * (T(1) + std::erf(v * T(0.70710678118654752440)));
        });
      }
    case UnaryOp::gelu_tanh:
      // 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), tanh(z) = 1 - 2 / (exp(2z) + 1)
      return map_unary(x, y, n, [&](auto d, auto v) {
        const auto inner = hn::Mul(hn::Set(d, T(0.79788456080286535588)),
                                   hn::MulAdd(hn::Mul(hn::Set(d, T(0.044715)), hn::Mul(v, v)), v, v));
        const auto e = ExpIeee(d, hn::Add(inner, inner));
        const auto th = hn::Sub(one(d), hn::Div(hn::Set(d, T(2)), hn::Add(e, one(d))));
        return zero_at_minus_inf(d, v, hn::Mul(hn::Mul(v, hn::Set(d, T(0.5))), hn::Add(one(d), th)));
      });
  }
}

void unary_f32_impl(UnaryOp op, const float* x, float* y, int64_t n) { unary_impl(op, x, y, n); }
void unary_f64_impl(UnaryOp op, const double* x, double* y, int64_t n) { unary_impl(op, x, y, n); }

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flambeau::kernels {
HWY_EXPORT(unary_f32_impl);
HWY_EXPORT(unary_f64_impl);
void unary_f32(UnaryOp op, const float* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(unary_f32_impl)(op, x, y, n); }
void unary_f64(UnaryOp op, const double* x, double* y, int64_t n) { HWY_DYNAMIC_DISPATCH(unary_f64_impl)(op, x, y, n); }
}  // namespace flambeau::kernels
#endif
