// nn::functional's small pieces: dropout (a Bernoulli mask from the counter-based
// generator, so the same seed drops the same elements on any thread count) and linear.
#include "flambeau/nn/functional.h"

#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {

Tensor dropout(const Tensor& x, double p, bool training, std::optional<Generator> gen) {
  FLB_CHECK(p >= 0 && p <= 1, ValueError, "[dropout] dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return x;
  if (p == 1) return mul(x, 0.0);
  Tensor keep = empty(x.sizes(), x.is_floating_point() ? x.dtype() : kFloat32);
  bernoulli_(keep, 1 - p, gen);
  return div(mul(x, keep), 1 - p);
}

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  return flambeau::linear(x, weight, bias);
}

}  // namespace flambeau::nn::functional
