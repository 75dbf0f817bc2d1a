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

TEST(Attention, SixteenBitRunsTheFloat32KernelOnWidenedInputs) {
  // Promised bitwise: the 16-bit result (and each gradient) is the float32 one of the widened
  // inputs, rounded once.
  const Tensor mask = random_tensor({40, 70}, kFloat32, Layout::Contiguous, 20);
  for (DType dt : {kBFloat16, kFloat16})
    for (int variant = 0; variant < 3; ++variant) {
      Tensor q = random_tensor({2, 3, 40, 16}, dt, Layout::Contiguous, 21).requires_grad_();
      Tensor k = random_tensor({2, 3, 70, 16}, dt, Layout::Contiguous, 22).requires_grad_();
      Tensor v = random_tensor({2, 3, 70, 8}, dt, Layout::Contiguous, 23).requires_grad_();
      std::optional<Tensor> m16, m32;
      if (variant == 1) m16 = mask.to(dt), m32 = mask.to(dt).to(kFloat32);
      const bool causal = variant == 2;
      Tensor got = nn::scaled_dot_product_attention(q, k, v, m16, 0.0, causal);
      ASSERT_EQ(got.dtype(), dt);
      const Tensor g = random_tensor(got.sizes(), dt, Layout::Contiguous, 24);
      auto grads = autograd::grad({got}, {q, k, v}, {g});
      Tensor q32 = q.detach().to(kFloat32).requires_grad_(), k32 = k.detach().to(kFloat32).requires_grad_(),
             v32 = v.detach().to(kFloat32).requires_grad_();
      Tensor want = nn::scaled_dot_product_attention(q32, k32, v32, m32, 0.0, causal);
      auto want_grads = autograd::grad({want}, {q32, k32, v32}, {g.to(kFloat32)});
      EXPECT_TRUE(bitwise_equal(got, want.to(dt))) << dtype_name(dt) << " variant " << variant;
      for (size_t i = 0; i < 3; ++i)
        EXPECT_TRUE(bitwise_equal(grads[i], want_grads[i].to(dt))) << dtype_name(dt) << " variant " << variant;
    }
}

}  // namespace
}  // namespace flambeau::testing
