// linear_cross_entropy: argument checks, the autograd wiring of the chunked kernel
// (linear_cross_entropy_kernel.cpp) and the composite reference it is tested against.
#include "flambeau/core/op_hook.h"
#include "flambeau/nn/linear_cross_entropy.h"

#include <cmath>
#include <limits>

#include "flambeau/autograd/autocast.h"
#include "flambeau/autograd/function.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/linear_cross_entropy_kernel.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

constexpr const char* kOp = "linear_cross_entropy";

struct Problem {
  int64_t N = 0, D = 0, C = 0;
  bool batched = true, probs = false;
};

Problem check_args(const Tensor& input, const Tensor& w, const Tensor& target, const std::optional<Tensor>& bias,
                   const std::optional<Tensor>& weight, const std::string& reduction, double label_smoothing,
                   double z_loss, std::optional<int64_t> chunk_size) {
  FLB_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", ValueError, "[", kOp,
            "] reduction must be 'mean', 'sum' or 'none', got '", reduction, "'");
  FLB_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError, "[", kOp,
            "] label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  FLB_CHECK(std::isfinite(z_loss) && z_loss >= 0, ValueError, "[", kOp, "] z_loss must be finite and >= 0, got ",
            z_loss);
  FLB_CHECK(!chunk_size || *chunk_size >= 1, ValueError, "[", kOp, "] chunk_size must be >= 1, got ",
            chunk_size.value_or(0));
  FLB_CHECK(input.is_floating_point(), TypeError, "[", kOp, "] expected a floating point input, got ",
            dtype_name(input.dtype()));
  FLB_CHECK(input.dim() == 1 || input.dim() == 2, ValueError, "[", kOp,
            "] expected input of shape [N, in_features] or [in_features], got ", shape_str(input.sizes()));
  FLB_CHECK(w.dim() == 2, ValueError, "[", kOp, "] expected linear_weight of shape [num_classes, in_features], got ",
            shape_str(w.sizes()));
  FLB_CHECK(w.dtype() == input.dtype(), TypeError, "[", kOp, "] linear_weight (", dtype_name(w.dtype()),
            ") must have input's dtype (", dtype_name(input.dtype()), ")");
  Problem p;
  p.batched = input.dim() == 2;
  p.N = p.batched ? input.size(0) : 1, p.D = input.size(-1), p.C = w.size(0);
  FLB_CHECK(p.D == w.size(1), ValueError, "[", kOp, "] input of shape ", shape_str(input.sizes()),
            " and linear_weight of shape ", shape_str(w.sizes()), " differ in in_features (", p.D, " vs ", w.size(1),
            ")");
  FLB_CHECK(p.C >= 1, ValueError, "[", kOp, "] linear_weight of shape ", shape_str(w.sizes()), " has no classes");
  if (bias) {
    FLB_CHECK(bias->dtype() == input.dtype(), TypeError, "[", kOp, "] linear_bias (", dtype_name(bias->dtype()),
              ") must have input's dtype (", dtype_name(input.dtype()), ")");
    FLB_CHECK(bias->sizes() == Dims{p.C}, ValueError, "[", kOp, "] expected linear_bias of shape [", p.C,
              "] for linear_weight of shape ", shape_str(w.sizes()), ", got ", shape_str(bias->sizes()));
  }
  if (weight) {
    FLB_CHECK(weight->is_floating_point(), TypeError, "[", kOp, "] weight must be floating point, got ",
              dtype_name(weight->dtype()));
    FLB_CHECK(weight->sizes() == Dims{p.C}, ValueError, "[", kOp, "] weight of shape ", shape_str(weight->sizes()),
              " does not match the ", p.C, " classes of linear_weight ", shape_str(w.sizes()));
  }
  p.probs = target.is_floating_point();
  const Dims logits = p.batched ? Dims{p.N, p.C} : Dims{p.C};
  const Dims rows = p.batched ? Dims{p.N} : Dims{};
  if (p.probs)
    FLB_CHECK(target.sizes() == logits, ValueError, "[", kOp, "] a class-probability target must have the logits' shape ",
              shape_str(logits), " (input ", shape_str(input.sizes()), ", linear_weight ", shape_str(w.sizes()),
              "), got ", shape_str(target.sizes()));
  else {
    FLB_CHECK(is_integral(target.dtype(), false), TypeError, "[", kOp,
              "] expected class indices as an integer target (or class probabilities as a floating one), got ",
              dtype_name(target.dtype()));
    FLB_CHECK(target.sizes() == rows, ValueError, "[", kOp, "] expected a target of shape ", shape_str(rows),
              " for input of shape ", shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  }
  return p;
}

