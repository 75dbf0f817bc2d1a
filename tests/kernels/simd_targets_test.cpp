// The SIMD kernels on every Highway target compiled into flambeau that this CPU runs (one
// test instance per target; a compiled target the CPU lacks is reported as skipped), on
// sizes that cross vector tails, against float64 references with error bounds derived from
// the maths (u = 2^-24, the float32 unit roundoff). Highway's target mock is reset after
// each test, so the suite passes in any order.
#include <hwy/targets.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "flambeau/core/generator.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/kernels/cpu/simd_gemm_small.h"
#include "flambeau/kernels/cpu/simd_norm.h"
#include "flambeau/kernels/cpu/simd_random.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

constexpr double u = 0x1p-24;
constexpr float kInf = std::numeric_limits<float>::infinity();
const int64_t kSizes[] = {1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 65, 127, 129, 1000, 1025, 4099};

// The targets in HWY_TARGETS (those foreach_target compiled), one bit each.
std::vector<int64_t> compiled_targets() {
  std::vector<int64_t> t;
  for (int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1) t.push_back(bits & -bits);
  return t;
}

std::string target_name(int64_t target) {
  std::string name = hwy::TargetName(target);
  if (name == "Unknown") name += std::to_string(__builtin_ctzll(uint64_t(target)));  // unique test names
  return name;
}

class SimdTargets : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(0);  // the CPU's own answer
    if ((hwy::SupportedTargets() & GetParam()) == 0)
      GTEST_SKIP() << target_name(GetParam()) << " not supported by this CPU";
    hwy::SetSupportedTargetsForTest(GetParam());
  }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }

  // The kernels just called were dispatched to this test's target.
  void expect_dispatched_here() {
    ASSERT_TRUE(hwy::GetChosenTarget().IsInitialized());
    const size_t index = hwy::GetChosenTarget().GetIndex();
    hwy::GetChosenTarget().Update(GetParam());
    EXPECT_EQ(index, hwy::GetChosenTarget().GetIndex()) << "dispatch did not pick " << target_name(GetParam());
  }
};

// n values in [lo, hi) (seeded by n), rounded to float.
std::vector<float> floats(int64_t n, double lo, double hi, uint64_t seed = 0) {
  std::vector<float> f;
  for (double v : random_values(n, seed * 1000003 + uint64_t(n), lo, hi, false)) f.push_back(float(v));
  return f;
}

// |got - want| <= bound, NaN matching NaN and infinities matching exactly.
::testing::AssertionResult near(double got, double want, double bound) {
  if (std::isnan(want) ? std::isnan(got) : std::isinf(want) ? got == want : std::fabs(got - want) <= bound)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " vs expected " << want << " (bound " << bound << ")";
}

