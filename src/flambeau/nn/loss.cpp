// The losses of nn::functional, as composites of differentiable ops (log_softmax, gather,
// where, softplus ...), so autograd derives their gradients. Every argument is checked
// before anything is computed.
#include <cmath>

#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

void check_reduction(const char* op, const std::string& reduction) {
  FLB_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", ValueError, "[", op,
            "] reduction must be 'mean', 'sum' or 'none', got '", reduction, "'");
}

Tensor reduce(const Tensor& loss, const std::string& reduction) {
  if (reduction == "mean") return mean(loss);
  if (reduction == "sum") return sum(loss);
  return loss;
}

// Whether a tensor of `shape` broadcasts to `target` (without growing it).
bool broadcasts_to(const Dims& shape, const Dims& target) {
  if (shape.size() > target.size()) return false;
  const size_t lead = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && shape[d] != target[lead + d]) return false;
  return true;
}

int64_t class_dim(const Tensor& input) { return input.dim() == 1 ? 0 : 1; }

// input [N, C, d1, ...] -> [N * d1 * ..., C]; [C] -> [1, C].
Tensor classes_last(const Tensor& input) {
  if (input.dim() == 1) return input.unsqueeze(0);
  if (input.dim() == 2) return input;
  Dims perm{0};
  for (int64_t d = 2; d < input.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return input.permute(perm).reshape({-1, input.size(1)});
}

void check_weight(const char* op, const std::optional<Tensor>& weight, int64_t classes, const Tensor& input) {
  if (!weight) return;
  FLB_CHECK(weight->is_floating_point(), TypeError, "[", op, "] weight must be floating point, got ",
            dtype_name(weight->dtype()));
  FLB_CHECK(weight->dim() == 1 && weight->size(0) == classes, ValueError, "[", op, "] weight of shape ",
            shape_str(weight->sizes()), " does not match the ", classes, " classes of input ", shape_str(input.sizes()));
}

// The class-index form shared by nll_loss and cross_entropy: checks input (the logits or
// log-probabilities, for its shape), target and weight, and flattens the target.
struct ClassTargets {
  Tensor safe;     // [M] int64: the target, 0 where ignored
  Tensor valid;    // [M] in input's dtype: 1 where counted, 0 where ignored
  Tensor counts;   // [M]: valid, times weight[target] when a weight is given
  Dims out_shape;  // the shape of the unreduced loss
};

ClassTargets class_targets(const char* op, const Tensor& input, const Tensor& target,
                           const std::optional<Tensor>& weight, int64_t ignore_index) {
  FLB_CHECK(input.dim() >= 1, ValueError, "[", op, "] input must have a class dim, got shape ",
            shape_str(input.sizes()));
  FLB_CHECK(input.is_floating_point(), TypeError, "[", op, "] expected a floating point input, got ",
            dtype_name(input.dtype()));
  FLB_CHECK(is_integral(target.dtype(), false), TypeError, "[", op,
            "] expected class indices as an integer target (or class probabilities as a floating one), got ",
            dtype_name(target.dtype()));
  const int64_t classes = input.size(class_dim(input));
  Dims want;
  for (int64_t d = 0; d < input.dim(); ++d)
    if (d != class_dim(input)) want.push_back(input.size(d));
  FLB_CHECK(target.sizes() == want, ValueError, "[", op, "] expected a target of shape ", shape_str(want),
            " for input of shape ", shape_str(input.sizes()), ", got ", shape_str(target.sizes()));
  check_weight(op, weight, classes, input);
  const Tensor t = target.to(kInt64).reshape({-1});
  const Tensor valid = ne(t, ignore_index);
  const Tensor bad = masked_select(t, logical_and(valid, logical_or(lt(t, 0), ge(t, classes))));
  FLB_CHECK(bad.numel() == 0, IndexError, "[", op, "] target ", bad.numel() ? bad[0].item<int64_t>() : 0,
            " is out of bounds for ", classes, " classes (ignore_index is ", ignore_index, ")");
  ClassTargets c;
  c.safe = where(valid, t, 0);
  c.valid = valid.to(input.dtype());
  c.counts = weight ? mul(c.valid, index_select(weight->to(input.dtype()), 0, c.safe)) : c.valid;
  c.out_shape = want;
  return c;
}

// The nll loss of log-probabilities logp [M, C].
Tensor nll_from(const Tensor& logp, const ClassTargets& c, const std::string& reduction) {
  const Tensor loss = mul(neg(gather(logp, 1, c.safe.unsqueeze(1)).squeeze(1)), c.counts);
  if (reduction == "mean") return div(sum(loss), sum(c.counts));
  if (reduction == "sum") return sum(loss);
  return loss.reshape(c.out_shape);
}

// cross_entropy against class probabilities (target of input's shape; checked).
Tensor cross_entropy_probs(const Tensor& logp, const Tensor& target, const std::optional<Tensor>& weight,
                           const std::string& reduction, double label_smoothing) {
  const int64_t cd = class_dim(logp), classes = logp.size(cd);
  Tensor t = target;
  if (label_smoothing > 0) t = add(mul(t, 1 - label_smoothing), label_smoothing / double(classes));
  Tensor terms = mul(logp, t);
  if (weight) {
    Dims shape(size_t(logp.dim() - cd), 1);  // [C, 1, ...]: broadcasts along the class dim
    shape[0] = classes;
    terms = mul(terms, weight->reshape(shape));
  }
  return reduce(neg(sum(terms, {cd})), reduction);
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight, int64_t ignore_index,
                const std::string& reduction) {
  check_reduction("nll_loss", reduction);
  const ClassTargets c = class_targets("nll_loss", input, target, weight, ignore_index);
  return nll_from(classes_last(input), c, reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t ignore_index, const std::string& reduction, double label_smoothing) {
  const char* op = "cross_entropy";
  check_reduction(op, reduction);
  FLB_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError, "[", op,
            "] label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  FLB_CHECK(input.dim() >= 1, ValueError, "[", op, "] input must have a class dim, got shape ",
            shape_str(input.sizes()));
  FLB_CHECK(input.is_floating_point(), TypeError, "[", op, "] expected floating point logits, got ",
            dtype_name(input.dtype()));
  if (target.is_floating_point()) {
    // Checked before the log_softmax, so that a bad call computes nothing.
    FLB_CHECK(target.sizes() == input.sizes(), ValueError, "[", op,
              "] a class-probability target must have input's shape ", shape_str(input.sizes()), ", got ",
              shape_str(target.sizes()));
    check_weight(op, weight, input.size(class_dim(input)), input);
    return cross_entropy_probs(log_softmax(input, class_dim(input)), target, weight, reduction, label_smoothing);
  }
  const ClassTargets c = class_targets(op, input, target, weight, ignore_index);
  const Tensor logp = classes_last(log_softmax(input, class_dim(input)));
  const Tensor nll = nll_from(logp, c, reduction);
  if (label_smoothing == 0) return nll;
  // torch: (1 - s) * nll + s / C * (-the sum over classes of the log-probabilities, weighted
  // per class, normalised like nll).
  const int64_t classes = input.size(class_dim(input));
  Tensor smooth = mul(neg(sum(weight ? mul(logp, weight->to(input.dtype())) : logp, {1})), c.valid);
  if (reduction == "mean") smooth = div(sum(smooth), sum(c.counts));
  else if (reduction == "sum") smooth = sum(smooth);
  else smooth = smooth.reshape(c.out_shape);
  return add(mul(nll, 1 - label_smoothing), mul(smooth, label_smoothing / double(classes)));
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction("mse_loss", reduction);
  broadcast_shapes(input.sizes(), target.sizes(), "mse_loss");
  const Tensor d = sub(input, target);
  return reduce(mul(d, d), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction("l1_loss", reduction);
  broadcast_shapes(input.sizes(), target.sizes(), "l1_loss");
  return reduce(abs(sub(input, target)), reduction);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                                        const std::string& reduction, const std::optional<Tensor>& pos_weight) {
  const char* op = "binary_cross_entropy_with_logits";
  check_reduction(op, reduction);
  FLB_CHECK(target.sizes() == input.sizes(), ValueError, "[", op, "] target of shape ", shape_str(target.sizes()),
            " must have input's shape ", shape_str(input.sizes()));
  for (const auto* w : {&weight, &pos_weight})
    if (*w)
      FLB_CHECK(broadcasts_to((*w)->sizes(), input.sizes()), ValueError, "[", op, "] ",
                w == &weight ? "weight" : "pos_weight", " of shape ", shape_str((*w)->sizes()),
                " does not broadcast to input's shape ", shape_str(input.sizes()));
  // (1 - t) * x + (1 + (pos_weight - 1) * t) * softplus(-x), where softplus(-x) = -log(sigmoid(x)).
  const Tensor log_sig_neg = softplus(neg(input));
  const Tensor scale = pos_weight ? add(mul(sub(*pos_weight, 1), target), 1) : Tensor();
  Tensor loss = add(mul(sub(1, target), input), scale.defined() ? mul(scale, log_sig_neg) : log_sig_neg);
  if (weight) loss = mul(loss, *weight);
  return reduce(loss, reduction);
}

}  // namespace flambeau::nn::functional
