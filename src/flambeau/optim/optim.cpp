// SGD, Adam and AdamW steps, fused over all parameters (one parallel loop, elements of
// every parameter in a fixed order; results do not depend on the thread count). A
// parameter may have any dense layout (channels-last weights): its gradient and state are
// laid out as it is, so the loop walks the same memory order in all of them.
#include "flambeau/optim/optim.h"

#include <algorithm>
#include <cmath>

#include "flambeau/autograd/node.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/ops/ops.h"

namespace flambeau::optim {
namespace {

void check_param(const char* op, const Tensor& p) {
  FLB_CHECK(p.is_floating_point() && is_non_overlapping_and_dense(p) && !is_reduced_float(p.dtype()), TypeError,
            "[", op, "] parameters must be dense float32 or float64 tensors, got ", dtype_name(p.dtype()), " ",
            shape_str(p.sizes()), " with strides ", shape_str(p.strides()));
}

// Calls f.template operator()<T>(i, param, grad, begin, end) on runs of the elements of
// every parameter in `ids` (T: float or double), in parallel.
template <class F>
void for_all_elements(const std::vector<Tensor>& params, const std::vector<size_t>& ids, const F& f) {
  std::vector<int64_t> start(ids.size() + 1, 0);
  for (size_t k = 0; k < ids.size(); ++k) start[k + 1] = start[k] + params[ids[k]].numel();
  parallel_for(0, start.back(), 32768, [&](int64_t b, int64_t e) {
    size_t k = size_t(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
    for (; k < ids.size() && start[k] < e; ++k) {
      const int64_t lo = std::max(b, start[k]) - start[k], hi = std::min(e, start[k + 1]) - start[k];
      if (lo >= hi) continue;
      const Tensor& p = params[ids[k]];
      visit_dtype(p.dtype(), [&]<class T>() {
        if constexpr (std::is_floating_point_v<T>) f.template operator()<T>(ids[k], p.data<T>(), p.grad().data<T>(), lo, hi);
      });
    }
  });
}

// Whether dense g and p put their elements in the same memory order.
bool same_layout(const Tensor& g, const Tensor& p) {
  if (g.is_contiguous() && p.is_contiguous()) return true;
  if (!is_non_overlapping_and_dense(g)) return false;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (g.size(d) != 1 && g.stride(d) != p.stride(d)) return false;
  return true;
}

// Parameters that have a gradient; checks their layout and the gradient's.
std::vector<size_t> with_grads(const char* op, const std::vector<Tensor>& params) {
  std::vector<size_t> ids;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    check_param(op, params[i]);
    FLB_CHECK(g.sizes() == params[i].sizes() && g.dtype() == params[i].dtype(), ValueError, "[", op,
              "] the gradient of parameter ", i, " must match it in shape and dtype");
    if (!same_layout(g, params[i])) {  // a gradient set by hand: laid out as the parameter for the step
      Tensor laid = empty_like(params[i], std::nullopt, MemoryFormat::Preserve);
      laid.copy_(g);
      Tensor(params[i]).set_grad(laid);
    }
    ids.push_back(i);
  }
  return ids;
}

}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  FLB_CHECK(lr >= 0, ValueError, "[optim] invalid learning rate: ", lr);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    if (set_to_none) p.set_grad(Tensor());
    else if (p.grad().defined()) p.grad().zero_();
  }
}

namespace {
void check_options(const SGDOptions& o) {
  FLB_CHECK(o.lr >= 0, ValueError, "[SGD] invalid learning rate: ", o.lr);
  FLB_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), ValueError,
            "[SGD] nesterov momentum requires a momentum and zero dampening");
  FLB_CHECK(o.momentum >= 0 && o.weight_decay >= 0, ValueError, "[SGD] invalid momentum or weight_decay");
}

void check_options(const AdamOptions& o) {
  FLB_CHECK(o.lr >= 0, ValueError, "[Adam] invalid learning rate: ", o.lr);
  FLB_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, ValueError, "[Adam] invalid betas (",
            o.beta1, ", ", o.beta2, ")");
  FLB_CHECK(o.eps >= 0 && o.weight_decay >= 0, ValueError, "[Adam] invalid eps or weight_decay");
}
}  // namespace

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), opt_(options), buffers_(params_.size()) {
  check_options(opt_);
}

