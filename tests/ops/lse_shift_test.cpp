// Ops built on logsumexp under large offsets: log_softmax(x + c) equals log_softmax(x),
// cross_entropy's loss and gradient too, logsumexp(x + c) - c equals logsumexp(x) to
// ulp(c). Inputs are multiples of 1/8 in [-8, 8], so x + c is exact in float32 for the
// offsets used and (x + c) - max(x + c) == x - max(x): a kernel that forms (x - max) - log
// sum gives the same result up to rounding, bounded here by 2 ulp of the result
// (x - (max + log sum) would be off by ulp(c), 1e-3 at c = 1e4).
#include <cmath>

#include "flambeau/nn/functional.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

Tensor grid(const Dims& shape, uint64_t seed) {
  std::vector<double> v = random_values(numel_of(shape), seed, -64, 64, true);
  for (double& x : v) x /= 8;
  return from_vector<double>(v, shape).to(kFloat32);
}

double ulp(double x) {
  const float f = std::fabs(float(x));
  return double(std::nextafter(f, INFINITY) - f);
}

// |got - want| <= ulps * ulp(scale or |want|) elementwise.
::testing::AssertionResult within_ulps(const Tensor& got, const Tensor& want, double ulps, double scale = 0) {
  const std::vector<double> g = values(got), w = values(want);
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = ulps * std::max(ulp(scale ? scale : w[i]), ulp(1e-30));
    if (!(std::fabs(g[i] - w[i]) <= tol))
      return ::testing::AssertionFailure() << "element " << i << ": " << g[i] << " vs " << w[i] << " (bound " << tol << ")";
  }
  return ::testing::AssertionSuccess();
}

const double kOffsets[] = {1e4, -1e4, 1e6};

TEST(LseShift, LogSoftmaxIssueExample) {
  const Tensor a = log_softmax(from_vector<float>({10000, 10001, 10002, 10003}), 0);
  const Tensor b = log_softmax(from_vector<float>({0, 1, 2, 3}), 0);
  EXPECT_TRUE(within_ulps(a, b, 2));
}

TEST(LseShift, LogSoftmax) {
  for (int64_t n : {5, 37, 1000})
    for (double c : kOffsets) {
      const Tensor x = grid({3, n}, uint64_t(n));
      EXPECT_TRUE(within_ulps(log_softmax(add(x, c), -1), log_softmax(x, -1), 2)) << "n " << n << " c " << c;
    }
}

TEST(LseShift, CrossEntropyLossAndGradient) {
  const Tensor target = from_vector<int64_t>({0, 3, 49, 7, 12, 3});
  for (double s : {0.0, 0.1})
    for (double c : kOffsets) {
      const Tensor x0 = grid({6, 50}, 7).requires_grad_(), x1 = add(x0, c).detach().requires_grad_();
      const Tensor l0 = nn::functional::cross_entropy(x0, target, {}, -100, "none", s);
      const Tensor l1 = nn::functional::cross_entropy(x1, target, {}, -100, "none", s);
      EXPECT_TRUE(within_ulps(l1, l0, 2)) << "c " << c << " smoothing " << s;
      l0.sum().backward();
      l1.sum().backward();
      EXPECT_TRUE(within_ulps(x1.grad(), x0.grad(), 2, 1.0)) << "c " << c << " smoothing " << s;
    }
}

TEST(LseShift, LogsumexpAndLogcumsumexpShiftByC) {
  for (double c : kOffsets) {
    const Tensor x = grid({4, 300}, 3);
    // The result rounds once at the magnitude of c: bound ulp(c).
    EXPECT_TRUE(within_ulps(sub(logsumexp(add(x, c), {-1}).to(kFloat64), c), logsumexp(x, {-1}), 1, c)) << c;
    EXPECT_TRUE(within_ulps(sub(logcumsumexp(add(x, c), -1).to(kFloat64), c), logcumsumexp(x, -1), 1, c)) << c;
  }
}

TEST(SizeOverflow, FactoriesViewsAndAllocation) {
  EXPECT_TRUE(contains(error_of<ValueError>([] { zeros({int64_t(1) << 62}); }), "[empty] storage size calculation overflowed"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { empty({int64_t(1) << 31, int64_t(1) << 31}); }), "[empty]"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { from_vector<float>({1}).expand({int64_t(1) << 62}).contiguous(); }),
                       "[empty]"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { from_vector<float>({1}).reshape({1, 1}).expand({int64_t(1) << 62, int64_t(1) << 62}); }),
                       "[expand]"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { from_vector<float>({1}).expand({-2}); }), "[expand]"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { zeros({0}).view({int64_t(1) << 32, int64_t(1) << 32, 0}); }), "[view]"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { zeros({4}).as_strided({int64_t(1) << 62, 4}, {int64_t(1) << 62, 1}); }),
                       "[as_strided]"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { zeros({4}).as_strided({2, 2}, {2, 2}); }), "out of bounds"));
  EXPECT_TRUE(contains(error_of<Error>([] { empty({int64_t(1) << 58}, kFloat64); }), "[allocate] out of memory"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { arange(Scalar(int64_t(-(int64_t(1) << 62) * 2 + 1)), Scalar(INT64_MAX), Scalar(int64_t(1))); }),
                       "[arange]"));
  EXPECT_EQ(mul_size(int64_t(1) << 31, int64_t(1) << 31, "t"), int64_t(1) << 62);
  EXPECT_TRUE(contains(error_of<ValueError>([] { add_size(INT64_MAX, 1, "t"); }), "[t] size calculation overflowed"));
  EXPECT_EQ(checked_numel({0, int64_t(1) << 40}, "t"), 0);
  EXPECT_EQ(checked_nbytes({3, 5}, 8, "t"), size_t(120));
}

}  // namespace
}  // namespace flambeau::testing
