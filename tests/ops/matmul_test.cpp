// Matrix products against double-precision reference loops: every transposition of the
// operands (BLAS transposes, no copies), strided views, empty sizes, 16-bit floats and
// integers, addmm/baddbmm scaling, matmul's 1-D and broadcasting rules, linear, errors.
#include "test_util.h"

namespace flambeau::testing {
namespace {

// Reference [n, m] = a[n, k] @ b[k, m] in double, from logical values.
std::vector<double> ref_mm(const Tensor& a, const Tensor& b) {
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  std::vector<double> av = values(a), bv = values(b), out(size_t(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < m; ++j) out[size_t(i * m + j)] += av[size_t(i * k + p)] * bv[size_t(p * m + j)];
  return out;
}

// The same logical matrix in one of four memory layouts.
Tensor with_layout(const Tensor& t, int kind) {
  switch (kind) {
    case 0: return t;
    case 1: return t.t().contiguous().t();                                            // column-major
    case 2: return cat({t, t}, 1).slice(1, {}, {}, 2).contiguous().t().contiguous().t().narrow(0, 0, t.size(0));
    default: return cat({t, zeros_like(t)}, 1).narrow(1, 0, t.size(1));                // padded rows (ld > cols)
  }
}

TEST(Matmul, MmEveryLayoutAndDtype) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt32, kInt64})
    for (auto [n, k, m] : {std::tuple<int64_t, int64_t, int64_t>{37, 53, 29}, {1, 8, 1}, {64, 1, 3}, {5, 0, 4}, {0, 3, 2}})
      for (int la = 0; la < 4; ++la)
        for (int lb = 0; lb < 4; ++lb) {
          const bool integral = !is_floating(dt);
          Tensor a = with_layout(random_tensor({n, k}, dt, Layout::Contiguous, 1, -3, 3), la);
          Tensor b = with_layout(random_tensor({k, m}, dt, Layout::Contiguous, 2, -3, 3), lb);
          Tensor c = mm(a, b);
          ASSERT_EQ(c.dtype(), dt);
          ASSERT_EQ(c.sizes(), (Dims{n, m}));
          const double tol = integral ? 0 : dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : 2e-2;
          EXPECT_TRUE(all_close(values(c), values(from_vector<double>(ref_mm(a, b)).to(dt)), tol, tol * 10))
              << dtype_name(dt) << " " << n << "x" << k << "x" << m << " layouts " << la << "," << lb;
        }
}

TEST(Matmul, AddmmBmmBaddbmm) {
  Tensor a = random_tensor({7, 5}, kFloat64, Layout::Contiguous, 3), b = random_tensor({5, 4}, kFloat64, Layout::Contiguous, 4);
  Tensor bias = random_tensor({4}, kFloat64, Layout::Contiguous, 5);
  std::vector<double> r = ref_mm(a, b), bv = values(bias.expand({7, 4})), want;
  for (size_t i = 0; i < r.size(); ++i) want.push_back(0.5 * bv[i] + 2 * r[i]);
  EXPECT_TRUE(all_close(values(addmm(bias, a, b, 0.5, 2)), want, 1e-12, 1e-12));
  // beta = 0: self is ignored, NaN included.
  EXPECT_TRUE(all_close(values(addmm(full({7, 4}, NAN, kFloat64), a, b, 0)), r, 1e-12, 1e-12));
  // k = 0: beta * self.
  EXPECT_EQ(values(addmm(ones({2, 3}), zeros({2, 0}), zeros({0, 3}), 3)), std::vector<double>(6, 3.0));

  Tensor A = random_tensor({3, 6, 5}, kFloat32, Layout::Transposed, 6), B = random_tensor({3, 5, 2}, kFloat32, Layout::Strided, 7);
  Tensor C = bmm(A, B);
  ASSERT_EQ(C.sizes(), (Dims{3, 6, 2}));
  Tensor D = baddbmm(ones({3, 6, 2}), A, B, 2, 0.5);
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<double> ri = ref_mm(A[i], B[i]), di;
    EXPECT_TRUE(all_close(values(C[i]), ri, 1e-5, 1e-5));
    for (double x : ri) di.push_back(2 + 0.5 * x);
    EXPECT_TRUE(all_close(values(D[i]), di, 1e-5, 1e-5));
  }
}

