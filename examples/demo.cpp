// A short tour of flambeau's tensor core: factories, views, broadcasting, elementwise
// math, reductions and softmax, printed as PyTorch would print them.
#include <iostream>

#include "flambeau/flambeau.h"

using namespace flambeau;

int main() {
  Tensor a = arange(12, kFloat32).reshape({3, 4});
  std::cout << "a = arange(12).reshape(3, 4):\n" << a << "\n\n";
  std::cout << "a.t():\n" << a.t() << "\n\n";
  std::cout << "a[:, ::2]:\n" << a.slice(1, {}, {}, 2) << "\n\n";

  Tensor b = from_vector<float>({10, 20, 30, 40});
  std::cout << "a + b (broadcast (3, 4) with (4,)):\n" << a + b << "\n\n";
  std::cout << "a * 0.5 - 1:\n" << a * 0.5 - 1 << "\n\n";
  std::cout << "int tensor + 2.5 promotes to float32: " << arange(3) + 2.5 << "\n\n";

  std::cout << "a.sum() = " << a.sum() << "\n";
  std::cout << "a.sum(dim=1) = " << a.sum({1}) << "\n";
  std::cout << "a.mean(dim=0, keepdim) = " << a.mean({0}, true) << "\n";
  std::cout << "a.amax(dim=1) = " << a.amax({1}) << "\n";
  auto [values, indices] = max(a, 0);
  std::cout << "max(a, dim=0) = " << values << ", indices " << indices << "\n";
  std::cout << "std(a, dim=1) = " << flambeau::std(a, {1}) << "\n\n";

  std::cout << "softmax(a, dim=1):\n" << a.softmax(1) << "\n\n";
  std::cout << "gelu(linspace(-3, 3, 7)) = " << gelu(linspace(-3, 3, 7)) << "\n";
  std::cout << "bfloat16 cast: " << linspace(0, 1, 5).to(kBFloat16) << "\n\n";

  Tensor big = arange(10000, kFloat32).reshape({100, 100}).div(7).sin();
  std::cout << "a large tensor prints summarised:\n" << big << "\n";
  std::cout << "threads: " << get_num_threads() << ", memory in use: " << memory::allocated() << " bytes\n";
  return 0;
}