void SGD::step() {
  // Reported to the op hook as one op, as torch's fused optimizers are.
  op_hook::op("_fused_sgd_", params_)([&] {
    autograd::NoGradGuard no_grad;
    const std::vector<size_t> ids = with_grads("SGD", params_);
    std::vector<bool> first(params_.size(), false);
    for (size_t i : ids)
      if (opt_.momentum != 0 && !buffers_[i].defined()) {
        buffers_[i] = empty_like(params_[i], std::nullopt, MemoryFormat::Preserve);
        first[i] = true;  // torch: the first buffer is the gradient itself (no dampening)
      }
    const double lr = lr_;
    for_all_elements(params_, ids, [&]<class T>(size_t i, T* p, const T* gp, int64_t lo, int64_t hi) {
      T* buf = buffers_[i].defined() ? buffers_[i].data<T>() : nullptr;
      const T wd = T(opt_.weight_decay), mom = T(opt_.momentum), damp = T(1 - opt_.dampening), step = T(lr);
      for (int64_t k = lo; k < hi; ++k) {
        T g = opt_.maximize ? -gp[k] : gp[k];
        if (wd != 0) g += wd * p[k];
        if (buf) {
          buf[k] = first[i] ? g : mom * buf[k] + damp * g;
          g = opt_.nesterov ? g + mom * buf[k] : buf[k];
        }
        p[k] -= step * g;
      }
    });
    for (size_t i : ids) params_[i].bump_version();
  });
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay)
    : Optimizer(std::move(params), options.lr),
      opt_(options),
      decoupled_(decoupled_weight_decay),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()),
      steps_(params_.size(), 0) {
  check_options(opt_);
}

void Adam::step() {
  // Reported to the op hook as one op, as torch's fused optimizers are.
  op_hook::op(decoupled_ ? "_fused_adamw_" : "_fused_adam_", params_)([&] {
    autograd::NoGradGuard no_grad;
    const std::vector<size_t> ids = with_grads(decoupled_ ? "AdamW" : "Adam", params_);
    for (size_t i : ids) {
      if (!exp_avg_[i].defined()) {
        exp_avg_[i] = zeros_like(params_[i], std::nullopt, MemoryFormat::Preserve);
        exp_avg_sq_[i] = zeros_like(params_[i], std::nullopt, MemoryFormat::Preserve);
      }
      ++steps_[i];
    }
    const double lr = lr_;
    for_all_elements(params_, ids, [&]<class T>(size_t i, T* p, const T* gp, int64_t lo, int64_t hi) {
      T* m = exp_avg_[i].data<T>();
      T* v = exp_avg_sq_[i].data<T>();
      const double t = double(steps_[i]);
      const T bc1 = T(1 - std::pow(opt_.beta1, t)), bc2_sqrt = T(std::sqrt(1 - std::pow(opt_.beta2, t)));
      const T step_size = T(lr) / bc1, b1 = T(1 - opt_.beta1), b2 = T(opt_.beta2), one_b2 = T(1 - opt_.beta2);
      const T wd = T(opt_.weight_decay), decay = T(1 - lr * opt_.weight_decay), eps = T(opt_.eps);
      for (int64_t k = lo; k < hi; ++k) {
        T g = opt_.maximize ? -gp[k] : gp[k];
        if (decoupled_) p[k] *= decay;
        else if (wd != 0) g += wd * p[k];
        m[k] += b1 * (g - m[k]);  // lerp toward g by 1 - beta1
        v[k] = v[k] * b2 + one_b2 * g * g;
        p[k] -= step_size * (m[k] / (std::sqrt(v[k]) / bc2_sqrt + eps));
      }
    });
    for (size_t i : ids) params_[i].bump_version();
  });
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, true) {}

// ---- state_dict --------------------------------------------------------------------

namespace {
// The value of option `name` in `options`, or `fallback` when absent.
double option_or(const std::map<std::string, double>& options, const char* name, double fallback) {
  auto it = options.find(name);
  return it == options.end() ? fallback : it->second;
}
}  // namespace

std::map<std::string, double> Optimizer::options() const { return get_options(); }

