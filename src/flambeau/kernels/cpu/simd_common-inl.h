// Shared pieces of the Highway kernels: array maps with a padded tail, and exp/log/erf
// with the IEEE special cases (NaN, +-inf, 0) that Highway's versions leave out.
// Included once per SIMD target (no include guard, by Highway's design).
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// y[i] = op(d, x[i]) over whole vectors; the tail goes through a zero-padded buffer so
// that every element, tail included, is computed by the same vector code.
template <class T, class Op>
HWY_INLINE void map_unary(const T* x, T* y, int64_t n, const Op& op) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(op(d, hn::LoadU(d, x + i)), d, y + i);
  if (i < n) {
    HWY_ALIGN T buf[HWY_MAX_BYTES / sizeof(T)] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(T));
    hn::Store(op(d, hn::Load(d, buf)), d, buf);
    std::memcpy(y + i, buf, (n - i) * sizeof(T));
  }
}

template <class T, class Op>
HWY_INLINE void map_binary(const T* a, const T* b, T* y, int64_t n, const Op& op) {
  const hn::ScalableTag<T> d;
  const int64_t N = int64_t(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(op(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, y + i);
  if (i < n) {
    HWY_ALIGN T ba[HWY_MAX_BYTES / sizeof(T)] = {};
    HWY_ALIGN T bb[HWY_MAX_BYTES / sizeof(T)] = {};
    std::memcpy(ba, a + i, (n - i) * sizeof(T));
    std::memcpy(bb, b + i, (n - i) * sizeof(T));
    hn::Store(op(d, hn::Load(d, ba), hn::Load(d, bb)), d, ba);
    std::memcpy(y + i, ba, (n - i) * sizeof(T));
  }
}

// exp with exp(NaN) = NaN and overflow to +inf.
template <class D, class V>
HWY_INLINE V ExpIeee(D d, V x) {
  using T = hn::TFromD<D>;
  const T overflow = sizeof(T) == 4 ? T(88.72283935546875) : T(709.782712893384);
  V y = hn::Exp(d, x);
  y = hn::IfThenElse(x > hn::Set(d, overflow), hn::Set(d, std::numeric_limits<T>::infinity()), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// log with log(0) = -inf, log(x<0) = NaN, log(inf) = inf, log(NaN) = NaN.
template <class D, class V>
HWY_INLINE V LogIeee(D d, V x) {
  using T = hn::TFromD<D>;
  const V zero = hn::Zero(d), inf = hn::Set(d, std::numeric_limits<T>::infinity());
  V y = hn::Log(d, x);
  y = hn::IfThenElse(x == zero, hn::Neg(inf), y);
  y = hn::IfThenElse(x == inf, inf, y);
  return hn::IfThenElse(x < zero, hn::Set(d, std::numeric_limits<T>::quiet_NaN()),
                        hn::IfThenElse(hn::IsNaN(x), x, y));
}

// float erf, |error| < 2e-7: x * P(x^2) for |x| <= 1, 1 - exp(-x^2) * Q(|x| - 2.5) for
// 1 < |x| < 4, 1 beyond (coefficients: least-squares fits made for flambeau; no division).
template <class D, class V>
HWY_INLINE V ErfF32(D d, V x) {
  const V ax = hn::Abs(x), one = hn::Set(d, 1.0f), x2 = hn::Mul(x, x);
  V p = hn::Set(d, 7.933422388e-05f);
  for (float c : {-8.034827975e-04f, 5.191216606e-03f, -2.685539872e-02f, 1.128362571e-01f,
                  -3.761262988e-01f, 1.128379167e+00f})
    p = hn::MulAdd(p, x2, hn::Set(d, c));
  const V small = hn::Mul(ax, p);
  const V t = hn::Sub(ax, hn::Set(d, 2.5f));
  V q = hn::Set(d, -4.269387317e-07f);
  for (float c : {1.671822396e-06f, -3.744405126e-06f, 1.435355823e-05f, -5.952958401e-05f, 2.129722628e-04f,
                  -7.331466705e-04f, 2.465982229e-03f, -8.001696400e-03f, 2.493820377e-02f, -7.434733646e-02f,
                  2.108063575e-01f})
    q = hn::MulAdd(q, t, hn::Set(d, c));
  // -x^2 <= 0 needs no overflow fixup; NaN is restored below.
  V large = hn::Sub(one, hn::Mul(hn::Exp(d, hn::Neg(x2)), q));
  large = hn::IfThenElse(ax >= hn::Set(d, 4.0f), one, large);
  const V r = hn::IfThenElse(ax <= one, small, large);
  return hn::IfThenElse(hn::IsNaN(x), x, hn::CopySign(r, x));
}

// float tanh, within about 2 ulp: x + x^3 P(x^2) for |x| < 0.625 (a relative least-squares
// fit made for flambeau: 0.84 ulp), 1 - 2 / (exp(2|x|) + 1) with x's sign beyond (1 at
// +-inf, where exp overflows); tanh(NaN) = NaN, tanh(-0) = -0.
template <class D, class V>
HWY_INLINE V TanhF32(D d, V x) {
  const V ax = hn::Abs(x), s = hn::Mul(x, x), one = hn::Set(d, 1.0f);
  V p = hn::Set(d, -5.7981000282e-03f);
  for (float c : {2.0720280707e-02f, -5.3763799369e-02f, 1.3331718743e-01f, -3.3333292603e-01f})
    p = hn::MulAdd(p, s, hn::Set(d, c));
  const V small = hn::CopySign(hn::MulAdd(hn::Mul(p, s), x, x), x);  // the sign of -0 kept
  const V e = ExpIeee(d, hn::Add(ax, ax));
  const V large = hn::CopySign(hn::Sub(one, hn::Div(hn::Set(d, 2.0f), hn::Add(e, one))), x);
  return hn::IfThenElse(ax < hn::Set(d, 0.625f), small, large);
}

// float sin (cosine: quadrant + 1), within 3 ulp for |x| < 4096: x - n pi/2 with pi/2
// split in four (12-bit C1, C2, C3: their products by n are exact), then sin or cos of the remainder
// by polynomials fitted for flambeau on [-pi/4, pi/4]. Larger |x|, inf and NaN: libm per lane.
template <class D, class V>
HWY_INLINE V SinCosF32(D d, V x, bool cosine) {
  const hn::RebindToSigned<D> di;
  const V ax = hn::Abs(x), one = hn::Set(d, 1.0f);
  const V n = hn::Round(hn::Mul(x, hn::Set(d, 0.63661977236758134f)));
  V r = hn::NegMulAdd(n, hn::Set(d, 1.5703125f), x);
  r = hn::NegMulAdd(n, hn::Set(d, 4.837512969970703e-04f), r);
  r = hn::NegMulAdd(n, hn::Set(d, 7.549533620476723e-08f), r);
  r = hn::NegMulAdd(n, hn::Set(d, 2.5633440682570896e-12f), r);
  const V z = hn::Mul(r, r);
  V s = hn::Set(d, 2.7198784665e-06f);
  for (float c : {-1.9839500601e-04f, 8.3333300427e-03f, -1.6666667163e-01f}) s = hn::MulAdd(s, z, hn::Set(d, c));
  const V sin_r = hn::MulAdd(hn::Mul(s, z), r, r);
  V c = hn::Set(d, -2.7217828347e-07f);
  for (float k : {2.4799608582e-05f, -1.3888884569e-03f, 4.1666667908e-02f}) c = hn::MulAdd(c, z, hn::Set(d, k));
  const V cos_r = hn::MulAdd(hn::Mul(c, z), z, hn::NegMulAdd(hn::Set(d, 0.5f), z, one));
  auto q = hn::ConvertTo(di, n);
  if (cosine) q = hn::Add(q, hn::Set(di, 1));
  const auto use_cos = hn::RebindMask(d, hn::TestBit(q, hn::Set(di, 1)));
  const auto negate = hn::RebindMask(d, hn::TestBit(q, hn::Set(di, 2)));
  V y = hn::IfThenElse(use_cos, cos_r, sin_r);
  y = hn::IfThenElse(negate, hn::Neg(y), y);
  if (!cosine) y = hn::IfThenElse(x == hn::Zero(d), x, y);  // sin(-0) = -0
  const auto far = hn::Not(ax < hn::Set(d, 4096.0f));  // also inf and NaN
  if (HWY_UNLIKELY(!hn::AllFalse(d, far))) {
    HWY_ALIGN float xs[hn::MaxLanes(d)], ys[hn::MaxLanes(d)];
    hn::Store(x, d, xs);
    hn::Store(y, d, ys);
    for (size_t i = 0; i < hn::Lanes(d); ++i)
      if (!(std::fabs(xs[i]) < 4096.0f)) ys[i] = cosine ? std::cos(xs[i]) : std::sin(xs[i]);
    y = hn::Load(d, ys);
  }
  return y;
}

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();