double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double gelu(double x) { return std::isinf(x) ? (x > 0 ? x : 0.0) : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) {
  if (std::isinf(x)) return x > 0 ? x : 0.0;
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Unary kernels: |y - ref| <= k u (|ref| + 1) with k = 8 for one elementary function and 32
// for composites of a few (each step adds a few u). The first inputs are the edge values
// +-inf, NaN, +-0, whose results follow the rule written in the references: exp(-inf) = 0,
// sigmoid(+-inf) = 1 / 0, silu(-inf) = gelu(-inf) = 0, silu/gelu(+inf) = +inf, NaN -> NaN.
TEST_P(SimdTargets, UnaryKernels) {
  using kernels::UnaryOp;
  struct Case {
    UnaryOp op;
    const char* name;
    double (*ref)(double);
    double lo, hi, k;
  };
  const Case cases[] = {
      {UnaryOp::exp, "exp", [](double x) { return std::exp(x); }, -80, 80, 8},
      {UnaryOp::log, "log", [](double x) { return std::log(x); }, 1e-3, 1e3, 8},
      {UnaryOp::sqrt, "sqrt", [](double x) { return std::sqrt(x); }, 0, 100, 1},
      {UnaryOp::abs, "abs", [](double x) { return std::fabs(x); }, -5, 5, 0},
      {UnaryOp::relu, "relu", [](double x) { return x < 0 ? 0.0 : x; }, -5, 5, 0},
      {UnaryOp::floor, "floor", [](double x) { return std::floor(x); }, -50, 50, 0},
      {UnaryOp::erf, "erf", [](double x) { return std::erf(x); }, -5, 5, 8},
      {UnaryOp::sigmoid, "sigmoid", sigmoid, -30, 30, 32},
      {UnaryOp::silu, "silu", [](double x) { return std::isinf(x) ? (x > 0 ? x : 0.0) : x * sigmoid(x); }, -30, 30,
       32},
      {UnaryOp::gelu_erf, "gelu", gelu, -8, 8, 32},
      {UnaryOp::gelu_tanh, "gelu_tanh", gelu_tanh, -8, 8, 32},
  };
  const float edges[] = {kInf, -kInf, std::nanf(""), -0.f, 0.f};
  for (const Case& c : cases) {
    for (int64_t n : kSizes) {
      std::vector<float> x = floats(n, c.lo, c.hi), y(size_t(n), -1.f);
      const bool edge_ok = c.op != UnaryOp::log && c.op != UnaryOp::sqrt;  // their domain: x >= 0
      for (size_t i = 0; edge_ok && i < 5 && i < x.size(); ++i) x[i] = edges[i];
      kernels::unary_f32(c.op, x.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double want = c.ref(x[size_t(i)]);
        ASSERT_TRUE(near(y[size_t(i)], want, c.k * u * (std::fabs(want) + 1)))
            << c.name << " n=" << n << " at " << i << " x=" << x[size_t(i)];
      }
    }
  }
  expect_dispatched_here();
}

// add/sub/mul/div are correctly rounded (float(double op) is the IEEE result); maximum and
// minimum return an operand and propagate NaN.
TEST_P(SimdTargets, BinaryKernelsAreExact) {
  using kernels::SimdBinaryOp;
  const std::pair<SimdBinaryOp, double (*)(double, double)> cases[] = {
      {SimdBinaryOp::add, [](double a, double b) { return a + b; }},
      {SimdBinaryOp::sub, [](double a, double b) { return a - b; }},
      {SimdBinaryOp::mul, [](double a, double b) { return a * b; }},
      {SimdBinaryOp::div, [](double a, double b) { return a / b; }},
      {SimdBinaryOp::maximum, [](double a, double b) { return std::isnan(a + b) ? NAN : std::max(a, b); }},
      {SimdBinaryOp::minimum, [](double a, double b) { return std::isnan(a + b) ? NAN : std::min(a, b); }},
  };
  for (const auto& [op, ref] : cases) {
    for (int64_t n : kSizes) {
      std::vector<float> a = floats(n, -10, 10, 1), b = floats(n, 0.5, 10, 2), y(static_cast<size_t>(n));
      a[0] = std::nanf("");
      kernels::binary_f32(op, a.data(), b.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float want = float(ref(a[size_t(i)], b[size_t(i)]));
        ASSERT_TRUE(std::isnan(want) ? std::isnan(y[size_t(i)]) : y[size_t(i)] == want)
            << "op " << int(op) << " n=" << n << " at " << i;
      }
    }
  }
  expect_dispatched_here();
}

// sum: float32 partial sums of at most 1024 terms (simd.h), then double, so
// |sum - exact| <= (min(n, 1024) + 1) u sum|x|. max/min are exact.
TEST_P(SimdTargets, ReductionKernels) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = floats(n, -3, 3);
    double exact = 0, abs_sum = 0, mx = -INFINITY, mn = INFINITY;
    for (float v : x) exact += v, abs_sum += std::fabs(v), mx = std::max<double>(mx, v), mn = std::min<double>(mn, v);
    EXPECT_TRUE(near(kernels::sum_f32(x.data(), n), exact, double(std::min<int64_t>(n, 1024) + 1) * u * abs_sum))
        << "n=" << n;
    EXPECT_EQ(kernels::max_f32(x.data(), n), float(mx)) << "n=" << n;
    EXPECT_EQ(kernels::min_f32(x.data(), n), float(mn)) << "n=" << n;
    std::vector<float> with_nan = x;
    with_nan[size_t(n - 1)] = std::nanf("");
    EXPECT_TRUE(std::isnan(kernels::max_f32(with_nan.data(), n)) && std::isnan(kernels::min_f32(with_nan.data(), n)));
  }
  expect_dispatched_here();
}

