// Unary ops against double-precision reference loops: every float dtype, every layout,
// sizes that cross SIMD tails and thread chunks, special values, integer and bool rules.
#include <cmath>
#include <functional>

#include "test_util.h"

namespace flambeau::testing {
namespace {

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
};

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
// silu and gelu at -inf: the limit 0 (their formulas give -inf * 0 = NaN).
double zero_at_minus_inf(double x, double y) { return x == -INFINITY ? 0.0 : y; }

const std::vector<UnaryCase>& cases() {
  static const std::vector<UnaryCase> c = {
      {"neg", [](const Tensor& t) { return neg(t); }, [](double x) { return -x; }},
      {"abs", [](const Tensor& t) { return abs(t); }, [](double x) { return std::fabs(x); }},
      {"sign", [](const Tensor& t) { return sign(t); }, [](double x) { return double((0 < x) - (x < 0)); }},
      {"exp", [](const Tensor& t) { return exp(t); }, [](double x) { return std::exp(x); }},
      {"exp2", [](const Tensor& t) { return exp2(t); }, [](double x) { return std::exp2(x); }},
      {"expm1", [](const Tensor& t) { return expm1(t); }, [](double x) { return std::expm1(x); }},
      {"log", [](const Tensor& t) { return log(t); }, [](double x) { return std::log(x); }},
      {"log2", [](const Tensor& t) { return log2(t); }, [](double x) { return std::log2(x); }},
      {"log10", [](const Tensor& t) { return log10(t); }, [](double x) { return std::log10(x); }},
      {"log1p", [](const Tensor& t) { return log1p(t); }, [](double x) { return std::log1p(x); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }, [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, [](double x) { return 1 / std::sqrt(x); }},
      {"reciprocal", [](const Tensor& t) { return reciprocal(t); }, [](double x) { return 1 / x; }},
      {"sin", [](const Tensor& t) { return sin(t); }, [](double x) { return std::sin(x); }},
      {"cos", [](const Tensor& t) { return cos(t); }, [](double x) { return std::cos(x); }},
      {"tan", [](const Tensor& t) { return tan(t); }, [](double x) { return std::tan(x); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](double x) { return std::tanh(x); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, sigmoid_ref},
      {"relu", [](const Tensor& t) { return relu(t); }, [](double x) { return x < 0 ? 0.0 : x; }},
      {"silu", [](const Tensor& t) { return silu(t); }, [](double x) { return zero_at_minus_inf(x, x * sigmoid_ref(x)); }},
      {"erf", [](const Tensor& t) { return erf(t); }, [](double x) { return std::erf(x); }},
      {"floor", [](const Tensor& t) { return floor(t); }, [](double x) { return std::floor(x); }},
      {"ceil", [](const Tensor& t) { return ceil(t); }, [](double x) { return std::ceil(x); }},
      {"round", [](const Tensor& t) { return round(t); }, [](double x) { return std::nearbyint(x); }},
      {"trunc", [](const Tensor& t) { return trunc(t); }, [](double x) { return std::trunc(x); }},
      {"gelu", [](const Tensor& t) { return gelu(t); },
       [](double x) { return zero_at_minus_inf(x, 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))); }},
      {"gelu_tanh", [](const Tensor& t) { return gelu(t, "tanh"); },
       [](double x) {
         return zero_at_minus_inf(x, 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))));
       }},
      {"softplus", [](const Tensor& t) { return softplus(t); },
       [](double x) { return x > 20 ? x : std::log1p(std::exp(x)); }},
  };
  return c;
}

// The expected output, rounded to the output dtype the way a cast would round it.
std::vector<double> expected(const UnaryCase& c, const Tensor& in, DType out_dt) {
  std::vector<double> ref;
  for (double x : values(in)) ref.push_back(c.ref(x));
  return values(from_vector<double>(ref).to(out_dt));
}

double atol_for(DType dt) { return dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-6 : rtol_for(dt); }

