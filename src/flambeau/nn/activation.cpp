// torch.nn.functional's activations, each a composition of differentiable elementwise ops
// (so autograd derives the gradient) reported to the op hook as one op.
#include "flambeau/core/op_hook.h"
#include "flambeau/core/shape.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

// The result, written into x when inplace.
Tensor finish(const Tensor& x, const Tensor& out, bool inplace) {
  if (!inplace) return out;
  Tensor self = x;
  self.copy_(out);
  return self;
}

void check_float(const char* op, const Tensor& x) {
  FLB_CHECK(x.is_floating_point(), TypeError, "[", op, "] not implemented for '", dtype_name(x.dtype()),
            "' (shape ", shape_str(x.sizes()), ")");
}

// where(x > 0, x, negative) with the elementwise result of the negative branch.
Tensor positive_or(const Tensor& x, const Tensor& negative) { return where(gt(x, 0.0), x, negative); }

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

}  // namespace

FLB_OP(elu, (const Tensor& x, double alpha, bool inplace), (x, alpha, inplace), Tensor) {
  check_float("elu", x);
  return finish(x, positive_or(x, mul(expm1(x), alpha)), inplace);
}

FLB_OP(selu, (const Tensor& x, bool inplace), (x, inplace), Tensor) {
  check_float("selu", x);
  return finish(x, mul(positive_or(x, mul(expm1(x), kSeluAlpha)), kSeluScale), inplace);
}

FLB_OP(celu, (const Tensor& x, double alpha, bool inplace), (x, alpha, inplace), Tensor) {
  check_float("celu", x);
  FLB_CHECK(alpha != 0, ValueError, "[celu] ZeroDivisionError: alpha cannot be 0 for CELU");
  return finish(x, positive_or(x, mul(expm1(div(x, alpha)), alpha)), inplace);
}

FLB_OP(leaky_relu, (const Tensor& x, double negative_slope, bool inplace), (x, negative_slope, inplace), Tensor) {
  check_float("leaky_relu", x);
  return finish(x, positive_or(x, mul(x, negative_slope)), inplace);
}

FLB_OP(prelu, (const Tensor& x, const Tensor& weight), (x, weight), Tensor) {
  check_float("prelu", x);
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  FLB_CHECK(weight.dim() <= 1 && (weight.numel() == 1 || weight.numel() == channels), ValueError,
            "[prelu] Mismatch of parameter numbers and input channel size. Found parameter numbers = ", weight.numel(),
            " and channel size = ", channels, " (input shape ", shape_str(x.sizes()), ", weight shape ",
            shape_str(weight.sizes()), ")");
  Tensor w = weight.reshape({-1});
  if (weight.numel() > 1) {  // one slope per channel: [C, 1, ...] against x's dims 1..
    Dims shape(size_t(x.dim() - 1), 1);
    shape[0] = channels;
    w = w.reshape(shape);
  }
  return positive_or(x, mul(x, w));
}

FLB_OP(rrelu, (const Tensor& x, double lower, double upper, bool training, bool inplace),
       (x, lower, upper, training, inplace), Tensor) {
  check_float("rrelu", x);
  FLB_CHECK(lower <= upper, ValueError, "[rrelu] Lower bound should be less than or equal to the upper bound, got ",
            lower, " and ", upper);
  if (!training) return finish(x, positive_or(x, mul(x, (lower + upper) / 2)), inplace);
  Tensor slopes = empty_like(x);
  uniform_(slopes, lower, upper);
  return finish(x, where(ge(x, 0.0), x, mul(x, slopes)), inplace);
}

FLB_OP(hardtanh, (const Tensor& x, double min_val, double max_val, bool inplace), (x, min_val, max_val, inplace),
       Tensor) {
  FLB_CHECK(min_val <= max_val, ValueError, "[hardtanh] min_val cannot be greater than max_val (", min_val, " > ",
            max_val, ")");
  return finish(x, clamp(x, Tensor(min_val), Tensor(max_val)), inplace);
}

FLB_OP(relu6, (const Tensor& x, bool inplace), (x, inplace), Tensor) {
  return finish(x, clamp(x, Tensor(0.0), Tensor(6.0)), inplace);
}

FLB_OP(hardsigmoid, (const Tensor& x, bool inplace), (x, inplace), Tensor) {
  check_float("hardsigmoid", x);
  return finish(x, div(clamp(add(x, 3.0), Tensor(0.0), Tensor(6.0)), 6.0), inplace);
}

FLB_OP(hardswish, (const Tensor& x, bool inplace), (x, inplace), Tensor) {
  check_float("hardswish", x);
  return finish(x, div(mul(x, clamp(add(x, 3.0), Tensor(0.0), Tensor(6.0))), 6.0), inplace);
}

FLB_OP(mish, (const Tensor& x, bool inplace), (x, inplace), Tensor) {
  check_float("mish", x);
  return finish(x, mul(x, tanh(softplus(x))), inplace);
}

FLB_OP(glu, (const Tensor& x, int64_t dim), (x, dim), Tensor) {
  check_float("glu", x);
  FLB_CHECK(x.dim() > 0, ValueError, "[glu] does not support scalars because halving size must be even");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  FLB_CHECK(d >= 0 && d < x.dim(), IndexError, "[glu] dim ", dim, " out of range for shape ", shape_str(x.sizes()));
  FLB_CHECK(x.size(d) % 2 == 0, ValueError, "[glu] Halving dimension must be even, but dimension ", d, " is size ",
            x.size(d), " (shape ", shape_str(x.sizes()), ")");
  const std::vector<Tensor> halves = chunk(x, 2, d);
  return mul(halves[0], sigmoid(halves[1]));
}

FLB_OP(log_sigmoid, (const Tensor& x), (x), Tensor) {
  check_float("log_sigmoid", x);
  return neg(softplus(neg(x)));
}

FLB_OP(softsign, (const Tensor& x), (x), Tensor) { return div(x, add(abs(x), 1.0)); }

FLB_OP(softshrink, (const Tensor& x, double lambd), (x, lambd), Tensor) {
  check_float("softshrink", x);
  FLB_CHECK(lambd >= 0, ValueError, "[softshrink] lambda must be greater or equal to 0, but found to be ", lambd);
  return where(gt(x, lambd), sub(x, lambd), where(lt(x, -lambd), add(x, lambd), mul(x, 0.0)));
}

FLB_OP(hardshrink, (const Tensor& x, double lambd), (x, lambd), Tensor) {
  check_float("hardshrink", x);
  return where(gt(abs(x), lambd), x, mul(x, 0.0));
}

FLB_OP(tanhshrink, (const Tensor& x), (x), Tensor) { return sub(x, tanh(x)); }

FLB_OP(threshold, (const Tensor& x, double threshold, double value, bool inplace), (x, threshold, value, inplace),
       Tensor) {
  return finish(x, where(gt(x, threshold), x, full_like(x, value)), inplace);
}

FLB_OP(softmin, (const Tensor& x, std::optional<int64_t> dim, std::optional<DType> dtype), (x, dim, dtype), Tensor) {
  const int64_t d = dim ? *dim : (x.dim() == 0 || x.dim() == 1 || x.dim() == 3) ? 0 : 1;
  return softmax(neg(x), d, dtype);
}

}  // namespace flambeau::nn::functional
