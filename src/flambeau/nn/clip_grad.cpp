// Gradient clipping by total norm and by value, without recording autograd history.
#include "flambeau/core/op_hook.h"
#include "flambeau/nn/clip_grad.h"

#include "flambeau/autograd/node.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::utils {

FLB_OP(clip_grad_norm_,
       (const std::vector<Tensor>& parameters, double max_norm, double norm_type),
       (parameters, max_norm, norm_type), Tensor) {
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  const Tensor total = get_total_norm(grads, norm_type);
  clip_grads_with_norm_(parameters, max_norm, total);
  return total;
}

Tensor get_total_norm(const std::vector<Tensor>& tensors, double norm_type) {
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> norms;
  for (const Tensor& t : tensors) norms.push_back(norm(t, norm_type));
  if (norms.empty()) return scalar_tensor(0.0, kFloat32);
  return norm(stack(norms), norm_type);
}

void clip_grads_with_norm_(const std::vector<Tensor>& parameters, double max_norm, const Tensor& total) {
  autograd::NoGradGuard no_grad;
  const Tensor coef = div(full_like(total, max_norm), total + 1e-6).clamp({}, scalar_tensor(1.0, total.dtype()));
  for (const Tensor& p : parameters)
    if (p.grad().defined()) {
      Tensor g = p.grad();
      g.mul_(coef.to(g.dtype()));
    }
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  autograd::NoGradGuard no_grad;
  for (const Tensor& p : parameters)
    if (p.grad().defined()) {
      Tensor g = p.grad();
      g.clamp_(-clip_value, clip_value);
    }
}

}  // namespace flambeau::nn::utils
