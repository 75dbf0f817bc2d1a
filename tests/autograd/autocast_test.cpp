// Autocast (torch.autocast on the CPU): the per-thread state and its nesting, the op policy
// (matmul-like ops in 16-bit, losses and prod in float32, the rest in the inputs' dtype),
// gradients through the casts to float32 leaves, and the cache of cast parameters.
#include <thread>

#include "flambeau/autograd/autocast.h"
#include "flambeau/nn/attention.h"
#include "flambeau/nn/functional.h"
#include "test_util.h"

namespace flambeau {
namespace {
namespace F = nn::functional;

Tensor seeded(const Dims& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, kFloat32, g);
}

// |got - ref| <= 2^-8 |ref| + k 2^-24 sum|a||b| elementwise: ref is the float64 product of the
// bf16-rounded operands; the 16-bit result is one rounding (half an ulp, 2^-9 relative, taken
// as 2^-8) of a float32 sum of exact products (k roundings of 2^-24 each).
::testing::AssertionResult close_to_bf16_product(const Tensor& got, const Tensor& a, const Tensor& b) {
  const Tensor a16 = a.to(kBFloat16).to(kFloat64), b16 = b.to(kBFloat16).to(kFloat64);
  const std::vector<double> g = testing::values(got), ref = testing::values(matmul(a16, b16)),
                            mag = testing::values(matmul(abs(a16), abs(b16)));
  const double k = double(a.size(-1));
  for (size_t i = 0; i < ref.size(); ++i)
    if (std::abs(g[i] - ref[i]) > std::ldexp(std::abs(ref[i]), -8) + k * std::ldexp(mag[i], -24))
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " vs " << ref[i];
  return ::testing::AssertionSuccess();
}

TEST(Autocast, StateNestsAndRestores) {
  EXPECT_FALSE(autocast::is_enabled());
  {
    AutocastGuard outer(kBFloat16);
    EXPECT_TRUE(autocast::is_enabled());
    EXPECT_EQ(autocast::dtype(), kBFloat16);
    {
      AutocastGuard inner(kFloat16);
      EXPECT_EQ(autocast::dtype(), kFloat16);
      {
        AutocastGuard off(kBFloat16, false);
        EXPECT_FALSE(autocast::is_enabled());
        EXPECT_EQ(mm(seeded({2, 3}, 1), seeded({3, 2}, 2)).dtype(), kFloat32);
      }
      EXPECT_TRUE(autocast::is_enabled());
      EXPECT_EQ(mm(seeded({2, 3}, 1), seeded({3, 2}, 2)).dtype(), kFloat16);
    }
    EXPECT_EQ(autocast::dtype(), kBFloat16);
    // The state is per thread: another thread starts with autocast off.
    bool other = true;
    std::thread([&] { other = autocast::is_enabled(); }).join();
    EXPECT_FALSE(other);
  }
  EXPECT_FALSE(autocast::is_enabled());
  EXPECT_THROW({ AutocastGuard g(kFloat32); }, TypeError);
  EXPECT_THROW({ AutocastGuard g(kFloat64); }, TypeError);
  EXPECT_FALSE(autocast::is_enabled());
}

TEST(Autocast, MatmulLikeOpsRunIn16Bit) {
  const Tensor x = seeded({5, 33}, 3), w = seeded({7, 33}, 4), bias = seeded({7}, 5);
  AutocastGuard guard(kBFloat16);
  const Tensor y_mm = mm(x, w.t()), y_mat = matmul(x, w.t()), y_lin = F::linear(x, w, std::nullopt);
  for (const Tensor& y : {y_mm, y_mat, y_lin}) {
    EXPECT_EQ(y.dtype(), kBFloat16);
    EXPECT_TRUE(close_to_bf16_product(y, x, w.t()));
  }
  const Tensor y_bmm = bmm(x.unsqueeze(0), w.t().unsqueeze(0));
  EXPECT_EQ(y_bmm.dtype(), kBFloat16);
  EXPECT_TRUE(close_to_bf16_product(y_bmm.squeeze(0), x, w.t()));
  // With a bias: torch casts it too; the sum adds one more bf16 rounding of the output.
  const Tensor y_add = addmm(bias, x, w.t()), y_lb = F::linear(x, w, bias);
  EXPECT_EQ(y_add.dtype(), kBFloat16);
  EXPECT_EQ(y_lb.dtype(), kBFloat16);
  EXPECT_EQ(baddbmm(bias, x.unsqueeze(0), w.t().unsqueeze(0)).dtype(), kBFloat16);
  const Tensor q = seeded({1, 2, 4, 8}, 6);
  EXPECT_EQ(nn::scaled_dot_product_attention(q, q, q).dtype(), kBFloat16);
  // float64 and integers are not cast; a bf16 operand under float16 autocast is.
  EXPECT_EQ(mm(x.to(kFloat64), w.t().to(kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(mm(ones({2, 2}, kInt64), ones({2, 2}, kInt64)).dtype(), kInt64);
  AutocastGuard half(kFloat16);
  EXPECT_EQ(mm(x.to(kBFloat16), w.t()).dtype(), kFloat16);
}

TEST(Autocast, LossesAndProdRunInFloat32OthersKeepTheirDtype) {
  const Tensor logits = seeded({6, 5}, 7).to(kBFloat16);
  const Tensor target = from_vector<int64_t>({0, 4, 2, 1, 3, 0}, Dims{6});
  AutocastGuard guard(kBFloat16);
  const Tensor ce = F::cross_entropy(logits, target);
  EXPECT_EQ(ce.dtype(), kFloat32);
  {
    AutocastGuard off(kBFloat16, false);
    EXPECT_NEAR(ce.item<double>(), F::cross_entropy(logits.to(kFloat32), target).item<double>(), 1e-6);
  }
  EXPECT_EQ(F::nll_loss(logits, target).dtype(), kFloat32);
  EXPECT_EQ(F::mse_loss(logits, logits).dtype(), kFloat32);
  EXPECT_EQ(F::l1_loss(logits, logits).dtype(), kFloat32);
  EXPECT_EQ(F::binary_cross_entropy_with_logits(logits, sigmoid(logits)).dtype(), kFloat32);
  EXPECT_EQ(prod(logits).dtype(), kFloat32);
  // Not on either list: the inputs' dtype, as torch's CPU autocast gives.
  EXPECT_EQ(softmax(logits, -1).dtype(), kBFloat16);
  EXPECT_EQ(softmax(logits.to(kFloat32), -1).dtype(), kFloat32);
  EXPECT_EQ(sum(logits).dtype(), kBFloat16);
  EXPECT_EQ(cat({logits, logits.to(kFloat32)}, 0).dtype(), kFloat32);  // promote
}

TEST(Autocast, GradientsReachFloat32Leaves) {
  Tensor x = seeded({4, 6}, 8).requires_grad_(), w = seeded({3, 6}, 9).requires_grad_();
  Tensor y;
  {
    AutocastGuard guard(kBFloat16);
    y = F::linear(x, w, std::nullopt);
  }
  sum(y.to(kFloat32)).backward();
  ASSERT_EQ(x.grad().dtype(), kFloat32);
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  // dx = ones @ bf16(w): sums of 3 bf16 values, rounded to bf16 once (relative 2^-8).
  const Tensor ref = sum(w.detach().to(kBFloat16).to(kFloat64), {0}, true).expand({4, 6});
  EXPECT_TRUE(testing::all_close(testing::values(x.grad()), testing::values(ref), std::ldexp(1.0, -8), 1e-6));
}

TEST(Autocast, CachesCastsOfLeafParametersWithinOneRegion) {
  Tensor w = seeded({3, 4}, 10).requires_grad_();
  const Tensor plain = seeded({3, 4}, 11);
  const TensorImpl* first;
  {
    AutocastGuard guard(kBFloat16);
    first = autocast::cast(autocast::Policy::lower, w).impl();
    EXPECT_EQ(autocast::cast(autocast::Policy::lower, w).impl(), first);
    {
      AutocastGuard inner(kBFloat16);  // nested: the cache survives the inner exit
      EXPECT_EQ(autocast::cast(autocast::Policy::lower, w).impl(), first);
    }
    EXPECT_EQ(autocast::cast(autocast::Policy::lower, w).impl(), first);
    // Not a leaf parameter: cast each time.
    EXPECT_NE(autocast::cast(autocast::Policy::lower, plain).impl(),
              autocast::cast(autocast::Policy::lower, plain).impl());
    // An in-place update of the parameter makes a new cast with the new values.
    {
      autograd::NoGradGuard no_grad;
      w.fill_(2.0);
    }
    const Tensor again = autocast::cast(autocast::Policy::lower, w);
    EXPECT_NE(again.impl(), first);
    EXPECT_EQ(testing::values(again)[0], 2.0);
  }
  {
    AutocastGuard off_cache(kBFloat16, true, false);
    EXPECT_NE(autocast::cast(autocast::Policy::lower, w).impl(), autocast::cast(autocast::Policy::lower, w).impl());
  }
}

}  // namespace
}  // namespace flambeau
