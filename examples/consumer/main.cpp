// A downstream C++ program: loads the example extension, runs its fused op forward and
// backward, and checks it against flambeau's own gelu(x + b). Exit code 0 when they agree.
#include <cmath>
#include <cstdio>

#include "flambeau/flambeau.h"
#include "flambeau/stable/extension.h"

int main(int argc, char** argv) {
  using namespace flambeau;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <path of libflambeau_example.so>\n", argv[0]);
    return 2;
  }
  load_library(argv[1]);
  manual_seed(0);
  Tensor x = randn({4, 8}, kFloat64).requires_grad_(), b = randn({8}, kFloat64).requires_grad_();
  Tensor y = std::get<Tensor>(call_op("mylib::fused_bias_gelu", {x, b}).at(0));
  sum(y).backward();
  const Tensor gx = x.grad(), gb = b.grad();
  x.set_grad(Tensor()), b.set_grad(Tensor());
  Tensor reference = gelu(add(x, b));
  sum(reference).backward();
  auto max_diff = [](const Tensor& a, const Tensor& c) { return a.sub(c).abs().amax().item<double>(); };
  const double forward_error = max_diff(y, reference);
  const double backward_error = std::max(max_diff(gx, x.grad()), max_diff(gb, b.grad()));
  std::printf("mylib::fused_bias_gelu against gelu(x + b): forward %.3g, backward %.3g\n", forward_error,
              backward_error);
  return forward_error < 1e-12 && backward_error < 1e-12 ? 0 : 1;
}
