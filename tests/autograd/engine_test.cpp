// The autograd engine: accumulation into leaves, the grad() API, retain_graph, in-place
// checks on saved tensors and leaves, hooks, retain_grad, grad mode, create_graph; gradcheck of the
// elementwise ops against finite differences.
#include "test_util.h"

namespace flambeau::testing {
namespace {
using autograd::gradcheck;

Tensor leaf(const Dims& shape, uint64_t seed, double lo = -2, double hi = 2) {
  return random_tensor(shape, kFloat64, Layout::Contiguous, seed, lo, hi).requires_grad_();
}

TEST(Autograd, BackwardAccumulatesIntoLeaves) {
  Tensor x = from_vector<double>({1, 2, 3}).requires_grad_();
  Tensor y = sum(mul(x, x));  // d/dx = 2x
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 4, 6}));
  sum(mul(x, 3)).backward();  // accumulates
  EXPECT_EQ(values(x.grad()), (std::vector<double>{5, 7, 9}));
  // A tensor used twice gets both contributions; broadcasting sums back.
  Tensor a = from_vector<double>({1, 2}).requires_grad_();
  Tensor b = from_vector<double>({10}).requires_grad_();
  sum(add(mul(a, b), a)).backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{11, 11}));
  EXPECT_EQ(values(b.grad()), (std::vector<double>{3}));
}

TEST(Autograd, GradApiRetainGraphAndErrors) {
  Tensor x = from_vector<double>({1, 2}).requires_grad_();
  Tensor y = sum(exp(x));
  auto g = autograd::grad({y}, {x}, {}, true);
  EXPECT_TRUE(all_close(values(g[0]), {std::exp(1.0), std::exp(2.0)}, 1e-12, 1e-12));
  EXPECT_FALSE(x.grad().defined());  // grad() does not accumulate
  y.backward();                       // the graph was retained
  EXPECT_TRUE(contains(error_of<Error>([&] { y.backward(); }), "a second time"));
  Tensor z = from_vector<double>({1.0});
  EXPECT_TRUE(contains(error_of<Error>([&] { z.backward(); }), "does not require grad"));
  EXPECT_TRUE(contains(error_of<Error>([&] { mul(x, 2).backward(); }), "only for scalar outputs"));
  Tensor unused = from_vector<double>({1.0}).requires_grad_();
  EXPECT_THROW(autograd::grad({sum(mul(x, 2))}, {unused}), ValueError);
  EXPECT_FALSE(autograd::grad({sum(mul(x, 2))}, {unused}, {}, false, true)[0].defined());
}

TEST(Autograd, InPlaceChangesAreCaught) {
  Tensor x = from_vector<double>({1, 2}).requires_grad_();
  Tensor h = mul(x, 2);
  Tensor y = exp(h);  // saves its output y
  y.add_(1);          // modifies a saved tensor
  EXPECT_TRUE(contains(error_of<Error>([&] { sum(y).backward(); }), "modified by an in-place operation"));
  EXPECT_TRUE(contains(error_of<Error>([&] { x.add_(1); }), "leaf tensor that requires grad"));
  // In-place ops on non-leaves are differentiated.
  Tensor w = from_vector<double>({1, 2}).requires_grad_();
  Tensor v = mul(w, 3);
  v.mul_(w);  // v = 3 w^2
  sum(v).backward();
  EXPECT_EQ(values(w.grad()), (std::vector<double>{6, 12}));
  {
    autograd::NoGradGuard no_grad;
    x.add_(1);  // allowed without grad mode (optimizer steps)
    EXPECT_FALSE(mul(x, 2).requires_grad());
  }
  EXPECT_EQ(values(x), (std::vector<double>{2, 3}));
}

TEST(Autograd, HooksAndRetainGrad) {
  Tensor x = from_vector<double>({1, 2}).requires_grad_();
  Tensor h = mul(x, 2);
  h.retain_grad();
  autograd::meta_of(x).hooks.push_back([](const Tensor& g) { return mul(g, 10); });
  int post = 0;
  autograd::meta_of(x).post_accumulate_hooks.push_back([&](Tensor&) { ++post; });
  sum(mul(h, h)).backward();
  EXPECT_EQ(values(h.grad()), (std::vector<double>{4, 8}));   // 2h
  EXPECT_EQ(values(x.grad()), (std::vector<double>{80, 160})); // 10 * 2 * 2h
  EXPECT_EQ(post, 1);
  EXPECT_TRUE(x.detach().is_leaf());
  EXPECT_FALSE(x.detach().requires_grad());
}