TEST(Unary, FloatDtypesLayoutsAndSizes) {
  const DType dtypes[] = {kFloat32, kFloat64, kBFloat16, kFloat16};
  const Dims shapes[] = {{37, 19}, {300, 257}, {5}, {}};
  for (const UnaryCase& c : cases())
    for (DType dt : dtypes)
      for (const Dims& shape : shapes)
        for (Layout layout : kAllLayouts) {
          Tensor x = random_tensor(shape, dt, layout, 7, -4, 4);
          Tensor y = c.op(x);
          ASSERT_EQ(y.dtype(), dt) << c.name;
          ASSERT_EQ(y.sizes(), shape) << c.name;
          EXPECT_TRUE(all_close(values(y), expected(c, x, dt), rtol_for(dt), atol_for(dt)))
              << c.name << " " << dtype_name(dt) << " " << layout_name(layout) << " " << shape_str(shape);
        }
}

// Every op of the schema (core/op_list.h), with no list to keep: each dtype and layout on the
// op's [lo, hi] agrees with the op on the same values in float64 rounded to the dtype (the
// double-precision references above and the OpInfo tests against PyTorch check the values).
TEST(Unary, EverySchemaOpAgreesWithItsFloat64Form) {
  int count = 0;
  auto check = [&](const char* name, Tensor (*op)(const Tensor&), double lo, double hi) {
    ++count;
    for (DType dt : {kFloat32, kBFloat16, kFloat16})
      for (Layout layout : kAllLayouts) {
        Tensor x = random_tensor({37, 19}, dt, layout, 11, lo, hi);
        Tensor y = op(x);
        ASSERT_EQ(y.dtype(), dt) << name;
        const std::vector<double> ref = values(op(x.to(kFloat64)).to(dt));
        EXPECT_TRUE(all_close(values(y), ref, rtol_for(dt), atol_for(dt)))
            << name << " " << dtype_name(dt) << " " << layout_name(layout);
      }
  };
#define FLB_CHECK_OP(name, kind, lo, hi) check(#name, [](const Tensor& t) { return flambeau::name(t); }, lo, hi);
  FLB_UNARY_OPS(FLB_CHECK_OP)
#undef FLB_CHECK_OP
  EXPECT_GE(count, 25);
}

TEST(Unary, EmptyInput) {
  for (const UnaryCase& c : cases()) {
    Tensor y = c.op(empty({0, 3}));
    EXPECT_EQ(y.sizes(), (Dims{0, 3})) << c.name;
  }
}

TEST(Unary, SpecialValues) {
  const double inf = INFINITY;
  const std::vector<double> special = {NAN, inf, -inf, 0.0, -0.0, 1e-40, -1e-40, 100.0, -100.0, 89.0, -89.0,
                                       0.5, -0.5, 1.5, 2.5, -2.5, 3.9999, 4.0, 1e30, -1e30};
  for (const UnaryCase& c : cases())
    for (DType dt : {kFloat32, kFloat64}) {
      Tensor x = from_vector<double>(special).to(dt);
      Tensor y = c.op(x);
      std::vector<double> ref = expected(c, x, dt), got = values(y);
      EXPECT_TRUE(all_close(got, ref, dt == kFloat32 ? 4e-6 : 1e-12, 1e-30)) << c.name << " " << dtype_name(dt);
      // Exact ops keep the sign of zero as PyTorch does.
      for (const char* exact : {"neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sqrt"})
        if (std::string(c.name) == exact)
          for (size_t i = 0; i < got.size(); ++i)
            if (got[i] == 0) EXPECT_EQ(std::signbit(got[i]), std::signbit(ref[i])) << c.name << " at " << special[i];
    }
}

TEST(Unary, SignOfNanAndZeroLikePyTorch) {
  Tensor s = sign(from_vector<float>({NAN, -0.0f, 0.0f, -2.5f, 2.5f}));
  EXPECT_EQ(values(s), (std::vector<double>{0, 0, 0, -1, 1}));
  EXPECT_FALSE(std::signbit(values(s)[1]));
  Tensor r = relu(from_vector<float>({NAN, -0.0f, -1.0f}));
  EXPECT_TRUE(std::isnan(values(r)[0]));
  EXPECT_TRUE(std::signbit(values(r)[1]));
}

