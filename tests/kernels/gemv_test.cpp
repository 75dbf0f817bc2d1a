// gemm_f32 with one row or one column of C (the matrix-vector path, sgemv): every
// transpose combination and strided leading dimensions against a float64 sum, a NaN in C's
// buffer not kept when beta is 0, beta = 1 accumulating, and the same bits on 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/blas.h"

namespace flambeau {
namespace {

struct Case {
  int64_t m, n, k;
};

// C (m x n, row stride ldc) = op(A) op(B), with op(A) m x k and op(B) k x n stored with
// one spare column per row (lda, ldb larger than the row).
std::vector<float> run(const Case& c, bool ta, bool tb, float beta, float c0, std::vector<double>* ref) {
  std::mt19937 rng(uint32_t(c.m * 131 + c.n * 7 + c.k + ta * 2 + tb));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t ar = ta ? c.k : c.m, ac = ta ? c.m : c.k, br = tb ? c.n : c.k, bc = tb ? c.k : c.n;
  const int64_t lda = ac + 1, ldb = bc + 1, ldc = c.n + 2;
  std::vector<float> a(size_t(ar * lda)), b(size_t(br * ldb)), out(size_t(c.m * ldc), c0);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  kernels::gemm_f32(ta, tb, c.m, c.n, c.k, 1.f, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
  ref->assign(size_t(c.m * c.n), 0.0);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = beta != 0.f ? double(beta) * c0 : 0.0;
      for (int64_t p = 0; p < c.k; ++p)
        s += double(ta ? a[size_t(p * lda + i)] : a[size_t(i * lda + p)]) *
             double(tb ? b[size_t(j * ldb + p)] : b[size_t(p * ldb + j)]);
      (*ref)[size_t(i * c.n + j)] = s;
    }
  std::vector<float> dense(size_t(c.m * c.n));
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) dense[size_t(i * c.n + j)] = out[size_t(i * ldc + j)];
  return dense;
}

TEST(Gemv, OneRowOrColumnMatchesTheFloat64Sum) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Case& c : {Case{1, 576, 192}, Case{1, 37, 5}, Case{300, 1, 64}, Case{1, 1, 9}, Case{1, 2048, 512}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.f, 1.f}) {
          std::vector<double> ref;
          const std::vector<float> got = run(c, ta, tb, beta, beta == 0.f ? nan : 0.5f, &ref);
          // |products| <= 1, so the float32 sum is within k * 2^-23 * (k + 1) of the exact one.
          const double tol = double(c.k + 1) * double(c.k) * 0x1p-23;
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], tol) << c.m << "x" << c.n << "x" << c.k << " ta " << ta << " tb " << tb
                                             << " beta " << beta << " at " << i;
        }
}

TEST(Gemv, SameBitsOnAnyThreadCount) {
  const int before = get_num_threads();
  std::vector<double> ref;
  set_num_threads(1);
  const std::vector<float> one = run({1, 2048, 512}, false, true, 0.f, 0.f, &ref);
  set_num_threads(2);
  const std::vector<float> two = run({1, 2048, 512}, false, true, 0.f, 0.f, &ref);
  set_num_threads(before);
  EXPECT_EQ(one, two);
}

}  // namespace
}  // namespace flambeau
