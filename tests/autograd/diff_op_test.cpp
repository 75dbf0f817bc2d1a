// Ops defined with FLB_DIFF_OP: the body runs below autograd and the op's derivative
// (autograd/op_derivatives.cpp) records one node, linked straight to the op's inputs; the
// autocast form casts above autograd; grad mode off records nothing.
#include <functional>

#include "flambeau/autograd/autocast.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

Tensor leaf(const Dims& shape, uint64_t seed) {
  return random_tensor(shape, kFloat64, Layout::Contiguous, seed, 0.5, 2).requires_grad_();
}

// Composites (var is sub, mean, mul, sum, div inside) get one node whose only edge is
// the input's gradient accumulator: none of the inner ops recorded anything.
TEST(DiffOp, ACompositeBodyRecordsOneNodeLinkedToTheInput) {
  const Tensor x = leaf({3, 4}, 1);
  const std::vector<std::pair<std::string, Tensor>> results = {
      {"VarBackward0", var(x, {0})},          {"StdBackward0", std(x)},
      {"LinalgVectorNormBackward0", norm(x, 3.0, {1})},   {"LogsumexpBackward0", logsumexp(x, {1})},
      {"MeanBackward1", mean(x, {1})},        {"SoftmaxBackward0", softmax(x, 1)},
      {"DotBackward0", dot(x.select(0, 0), x.select(0, 1))}};
  for (const auto& [name, y] : results) {
    ASSERT_TRUE(y.grad_fn()) << name;
    EXPECT_EQ(y.grad_fn()->name(), name);
    for (const autograd::Edge& e : y.grad_fn()->next) {
      ASSERT_TRUE(e.fn) << name;
      const std::string next = e.fn->name();
      EXPECT_TRUE(next == "AccumulateGrad" || next == "SelectBackward0") << name << " -> " << next;
    }
  }
}

// The derivative sees the arguments as the user passed them: negative dims are wrapped
// there as the op wrapped them, and the gradients match the positive-dim call.
TEST(DiffOp, DerivativesWrapDimsAsTheOpDid) {
  const Tensor x = leaf({3, 5}, 2);
  auto grad_of = [&](const std::function<Tensor(const Tensor&)>& f) {
    Tensor g = autograd::grad({sum(mul(f(x), f(x)))}, {x})[0];
    return values(g);
  };
  using F = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<F, F>> pairs = {
      {[](const Tensor& t) { return cumsum(t, -1); }, [](const Tensor& t) { return cumsum(t, 1); }},
      {[](const Tensor& t) { return sort(t, -1).first; }, [](const Tensor& t) { return sort(t, 1).first; }},
      {[](const Tensor& t) { return topk(t, 2, -1).first; }, [](const Tensor& t) { return topk(t, 2, 1).first; }},
      {[](const Tensor& t) { return max(t, -2).first; }, [](const Tensor& t) { return max(t, 0).first; }},
      {[](const Tensor& t) { return gather(t, -1, from_vector<int64_t>({4, 0, 2}).reshape({3, 1})); },
       [](const Tensor& t) { return gather(t, 1, from_vector<int64_t>({4, 0, 2}).reshape({3, 1})); }},
      {[](const Tensor& t) { return index_select(t, -1, from_vector<int64_t>({4, 0})); },
       [](const Tensor& t) { return index_select(t, 1, from_vector<int64_t>({4, 0})); }},
      {[](const Tensor& t) { return take(t, from_vector<int64_t>({-1, 3})); },
       [](const Tensor& t) { return take(t, from_vector<int64_t>({14, 3})); }},
      {[](const Tensor& t) { return cat({t, t}, -1); }, [](const Tensor& t) { return cat({t, t}, 1); }},
  };
  for (size_t i = 0; i < pairs.size(); ++i) EXPECT_EQ(grad_of(pairs[i].first), grad_of(pairs[i].second)) << i;
}

// A 0-dim input to sort/topk/kthvalue passes its gradient through, under the op's name.
TEST(DiffOp, ZeroDimSortingOpsPassTheGradientThrough) {
  const Tensor x = from_vector<double>({2.5}).reshape({}).requires_grad_();
  const std::pair<Tensor, Tensor> s = sort(x), k = topk(x, 1), kv = kthvalue(x, 1);
  EXPECT_EQ(s.first.grad_fn()->name(), "SortBackward0");
  EXPECT_EQ(k.first.grad_fn()->name(), "TopkBackward0");
  EXPECT_EQ(kv.first.grad_fn()->name(), "KthvalueBackward0");
  const Tensor g = autograd::grad({add(add(mul(s.first, 2), mul(k.first, 3)), kv.first)}, {x})[0];
  EXPECT_EQ(g.item<double>(), 6.0);
}

// Under autocast the casts are recorded above the op: gradients reach the float32 leaves
// through ToCopyBackward0, and mm's node sees 16-bit inputs.
TEST(DiffOp, AutocastCastsAboveAutograd) {
  const Tensor a = leaf({2, 3}, 3), b = leaf({3, 2}, 4);
  const Tensor a32 = a.detach().to(kFloat32).requires_grad_(), b32 = b.detach().to(kFloat32).requires_grad_();
  Tensor y;
  {
    autocast::AutocastGuard guard(kBFloat16);
    y = mm(a32, b32);
  }
  EXPECT_EQ(y.dtype(), kBFloat16);
  ASSERT_EQ(y.grad_fn()->name(), "MmBackward0");
  ASSERT_EQ(y.grad_fn()->next.size(), 2u);
  EXPECT_EQ(y.grad_fn()->next[0].fn->name(), "ToCopyBackward0");
  sum(y).backward();
  EXPECT_EQ(a32.grad().dtype(), kFloat32);
  // d sum(a b) / d a = rows of b summed, computed from bfloat16 copies of b.
  const Tensor want = sum(b32.to(kBFloat16).to(kFloat32), {1}).unsqueeze(0).expand({2, 3});
  EXPECT_TRUE(all_close(values(a32.grad()), values(want), 1e-2, 1e-2));
}

TEST(DiffOp, GradModeOffRecordsNothing) {
  const Tensor x = leaf({4}, 5);
  autograd::NoGradGuard no_grad;
  EXPECT_FALSE(cumsum(x, 0).grad_fn());
  EXPECT_FALSE(var(x).requires_grad());
}

}  // namespace
}  // namespace flambeau::testing