// softmax / log_softmax of a row: the row sum adds k = min(n, 1024) + 8 u of relative error
// (the sum bound above plus a few u for exp) and the rounding of x - max to float |x - max| u,
// so |y - ref| <= (k + |x - max|) u ref for softmax and k u (1 + |ref|) for log_softmax. The
// fast exp-shift-sum of the attention kernels: ~2e-7 per element (4u) plus the same rounding
// of its argument, a float sum in fixed order.
TEST_P(SimdTargets, SoftmaxKernels) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = floats(n, -20, 20);
    double mx = -INFINITY, s = 0;
    for (float v : x) mx = std::max<double>(mx, v);
    for (float v : x) s += std::exp(v - mx);
    const double k = double(std::min<int64_t>(n, 1024) + 8);
    std::vector<float> y(static_cast<size_t>(n)), ly(static_cast<size_t>(n));
    kernels::softmax_row_f32(x.data(), y.data(), n, false);
    kernels::softmax_row_f32(x.data(), ly.data(), n, true);
    for (int64_t i = 0; i < n; ++i) {
      const double p = std::exp(x[size_t(i)] - mx) / s, lp = x[size_t(i)] - mx - std::log(s);
      ASSERT_TRUE(near(y[size_t(i)], p, (k + mx - x[size_t(i)]) * u * p)) << "softmax n=" << n << " at " << i;
      ASSERT_TRUE(near(ly[size_t(i)], lp, k * u * (1 + std::fabs(lp)))) << "log_softmax n=" << n << " at " << i;
    }
    std::vector<float> e = x;
    const float total = kernels::exp_shift_sum_fast_f32(e.data(), n, float(mx));
    for (int64_t i = 0; i < n; ++i) {
      const double want = std::exp(double(x[size_t(i)]) - float(mx));
      ASSERT_TRUE(near(e[size_t(i)], want, (4 + mx - x[size_t(i)]) * u * want)) << "n=" << n << " at " << i;
    }
    EXPECT_TRUE(near(total, s, (double(n) + 4) * u * s)) << "exp_shift_sum n=" << n;
  }
  expect_dispatched_here();
}

// LayerNorm / RMSNorm rows: mean and variance carry k = min(n, 1024) + 8 u relative error,
// so |y - ref| <= k u (|(x - mean) rstd w| + |b| + 1 + max|x| rstd w) (the last term: the
// mean's error, scaled).
TEST_P(SimdTargets, NormKernels) {
  for (int64_t n : kSizes) {
    const std::vector<float> x = floats(n, -4, 6), w = floats(n, 0.5, 2, 3), b = floats(n, -1, 1, 4);
    for (bool rms : {false, true}) {
      double mean = 0, var = 0;
      if (!rms) {
        for (float v : x) mean += v;
        mean /= double(n);
      }
      for (float v : x) var += (v - mean) * (v - mean);
      var /= double(n);
      const double rstd = 1 / std::sqrt(var + 1e-5), k = double(std::min<int64_t>(n, 1024) + 8);
      std::vector<float> y(static_cast<size_t>(n));
      float m_out = 0, r_out = 0;
      kernels::norm_row_forward(x.data(), w.data(), rms ? nullptr : b.data(), y.data(), n, rms, 1e-5, &m_out, &r_out);
      EXPECT_TRUE(near(r_out, rstd, k * u * rstd)) << "rstd rms=" << rms << " n=" << n;
      if (!rms) EXPECT_TRUE(near(m_out, mean, k * u * 6)) << "mean n=" << n;
      for (int64_t i = 0; i < n; ++i) {
        const double scaled = (x[size_t(i)] - mean) * rstd * w[size_t(i)], bias = rms ? 0.0 : b[size_t(i)];
        ASSERT_TRUE(near(y[size_t(i)], scaled + bias, k * u * (std::fabs(scaled) + std::fabs(bias) + 1 + 6 * rstd * w[size_t(i)])))
            << "rms=" << rms << " n=" << n << " at " << i;
      }
    }
  }
  expect_dispatched_here();
}

