// nn::functional's small pieces: dropout (a Bernoulli mask from the counter-based
// generator, so the same seed drops the same elements on any thread count) and linear.
#include "flambeau/core/op_hook.h"
#include "flambeau/nn/functional.h"

#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {

FLB_OP(dropout,
       (const Tensor& x, double p, bool training, std::optional<Generator> gen),
       (x, p, training, gen), Tensor) {
  FLB_CHECK(p >= 0 && p <= 1, ValueError, "[dropout] dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return x;
  if (p == 1) return mul(x, 0.0);
  Tensor keep = empty(x.sizes(), x.is_floating_point() ? x.dtype() : kFloat32);
  bernoulli_(keep, 1 - p, gen);
  return div(mul(x, keep), 1 - p);
}

FLB_OP(linear,
       (const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias),
       (x, weight, bias), Tensor) {
  return flambeau::linear(x, weight, bias);
}

}  // namespace flambeau::nn::functional
