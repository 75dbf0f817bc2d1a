// nn::init: gains and fans, the bounds and spread of each initialiser, generator
// reproducibility, no gradient recorded, errors.
#include "test_util.h"

namespace flambeau::testing {
namespace {

namespace I = nn::init;

double std_of(const Tensor& t) { return flambeau::std(t.to(kFloat64)).item<double>(); }
double max_abs(const Tensor& t) { return max(abs(t.to(kFloat64))).item<double>(); }

TEST(Init, GainsAndFans) {
  EXPECT_EQ(I::calculate_gain("linear"), 1.0);
  EXPECT_EQ(I::calculate_gain("conv2d"), 1.0);
  EXPECT_EQ(I::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(I::calculate_gain("tanh"), 5.0 / 3);
  EXPECT_DOUBLE_EQ(I::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(I::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(I::calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3));
  EXPECT_DOUBLE_EQ(I::calculate_gain("selu"), 0.75);
  EXPECT_TRUE(contains(error_of<ValueError>([] { I::calculate_gain("swish"); }), "unsupported nonlinearity swish"));
  EXPECT_EQ(I::calculate_fan_in_and_fan_out(empty({3, 4, 5, 6})), (std::pair<int64_t, int64_t>{120, 90}));
  EXPECT_EQ(I::calculate_fan_in_and_fan_out(empty({7, 2})), (std::pair<int64_t, int64_t>{2, 7}));
  EXPECT_TRUE(contains(error_of<ValueError>([] { I::calculate_fan_in_and_fan_out(empty({5})); }),
                       "fewer than 2 dimensions, got shape (5,)"));
}

TEST(Init, SpreadAndBounds) {
  Tensor w = empty({400, 300});
  I::xavier_uniform_(w);
  const double a = std::sqrt(6.0 / 700);
  EXPECT_LE(max_abs(w), a);
  EXPECT_NEAR(std_of(w), a / std::sqrt(3.0), 0.002);
  I::xavier_normal_(w, 2.0);
  EXPECT_NEAR(std_of(w), 2 * std::sqrt(2.0 / 700), 0.002);
  I::kaiming_uniform_(w, 0, "fan_out", "relu");
  EXPECT_LE(max_abs(w), std::sqrt(6.0 / 400));
  EXPECT_NEAR(std_of(w), std::sqrt(2.0 / 400), 0.002);
  I::kaiming_normal_(w, 0, "fan_in", "relu");
  EXPECT_NEAR(std_of(w), std::sqrt(2.0 / 300), 0.002);
  I::uniform_(w, 2, 3);
  EXPECT_GE(min(w).item<double>(), 2);
  EXPECT_LT(max(w).item<double>(), 3);
  I::normal_(w, 5, 0.5);
  EXPECT_NEAR(mean(w).item<double>(), 5, 0.01);
  EXPECT_NEAR(std_of(w), 0.5, 0.005);
  // N(0, 0.02^2) cut at +-2 std has std 0.02 * 0.8796.
  I::trunc_normal_(w, 0, 0.02, -0.04, 0.04);
  EXPECT_LE(max_abs(w), 0.04);
  EXPECT_NEAR(std_of(w), 0.02 * 0.8796, 0.0003);
  // Asymmetric bounds far in the tail: every value lands in [a, b].
  I::trunc_normal_(w, 1, 1, 3, 3.5);
  EXPECT_GE(min(w).item<double>(), 3);
  EXPECT_LE(max(w).item<double>(), 3.5);
  I::constant_(w, 2.5);
  EXPECT_EQ(values(w), std::vector<double>(size_t(w.numel()), 2.5));
  I::zeros_(w);
  EXPECT_EQ(max_abs(w), 0);
  I::ones_(w);
  EXPECT_EQ(min(w).item<double>(), 1);
}

TEST(Init, GeneratorAndNoGrad) {
  Tensor a = empty({30, 20}, kFloat64).requires_grad_(), b = empty({30, 20}, kFloat64);
  Generator g1(3), g2(3);
  I::kaiming_uniform_(a, std::sqrt(5.0), "fan_in", "leaky_relu", g1);
  I::kaiming_uniform_(b, std::sqrt(5.0), "fan_in", "leaky_relu", g2);
  EXPECT_TRUE(bitwise_equal(a.detach(), b));
  EXPECT_TRUE(a.is_leaf() && a.requires_grad());
  I::trunc_normal_(a, 0, 1, -2, 2, g1);
  I::trunc_normal_(b, 0, 1, -2, 2, g2);
  EXPECT_TRUE(bitwise_equal(a.detach(), b));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { I::kaiming_normal_(a, 0, "fan_avg"); }),
                       "[kaiming_normal_] mode fan_avg not supported"));
  Tensor vec = empty({4});
  EXPECT_THROW(I::xavier_uniform_(vec), ValueError);
  Tensor none = empty({0, 3});
  EXPECT_NO_THROW(I::kaiming_uniform_(none));  // a zero-element tensor is left alone
}

}  // namespace
}  // namespace flambeau::testing