// Class-index targets as [N] int64 with -1 for ignored rows (values checked), and the
// total weight of the counted rows (the "mean" normaliser).
Tensor safe_targets(const Tensor& target, const Problem& p, const std::optional<Tensor>& weight, int64_t ignore_index,
                    double* total) {
  Tensor t = target.to(kInt64).reshape({-1}).contiguous().clone();
  int64_t* v = t.data<int64_t>();
  const Tensor wd = weight ? weight->to(kFloat64).contiguous() : Tensor();
  *total = 0;
  for (int64_t i = 0; i < p.N; ++i) {
    if (v[i] == ignore_index) {
      v[i] = -1;
      continue;
    }
    FLB_CHECK(v[i] >= 0 && v[i] < p.C, IndexError, "[", kOp, "] target ", v[i], " at row ", i,
              " is out of bounds for ", p.C, " classes (ignore_index is ", ignore_index, ")");
    *total += wd.defined() ? wd.data<double>()[v[i]] : 1.0;
  }
  return t;
}

}  // namespace

FLB_OP(linear_cross_entropy,
       (const Tensor& input, const Tensor& linear_weight, const Tensor& target,
        const std::optional<Tensor>& linear_bias, const std::optional<Tensor>& weight,
        const std::string& reduction, int64_t ignore_index, double label_smoothing, double z_loss,
        std::optional<int64_t> chunk_size),
       (input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing, z_loss,
        chunk_size), Tensor) {
  FLB_AUTOCAST(fp32, linear_cross_entropy, input, linear_weight, target, linear_bias, weight, reduction, ignore_index, label_smoothing, z_loss, chunk_size);
  const Problem p = check_args(input, linear_weight, target, linear_bias, weight, reduction, label_smoothing, z_loss,
                               chunk_size);
  const bool grad_mode = autograd::grad_mode_enabled();
  if (grad_mode && ((p.probs && autograd::requires_grad(target)) || (weight && autograd::requires_grad(*weight))))
    return linear_cross_entropy_reference(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
                                          label_smoothing, z_loss);
  const bool need_x = grad_mode && autograd::requires_grad(input);
  const bool need_w = grad_mode && autograd::requires_grad(linear_weight);
  const bool need_b = grad_mode && linear_bias && autograd::requires_grad(*linear_bias);
  const bool need_any = need_x || need_w || need_b;
  const DType ct = detail::lce_compute_dtype(input.dtype());

  detail::LceArgs args;
  double total = double(p.N);  // the "mean" normaliser
  {
    autograd::NoGradGuard no_grad;
    args.x = input.reshape({p.N, p.D}).contiguous();
    args.w = linear_weight.contiguous();
    if (linear_bias) args.bias = linear_bias->to(ct).contiguous();
    if (weight) args.class_weight = weight->to(ct).contiguous();
    if (p.probs) args.probs = target.to(ct).reshape({p.N, p.C}).contiguous();
    else args.target = safe_targets(target, p, weight, ignore_index, &total);
  }
  args.label_smoothing = label_smoothing, args.z_loss = z_loss, args.chunk = chunk_size.value_or(0);
  args.want_grad_x = need_x, args.want_grad_w = need_w, args.want_grad_b = need_b;
  const Dims row_shape = p.batched ? Dims{p.N} : Dims{};
  const Dims x_shape = input.sizes();

  // Per-row gradient scales: `scale` on counted rows, 0 on ignored ones.
  auto row_scales = [](const detail::LceArgs& a, int64_t n, const Tensor& scale, DType ct) {
    Tensor s = scale.to(ct).reshape({n}).contiguous().clone();
    if (a.target.defined())
      s = where(ge(a.target, 0), s, zeros({n}, ct));
    return s;
  };

  if (reduction == "none") {
    detail::LceResult r;
    {
      autograd::NoGradGuard no_grad;
      r = detail::lce_chunked(args);
    }
    Tensor out = r.loss_rows.to(input.dtype()).reshape(row_shape);
    if (!need_any) return out;
    // Backward recomputes the logits chunk by chunk with the upstream gradient per row. The
    // tensors travel as saved tensors (freed with the graph); `opts` keeps the rest.
    detail::LceArgs opts = args;
    opts.x = opts.w = opts.bias = opts.target = opts.probs = opts.class_weight = Tensor();
    autograd::record(
        "LinearCrossEntropyBackward0", {&out}, {&input, &linear_weight, linear_bias ? &*linear_bias : nullptr},
        {args.x, args.w, args.bias, args.target, args.probs, args.class_weight},
        [opts, row_scales, n = p.N, ct, x_shape](const std::vector<Tensor>& grads, const std::vector<Tensor>& saved) {
          detail::LceArgs a = opts;
          a.x = saved[0], a.w = saved[1], a.bias = saved[2], a.target = saved[3], a.probs = saved[4];
          a.class_weight = saved[5];
          a.row_scale = row_scales(a, n, grads[0], ct);
          detail::LceResult g = detail::lce_chunked(a);
          if (g.grad_x.defined()) g.grad_x = g.grad_x.reshape(x_shape);
          return std::vector<Tensor>{g.grad_x, g.grad_w, g.grad_b};
        });
    return out;
  }

  const bool mean = reduction == "mean";
  if (need_any) args.row_scale = row_scales(args, p.N, full({p.N}, mean ? 1.0 / total : 1.0, ct), ct);
  detail::LceResult r;
  {
    autograd::NoGradGuard no_grad;
    r = detail::lce_chunked(args);
  }
  const double value = mean ? r.loss_sum / total : r.loss_sum;
  Tensor out = full({}, value, input.dtype());
  if (!need_any) return out;
  // The gradients for an upstream gradient of 1, in the parameters' dtypes and shapes.
  auto finish = [&](Tensor g, const Dims& shape) {
    if (!g.defined()) return g;
    if (g.dtype() != input.dtype()) g = g.to(input.dtype());
    return g.sizes() == shape ? g : g.reshape(shape).clone();
  };
  const Tensor gx = finish(r.grad_x, x_shape), gw = finish(r.grad_w, linear_weight.sizes());
  const Tensor gb = linear_bias ? finish(r.grad_b, linear_bias->sizes()) : Tensor();
  r = {};
  autograd::record("LinearCrossEntropyBackward0", {&out}, {&input, &linear_weight, linear_bias ? &*linear_bias : nullptr},
                   {gx, gw, gb}, [](const std::vector<Tensor>& grads, const std::vector<Tensor>& saved) {
                     const Tensor& g = grads[0];
                     // Note: with an upstream gradient of exactly 1 the saved buffers are
                     // returned as they are; once the graph is released, AccumulateGrad
                     // adopts them without a copy (the memory floor).
                     if (g.item<double>() == 1.0) return std::vector<Tensor>{saved[0], saved[1], saved[2]};
                     std::vector<Tensor> out;
                     for (const Tensor& s : saved) out.push_back(s.defined() ? mul(s, g) : Tensor());
                     return out;
                   });
  return out;
}

