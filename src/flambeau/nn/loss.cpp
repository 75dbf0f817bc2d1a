// The losses of nn::functional, as composites of differentiable ops (log_softmax, gather,
// where, softplus ...), so autograd derives their gradients; cross_entropy over [N, C]
// logits and class indices is one fused op. Every argument is checked before anything is
// computed.
#include <cmath>

#include "flambeau/core/op_hook.h"
#include "flambeau/autograd/autocast.h"
#include "flambeau/autograd/function.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd.h"
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

// Note [Fused cross_entropy]
// cross_entropy of logits x [N, C] (float32 / float64) against class indices in one pass
// per row, keeping only each row's logsumexp: the backward rebuilds the softmax from x, so
// nothing [N, C]-sized is kept or built besides the gradient (the composite keeps
// log_softmax and its backward makes several [N, C] temporaries). lse_i = m_i + ls_i with m_i
// the row's max and ls_i = log sum_j exp(x_ij - m_i), kept apart: x - lse is formed as
// (x - m) - ls, which keeps float32's precision for large logits. Per row i with target t,
// class weights w (ones when none; W their sum), smoothing s, v_i = 0 for ignored rows:
//   loss_i = v_i [ (1-s) w_t (lse_i - x_it) + s/C (W lse_i - sum_j w_j x_ij) ]
//   dloss_i/dx_ij = v_i [ ((1-s) w_t + s W / C) p_ij - (1-s) w_t [j = t] - s w_j / C ]
// with p_ij = exp(x_ij - lse_i); "mean" divides by sum_i v_i w_t, as PyTorch (also the
// smoothing term). Sums over rows run in double, in row order.
template <class T>
Tensor fused_cross_entropy(const Tensor& input, const ClassTargets& c, const std::optional<Tensor>& weight,
                           const std::string& reduction, double s) {
  const Tensor x = input.contiguous();
  const int64_t N = x.size(0), C = x.size(1);
  const Tensor w = weight ? weight->detach().to(x.dtype()).contiguous() : Tensor();
  const T* wp = w.defined() ? w.data<T>() : nullptr;
  double W = double(C);
  if (wp) {
    W = 0;
    for (int64_t j = 0; j < C; ++j) W += double(wp[j]);
  }
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1));  // rows per task
  Tensor maxes = empty({N}, x.dtype()), logsums = empty({N}, x.dtype()), rows = empty({N}, x.dtype());
  const T* xp = x.data<T>();
  const int64_t* tp = c.safe.data<int64_t>();
  const T* vp = c.valid.data<T>();
  T *mp = maxes.data<T>(), *lp = logsums.data<T>(), *rp = rows.data<T>();
  parallel_for(0, N, grain, [&](int64_t lo, int64_t hi) {
    std::vector<T> buf(static_cast<size_t>(C));
    for (int64_t i = lo; i < hi; ++i) {
      const T* row = xp + i * C;
      std::copy_n(row, C, buf.data());
      const T mx = kernels::max_of(row, C);
      const double l = std::log(kernels::exp_shift_sum(buf.data(), C, mx));  // lse - mx
      mp[i] = mx, lp[i] = T(l);
      if (vp[i] == T(0)) {
        rp[i] = T(0);
        continue;
      }
      const double wt = wp ? double(wp[tp[i]]) : 1.0;
      double loss = (1 - s) * wt * (l - (double(row[tp[i]]) - double(mx)));
      if (s > 0) {  // W lse - sum_j w_j x_j = W l - sum_j w_j (x_j - mx)
        double dot = 0;
        for (int64_t j = 0; j < C; ++j) dot += (wp ? double(wp[j]) : 1.0) * (double(row[j]) - double(mx));
        loss += s / double(C) * (W * l - dot);
      }
      rp[i] = T(loss);
    }
  });
  double total = 0, den = 0;
  const T* cp = c.counts.data<T>();
  for (int64_t i = 0; i < N; ++i) total += double(rp[i]), den += double(cp[i]);
  const bool mean = reduction == "mean", none = reduction == "none";
  Tensor out = none ? rows.reshape(c.out_shape) : scalar_tensor(mean ? total / den : total, x.dtype());
  autograd::record(
      "CrossEntropyLossBackward0", {&out}, {&input}, {x, maxes, logsums},
      [N, C, W, s, den, mean, none, grain, w, safe = c.safe, valid = c.valid](const std::vector<Tensor>& grads,
                                                                        const std::vector<Tensor>& saved) {
        const Tensor g = grads[0].to(saved[0].dtype()).contiguous();
        const T* wp = w.defined() ? w.data<T>() : nullptr;
        Tensor dx = empty({N, C}, saved[0].dtype());
        const T *xp = saved[0].data<T>(), *mp = saved[1].data<T>(), *lp = saved[2].data<T>(), *gp = g.data<T>(),
                *vp = valid.data<T>();
        const int64_t* tp = safe.data<int64_t>();
        T* dp = dx.data<T>();
        parallel_for(0, N, grain, [&](int64_t lo, int64_t hi) {
          for (int64_t i = lo; i < hi; ++i) {
            T* d = dp + i * C;
            const double coef = double(vp[i]) * double(none ? gp[i] : gp[0]) / (mean ? den : 1.0);
            if (coef == 0) {
              std::fill_n(d, C, T(0));
              continue;
            }
            for (int64_t j = 0; j < C; ++j) d[j] = xp[i * C + j] - mp[i];
            kernels::exp_shift_sum(d, C, lp[i]);  // p = exp((x - m) - ls)
            const double wt = wp ? double(wp[tp[i]]) : 1.0;
            const T a = T(coef * ((1 - s) * wt + s * W / double(C))), b = T(coef * s / double(C));
            if (s > 0 && wp)
              for (int64_t j = 0; j < C; ++j) d[j] = a * d[j] - b * wp[j];
            else if (s > 0)
              for (int64_t j = 0; j < C; ++j) d[j] = a * d[j] - b;
            else
              for (int64_t j = 0; j < C; ++j) d[j] *= a;
            d[tp[i]] -= T(coef * (1 - s) * wt);
          }
        });
        return std::vector<Tensor>{dx.reshape(saved[0].sizes())};
      });
  return out;
}

}  // namespace

