// Reductions and softmax against double-precision reference loops over every dim set,
// layout and dtype; NaN / inf behaviour; errors; and bitwise equality with 1 and 2 threads.
#include <cmath>
#include <functional>
#include <numeric>

#include "test_util.h"

namespace flambeau::testing {
namespace {

using Group = std::vector<double>;

// Applies f to every group of values that reducing `dims` (empty: all) of `shape` collects;
// returns one result per output element in row-major order.
std::vector<double> ref_reduce(const std::vector<double>& v, const Dims& shape, const Dims& dims,
                               const std::function<double(const Group&)>& f) {
  const int64_t nd = int64_t(shape.size());
  std::vector<bool> red(size_t(nd), dims.empty());
  for (int64_t d : dims) red[size_t(d < 0 ? d + nd : d)] = true;
  Dims st = contiguous_strides(shape);
  std::map<std::vector<int64_t>, Group> groups;
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    std::vector<int64_t> key;
    for (int64_t d = 0; d < nd; ++d)
      if (!red[d]) key.push_back((i / st[d]) % shape[d]);
    groups[key].push_back(v[size_t(i)]);
  }
  std::vector<double> out;
  for (auto& [k, g] : groups) out.push_back(f(g));
  return out;
}

double g_sum(const Group& g) { return std::accumulate(g.begin(), g.end(), 0.0); }
double g_mean(const Group& g) { return g_sum(g) / double(g.size()); }
double g_var(const Group& g) {
  double m = g_mean(g), s = 0;
  for (double x : g) s += (x - m) * (x - m);
  return s / double(g.size() - 1);
}
double g_max(const Group& g) {
  double m = -INFINITY;
  for (double x : g) m = std::isnan(x) || std::isnan(m) ? NAN : std::max(m, x);
  return m;
}
double g_min(const Group& g) {
  double m = INFINITY;
  for (double x : g) m = std::isnan(x) || std::isnan(m) ? NAN : std::min(m, x);
  return m;
}

struct ReduceCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Dims&, bool)> op;
  std::function<double(const Group&)> ref;
};

const std::vector<ReduceCase>& cases() {
  static const std::vector<ReduceCase> c = {
      {"sum", [](auto& t, auto& d, bool k) { return sum(t, d, k); }, g_sum},
      {"mean", [](auto& t, auto& d, bool k) { return mean(t, d, k); }, g_mean},
      {"prod", [](auto& t, auto& d, bool k) { return prod(t, d, k); },
       [](const Group& g) { return std::accumulate(g.begin(), g.end(), 1.0, std::multiplies<double>()); }},
      {"amax", [](auto& t, auto& d, bool k) { return amax(t, d, k); }, g_max},
      {"amin", [](auto& t, auto& d, bool k) { return amin(t, d, k); }, g_min},
      {"var", [](auto& t, auto& d, bool k) { return var(t, d, 1, k); }, g_var},
      {"std", [](auto& t, auto& d, bool k) { return flambeau::std(t, d, 1, k); }, [](const Group& g) { return std::sqrt(g_var(g)); }},
      {"norm2", [](auto& t, auto& d, bool k) { return norm(t, 2, d, k); },
       [](const Group& g) { double s = 0; for (double x : g) s += x * x; return std::sqrt(s); }},
      {"norm1", [](auto& t, auto& d, bool k) { return norm(t, 1, d, k); },
       [](const Group& g) { double s = 0; for (double x : g) s += std::fabs(x); return s; }},
      {"norminf", [](auto& t, auto& d, bool k) { return norm(t, INFINITY, d, k); },
       [](const Group& g) { double s = 0; for (double x : g) s = std::max(s, std::fabs(x)); return s; }},
      {"logsumexp", [](auto& t, auto& d, bool k) { return logsumexp(t, d, k); },
       [](const Group& g) { double m = g_max(g), s = 0; for (double x : g) s += std::exp(x - m); return m + std::log(s); }},
  };
  return c;
}

const Dims kShape = {5, 67, 33};
const Dims kDimSets[] = {{}, {0}, {1}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}};