TEST(Matmul, MatmulRulesMatchReference) {
  Tensor v = random_tensor({5}, kFloat64, Layout::Contiguous, 1), w = random_tensor({5}, kFloat64, Layout::Contiguous, 2);
  Tensor M = random_tensor({3, 5}, kFloat64, Layout::Contiguous, 3), N = random_tensor({5, 4}, kFloat64, Layout::Contiguous, 4);
  // 1-D . 1-D: a 0-dim dot product.
  Tensor d = matmul(v, w);
  EXPECT_EQ(d.dim(), 0);
  double dv = 0;
  for (int i = 0; i < 5; ++i) dv += values(v)[size_t(i)] * values(w)[size_t(i)];
  EXPECT_NEAR(d.item<double>(), dv, 1e-12);
  EXPECT_EQ(matmul(M, v).sizes(), (Dims{3}));
  EXPECT_TRUE(all_close(values(matmul(M, v)), ref_mm(M, v.unsqueeze(1)), 1e-12, 1e-12));
  EXPECT_EQ(matmul(v, N).sizes(), (Dims{4}));
  EXPECT_TRUE(all_close(values(matmul(v, N)), ref_mm(v.unsqueeze(0), N), 1e-12, 1e-12));
  // Batched with broadcasting: [2, 1, 3, 5] @ [4, 5, 4] -> [2, 4, 3, 4].
  Tensor A = random_tensor({2, 1, 3, 5}, kFloat64, Layout::Contiguous, 5), B = random_tensor({4, 5, 4}, kFloat64, Layout::Transposed, 6);
  Tensor C = matmul(A, B);
  ASSERT_EQ(C.sizes(), (Dims{2, 4, 3, 4}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_TRUE(all_close(values(C[i][j]), ref_mm(A[i][0], B[j]), 1e-12, 1e-12));
  // ND @ 2-D folds into one GEMM; ND @ 1-D and 1-D @ ND.
  Tensor X = random_tensor({2, 3, 5}, kFloat64, Layout::Transposed, 7);
  EXPECT_EQ(matmul(X, N).sizes(), (Dims{2, 3, 4}));
  EXPECT_TRUE(all_close(values(matmul(X, N)[1]), ref_mm(X[1], N), 1e-12, 1e-12));
  EXPECT_EQ(matmul(X, v).sizes(), (Dims{2, 3}));
  EXPECT_EQ(matmul(v, B).sizes(), (Dims{4, 4}));
  EXPECT_TRUE(all_close(values(matmul(v, B)[2]), ref_mm(v.unsqueeze(0), B[2]), 1e-12, 1e-12));
  // linear and outer.
  Tensor W = random_tensor({4, 5}, kFloat32, Layout::Contiguous, 8), bias = random_tensor({4}, kFloat32, Layout::Contiguous, 9);
  Tensor x = random_tensor({2, 3, 5}, kFloat32, Layout::Contiguous, 10);
  Tensor y = linear(x, W, bias);
  ASSERT_EQ(y.sizes(), (Dims{2, 3, 4}));
  std::vector<double> ry = ref_mm(x.reshape({6, 5}), W.t()), bv = values(bias);
  for (size_t i = 0; i < ry.size(); ++i) ry[i] += bv[i % 4];
  EXPECT_TRUE(all_close(values(y), ry, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(values(linear(x, W)), ref_mm(x.reshape({6, 5}), W.t()), 1e-5, 1e-5));
  EXPECT_EQ(values(outer(from_vector<float>({1, 2}), from_vector<float>({3, 4, 5}))), (std::vector<double>{3, 4, 5, 6, 8, 10}));
}

// bfloat16 products (whichever 16-bit GEMM path this CPU takes, tests/kernels/gemm16_test)
// match the float32 product rounded once, scaling included.
TEST(Matmul, Bf16PathAndScaling) {
  Tensor a = random_tensor({70, 300}, kBFloat16, Layout::Contiguous, 8), b = random_tensor({300, 90}, kBFloat16, Layout::Transposed, 9);
  Tensor self = random_tensor({70, 90}, kBFloat16, Layout::Contiguous, 10);
  Tensor want = add(mul(mm(a.to(kFloat32), b.to(kFloat32)), 0.5), self.to(kFloat32), 2).to(kBFloat16);
  EXPECT_TRUE(all_close(values(addmm(self, a, b, 2, 0.5)), values(want), 1e-2, 1e-2));
}

TEST(Matmul, Errors) {
  try {
    mm(ones({3, 4}), ones({5, 6}));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "[mm] mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)");
  }
  EXPECT_THROW(mm(ones({3, 4}), ones({4, 2}, kFloat64)), TypeError);
  EXPECT_THROW(mm(ones({3}), ones({3, 2})), ValueError);
  EXPECT_THROW(bmm(ones({2, 3, 4}), ones({3, 4, 2})), ValueError);
  EXPECT_THROW(dot(ones({3}), ones({4})), ValueError);
  EXPECT_THROW(matmul(ones({2, 3, 4}), ones({5, 2})), ValueError);
  EXPECT_THROW(matmul(ones({2, 3, 4}), ones({3, 4, 2})), ValueError);  // batch 2 vs 3
  EXPECT_THROW(linear(ones({2, 3}), ones({4, 5})), ValueError);
  EXPECT_THROW(addmm(ones({3}), ones({2, 2}), ones({2, 2})), ValueError);
}

TEST(Matmul, SameBitsWithOneAndTwoThreads) {
  const int saved = get_num_threads();
  Tensor a = random_tensor({300, 200}, kFloat32, Layout::Contiguous, 1), b = random_tensor({200, 150}, kFloat32, Layout::Transposed, 2);
  set_num_threads(1);
  Tensor one = mm(a, b), d1 = dot(a.reshape({-1}), a.reshape({-1}));
  set_num_threads(2);
  EXPECT_TRUE(bitwise_equal(one, mm(a, b)));
  EXPECT_TRUE(bitwise_equal(d1, dot(a.reshape({-1}), a.reshape({-1}))));
  set_num_threads(saved);
}

// OpenMP OpenBLAS's openblas_set_num_threads(1) lowers omp_get_max_threads() for the
// process; flambeau's default thread count (never set) must not follow it down.
TEST(Matmul, DefaultThreadCountSurvivesBlas) {
  const int before = get_num_threads();
  const Tensor a = ones({64, 64}, kFloat32), b = ones({64, 64}, kFloat32);
  EXPECT_FLOAT_EQ(mm(a, b).sum().item<float>(), 64.0f * 64 * 64);
  EXPECT_EQ(get_num_threads(), before);
}

}  // namespace
}  // namespace flambeau::testing