TEST(Unary, IntegerTypesKeepTheirTypeOrBecomeFloat) {
  for (DType dt : {kUInt8, kInt8, kInt16, kInt32, kInt64})
    for (Layout layout : kAllLayouts) {
      Tensor x = random_tensor({33, 17}, dt, layout, 3, dt == kUInt8 ? 0 : -50, 50);
      std::vector<double> xv = values(x);
      Tensor n = abs(x), r = relu(x), f = floor(x), s = sign(x);
      EXPECT_EQ(n.dtype(), dt);
      EXPECT_EQ(f.dtype(), dt);
      for (size_t i = 0; i < xv.size(); ++i) {
        EXPECT_EQ(values(n)[i], std::fabs(xv[i]));
        EXPECT_EQ(values(r)[i], xv[i] < 0 ? 0 : xv[i]);
        EXPECT_EQ(values(f)[i], xv[i]);
        EXPECT_EQ(values(s)[i], double((0 < xv[i]) - (xv[i] < 0)));
      }
      Tensor e = exp(x);
      EXPECT_EQ(e.dtype(), kFloat32);
      std::vector<double> ref;
      for (double v : xv) ref.push_back(std::exp(v));
      EXPECT_TRUE(all_close(values(e), values(from_vector<double>(ref).to(kFloat32)), 2e-6, 0));
    }
  // Wrapping negation like PyTorch: -(-128) stays -128 in int8, -1 is 255 in uint8.
  EXPECT_EQ(values(neg(from_vector<int8_t>({-128, 5}))), (std::vector<double>{-128, -5}));
  EXPECT_EQ(values(neg(from_vector<uint8_t>({1, 0}))), (std::vector<double>{255, 0}));
  EXPECT_EQ(values(neg(from_vector<int64_t>({INT64_MIN})))[0], double(INT64_MIN));
}

TEST(Unary, BoolAndIntegerErrors) {
  Tensor b = from_vector<bool>({true, false});
  EXPECT_THROW(neg(b), TypeError);
  EXPECT_THROW(abs(b), TypeError);
  EXPECT_THROW(relu(b), TypeError);
  EXPECT_THROW(floor(b), TypeError);
  EXPECT_EQ(values(sign(b)), (std::vector<double>{1, 0}));
  EXPECT_EQ(sigmoid(b).dtype(), kFloat32);
  EXPECT_THROW(gelu(arange(3)), TypeError);
  EXPECT_THROW(silu(arange(3)), TypeError);
  EXPECT_THROW(softplus(arange(3)), TypeError);
  EXPECT_THROW(gelu(ones({2}), "fast"), ValueError);
  try {
    neg(b);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[neg]"), std::string::npos) << e.what();
  }
}

TEST(Unary, InPlace) {
  Tensor x = random_tensor({40, 30}, kFloat32, Layout::Transposed, 5);
  std::vector<double> before = values(x);
  Tensor same = x;
  exp_(x);
  EXPECT_EQ(same.data_ptr(), x.data_ptr());
  std::vector<double> ref;
  for (double v : before) ref.push_back(std::exp(v));
  EXPECT_TRUE(all_close(values(x), values(from_vector<double>(ref).to(kFloat32)), 2e-6, 0));
  // exp_ of an integer tensor would need a float result: refused, tensor untouched.
  Tensor i = arange(4);
  EXPECT_THROW(exp_(i), TypeError);
  EXPECT_EQ(values(i), (std::vector<double>{0, 1, 2, 3}));
}

