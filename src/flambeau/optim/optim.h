// Optimizers (torch.optim): SGD (momentum, dampening, nesterov, weight decay), Adam and
// AdamW. Each step updates every parameter in one fused pass: a single parallel loop runs
// over all parameters' elements, so small tensors cost no per-tensor dispatch. The update
// formulas are PyTorch's (lerp for the first moment, the bias corrections as torch's
// single-tensor path computes them).
#pragma once
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::optim {

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  // One update from the parameters' current .grad() (parameters without one are skipped).
  virtual void step() = 0;
  // Drops every gradient (set_to_none) or zeroes it in place.
  void zero_grad(bool set_to_none = true);
  const std::vector<Tensor>& params() const { return params_; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }

 protected:
  std::vector<Tensor> params_;
  double lr_;
};

struct SGDOptions {
  double lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0;
  bool nesterov = false, maximize = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options);
  void step() override;
  // The momentum buffer of parameter i (undefined before its first step with momentum).
  const Tensor& momentum_buffer(size_t i) const { return buffers_[i]; }

 private:
  SGDOptions opt_;
  std::vector<Tensor> buffers_;
};

struct AdamOptions {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool maximize = false;
};

// Adam; with decoupled weight decay (AdamW) the decay scales the parameter directly.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay = false);
  void step() override;
  int64_t step_count(size_t i) const { return steps_[i]; }
  const Tensor& exp_avg(size_t i) const { return exp_avg_[i]; }
  const Tensor& exp_avg_sq(size_t i) const { return exp_avg_sq_[i]; }

 private:
  AdamOptions opt_;
  bool decoupled_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
  std::vector<int64_t> steps_;
};

class AdamW : public Adam {
 public:
  // weight_decay defaults to 1e-2 as in torch.optim.AdamW.
  AdamW(std::vector<Tensor> params, AdamOptions options = with_default_decay());

 private:
  static AdamOptions with_default_decay() {
    AdamOptions o;
    o.weight_decay = 1e-2;
    return o;
  }
};

}  // namespace flambeau::optim