void Optimizer::set_option(const std::string& name, double value) {
  std::map<std::string, double> o = get_options();
  FLB_CHECK(o.count(name), ValueError, "[optim] unknown option '", name, "'");
  o[name] = value;
  put_options(o);
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState s;
  for (size_t i = 0; i < params_.size(); ++i) {
    std::map<std::string, Tensor> st = param_state(i);
    for (auto& [name, t] : st) t = t.clone();
    s.params.push_back(std::move(st));
  }
  s.options = get_options();
  return s;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  FLB_CHECK(state.params.size() == params_.size(), ValueError, "[load_state_dict] the state has ",
            state.params.size(), " parameters, the optimizer ", params_.size());
  const std::vector<std::string> names = state_names();
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& st = state.params[i];
    if (st.empty()) continue;
    for (const std::string& n : names) FLB_CHECK(st.count(n), ValueError, "[load_state_dict] parameter ", i, " lacks '", n, "'");
    for (const auto& [n, t] : st) {
      FLB_CHECK(std::find(names.begin(), names.end(), n) != names.end(), ValueError,
                "[load_state_dict] unknown state '", n, "' for parameter ", i);
      const Dims want = n == "step" ? Dims{} : params_[i].sizes();
      FLB_CHECK(t.defined() && t.sizes() == want && t.is_floating_point(), ValueError, "[load_state_dict] state '", n,
                "' of parameter ", i, " must be a floating tensor of shape ", shape_str(want), ", got ",
                t.defined() ? shape_str(t.sizes()) : std::string("none"));
    }
  }
  const std::map<std::string, double> current = get_options();
  for (const auto& [n, v] : state.options)
    FLB_CHECK(current.count(n), ValueError, "[load_state_dict] unknown option '", n, "'");
  std::map<std::string, double> merged = current;
  for (const auto& [n, v] : state.options) merged[n] = v;
  put_options(merged);  // validates before it changes anything
  autograd::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    std::map<std::string, Tensor> st;
    for (const auto& [n, t] : state.params[i])
      st[n] = n == "step" ? t.to(kFloat32).clone() : empty_like(params_[i], std::nullopt, MemoryFormat::Preserve).copy_(t);
    set_param_state(i, st);
  }
}

std::map<std::string, Tensor> SGD::param_state(size_t i) const {
  if (!buffers_[i].defined()) return {};
  return {{"momentum_buffer", buffers_[i]}};
}
void SGD::set_param_state(size_t i, const std::map<std::string, Tensor>& st) {
  buffers_[i] = st.empty() ? Tensor() : st.at("momentum_buffer");
}
std::map<std::string, double> SGD::get_options() const {
  return {{"lr", lr_}, {"momentum", opt_.momentum}, {"dampening", opt_.dampening}, {"weight_decay", opt_.weight_decay},
          {"nesterov", double(opt_.nesterov)}, {"maximize", double(opt_.maximize)}};
}
void SGD::put_options(const std::map<std::string, double>& o) {
  SGDOptions n{option_or(o, "lr", lr_), option_or(o, "momentum", opt_.momentum),
               option_or(o, "dampening", opt_.dampening), option_or(o, "weight_decay", opt_.weight_decay),
               option_or(o, "nesterov", opt_.nesterov) != 0, option_or(o, "maximize", opt_.maximize) != 0};
  check_options(n);
  opt_ = n;
  lr_ = n.lr;
}

std::map<std::string, Tensor> Adam::param_state(size_t i) const {
  if (!exp_avg_[i].defined()) return {};
  return {{"step", scalar_tensor(double(steps_[i]), kFloat32)}, {"exp_avg", exp_avg_[i]}, {"exp_avg_sq", exp_avg_sq_[i]}};
}
void Adam::set_param_state(size_t i, const std::map<std::string, Tensor>& st) {
  if (st.empty()) {
    exp_avg_[i] = exp_avg_sq_[i] = Tensor();
    steps_[i] = 0;
    return;
  }
  steps_[i] = int64_t(st.at("step").item<double>());
  exp_avg_[i] = st.at("exp_avg");
  exp_avg_sq_[i] = st.at("exp_avg_sq");
}
std::map<std::string, double> Adam::get_options() const {
  return {{"lr", lr_}, {"beta1", opt_.beta1}, {"beta2", opt_.beta2}, {"eps", opt_.eps},
          {"weight_decay", opt_.weight_decay}, {"maximize", double(opt_.maximize)}};
}
void Adam::put_options(const std::map<std::string, double>& o) {
  AdamOptions n{option_or(o, "lr", lr_), option_or(o, "beta1", opt_.beta1), option_or(o, "beta2", opt_.beta2),
                option_or(o, "eps", opt_.eps), option_or(o, "weight_decay", opt_.weight_decay),
                option_or(o, "maximize", opt_.maximize) != 0};
  check_options(n);
  opt_ = n;
  lr_ = n.lr;
}

}  // namespace flambeau::optim
