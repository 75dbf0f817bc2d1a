// gradcheck of views, reductions, softmax, scans, matrix products, joins and indexing
// reads; an MLP's gradients against a hand-written backward.
#include "test_util.h"

namespace flambeau::testing {
namespace {
using autograd::gradcheck;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor leaf(const Dims& shape, uint64_t seed, double lo = -2, double hi = 2) {
  return random_tensor(shape, kFloat64, Layout::Contiguous, seed, lo, hi).requires_grad_();
}

void check_all(const std::vector<std::pair<const char*, Fn>>& cases, const std::vector<Tensor>& inputs) {
  for (const auto& [name, f] : cases) {
    std::string report;
    EXPECT_TRUE(gradcheck(f, inputs, 1e-6, 1e-5, 1e-3, &report)) << name << ": " << report;
  }
}

TEST(AutogradStructure, ViewsAndJoins) {
  const Tensor x = leaf({2, 3, 4}, 1), y = leaf({2, 3, 4}, 2);
  check_all({
      {"view", [](auto& in) { return in[0].view({6, 4}); }},
      {"reshape of a transpose (copy)", [](auto& in) { return in[0].transpose(0, 2).reshape({-1}); }},
      {"permute", [](auto& in) { return mul(in[0].permute({2, 0, 1}), arange(3, kFloat64)); }},
      {"transpose + t", [](auto& in) { return in[0].select(0, 1).t(); }},
      {"expand", [](auto& in) { return in[0].narrow(2, 0, 1).expand({2, 3, 5}); }},
      {"slice with step", [](auto& in) { return in[0].slice(2, 1, {}, 2); }},
      {"squeeze / unsqueeze", [](auto& in) { return in[0].unsqueeze(1).narrow(3, 1, 1).squeeze(); }},
      {"flatten / unflatten", [](auto& in) { return in[0].flatten().unflatten(0, {4, 6}); }},
      {"cat", [](auto& in) { return cat({in[0], mul(in[1], 2)}, 1); }},
      {"stack", [](auto& in) { return stack({in[0], in[1]}, -1); }},
      {"split + chunk", [](auto& in) { return mul(split(in[0], 2, 2)[1], chunk(in[1], 2, 2)[0]); }},
      {"contiguous + clone", [](auto& in) { return in[0].transpose(0, 2).contiguous().clone(); }},
  }, {x, y});
}

TEST(AutogradStructure, ReductionsSoftmaxScans) {
  const Tensor x = leaf({3, 5}, 3, 0.5, 2);
  check_all({
      {"sum all", [](auto& in) { return sum(in[0]); }},
      {"sum dims keepdim", [](auto& in) { return sum(in[0], {1}, true); }},
      {"mean", [](auto& in) { return mean(in[0], {0}); }},
      {"prod", [](auto& in) { return prod(in[0], {1}); }},
      {"amax / amin", [](auto& in) { return add(amax(in[0], {1}), amin(in[0], {0}).sum()); }},
      {"max(dim)", [](auto& in) { return max(in[0], 1).first; }},
      {"min(dim) keepdim", [](auto& in) { return min(in[0], 0, true).first; }},
      {"var / std", [](auto& in) { return add(var(in[0], {1}), flambeau::std(in[0], {1}, 0)); }},
      {"norm", [](auto& in) { return add(norm(in[0]), norm(in[0], 1, {1})); }},
      {"logsumexp", [](auto& in) { return logsumexp(in[0], {1}); }},
      {"softmax", [](auto& in) { return softmax(in[0], 1); }},
      {"log_softmax", [](auto& in) { return log_softmax(in[0], 0); }},
      {"cumsum", [](auto& in) { return cumsum(in[0], 1); }},
      {"cummax", [](auto& in) { return cummax(in[0], 1).first; }},
      {"sort values", [](auto& in) { return sort(in[0], 1, true).first; }},
      {"topk", [](auto& in) { return topk(in[0], 2, 1).first; }},
      {"kthvalue", [](auto& in) { return kthvalue(in[0], 2, 0).first; }},
  }, {x});
}

TEST(AutogradStructure, MatrixProducts) {
  const Tensor a = leaf({3, 4}, 4), b = leaf({4, 5}, 5), bias = leaf({5}, 6);
  check_all({
      {"mm", [](auto& in) { return mm(in[0], in[1]); }},
      {"mm transposed", [](auto& in) { return mm(in[1].t(), in[0].t()); }},
      {"addmm", [](auto& in) { return addmm(in[2], in[0], in[1], 0.5, 2); }},
      {"linear", [](auto& in) { return linear(in[0], in[1].t(), in[2]); }},
      {"matmul batched", [](auto& in) { return matmul(in[0].reshape({2, 3, 2}), in[1].reshape({2, 10})); }},
      {"bmm", [](auto& in) { return bmm(in[0].reshape({3, 2, 2}), in[1].narrow(1, 0, 3).reshape({3, 2, 2})); }},
      {"dot + outer", [](auto& in) { return add(outer(in[2], in[2]), dot(in[1].select(0, 0), in[2])); }},
  }, {a, b, bias});
}

TEST(AutogradStructure, IndexingReads) {
  const Tensor x = leaf({5, 4}, 7);
  const Tensor rows = from_vector<int64_t>({3, 0, 3, 1});
  check_all({
      {"index_select", [&](auto& in) { return index_select(in[0], 0, rows); }},
      {"gather", [&](auto& in) { return gather(in[0], 1, from_vector<int64_t>({0, 3, 3, 1, 2}, Dims{5, 1})); }},
      {"embedding", [&](auto& in) { return embedding(in[0], from_vector<int64_t>({4, 4, 0}, Dims{3})); }},
      {"advanced index", [&](auto& in) { return index(in[0], {rows, std::nullopt}); }},
      {"mask index", [&](auto& in) { return index(in[0], {gt(in[0].detach(), 0)}); }},
      {"masked_fill", [&](auto& in) { return masked_fill(in[0], gt(in[0].detach(), 0.5), 2.0); }},
      {"where + clamp", [&](auto& in) { return where(gt(in[0], 0), clamp(in[0], -0.5, 1.0), mul(in[0], 3)); }},
  }, {x});
  // An in-place write into a non-leaf: the filled rows get no gradient.
  Tensor h = mul(x, 2);
  index_fill_(h, 0, rows, 1.0);
  const Tensor g = autograd::grad({h.sum()}, {x})[0];
  EXPECT_EQ(values(g.sum({1})), (std::vector<double>{0, 0, 8, 0, 8}));
}

// A two-layer MLP with cross-entropy-like loss: autograd against the hand-derived gradient.
TEST(AutogradStructure, MlpGradientsMatchHandDerivation) {
  const Tensor x = random_tensor({8, 6}, kFloat64, Layout::Contiguous, 11);
  Tensor w1 = leaf({6, 10}, 12), w2 = leaf({10, 3}, 13);
  const Tensor h = relu(mm(x, w1));
  const Tensor logits = mm(h, w2);
  const Tensor loss = neg(mean(log_softmax(logits, 1).select(1, 0)));
  loss.backward();
  autograd::NoGradGuard no_grad;
  // d loss / d logits = (softmax - onehot(0)) / n
  Tensor dlogits = softmax(logits, 1);
  dlogits.select(1, 0).sub_(1);
  dlogits = div(dlogits, 8.0);
  const Tensor dw2 = mm(h.t(), dlogits);
  const Tensor dh = mul(mm(dlogits, w2.t()), gt(h, 0).to(kFloat64));
  const Tensor dw1 = mm(x.t(), dh);
  EXPECT_TRUE(all_close(values(w2.grad()), values(dw2), 1e-12, 1e-12));
  EXPECT_TRUE(all_close(values(w1.grad()), values(dw1), 1e-12, 1e-12));
}

}  // namespace
}  // namespace flambeau::testing
