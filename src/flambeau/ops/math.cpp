// Math ops composed of elementwise ops (differentiable through them): isposinf/isneginf,
// nan_to_num, logaddexp/logaddexp2; and the counting ops bincount and histc (loops; no
// gradient, as in torch).
#include <cfloat>
#include <cmath>

#include "flambeau/core/op_hook.h"
#include "flambeau/core/shape.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

// The largest finite value of a floating dtype.
double largest_finite(DType dtype) {
  switch (dtype) {
    case kFloat16: return 65504.0;
    case kBFloat16: return 3.38953138925153547590470800371487866880e38;
    case kFloat32: return double(FLT_MAX);
    default: return DBL_MAX;
  }
}

// max(a, b) + log1p(base^-|a - b|) (in base e or 2), exact where a == b == +-inf.
Tensor log_add(const Tensor& a, const Tensor& b, bool base2) {
  const Tensor m = maximum(a, b);
  const Tensor tail = neg(abs(sub(a, b)));
  const Tensor sum = base2 ? add(m, div(log1p(exp2(tail)), M_LN2)) : add(m, log1p(exp(tail)));
  return where(logical_and(isinf(a), eq(a, b)), m, sum);
}

}  // namespace

FLB_OP(isposinf, (const Tensor& t), (t), Tensor) { return logical_and(isinf(t), gt(t, 0)); }
FLB_OP(isneginf, (const Tensor& t), (t), Tensor) { return logical_and(isinf(t), lt(t, 0)); }

FLB_OP(nan_to_num, (const Tensor& t, std::optional<double> nan, std::optional<double> posinf,
                    std::optional<double> neginf), (t, nan, posinf, neginf), Tensor) {
  if (!t.is_floating_point()) return t.clone();
  const double big = largest_finite(t.dtype());
  Tensor out = where(isnan(t), full({}, nan.value_or(0.0), t.dtype()), t);
  out = where(isposinf(t), full({}, posinf.value_or(big), t.dtype()), out);
  return where(isneginf(t), full({}, neginf.value_or(-big), t.dtype()), out);
}

FLB_OP(logaddexp, (const Tensor& a, const Tensor& b), (a, b), Tensor) { return log_add(a, b, false); }
FLB_OP(logaddexp2, (const Tensor& a, const Tensor& b), (a, b), Tensor) { return log_add(a, b, true); }

FLB_OP(bincount, (const Tensor& t, const std::optional<Tensor>& weights, int64_t minlength), (t, weights, minlength),
       Tensor) {
  FLB_CHECK(t.dim() == 1 && !t.is_floating_point() && t.dtype() != kBool, ValueError,
            "[bincount] only supports 1-d non-negative integral inputs, got ", dtype_name(t.dtype()), " of shape ",
            shape_str(t.sizes()));
  FLB_CHECK(minlength >= 0, ValueError, "[bincount] minlength should be >= 0, got ", minlength);
  FLB_CHECK(!weights || (weights->dim() == 1 && weights->numel() == t.numel()), ValueError,
            "[bincount] weights should be 1-d and have the same length as input: input ", shape_str(t.sizes()),
            ", weights ", shape_str(weights ? weights->sizes() : Dims{}));
  const Tensor idx = t.to(kInt64).contiguous();
  const int64_t* iv = idx.data<int64_t>();
  int64_t bins = minlength;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    FLB_CHECK(iv[i] >= 0, ValueError, "[bincount] input must be non-negative, got ", iv[i], " at index ", i);
    bins = std::max(bins, iv[i] + 1);
  }
  // Counts in int64; weighted sums in double (in input order), returned in the weights' dtype
  // (float for integral weights, as torch).
  const DType out_dtype = !weights ? kInt64 : weights->is_floating_point() ? weights->dtype() : kFloat64;
  Tensor acc = zeros({bins}, weights ? kFloat64 : kInt64);
  if (!weights) {
    int64_t* c = acc.data<int64_t>();
    for (int64_t i = 0; i < idx.numel(); ++i) ++c[iv[i]];
    return acc;
  }
  const Tensor w = weights->to(kFloat64).contiguous();
  double* c = acc.data<double>();
  for (int64_t i = 0; i < idx.numel(); ++i) c[iv[i]] += w.data<double>()[i];
  return acc.to(out_dtype);
}

FLB_OP(histc, (const Tensor& t, int64_t bins, Scalar min, Scalar max), (t, bins, min, max), Tensor) {
  FLB_CHECK(t.is_floating_point(), TypeError, "[histc] \"histogram_cpu\" not implemented for '",
            dtype_name(t.dtype()), "' (shape ", shape_str(t.sizes()), ")");
  FLB_CHECK(bins > 0, ValueError, "[histc] bins must be > 0, got ", bins);
  const Tensor x = t.to(kFloat64).contiguous();
  const double* v = x.data<double>();
  double lo = min.to<double>(), hi = max.to<double>();
  FLB_CHECK(!(lo > hi), ValueError, "[histc] max must be larger than min, got min ", lo, " and max ", hi);
  if (lo == hi && x.numel() > 0) {  // the data's range
    lo = hi = v[0];
    for (int64_t i = 0; i < x.numel(); ++i) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
  }
  if (lo == hi) lo -= 1, hi += 1;
  FLB_CHECK(std::isfinite(lo) && std::isfinite(hi), ValueError, "[histc] range of [", lo, ", ", hi,
            "] is not finite");
  Tensor counts = zeros({bins}, kFloat64);
  double* c = counts.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (!(v[i] >= lo && v[i] <= hi)) continue;  // outside (and NaN) ignored
    const int64_t b = std::min(bins - 1, int64_t((v[i] - lo) * double(bins) / (hi - lo)));
    c[b] += 1;
  }
  return counts.to(t.dtype());
}

}  // namespace flambeau
