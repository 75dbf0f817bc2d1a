// gradcheck: the Jacobian from backward (one vector-Jacobian product per output element)
// against central finite differences, in float64.
#include <cmath>
#include <sstream>

#include "flambeau/autograd/autograd.h"
#include "flambeau/ops/ops.h"

namespace flambeau::autograd {

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
               double eps, double atol, double rtol, std::string* report) {
  for (const Tensor& in : inputs)
    FLB_CHECK(in.dtype() == kFloat64 && in.is_contiguous() && in.requires_grad(), ValueError,
              "[gradcheck] inputs must be contiguous float64 tensors that require grad");
  const Tensor out = f(inputs).contiguous();
  const int64_t m = out.numel();
  // Analytical: row j of the Jacobian is the gradient of out[j].
  std::vector<std::vector<double>> analytic(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) analytic[i].assign(size_t(m * inputs[i].numel()), 0.0);
  for (int64_t j = 0; j < m; ++j) {
    Tensor seed = zeros(out.sizes(), out.dtype());
    seed.reshape({-1}).narrow(0, j, 1).fill_(1);
    const std::vector<Tensor> g = grad({out}, inputs, {seed}, true, true);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!g[i].defined()) continue;
      const Tensor gi = g[i].to(kFloat64).contiguous();
      for (int64_t k = 0; k < gi.numel(); ++k) analytic[i][size_t(j * gi.numel() + k)] = gi.data<double>()[k];
    }
  }
  // Numerical: central differences, one input element at a time.
  NoGradGuard no_grad;
  bool ok = true;
  std::ostringstream msg;
  for (size_t i = 0; i < inputs.size(); ++i) {
    double* x = inputs[i].data<double>();
    const int64_t n = inputs[i].numel();
    for (int64_t k = 0; k < n; ++k) {
      const double saved = x[k];
      x[k] = saved + eps;
      const Tensor plus = f(inputs).to(kFloat64).clone();  // a copy: f may return a view of x
      x[k] = saved - eps;
      const Tensor minus = f(inputs).to(kFloat64).clone();
      x[k] = saved;
      for (int64_t j = 0; j < m; ++j) {
        const double num = (plus.data<double>()[j] - minus.data<double>()[j]) / (2 * eps);
        const double ana = analytic[i][size_t(j * n + k)];
        if (!(std::abs(num - ana) <= atol + rtol * std::abs(num))) {
          if (ok) msg << "[gradcheck] input " << i << " element " << k << ", output " << j << ": analytical " << ana
                      << " vs numerical " << num;
          ok = false;
        }
      }
    }
  }
  if (!ok && report) *report = msg.str();
  return ok;
}

}  // namespace flambeau::autograd