TEST(Reduce, FloatDtypesDimsAndLayouts) {
  for (const ReduceCase& c : cases())
    for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16})
      for (const Dims& dims : kDimSets)
        for (Layout layout : kAllLayouts)
          for (bool keepdim : {false, true}) {
            const bool is_prod = std::string(c.name) == "prod";
            Tensor x = random_tensor(kShape, dt, layout, 5, is_prod ? 0.9 : -2, is_prod ? 1.1 : 2);
            Tensor y = c.op(x, dims, keepdim);
            ASSERT_EQ(y.dtype(), dt) << c.name;
            Tensor shape_ref = sum(zeros(kShape), dims, keepdim);
            ASSERT_EQ(y.sizes(), shape_ref.sizes()) << c.name << " " << shape_str(dims);
            std::vector<double> ref = ref_reduce(values(x), kShape, dims, c.ref);
            const double tol = dt == kFloat64 ? 1e-10 : dt == kFloat32 ? 2e-5 : 2 * rtol_for(dt);
            EXPECT_TRUE(all_close(values(y), values(from_vector<double>(ref).to(dt)), tol, tol))
                << c.name << " " << dtype_name(dt) << " dims " << shape_str(dims) << " " << layout_name(layout);
          }
}

TEST(Reduce, IntegerAndBoolInputs) {
  for (DType dt : {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64})
    for (const Dims& dims : kDimSets) {
      Tensor x = random_tensor(kShape, dt, Layout::Transposed, 9, dt == kUInt8 || dt == kBool ? 0 : -5, 5);
      std::vector<double> v = values(x);
      Tensor s = sum(x, dims);
      EXPECT_EQ(s.dtype(), kInt64);
      EXPECT_EQ(values(s), ref_reduce(v, kShape, dims, g_sum)) << dtype_name(dt);
      Tensor m = amax(x, dims);
      EXPECT_EQ(m.dtype(), dt);
      EXPECT_EQ(values(m), ref_reduce(v, kShape, dims, g_max)) << dtype_name(dt);
      EXPECT_EQ(values(amin(x, dims)), ref_reduce(v, kShape, dims, g_min));
      EXPECT_EQ(values(count_nonzero(x, dims)),
                ref_reduce(v, kShape, dims, [](const Group& g) { double n = 0; for (double e : g) n += e != 0; return n; }));
      EXPECT_EQ(values(any(x, dims)),
                ref_reduce(v, kShape, dims, [](const Group& g) { for (double e : g) if (e != 0) return 1.0; return 0.0; }));
      EXPECT_EQ(values(all(x, dims)),
                ref_reduce(v, kShape, dims, [](const Group& g) { for (double e : g) if (e == 0) return 0.0; return 1.0; }));
    }
  EXPECT_THROW(mean(arange(4)), TypeError);
  EXPECT_EQ(values(mean(arange(4), {}, false, kFloat64)), (std::vector<double>{1.5}));
  EXPECT_EQ(prod(from_vector<int32_t>({2, 3, 4})).item<int64_t>(), 24);
  EXPECT_EQ(any(from_vector<uint8_t>({0, 3})).dtype(), kUInt8);
}

TEST(Reduce, MaxMinWithIndices) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt32})
    for (int64_t dim : {0, 1, 2, -1})
      for (Layout layout : kAllLayouts) {
        Tensor x = random_tensor(kShape, dt, layout, 13, -20, 20);
        auto [v, i] = max(x, dim);
        auto [vn, in] = min(x, dim, true);
        ASSERT_EQ(i.dtype(), kInt64);
        ASSERT_EQ(v.dtype(), dt);
        // The index points at the value, and it is the first such index.
        Tensor xv = x.to(kFloat64);
        const int64_t d = dim < 0 ? dim + 3 : dim;
        std::vector<double> vals = values(v), idx = values(i), vals_n = values(vn), idx_n = values(in);
        std::vector<double> ref_max = ref_reduce(values(x), kShape, {dim}, g_max);
        std::vector<double> ref_first = ref_reduce(values(x), kShape, {dim}, [](const Group& g) {
          return double(std::max_element(g.begin(), g.end()) - g.begin());
        });
        std::vector<double> ref_first_min = ref_reduce(values(x), kShape, {dim}, [](const Group& g) {
          return double(std::min_element(g.begin(), g.end()) - g.begin());
        });
        EXPECT_EQ(vals, ref_max);
        EXPECT_EQ(idx, ref_first) << dtype_name(dt) << " dim " << dim;
        EXPECT_EQ(idx_n, ref_first_min);
        EXPECT_EQ(values(argmax(x, dim)), ref_first);
        EXPECT_EQ(values(argmin(x, dim)), ref_first_min);
        EXPECT_EQ(in.dim(), 3);
        EXPECT_EQ(in.size(d), 1);
        (void)vals_n;
      }
  // Over all elements, NaN wins and ties give the first index.
  Tensor t = from_vector<float>({1, 5, 5, NAN, 2, NAN});
  EXPECT_EQ(argmax(t).item<int64_t>(), 3);
  EXPECT_EQ(argmin(t).item<int64_t>(), 3);
  EXPECT_EQ(argmax(from_vector<float>({1, 5, 5})).item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(max(t).item<double>()));
  EXPECT_EQ(argmax(arange(6).reshape({2, 3}), {}, true).sizes(), (Dims{1, 1}));
}