Tensor linear_cross_entropy_reference(const Tensor& input, const Tensor& linear_weight, const Tensor& target,
                                      const std::optional<Tensor>& linear_bias, const std::optional<Tensor>& weight,
                                      const std::string& reduction, int64_t ignore_index, double label_smoothing,
                                      double z_loss) {
  const Problem p =
      check_args(input, linear_weight, target, linear_bias, weight, reduction, label_smoothing, z_loss, std::nullopt);
  const Tensor logits = functional::linear(input, linear_weight, linear_bias);
  const Tensor ce = cross_entropy(logits, target, weight, ignore_index, reduction, label_smoothing);
  if (z_loss == 0) return ce;
  const Tensor lse = logsumexp(logits, {-1});
  Tensor counted = ones_like(lse), norm = scalar_tensor(double(p.N), input.dtype());
  if (!p.probs) {
    counted = ne(target, ignore_index).to(input.dtype());
    const Tensor safe = where(ne(target, ignore_index), target.to(kInt64), 0);
    norm = weight ? sum(mul(counted, index_select(weight->to(input.dtype()), 0, safe.reshape({-1})).reshape(
                                         counted.sizes())))
                  : sum(counted);
  }
  const Tensor z = mul(mul(lse, lse), mul(counted, z_loss));
  if (reduction == "none") return add(ce, z);
  if (reduction == "sum") return add(ce, sum(z));
  return add(ce, div(sum(z), norm));
}

}  // namespace flambeau::nn::functional