TEST(Autograd, GradcheckBinaryAndTernaryOpsWithBroadcasting) {
  Tensor a = leaf({3, 4}, 1, 0.5, 2), b = leaf({4}, 2, 0.5, 2), c = leaf({3, 1}, 3, 0.5, 2);
  using F = std::function<Tensor(const std::vector<Tensor>&)>;
  const std::vector<F> fs = {
      [](const std::vector<Tensor>& in) { return add(in[0], in[1], 2.5); },
      [](const std::vector<Tensor>& in) { return sub(in[0], in[1], 0.5); },
      [](const std::vector<Tensor>& in) { return mul(in[0], in[1]); },
      [](const std::vector<Tensor>& in) { return div(in[0], in[1]); },
      [](const std::vector<Tensor>& in) { return pow(in[0], in[1]); },
      [](const std::vector<Tensor>& in) { return atan2(in[0], in[1]); },
      [](const std::vector<Tensor>& in) { return maximum(in[0], in[1]); },
      [](const std::vector<Tensor>& in) { return minimum(in[0], in[1]); },
      [](const std::vector<Tensor>& in) { return remainder(in[0], mul(in[1], 0.7)); },
      [](const std::vector<Tensor>& in) { return where(gt(in[0], 1.2), in[0], in[1]); },
      [](const std::vector<Tensor>& in) { return clamp(in[0], in[1], add(in[1], 0.5)); },
      [](const std::vector<Tensor>& in) { return addcmul(in[0], in[1], in[2], 0.5); },
      [](const std::vector<Tensor>& in) { return addcdiv(in[0], in[1], in[2], 0.5); },
      [](const std::vector<Tensor>& in) { return lerp(in[0], in[1].expand({3, 4}).contiguous(), in[2]); },
      [](const std::vector<Tensor>& in) { return mul(in[0].to(kFloat32), 2).to(kFloat64); },
      [](const std::vector<Tensor>& in) { return pow(in[0], 3); },
  };
  for (size_t i = 0; i < fs.size(); ++i) {
    std::string report;
    // Case 14 goes through float32: wider steps keep float32 rounding out of the differences.
    EXPECT_TRUE(gradcheck(fs[i], {a, b, c}, i == 14 ? 1e-2 : 1e-6, i == 14 ? 1e-3 : 1e-5, 1e-3, &report))
        << "case " << i << ": " << report;
  }
}

// create_graph: the gradients have a graph of their own, through saved inputs (mul) and
// saved outputs (exp); without it they have none; backward(create_graph) gives .grad one.
TEST(Autograd, CreateGraphGivesSecondDerivatives) {
  Tensor x = from_vector<double>({0.5, -1.0, 2.0}).requires_grad_();
  const Tensor g = autograd::grad({sum(mul(mul(x, x), x))}, {x}, {}, true, false, true)[0];  // 3x^2
  ASSERT_TRUE(g.requires_grad());
  EXPECT_TRUE(all_close(values(autograd::grad({sum(g)}, {x})[0]), {3.0, -6.0, 12.0}, 1e-12, 1e-12));  // 6x
  const Tensor ge = autograd::grad({sum(exp(x))}, {x}, {}, true, false, true)[0];
  EXPECT_TRUE(all_close(values(autograd::grad({sum(ge)}, {x})[0]), values(exp(x.detach())), 1e-12, 1e-12));
  EXPECT_FALSE(autograd::grad({sum(mul(x, x))}, {x})[0].requires_grad());
  sum(mul(mul(x, x), x)).backward({}, true, true);
  ASSERT_TRUE(x.grad().requires_grad());
  const Tensor gx = x.grad();
  x.set_grad(Tensor());
  sum(gx).backward();
  EXPECT_TRUE(all_close(values(x.grad()), {3.0, -6.0, 12.0}, 1e-12, 1e-12));
}

}  // namespace
}  // namespace flambeau::testing
