// flambeau::linalg in C++: factorizations reconstruct their input, solves satisfy their
// equations (residuals at roundoff), LinAlgError on singular and indefinite input, results
// independent of the thread count; the special functions at known values.
#include <gtest/gtest.h>

#include <cmath>

#include "flambeau/kernels/cpu/special_functions.h"
#include "flambeau/ops/linalg.h"
#include "test_util.h"

namespace flambeau {
namespace {
using testing::values;

Tensor seeded_matrix(Dims shape, uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return from_vector<double>(testing::random_values(n, seed, -1, 1, false), shape);
}

double max_abs(const Tensor& t) { return amax(abs(t)).item<double>(); }

TEST(Linalg, SolveInvDetAgree) {
  const Tensor a = add(seeded_matrix({3, 5, 5}, 1), mul(eye(5, 5, kFloat64), 3.0));
  const Tensor b = seeded_matrix({3, 5, 2}, 2);
  const Tensor x = linalg::solve(a, b);
  EXPECT_LT(max_abs(sub(matmul(a, x), b)), 1e-13);
  EXPECT_LT(max_abs(sub(matmul(a, linalg::inv(a)), eye(5, 5, kFloat64))), 1e-13);
  // det(A) det(A^-1) = 1; slogdet agrees with det.
  EXPECT_LT(max_abs(sub(mul(linalg::det(a), linalg::det(linalg::inv(a))), Tensor(1.0))), 1e-12);
  auto [sign, logabs] = linalg::slogdet(a);
  EXPECT_LT(max_abs(sub(mul(sign, exp(logabs)), linalg::det(a))), 1e-10);
}

TEST(Linalg, FactorizationsReconstruct) {
  const Tensor a = seeded_matrix({2, 6, 4}, 3);
  auto [q, r] = linalg::qr(a);
  EXPECT_LT(max_abs(sub(matmul(q, r), a)), 1e-13);
  auto [u, s, vh] = linalg::svd(a, false);
  EXPECT_LT(max_abs(sub(matmul(mul(u, s.unsqueeze(-2)), vh), a)), 1e-13);
  const Tensor spd = add(matmul(a.transpose(-2, -1), a), mul(eye(4, 4, kFloat64), 0.5));
  const Tensor l = linalg::cholesky(spd);
  EXPECT_LT(max_abs(sub(matmul(l, l.transpose(-2, -1)), spd)), 1e-13);
  auto [w, v] = linalg::eigh(spd);
  EXPECT_LT(max_abs(sub(matmul(mul(v, w.unsqueeze(-2)), v.transpose(-2, -1)), spd)), 1e-12);
  EXPECT_LT(max_abs(sub(matmul(matmul(a, linalg::pinv(a)), a), a)), 1e-12);
}

TEST(Linalg, SingularAndIndefiniteInputRaise) {
  EXPECT_THROW(linalg::inv(zeros({2, 2}, kFloat64)), LinAlgError);
  EXPECT_THROW(linalg::solve(zeros({2, 2}, kFloat64), ones({2}, kFloat64)), LinAlgError);
  try {
    linalg::cholesky(stack({eye(2, 2, kFloat64), neg(eye(2, 2, kFloat64))}));
    FAIL();
  } catch (const LinAlgError& e) {
    EXPECT_NE(std::string(e.what()).find("(Batch element 1)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(linalg::det(zeros({3, 3}, kFloat64)).item<double>(), 0.0);
  EXPECT_THROW(linalg::det(ones({2, 3}, kFloat64)), ValueError);
}

TEST(Linalg, ThreadCountDoesNotChangeBits) {
  const Tensor a = add(seeded_matrix({8, 6, 6}, 4), mul(eye(6, 6, kFloat64), 2.0)).to(kFloat32);
  std::vector<std::vector<double>> runs;
  for (int n : {1, 2}) {
    set_num_threads(n);
    runs.push_back(values(cat({linalg::inv(a).flatten(), linalg::svdvals(a).flatten(), linalg::det(a)})));
  }
  set_num_threads(2);
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(SpecialFunctions, KnownValues) {
  namespace sp = kernels::special;
  const double pi = 3.14159265358979323846, euler = 0.57721566490153286061;
  EXPECT_NEAR(sp::digamma(1.0), -euler, 1e-15);
  EXPECT_NEAR(sp::digamma(0.5), -euler - 2 * std::log(2.0), 1e-15);
  EXPECT_NEAR(sp::trigamma(1.0), pi * pi / 6, 1e-15);
  EXPECT_NEAR(sp::trigamma(0.5), pi * pi / 2, 1e-14);
  EXPECT_NEAR(sp::log_gamma(0.5), 0.5 * std::log(pi), 1e-15);
  EXPECT_NEAR(sp::erfinv(std::erf(0.3)), 0.3, 1e-16);
  // erf(-2.5) is rounded by 1e-16, which erfinv scales by 1 / erf'(2.5) = 460.
  EXPECT_NEAR(sp::erfinv(std::erf(-2.5)), -2.5, 1e-13);
  EXPECT_NEAR(sp::i0(1.0), 1.2660658777520083, 1e-15);    // sum 1 / (4^j j!^2)
  EXPECT_NEAR(sp::i1(1.0), 0.56515910399248503, 1e-15);
  EXPECT_NEAR(sp::i0(50.0) / 2.9325537838493363e20, 1.0, 1e-14);  // the asymptotic branch
  EXPECT_EQ(sp::digamma(0.0), -INFINITY);
  EXPECT_EQ(sp::digamma(-0.0), INFINITY);
  EXPECT_TRUE(std::isnan(sp::digamma(-2.0)));
  EXPECT_EQ(sp::erfinv(1.0), INFINITY);
  EXPECT_TRUE(std::isnan(sp::erfinv(1.5)));
}

}  // namespace
}  // namespace flambeau
