// Optimizers (torch.optim): SGD (momentum, dampening, nesterov, weight decay), Adam and
// AdamW. Each step updates every parameter in one fused pass: a single parallel loop runs
// over all parameters' elements, so small tensors cost no per-tensor dispatch. The update
// formulas are PyTorch's (lerp for the first moment, the bias corrections as torch's
// single-tensor path computes them).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::optim {

// What torch.optim's state_dict holds: each parameter's state tensors by name (empty
// before its first step) and the hyperparameters (booleans as 0/1).
struct OptimizerState {
  std::vector<std::map<std::string, Tensor>> params;
  std::map<std::string, double> options;
};

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

  // A copy of the state ("step" is a 0-dim float32 tensor, as in torch).
  OptimizerState state_dict() const;
  // Checks everything (parameter count, names, shapes, option names and values) before
  // changing anything, then copies the state in.
  void load_state_dict(const OptimizerState& state);
  std::map<std::string, double> options() const;
  // Sets one hyperparameter by its state_dict name (ValueError for unknown names or values).
  void set_option(const std::string& name, double value);

 protected:
  // Per-optimizer parts of the state: names of the per-parameter tensors, the state of
  // parameter i, and the hyperparameters (put_options raises, changing nothing, when a
  // value is invalid).
  virtual std::vector<std::string> state_names() const = 0;
  virtual std::map<std::string, Tensor> param_state(size_t i) const = 0;
  virtual void set_param_state(size_t i, const std::map<std::string, Tensor>& state) = 0;
  virtual std::map<std::string, double> get_options() const = 0;
  virtual void put_options(const std::map<std::string, double>& options) = 0;

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

 protected:
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  std::map<std::string, Tensor> param_state(size_t i) const override;
  void set_param_state(size_t i, const std::map<std::string, Tensor>& state) override;
  std::map<std::string, double> get_options() const override;
  void put_options(const std::map<std::string, double>& options) override;

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
  Adam(std::vector<Tensor> params, AdamOptions options = {}, bool decoupled_weight_decay = false);
  void step() override;
  int64_t step_count(size_t i) const { return steps_[i]; }
  const Tensor& exp_avg(size_t i) const { return exp_avg_[i]; }
  const Tensor& exp_avg_sq(size_t i) const { return exp_avg_sq_[i]; }

 protected:
  std::vector<std::string> state_names() const override { return {"step", "exp_avg", "exp_avg_sq"}; }
  std::map<std::string, Tensor> param_state(size_t i) const override;
  void set_param_state(size_t i, const std::map<std::string, Tensor>& state) override;
  std::map<std::string, double> get_options() const override;
  void put_options(const std::map<std::string, double>& options) override;

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
