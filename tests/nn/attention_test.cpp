// scaled_dot_product_attention: the tiled kernel against the plain formula (values and
// gradients, through autograd), gradcheck, masks, GQA, thread independence.
#include "test_util.h"

namespace flambeau::testing {
namespace {

// softmax(q k^T * scale + mask) v with ordinary ops (its backward comes from autograd).
Tensor reference(const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> mask, bool causal) {
  Tensor s = mul(matmul(q, k.transpose(-1, -2)), 1.0 / std::sqrt(double(q.size(-1))));
  if (causal) s = masked_fill(s, lt(arange(q.size(-2)).unsqueeze(1), arange(k.size(-2)).unsqueeze(0)), -INFINITY);
  if (mask) s = mask->dtype() == kBool ? masked_fill(s, logical_not(*mask), -INFINITY) : add(s, *mask);
  return matmul(softmax(s, -1), v);
}

Tensor leaf(const Dims& shape, uint64_t seed) {
  return random_tensor(shape, kFloat64, Layout::Contiguous, seed).requires_grad_();
}

TEST(Attention, MatchesReferenceValuesAndGradients) {
  // L and S cross the 32-row and 64-column tiles; the bool mask keeps every row non-empty.
  const Tensor mask_bool = logical_or(gt(random_tensor({70, 130}, kFloat32, Layout::Contiguous, 9, 0, 1), 0.3),
                                      eq(arange(130).unsqueeze(0), 0));
  const Tensor mask_add = random_tensor({1, 70, 130}, kFloat64, Layout::Contiguous, 10);
  for (int variant = 0; variant < 4; ++variant) {
    Tensor q = leaf({2, 3, 70, 16}, 1), k = leaf({2, 3, 130, 16}, 2), v = leaf({2, 3, 130, 8}, 3);
    std::optional<Tensor> mask;
    if (variant == 1) mask = mask_bool;
    if (variant == 2) mask = mask_add;
    const bool causal = variant == 3;
    Tensor got = nn::scaled_dot_product_attention(q, k, v, mask, 0.0, causal);
    Tensor g = random_tensor(got.sizes(), kFloat64, Layout::Contiguous, 4);
    auto grads = autograd::grad({got}, {q, k, v}, {g});
    Tensor want = reference(q, k, v, mask, causal);
    auto want_grads = autograd::grad({want}, {q, k, v}, {g});
    EXPECT_TRUE(all_close(values(got), values(want), 1e-12, 1e-12)) << "variant " << variant;
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(all_close(values(grads[size_t(i)]), values(want_grads[size_t(i)]), 1e-10, 1e-12))
          << "variant " << variant << " grad " << i;
  }
}

TEST(Attention, GradcheckGqaAndThreadIndependence) {
  Tensor q = leaf({1, 4, 5, 3}, 5), k = leaf({1, 2, 7, 3}, 6), v = leaf({1, 2, 7, 2}, 7);
  std::string report;
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return nn::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true, 0.7, true);
      },
      {q, k, v}, 1e-6, 1e-5, 1e-3, &report))
      << report;
  EXPECT_THROW(nn::scaled_dot_product_attention(q, k, v), ValueError);  // GQA needs enable_gqa
  const int saved = get_num_threads();
  Tensor a = random_tensor({2, 4, 100, 32}, kFloat32, Layout::Contiguous, 8).requires_grad_();
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    a.set_grad(Tensor());
    Tensor o = nn::scaled_dot_product_attention(a, a, a, {}, 0.0, true);
    sum(mul(o, o)).backward();
    runs.push_back(values(o));
    runs.push_back(values(a.grad()));
  }
  set_num_threads(saved);
  EXPECT_EQ(runs[0], runs[2]);
  EXPECT_EQ(runs[1], runs[3]);
}

TEST(Attention, AdditiveMaskGetsAGradient) {
  Tensor q = leaf({2, 3, 4}, 11), k = leaf({2, 5, 4}, 12), v = leaf({2, 5, 3}, 13), mask = leaf({3, 5}, 14);
  std::string report;
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        return nn::scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
      },
      {q, k, v, mask}, 1e-6, 1e-5, 1e-3, &report))
      << report;
}

}  // namespace
}  // namespace flambeau::testing