TEST(Reduce, SpecialValuesAndEmpty) {
  Tensor x = from_vector<float>({1, INFINITY, 3});
  EXPECT_EQ(sum(x).item<double>(), INFINITY);
  EXPECT_TRUE(std::isnan(sum(from_vector<float>({INFINITY, -INFINITY})).item<double>()));
  EXPECT_TRUE(std::isnan(amax(from_vector<float>({1, NAN, 3})).item<double>()));
  EXPECT_TRUE(std::isnan(amin(from_vector<double>({NAN, 1})).item<double>()));
  EXPECT_EQ(logsumexp(from_vector<float>({-INFINITY, -INFINITY}), {0}).item<double>(), -INFINITY);
  EXPECT_EQ(logsumexp(from_vector<float>({INFINITY, 1}), {0}).item<double>(), INFINITY);
  EXPECT_NEAR(logsumexp(from_vector<float>({1000, 1000}), {0}).item<double>(), 1000 + std::log(2.0), 1e-3);
  // Empty reductions: identities, NaN mean, errors for max.
  Tensor e = zeros({0, 4});
  EXPECT_EQ(values(sum(e, {0})), std::vector<double>(4, 0.0));
  EXPECT_EQ(values(prod(e, {0})), std::vector<double>(4, 1.0));
  EXPECT_TRUE(std::isnan(mean(e).item<double>()));
  EXPECT_EQ(sum(e, {1}).sizes(), (Dims{0}));
  EXPECT_THROW(amax(e), ValueError);
  EXPECT_THROW(amax(e, {0}), IndexError);
  EXPECT_EQ(amax(e, {1}).sizes(), (Dims{0}));
  EXPECT_THROW(argmax(e), ValueError);
  EXPECT_THROW(max(e, 0), IndexError);
  // 0-dim inputs reduce to themselves.
  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(sum(s).item<double>(), 2.5);
  EXPECT_EQ(sum(s, {0}).dim(), 0);
  EXPECT_EQ(argmax(s).item<int64_t>(), 0);
  EXPECT_EQ(amax(s, {-1}, true).dim(), 0);
  // Bad dims.
  EXPECT_THROW(sum(ones({2, 3}), {2}), IndexError);
  EXPECT_THROW(sum(ones({2, 3}), {1, -1}), ValueError);
}

TEST(Reduce, LongRowsAndColumnsAreAccurate) {
  // 1M ones sum exactly; a long column of 0.1 stays close to the double sum.
  EXPECT_EQ(sum(ones({1 << 20})).item<double>(), double(1 << 20));
  Tensor col = full({200000, 3}, 0.1);
  std::vector<double> s = values(sum(col, {0}));
  for (double v : s) EXPECT_NEAR(v, 200000 * double(0.1f), 1e-2);
  EXPECT_NEAR(sum(full({3000000}, 0.1)).item<double>(), 3000000 * double(0.1f), 0.05);
}