TEST(Unary, PredicatesAndLogicalNot) {
  Tensor x = from_vector<float>({NAN, INFINITY, -INFINITY, 0.0f, 1.0f});
  EXPECT_EQ(values(isnan(x)), (std::vector<double>{1, 0, 0, 0, 0}));
  EXPECT_EQ(values(isinf(x)), (std::vector<double>{0, 1, 1, 0, 0}));
  EXPECT_EQ(values(isfinite(x)), (std::vector<double>{0, 0, 0, 1, 1}));
  EXPECT_EQ(values(logical_not(x)), (std::vector<double>{0, 0, 0, 1, 0}));
  EXPECT_EQ(isnan(arange(3)).dtype(), kBool);
  EXPECT_EQ(values(isfinite(arange(2))), (std::vector<double>{1, 1}));
}

}  // namespace
}  // namespace flambeau::testing

namespace flambeau::testing {
namespace {

// The float32 erf (and so gelu) is a fitted approximation: bound its error on a dense grid.
TEST(Unary, Float32ErfErrorBound) {
  Tensor x = linspace(-6, 6, 1200001, kFloat32);
  std::vector<double> xv = values(x), got = values(erf(x));
  double worst = 0;
  for (size_t i = 0; i < xv.size(); ++i) worst = std::max(worst, std::fabs(got[i] - std::erf(xv[i])));
  EXPECT_LT(worst, 2.5e-7);
}

// float32 tanh (a polynomial below 0.625, exp beyond): within 3 ulp of the float64 tanh
// everywhere on [-12, 12] (both branches, the switch, saturation), and the IEEE cases.
TEST(Unary, Float32TanhErrorBound) {
  Tensor x = linspace(-12, 12, 2400001, kFloat32);
  std::vector<double> xv = values(x), got = values(tanh(x));
  double worst = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double want = std::tanh(xv[i]);
    const double ulp = std::nextafter(float(std::fabs(want)), INFINITY) - float(std::fabs(want));
    worst = std::max(worst, std::fabs(got[i] - want) / ulp);
  }
  EXPECT_LE(worst, 3.0);
  const std::vector<double> edge = values(tanh(from_vector<float>({INFINITY, -INFINITY, NAN, -0.0f, 0.0f}, Dims{5})));
  EXPECT_EQ(edge[0], 1.0);
  EXPECT_EQ(edge[1], -1.0);
  EXPECT_TRUE(std::isnan(edge[2]));
  EXPECT_TRUE(edge[3] == 0 && std::signbit(edge[3]));
  EXPECT_TRUE(edge[4] == 0 && !std::signbit(edge[4]));
}

// float32 sin and cos (a reduction by pi/2 in three parts and polynomials below |x| = 4096,
// libm beyond): within 3 ulp of the float64 result, or 2^-40 where it is near 0 (the
// reduction's rounding), on [-5000, 5000] (both sides of the switch); IEEE cases.
TEST(Unary, Float32SinCosErrorBound) {
  Tensor x = linspace(-5000, 5000, 4000001, kFloat32);
  const std::vector<double> xv = values(x);
  for (bool cosine : {false, true}) {
    const std::vector<double> got = values(cosine ? cos(x) : sin(x));
    double worst = 0;
    for (size_t i = 0; i < xv.size(); ++i) {
      const double want = cosine ? std::cos(xv[i]) : std::sin(xv[i]);
      const double ulp = std::nextafter(float(std::fabs(want)), INFINITY) - float(std::fabs(want));
      worst = std::max(worst, std::fabs(got[i] - want) / std::max(ulp, std::ldexp(1.0, -40)));
    }
    EXPECT_LE(worst, 3.0) << (cosine ? "cos" : "sin");
  }
  const std::vector<double> s = values(sin(from_vector<float>({INFINITY, NAN, -0.0f, 1e30f}, Dims{4})));
  EXPECT_TRUE(std::isnan(s[0]) && std::isnan(s[1]));
  EXPECT_TRUE(s[2] == 0 && std::signbit(s[2]));
  EXPECT_EQ(s[3], double(std::sin(1e30f)));
  EXPECT_EQ(values(cos(from_vector<float>({-0.0f}, Dims{1})))[0], 1.0);
}

}  // namespace
}  // namespace flambeau::testing
