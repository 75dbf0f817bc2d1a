// Scans against double-precision reference loops over every dim, layout and dtype;
// NaN and tie rules for cummax/cummin; integer accumulation; 1 vs 2 threads.
#include "test_util.h"

namespace flambeau::testing {
namespace {

// Applies a running fold along `dim` of row-major values of `shape`.
std::vector<double> ref_scan(const std::vector<double>& v, const Dims& shape, int64_t dim,
                             const std::function<double(double acc, double x, bool first)>& f) {
  const Dims st = contiguous_strides(shape);
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const int64_t pos = (int64_t(i) / st[dim]) % shape[dim];
    if (pos != 0) continue;
    double acc = 0;
    for (int64_t k = 0; k < shape[dim]; ++k) {
      const size_t j = i + size_t(k * st[dim]);
      acc = f(acc, v[j], k == 0);
      out[j] = acc;
    }
  }
  return out;
}

const Dims kShape = {6, 35, 9};

TEST(Scan, CumsumCumprodLogcumsumexpAgainstReference) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16})
    for (int64_t dim : {0, 1, 2})
      for (Layout layout : kAllLayouts) {
        Tensor x = random_tensor(kShape, dt, layout, 3, -1.5, 1.5);
        std::vector<double> v = values(x);
        const double tol = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : 2e-2;
        auto check = [&](const Tensor& got, const std::vector<double>& ref, const char* name) {
          ASSERT_EQ(got.dtype(), dt);
          ASSERT_EQ(got.sizes(), kShape);
          EXPECT_TRUE(all_close(values(got), values(from_vector<double>(ref).to(dt)), tol, tol))
              << name << " " << dtype_name(dt) << " dim " << dim << " " << layout_name(layout);
        };
        check(cumsum(x, dim), ref_scan(v, kShape, dim, [](double a, double b, bool f) { return f ? b : a + b; }), "cumsum");
        Tensor xp = add(mul(x, 0.1), 1.0).to(dt);
        check(cumprod(xp, dim), ref_scan(values(xp), kShape, dim, [](double a, double b, bool f) { return f ? b : a * b; }),
              "cumprod");
        check(logcumsumexp(x, dim), ref_scan(v, kShape, dim, [](double a, double b, bool f) {
                return f ? b : std::max(a, b) + std::log1p(std::exp(-std::fabs(a - b)));
              }), "logcumsumexp");
      }
}

TEST(Scan, CummaxCumminValuesAndIndices) {
  for (DType dt : {kFloat32, kInt32, kInt64})
    for (int64_t dim : {0, 1, -1})
      for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Broadcast}) {
        Tensor x = random_tensor(kShape, dt, layout, 8, -4, 4);  // small ints: many ties
        const int64_t d = dim < 0 ? dim + 3 : dim;
        auto [mv, mi] = cummax(x, dim);
        auto [nv, ni] = cummin(x, dim);
        ASSERT_EQ(mi.dtype(), kInt64);
        std::vector<double> v = values(x);
        // Reference: latest index of the running extreme.
        const Dims st = contiguous_strides(kShape);
        std::vector<double> rmv(v.size()), rmi(v.size()), rnv(v.size()), rni(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          if ((int64_t(i) / st[d]) % kShape[d] != 0) continue;
          double bm = v[i], bn = v[i];
          int64_t im = 0, in = 0;
          for (int64_t k = 0; k < kShape[d]; ++k) {
            const size_t j = i + size_t(k * st[d]);
            if (v[j] >= bm) bm = v[j], im = k;
            if (v[j] <= bn) bn = v[j], in = k;
            rmv[j] = bm, rmi[j] = double(im), rnv[j] = bn, rni[j] = double(in);
          }
        }
        EXPECT_EQ(values(mv), rmv);
        EXPECT_EQ(values(mi), rmi) << dtype_name(dt) << " dim " << dim;
        EXPECT_EQ(values(nv), rnv);
        EXPECT_EQ(values(ni), rni);
      }
  // NaN propagates and each new NaN takes the index.
  auto [v, i] = cummax(from_vector<float>({1, NAN, 3, NAN, 0}), 0);
  std::vector<double> vv = values(v);
  EXPECT_EQ(vv[0], 1);
  for (size_t k = 1; k < 5; ++k) EXPECT_TRUE(std::isnan(vv[k]));
  EXPECT_EQ(values(i), (std::vector<double>{0, 1, 1, 3, 3}));
}

TEST(Scan, IntegerAccumulationEdgeCasesAndThreads) {
  Tensor b = from_vector<bool>({true, true, false, true});
  EXPECT_EQ(cumsum(b, 0).dtype(), kInt64);
  EXPECT_EQ(values(cumsum(b, 0)), (std::vector<double>{1, 2, 2, 3}));
  EXPECT_EQ(values(cumsum(from_vector<int8_t>({100, 100, 100}), 0)), (std::vector<double>{100, 200, 300}));
  EXPECT_EQ(cumsum(arange(4, kInt32), 0, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(values(cumprod(from_vector<int32_t>({2, 3, 4}), 0)), (std::vector<double>{2, 6, 24}));
  EXPECT_THROW(cumsum(arange(3), 0, kBool), TypeError);
  EXPECT_EQ(values(logcumsumexp(from_vector<float>({-INFINITY, -INFINITY, 0}), 0))[1], -INFINITY);
  EXPECT_EQ(values(logcumsumexp(from_vector<float>({INFINITY, 1}), 0))[1], INFINITY);
  EXPECT_THROW(logcumsumexp(arange(3), 0), TypeError);
  EXPECT_EQ(cumsum(scalar_tensor(2.5), 0).item<double>(), 2.5);
  EXPECT_EQ(cumsum(zeros({0, 3}), 0).sizes(), (Dims{0, 3}));
  EXPECT_THROW(cumsum(ones({2}), 1), IndexError);
  const int saved = get_num_threads();
  Tensor x = random_tensor({4000, 301}, kFloat32, Layout::Contiguous, 1);
  set_num_threads(1);
  Tensor one = cumsum(x, 1), one0 = logcumsumexp(x, 0);
  set_num_threads(2);
  EXPECT_TRUE(bitwise_equal(one, cumsum(x, 1)));
  EXPECT_TRUE(bitwise_equal(one0, logcumsumexp(x, 0)));
  set_num_threads(saved);
}

}  // namespace
}  // namespace flambeau::testing
