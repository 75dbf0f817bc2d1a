// SGD, Adam and AdamW steps, fused over all parameters (one parallel loop, elements of
// every parameter in a fixed order; results do not depend on the thread count).
#include "flambeau/optim/optim.h"

#include <algorithm>
#include <cmath>

#include "flambeau/autograd/node.h"
#include "flambeau/core/parallel.h"
#include "flambeau/ops/ops.h"

namespace flambeau::optim {
namespace {

void check_param(const char* op, const Tensor& p) {
  FLB_CHECK(p.is_floating_point() && p.is_contiguous() && !is_reduced_float(p.dtype()), TypeError, "[", op,
            "] parameters must be contiguous float32 or float64 tensors, got ", dtype_name(p.dtype()), " ",
            shape_str(p.sizes()));
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

// Parameters that have a gradient; checks their layout and the gradient's.
std::vector<size_t> with_grads(const char* op, const std::vector<Tensor>& params) {
  std::vector<size_t> ids;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor g = params[i].grad();
    if (!g.defined()) continue;
    check_param(op, params[i]);
    FLB_CHECK(g.sizes() == params[i].sizes() && g.dtype() == params[i].dtype() && g.is_contiguous(), ValueError, "[",
              op, "] the gradient of parameter ", i, " must match it in shape, dtype and layout");
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

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : Optimizer(std::move(params), options.lr), opt_(options), buffers_(params_.size()) {
  FLB_CHECK(!opt_.nesterov || (opt_.momentum > 0 && opt_.dampening == 0), ValueError,
            "[SGD] nesterov momentum requires a momentum and zero dampening");
  FLB_CHECK(opt_.momentum >= 0 && opt_.weight_decay >= 0, ValueError, "[SGD] invalid momentum or weight_decay");
}

void SGD::step() {
  autograd::NoGradGuard no_grad;
  const std::vector<size_t> ids = with_grads("SGD", params_);
  std::vector<bool> first(params_.size(), false);
  for (size_t i : ids)
    if (opt_.momentum != 0 && !buffers_[i].defined()) {
      buffers_[i] = empty(params_[i].sizes(), params_[i].dtype());
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
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options, bool decoupled_weight_decay)
    : Optimizer(std::move(params), options.lr),
      opt_(options),
      decoupled_(decoupled_weight_decay),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()),
      steps_(params_.size(), 0) {
  FLB_CHECK(opt_.beta1 >= 0 && opt_.beta1 < 1 && opt_.beta2 >= 0 && opt_.beta2 < 1, ValueError,
            "[Adam] invalid betas (", opt_.beta1, ", ", opt_.beta2, ")");
  FLB_CHECK(opt_.eps >= 0 && opt_.weight_decay >= 0, ValueError, "[Adam] invalid eps or weight_decay");
}

void Adam::step() {
  autograd::NoGradGuard no_grad;
  const std::vector<size_t> ids = with_grads(decoupled_ ? "AdamW" : "Adam", params_);
  for (size_t i : ids) {
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = zeros(params_[i].sizes(), params_[i].dtype());
      exp_avg_sq_[i] = zeros(params_[i].sizes(), params_[i].dtype());
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
}

AdamW::AdamW(std::vector<Tensor> params, AdamOptions options) : Adam(std::move(params), options, true) {}

}  // namespace flambeau::optim
