// Binary elementwise SIMD kernels (float32 / float64) and the float <-> bfloat16 casts.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_binary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "flambeau/kernels/cpu/simd_common-inl.h"
#include "flambeau/kernels/cpu/simd.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {

template <class T>
void binary_impl(SimdBinaryOp op, const T* a, const T* b, T* y, int64_t n) {
  // x86 max/min return the second operand on NaN; propagate NaN from either side instead.
  auto nan_or = [](auto v, auto w, auto r) { return hn::IfThenElse(hn::IsNaN(v), v, hn::IfThenElse(hn::IsNaN(w), w, r)); };
  switch (op) {
    case SimdBinaryOp::add: return map_binary(a, b, y, n, [](auto, auto v, auto w) { return hn::Add(v, w); });
    case SimdBinaryOp::sub: return map_binary(a, b, y, n, [](auto, auto v, auto w) { return hn::Sub(v, w); });
    case SimdBinaryOp::mul: return map_binary(a, b, y, n, [](auto, auto v, auto w) { return hn::Mul(v, w); });
    case SimdBinaryOp::div: return map_binary(a, b, y, n, [](auto, auto v, auto w) { return hn::Div(v, w); });
    case SimdBinaryOp::maximum:
      return map_binary(a, b, y, n, [&](auto, auto v, auto w) { return nan_or(v, w, hn::Max(v, w)); });
    case SimdBinaryOp::minimum:
      return map_binary(a, b, y, n, [&](auto, auto v, auto w) { return nan_or(v, w, hn::Min(v, w)); });
  }
}

void binary_f32_impl(SimdBinaryOp op, const float* a, const float* b, float* y, int64_t n) {
  binary_impl(op, a, b, y, n);
}
void binary_f64_impl(SimdBinaryOp op, const double* a, const double* b, double* y, int64_t n) {
  binary_impl(op, a, b, y, n);
}

// bfloat16 = upper half of float32, rounded to nearest even; NaN stays a (quiet) NaN.
void f32_to_bf16_impl(const float* x, BFloat16* y, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const int64_t N = int64_t(hn::Lanes(df));
  uint16_t* out = reinterpret_cast<uint16_t*>(y);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(df, x + i);
    const auto u = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u));
    auto r = hn::ShiftRight<16>(hn::Add(u, hn::Add(lsb, hn::Set(du, 0x7fffu))));
    const auto nan = hn::Or(hn::ShiftRight<16>(u), hn::Set(du, 0x40u));
    r = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), nan, r);
    hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, r)), d16, out + i);
  }
  for (; i < n; ++i) y[i] = BFloat16(x[i]);
}

void bf16_to_f32_impl(const BFloat16* x, float* y, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> d16;
  const int64_t N = int64_t(hn::Lanes(df));
  const uint16_t* in = reinterpret_cast<const uint16_t*>(x);
  int64_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(d16, in + i)))), df, y + i);
  for (; i < n; ++i) y[i] = float(x[i]);
}

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flambeau::kernels {
HWY_EXPORT(binary_f32_impl);
HWY_EXPORT(binary_f64_impl);
HWY_EXPORT(f32_to_bf16_impl);
HWY_EXPORT(bf16_to_f32_impl);
void binary_f32(SimdBinaryOp op, const float* a, const float* b, float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(binary_f32_impl)(op, a, b, y, n);
}
void binary_f64(SimdBinaryOp op, const double* a, const double* b, double* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(binary_f64_impl)(op, a, b, y, n);
}
void f32_to_bf16(const float* x, BFloat16* y, int64_t n) { HWY_DYNAMIC_DISPATCH(f32_to_bf16_impl)(x, y, n); }
void bf16_to_f32(const BFloat16* x, float* y, int64_t n) { HWY_DYNAMIC_DISPATCH(bf16_to_f32_impl)(x, y, n); }
// float16 conversions are scalar: exact round-to-nearest-even on every target.
void f32_to_f16(const float* x, Half* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = Half(x[i]);
}
void f16_to_f32(const Half* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = float(x[i]);
}
}  // namespace flambeau::kernels
#endif