// The attention small GEMM (A as is and transposed, beta 0 and 0.5) and dot_rows: a dot
// product of k terms is within (k + 2) u sum|a b| (+ u |beta c|) of the exact value.
TEST_P(SimdTargets, SmallGemmKernels) {
  const std::array<int64_t, 3> shapes[] = {{1, 1, 1}, {3, 17, 5}, {7, 33, 64}, {16, 65, 31}, {5, 129, 17}};
  for (const auto& [m, n, k] : shapes) {
    const std::vector<float> a = floats(m * k, -2, 2, 5), b = floats(k * n, -2, 2, 6), c0 = floats(m * n, -2, 2, 7);
    for (bool trans : {false, true}) {
      for (float beta : {0.f, 0.5f}) {
        std::vector<float> c = c0;
        if (beta == 0) std::fill(c.begin(), c.end(), std::nanf(""));  // beta == 0 never reads c
        // A[i, e]: row-major [m, k], or the transpose of a row-major [k, m].
        const int64_t rs = trans ? 1 : k, cs = trans ? m : 1;
        kernels::gemm_small_f32(m, n, k, 1.5f, a.data(), rs, cs, b.data(), n, beta, c.data(), n);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double exact = 0, mag = 0;
            for (int64_t e = 0; e < k; ++e) {
              const double p = double(a[size_t(i * rs + e * cs)]) * b[size_t(e * n + j)];
              exact += p, mag += std::fabs(p);
            }
            const double want = 1.5 * exact + beta * c0[size_t(i * n + j)];
            const double bound = double(k + 2) * u * (1.5 * mag + std::fabs(beta * c0[size_t(i * n + j)]));
            ASSERT_TRUE(near(c[size_t(i * n + j)], want, bound))
                << "gemm " << m << "x" << n << "x" << k << " trans=" << trans << " beta=" << beta;
          }
      }
    }
    // dot_rows: c[i, j] = alpha * a row i . b row j, b as [n, k].
    std::vector<float> c(size_t(m * n));
    kernels::dot_rows_f32(m, n, k, 0.5f, a.data(), k, b.data(), k, c.data(), n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, mag = 0;
        for (int64_t e = 0; e < k; ++e) {
          const double p = double(a[size_t(i * k + e)]) * b[size_t(j * k + e)];
          exact += p, mag += std::fabs(p);
        }
        ASSERT_TRUE(near(c[size_t(i * n + j)], 0.5 * exact, double(k + 2) * u * 0.5 * mag)) << "dot_rows";
      }
  }
  expect_dispatched_here();
}

// Random kernels. Philox words are integers: bitwise equal to the scalar Philox of
// core/generator on every target, so every target draws the same stream. rand's [0, 1)
// values (from 0, span 1) are exact, so the same on every target too. Box-Muller goes
// through log/sin/cos, whose last bits may differ between targets (FMA or not): within
// 16 u (|z| + 1) of the float64 transform of the same words, plus r * 3u * t for the float
// angle t = 2 pi u1 (float(2 pi) and the product round).
TEST_P(SimdTargets, RandomKernels) {
  const std::array<uint32_t, 2> key = {0x12345678u, 0x9abcdef0u};
  for (int64_t blocks : {1, 3, 5, 17, 100}) {
    const uint64_t counter = 0xFFFFFFF0ull;  // crosses into the high counter word
    std::vector<uint32_t> words(size_t(4 * blocks));
    kernels::philox_words(counter, key, words.data(), blocks);
    for (int64_t bi = 0; bi < blocks; ++bi) {
      const uint64_t ctr = counter + uint64_t(bi);
      const auto want = philox4x32_10({uint32_t(ctr), uint32_t(ctr >> 32), 0, 0}, key);
      for (int l = 0; l < 4; ++l) ASSERT_EQ(words[size_t(4 * bi + l)], want[size_t(l)]) << "block " << bi;
    }
    const int64_t n = 4 * blocks - 1;  // odd: Box-Muller's last pair is half used
    std::vector<float> uni(static_cast<size_t>(n)), normal(static_cast<size_t>(n));
    kernels::uniform_f32(words.data(), uni.data(), n, 0.f, 1.f, 1.f);
    kernels::box_muller_f32(words.data(), normal.data(), n, 0.f, 1.f);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(uni[size_t(i)], float(words[size_t(i)] >> 8) * 0x1p-24f) << "uniform at " << i;
      const int64_t j = i & ~int64_t(1);
      const double u0 = double(words[size_t(j)] >> 8) * 0x1p-24, u1 = double(words[size_t(j + 1)] >> 8) * 0x1p-24;
      const double r = std::sqrt(-2 * std::log(1 - u0)), t = 2 * M_PI * u1;
      const double z = (i % 2 == 0) ? r * std::cos(t) : r * std::sin(t);
      ASSERT_TRUE(near(normal[size_t(i)], z, 16 * u * (std::fabs(z) + 1) + r * 3 * u * t)) << "box_muller at " << i;
    }
  }
  expect_dispatched_here();
}

INSTANTIATE_TEST_SUITE_P(Hwy, SimdTargets, ::testing::ValuesIn(compiled_targets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) { return target_name(info.param); });

}  // namespace
}  // namespace flambeau::testing
