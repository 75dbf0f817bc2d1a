// Binary elementwise SIMD kernels (float32 / float64) and the float <-> bfloat16 / float16 casts.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_binary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "flambeau/kernels/cpu/simd_common-inl.h"
#include "flambeau/kernels/cpu/simd.h"

#if HWY_ONCE
#include <immintrin.h>

#include "flambeau/core/cpu_info.h"
#endif

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
// float16 conversions: F16C where the CPU has it (round to nearest even, as Half), eight at a
// time; a block holding a NaN, the tail and CPUs without F16C take Half's scalar conversion,
// so every bit (NaN payloads included) is the same on every CPU.
namespace {
#pragma GCC push_options
#pragma GCC target("avx,f16c")
int64_t f32_to_f16_f16c(const float* x, Half* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
      for (int64_t j = i; j < i + 8; ++j) y[j].bits = Half::from_float(x[j]);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return i;
}
int64_t f16_to_f32_f16c(const Half* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))
      for (int64_t j = i; j < i + 8; ++j) y[j] = Half::to_float(x[j].bits);
    else
      _mm256_storeu_ps(y + i, v);
  }
  return i;
}
#pragma GCC pop_options
bool has_f16c() {
  static const bool f16c = cpu_info().f16c;
  return f16c;
}
}  // namespace

void f32_to_f16(const float* x, Half* y, int64_t n) {
  for (int64_t i = has_f16c() ? f32_to_f16_f16c(x, y, n) : 0; i < n; ++i) y[i] = Half(x[i]);
}
void f16_to_f32(const Half* x, float* y, int64_t n) {
  for (int64_t i = has_f16c() ? f16_to_f32_f16c(x, y, n) : 0; i < n; ++i) y[i] = float(x[i]);
}
}  // namespace flambeau::kernels
#endif