TEST(Softmax, AgainstReferenceAllDimsAndDtypes) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16})
    for (int64_t dim : {0, 1, 2, -1})
      for (Layout layout : kAllLayouts)
        for (bool log : {false, true}) {
          Tensor x = random_tensor(kShape, dt, layout, 17, -10, 10);
          Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
          ASSERT_EQ(y.dtype(), dt);
          ASSERT_EQ(y.sizes(), kShape);
          // Reference: reduce along dim for the normaliser, then map every element.
          const int64_t d = dim < 0 ? dim + 3 : dim;
          std::vector<double> v = values(x), ref(v.size());
          Dims st = contiguous_strides(kShape);
          for (size_t i = 0; i < v.size(); ++i) {
            const int64_t pos = (int64_t(i) / st[d]) % kShape[d];
            const int64_t base = int64_t(i) - pos * st[d];
            double m = -INFINITY, s = 0;
            for (int64_t k = 0; k < kShape[d]; ++k) m = std::max(m, v[size_t(base + k * st[d])]);
            for (int64_t k = 0; k < kShape[d]; ++k) s += std::exp(v[size_t(base + k * st[d])] - m);
            ref[i] = log ? v[i] - m - std::log(s) : std::exp(v[i] - m) / s;
          }
          const double tol = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : 2 * rtol_for(dt);
          EXPECT_TRUE(all_close(values(y), values(from_vector<double>(ref).to(dt)), tol, log ? tol : tol * 0.1))
              << dtype_name(dt) << " dim " << dim << " " << layout_name(layout) << (log ? " log" : "");
        }
  // Stable for large inputs; a row of -inf is NaN as in PyTorch; ints are refused.
  std::vector<double> big = values(softmax(from_vector<float>({1000, 1000}), 0));
  EXPECT_EQ(big, (std::vector<double>{0.5, 0.5}));
  EXPECT_TRUE(std::isnan(values(softmax(from_vector<float>({-INFINITY, -INFINITY}), 0))[0]));
  EXPECT_EQ(values(softmax(from_vector<float>({-INFINITY, 0}), 0)), (std::vector<double>{0, 1}));
  EXPECT_THROW(softmax(arange(3), 0), TypeError);
  EXPECT_EQ(softmax(arange(3), 0, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(softmax(scalar_tensor(3.0), 0).item<double>(), 1.0);
  EXPECT_EQ(softmax(zeros({0, 5}), 1).sizes(), (Dims{0, 5}));
}

// Every reduction and softmax gives the same bits with 1 and with 2 threads.
TEST(Determinism, ReductionsBitwiseIdenticalAcrossThreadCounts) {
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"sum_all", [](const Tensor& t) { return sum(t); }},
      {"sum_last", [](const Tensor& t) { return sum(t, {-1}); }},
      {"sum_first", [](const Tensor& t) { return sum(t, {0}); }},
      {"mean", [](const Tensor& t) { return mean(t, {1}); }},
      {"prod", [](const Tensor& t) { return prod(t, {0}); }},
      {"amax", [](const Tensor& t) { return amax(t); }},
      {"amin_last", [](const Tensor& t) { return amin(t, {-1}); }},
      {"max_dim", [](const Tensor& t) { return max(t, 1).first; }},
      {"argmax", [](const Tensor& t) { return argmax(t); }},
      {"var", [](const Tensor& t) { return var(t, {1}); }},
      {"std_all", [](const Tensor& t) { return flambeau::std(t); }},
      {"norm", [](const Tensor& t) { return norm(t); }},
      {"logsumexp", [](const Tensor& t) { return logsumexp(t, {-1}); }},
      {"count_nonzero", [](const Tensor& t) { return count_nonzero(t); }},
      {"softmax", [](const Tensor& t) { return softmax(t, -1); }},
      {"softmax_dim0", [](const Tensor& t) { return softmax(t, 0); }},
      {"log_softmax", [](const Tensor& t) { return log_softmax(t, -1); }},
  };
  const int saved = get_num_threads();
  for (const Dims& shape : {Dims{3, 400000}, Dims{2000, 333}, Dims{70001, 2}})
    for (DType dt : {kFloat32, kBFloat16, kFloat64}) {
      Tensor x = random_tensor(shape, dt, Layout::Contiguous, 99, -3, 3);
      for (auto& [name, op] : ops) {
        set_num_threads(1);
        Tensor one = op(x);
        set_num_threads(2);
        Tensor two = op(x);
        EXPECT_TRUE(bitwise_equal(one, two)) << name << " " << shape_str(shape) << " " << dtype_name(dt);
      }
    }
  set_num_threads(saved);
}

}  // namespace
}  // namespace flambeau::testing

namespace flambeau::testing {
namespace {

// Shapes big enough to split across threads and, for rows, into several fixed pieces.
TEST(Reduce, LargeShapesAcrossThreadChunksAndPieces) {
  for (const Dims& shape : {Dims{3, 150001}, Dims{70001, 3}, Dims{2, 300, 257}})
    for (Layout layout : {Layout::Contiguous, Layout::Transposed}) {
      Tensor x = random_tensor(shape, kFloat32, layout, 77, -2, 2);
      std::vector<double> v = values(x);
      for (const Dims& dims : {Dims{}, Dims{0}, Dims{-1}}) {
        EXPECT_TRUE(all_close(values(sum(x, dims)), ref_reduce(v, shape, dims, g_sum), 1e-6, 1e-3))
            << "sum " << shape_str(shape) << " " << shape_str(dims);
        EXPECT_EQ(values(amax(x, dims)), ref_reduce(v, shape, dims, g_max)) << shape_str(shape);
        EXPECT_EQ(values(amin(x, dims)), ref_reduce(v, shape, dims, g_min)) << shape_str(shape);
      }
      Tensor s = softmax(x, -1);
      std::vector<double> row_sums = values(sum(s.to(kFloat64), {-1}));
      for (double r : row_sums) EXPECT_NEAR(r, 1.0, 1e-5);
    }
}

}  // namespace
}  // namespace flambeau::testing
