// In-place writes through views of tensors in the graph (CopySlices): the base's gradient
// outside the written region goes to its old history, inside it to the written value.
#include "test_util.h"

namespace flambeau::testing {
namespace {
using autograd::gradcheck;

Tensor leaf(const Dims& shape, uint64_t seed) {
  return random_tensor(shape, kFloat64, Layout::Contiguous, seed, 0.5, 2).requires_grad_();
}

TEST(InplaceView, MulThroughARowView) {
  Tensor a = leaf({3, 4}, 1), c = random_tensor({3, 4}, kFloat64, Layout::Contiguous, 2);
  Tensor base = mul(a, 1.0);
  Tensor row = base.select(0, 1);
  row.mul_(2);
  EXPECT_EQ(base.grad_fn()->name(), "CopySlices");
  sum(mul(base, c)).backward();
  std::vector<double> want = values(c);
  for (int j = 0; j < 4; ++j) want[4 + j] *= 2;
  EXPECT_TRUE(all_close(values(a.grad()), want, 1e-12, 1e-12));
}

TEST(InplaceView, CopyIntoAConstantTensorGivesItHistory) {
  Tensor w = leaf({4}, 3), c = random_tensor({3, 4}, kFloat64, Layout::Contiguous, 4);
  Tensor x = zeros({3, 4}, kFloat64);
  x.select(0, 2).copy_(w);
  EXPECT_TRUE(x.requires_grad());
  sum(mul(x, c)).backward();
  EXPECT_TRUE(all_close(values(w.grad()), values(c.select(0, 2)), 0, 0));
}

TEST(InplaceView, FilledRegionGetsNoGradient) {
  Tensor a = leaf({2, 5}, 5);
  Tensor base = mul(a, 3.0);
  base.slice(1, 1, 3).zero_();
  sum(base).backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>{3, 0, 0, 3, 3, 3, 0, 0, 3, 3}));
}

TEST(InplaceView, TheViewKeepsWorkingAfterTheWrite) {
  Tensor a = leaf({3, 3}, 6), w = leaf({3}, 7);
  Tensor base = mul(a, 1.0);
  Tensor row = base.select(0, 0);
  row.add_(w);                     // row = a[0] + w
  sum(mul(row, row)).backward();   // d/da[0] = d/dw = 2 (a[0] + w)
  std::vector<double> want(3);
  for (int j = 0; j < 3; ++j) want[size_t(j)] = 2 * (values(a)[size_t(j)] + values(w)[size_t(j)]);
  EXPECT_TRUE(all_close(values(w.grad()), want, 1e-12, 1e-12));
  const std::vector<double> ga = values(a.grad());
  EXPECT_TRUE(all_close(std::vector<double>(ga.begin(), ga.begin() + 3), want, 1e-12, 1e-12));
  EXPECT_EQ(std::vector<double>(ga.begin() + 3, ga.end()), std::vector<double>(6, 0.0));
}

TEST(InplaceView, GradcheckOfWritesThroughViews) {
  auto f = [](const std::vector<Tensor>& in) {
    Tensor b = mul(in[0], 1.0);
    b.slice(1, 0, 2).mul_(in[1]);          // broadcast [2] over the first two columns
    b.select(0, 1).copy_(in[2]);           // a whole row replaced
    b.t().select(0, 3).add_(in[2].slice(0, 0, 3));  // a column through a transposed view
    return exp(b);
  };
  std::string report;
  EXPECT_TRUE(gradcheck(f, {leaf({3, 4}, 8), leaf({2}, 9), leaf({4}, 10)}, 1e-6, 1e-6, 1e-4, &report)) << report;
}

TEST(InplaceView, ErrorsForLeavesAndSavedTensors) {
  Tensor a = leaf({2, 2}, 11);
  EXPECT_TRUE(contains(error_of<Error>([&] { a.select(0, 0).mul_(2); }),
                       "a view of a leaf tensor that requires grad is used in an in-place operation"));
  {
    autograd::NoGradGuard no_grad;  // allowed without grad mode (optimizers, init)
    a.select(0, 0).mul_(1);
  }
  Tensor y = exp(a);  // saves y
  y.select(0, 1).mul_(2);
  EXPECT_TRUE(contains(error_of<Error>([&] { sum(y).backward(); }), "modified by an in-place operation"));
}

}  // namespace
}  // namespace flambeau::testing

namespace flambeau::testing {
namespace {

TEST(InplaceView, FillKeepsANonLeafInTheGraphAndAsStridedHasAGradient) {
  Tensor a = leaf({2, 3}, 20);
  Tensor y = mul(a, 2.0);
  y.zero_();
  EXPECT_TRUE(y.requires_grad());
  sum(y).backward();
  EXPECT_EQ(values(a.grad()), std::vector<double>(6, 0.0));
  // Overlapping windows: positions read twice get both gradients.
  std::string report;
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return exp(mul(in[0], 1.0).as_strided({3, 2}, {1, 1}, 1)); },
      {leaf({5}, 21)}, 1e-6, 1e-6, 1e-4, &report))
      << report;
}

}  // namespace
}  // namespace flambeau::testing