FLB_OP(nll_loss,
       (const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight, int64_t ignore_index,
        const std::string& reduction),
       (input, target, weight, ignore_index, reduction), Tensor) {
  FLB_AUTOCAST(fp32, nll_loss, input, target, weight, ignore_index, reduction);
  check_reduction("nll_loss", reduction);
  const ClassTargets c = class_targets("nll_loss", input, target, weight, ignore_index);
  return nll_from(classes_last(input), c, reduction);
}

FLB_OP(cross_entropy,
       (const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight, int64_t ignore_index,
        const std::string& reduction, double label_smoothing),
       (input, target, weight, ignore_index, reduction, label_smoothing), Tensor) {
  FLB_AUTOCAST(fp32, cross_entropy, input, target, weight, ignore_index, reduction, label_smoothing);
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
  // Note [Fused cross_entropy]: [N, C] (or [C]) logits in float32 / float64.
  if (input.dim() <= 2 && (input.dtype() == kFloat32 || input.dtype() == kFloat64) &&
      !(weight && autograd::requires_grad(*weight))) {
    const Tensor x2 = input.dim() == 1 ? input.unsqueeze(0) : input;
    Tensor out = input.dtype() == kFloat32 ? fused_cross_entropy<float>(x2, c, weight, reduction, label_smoothing)
                                           : fused_cross_entropy<double>(x2, c, weight, reduction, label_smoothing);
    return out;
  }
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

FLB_OP(mse_loss,
       (const Tensor& input, const Tensor& target, const std::string& reduction),
       (input, target, reduction), Tensor) {
  FLB_AUTOCAST(fp32, mse_loss, input, target, reduction);
  check_reduction("mse_loss", reduction);
  broadcast_shapes(input.sizes(), target.sizes(), "mse_loss");
  const Tensor d = sub(input, target);
  return reduce(mul(d, d), reduction);
}

FLB_OP(l1_loss,
       (const Tensor& input, const Tensor& target, const std::string& reduction),
       (input, target, reduction), Tensor) {
  FLB_AUTOCAST(fp32, l1_loss, input, target, reduction);
  check_reduction("l1_loss", reduction);
  broadcast_shapes(input.sizes(), target.sizes(), "l1_loss");
  return reduce(abs(sub(input, target)), reduction);
}

FLB_OP(binary_cross_entropy_with_logits,
       (const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
        const std::string& reduction, const std::optional<Tensor>& pos_weight),
       (input, target, weight, reduction, pos_weight), Tensor) {
  FLB_AUTOCAST(fp32, binary_cross_entropy_with_logits, input, target, weight, reduction, pos_weight);
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
