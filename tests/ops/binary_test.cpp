// Binary, comparison, logical and ternary ops against double-precision references, with
// broadcasting, mixed dtypes, weak scalars, integer semantics and error cases.
#include <cmath>
#include <functional>

#include "test_util.h"

namespace flambeau::testing {
namespace {

struct BinaryCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  std::function<double(double, double)> ref;
  bool int_ok;  // defined on integer inputs with integer results
};

double py_floor_div(double a, double b) { return std::floor(a / b); }
double py_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}

const std::vector<BinaryCase>& cases() {
  static const std::vector<BinaryCase> c = {
      {"add", [](auto& a, auto& b) { return add(a, b); }, [](double a, double b) { return a + b; }, true},
      {"add_alpha", [](auto& a, auto& b) { return add(a, b, 3); }, [](double a, double b) { return a + 3 * b; }, true},
      {"sub", [](auto& a, auto& b) { return sub(a, b); }, [](double a, double b) { return a - b; }, true},
      {"mul", [](auto& a, auto& b) { return mul(a, b); }, [](double a, double b) { return a * b; }, true},
      {"div", [](auto& a, auto& b) { return div(a, b); }, [](double a, double b) { return a / b; }, false},
      {"div_floor", [](auto& a, auto& b) { return div(a, b, "floor"); }, py_floor_div, true},
      {"div_trunc", [](auto& a, auto& b) { return div(a, b, "trunc"); }, [](double a, double b) { return std::trunc(a / b); }, true},
      {"remainder", [](auto& a, auto& b) { return remainder(a, b); }, py_mod, true},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); }, [](double a, double b) { return std::max(a, b); }, true},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); }, [](double a, double b) { return std::min(a, b); }, true},
      {"atan2", [](auto& a, auto& b) { return atan2(a, b); }, [](double a, double b) { return std::atan2(a, b); }, false},
      {"pow", [](auto& a, auto& b) { return pow(abs(a), b); }, [](double a, double b) { return std::pow(std::fabs(a), b); }, true},
  };
  return c;
}

// Reference: broadcast both inputs to the output shape, apply ref, round to the dtype.
std::vector<double> expected(const BinaryCase& c, const Tensor& a, const Tensor& b, const Tensor& out) {
  std::vector<double> av = values(a.expand(out.sizes())), bv = values(b.expand(out.sizes())), r;
  for (size_t i = 0; i < av.size(); ++i) r.push_back(c.ref(av[i], bv[i]));
  return values(from_vector<double>(r).to(out.dtype()));
}

TEST(Binary, FloatDtypesLayoutsAndBroadcasting) {
  const std::pair<Dims, Dims> shapes[] = {{{37, 19}, {37, 19}}, {{37, 19}, {19}}, {{37, 1}, {1, 19}},
                                          {{300, 257}, {300, 257}}, {{4}, {}}, {{0, 3}, {3}}};
  for (const BinaryCase& c : cases())
    for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16})
      for (auto& [sa, sb] : shapes)
        for (Layout la : kAllLayouts) {
          Tensor a = random_tensor(sa, dt, la, 11, -4, 4);
          Tensor b = random_tensor(sb, dt, Layout::Strided, 12, 0.5, 4);  // divisors away from 0
          Tensor y = c.op(a, b);
          ASSERT_EQ(y.dtype(), dt);
          ASSERT_EQ(y.sizes(), broadcast_shapes(sa, sb, "test"));
          EXPECT_TRUE(all_close(values(y), expected(c, a, b, y), 2 * rtol_for(dt), dt == kFloat64 ? 1e-12 : rtol_for(dt) + 1e-6))
              << c.name << " " << dtype_name(dt) << " " << layout_name(la) << " " << shape_str(sa) << " " << shape_str(sb);
        }
}

TEST(Binary, IntegerDtypes) {
  for (const BinaryCase& c : cases())
    for (DType dt : {kUInt8, kInt8, kInt16, kInt32, kInt64})
      for (Layout la : kAllLayouts) {
        const bool is_unsigned = dt == kUInt8;
        Tensor a = random_tensor({23, 9}, dt, la, 21, is_unsigned ? 0 : -9, 10);
        Tensor b = random_tensor({9}, dt, Layout::Contiguous, 22, 1, 4);
        if (!is_unsigned) b = mul(b, from_vector<double>({1, -1, 1, -1, 1, -1, 1, -1, 1}).to(dt));
        Tensor y = c.op(a, b);
        if (!c.int_ok) {
          EXPECT_EQ(y.dtype(), kFloat32) << c.name;
          EXPECT_TRUE(all_close(values(y), expected(c, a, b, y), 2e-6, 1e-6)) << c.name << " " << dtype_name(dt);
          continue;
        }
        ASSERT_EQ(y.dtype(), dt) << c.name;
        if (std::string(c.name) == "pow") continue;  // |a| ** negative is checked below
        EXPECT_EQ(values(y), expected(c, a, b, y)) << c.name << " " << dtype_name(dt) << " " << layout_name(la);
      }
  // Integer powers, including PyTorch's results for negative exponents.
  Tensor base = from_vector<int64_t>({2, -3, 1, -1, -1, 2, 0});
  Tensor ex = from_vector<int64_t>({10, 3, -5, -3, -4, -1, 0});
  EXPECT_EQ(values(pow(base, ex)), (std::vector<double>{1024, -27, 1, -1, 1, 0, 1}));
  // Overflow wraps as in PyTorch.
  EXPECT_EQ(values(add(from_vector<int8_t>({127}), from_vector<int8_t>({1}))), (std::vector<double>{-128}));
  EXPECT_EQ(values(mul(from_vector<int64_t>({INT64_MAX}), from_vector<int64_t>({2}))), (std::vector<double>{-2}));
}

TEST(Binary, FloatSpecialCasesMatchPyTorch) {
  Tensor a = from_vector<float>({-3, 3, -0.0f, 5, 0, NAN});
  Tensor b = from_vector<float>({2, -2, 2, 0, 0, 1});
  std::vector<double> rem = values(remainder(a, b)), fd = values(div(a, b, "floor"));
  EXPECT_EQ(rem[0], 1);
  EXPECT_EQ(rem[1], -1);
  EXPECT_TRUE(std::signbit(rem[2]));
  EXPECT_TRUE(std::isnan(rem[3]));
  EXPECT_EQ(fd[0], -2);
  EXPECT_EQ(fd[1], -2);
  EXPECT_TRUE(fd[2] == 0 && std::signbit(fd[2]));
  EXPECT_EQ(fd[3], INFINITY);
  EXPECT_TRUE(std::isnan(fd[4]));
  // maximum / minimum propagate NaN from either side.
  Tensor m = maximum(from_vector<float>({1, NAN, 3}), from_vector<float>({NAN, 2, 1}));
  EXPECT_TRUE(std::isnan(values(m)[0]) && std::isnan(values(m)[1]));
  EXPECT_EQ(values(m)[2], 3);
  EXPECT_TRUE(std::isnan(values(minimum(from_vector<double>({1}), from_vector<double>({NAN})))[0]));
}

TEST(Binary, TypePromotionAndWeakScalars) {
  Tensor i64 = arange(4), i32 = arange(4, kInt32), f16 = ones({3}, kFloat16), b = from_vector<bool>({true, false});
  EXPECT_EQ((i64 + 2.5).dtype(), kFloat32);
  EXPECT_EQ((i32 + 2).dtype(), kInt32);
  EXPECT_EQ((i32 + scalar_tensor(2)).dtype(), kInt32);               // 0-dim int64 tensor: same category
  EXPECT_EQ((i64 + scalar_tensor(1.5, kFloat64)).dtype(), kFloat64);  // 0-dim float64: higher category
  EXPECT_EQ((f16 + 2.5).dtype(), kFloat16);
  EXPECT_EQ((b + 1).dtype(), kInt64);
  EXPECT_EQ((b + b).dtype(), kBool);
  EXPECT_EQ(div(i64, 2).dtype(), kFloat32);
  EXPECT_EQ(add(ones({2}, kFloat16), ones({2}, kBFloat16)).dtype(), kFloat32);
  EXPECT_EQ(add(ones({2}, kUInt8), ones({2}, kInt8)).dtype(), kInt16);
  EXPECT_EQ(values(i64 + 2.5), (std::vector<double>{2.5, 3.5, 4.5, 5.5}));
  // A float64 scalar is used at full precision on float64 tensors.
  EXPECT_EQ(values(zeros({1}, kFloat64) + 0.1)[0], 0.1);
  EXPECT_EQ(values(b + b), (std::vector<double>{1, 0}));
  EXPECT_EQ(values(b * from_vector<bool>({false, false})), (std::vector<double>{0, 0}));
}

TEST(Binary, Errors) {
  try {
    add(ones({3, 4}), ones({5}));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_STREQ(e.what(), "[add] shapes (3, 4) and (5,) cannot be broadcast");
  }
  EXPECT_THROW(sub(from_vector<bool>({true}), from_vector<bool>({true})), TypeError);
  EXPECT_THROW(div(arange(3), from_vector<int64_t>({1, 0, 2}), "floor"), Error);
  EXPECT_THROW(remainder(arange(3), 0), Error);
  EXPECT_THROW(div(ones({2}), ones({2}), "round"), ValueError);
  EXPECT_THROW(add(arange(3), arange(3), 1.5), TypeError);
}

TEST(Binary, InPlaceChecksBeforeWriting) {
  Tensor a = arange(6, kFloat32).reshape({2, 3});
  Tensor view = a.t();  // in-place through a transposed view
  view.add_(from_vector<float>({10, 20}));
  EXPECT_EQ(values(a), (std::vector<double>{10, 11, 12, 23, 24, 25}));
  Tensor i = arange(3);
  EXPECT_THROW(i.add_(1.5), TypeError);  // float result into int64
  EXPECT_EQ(values(i), (std::vector<double>{0, 1, 2}));
  Tensor small = ones({3});
  EXPECT_THROW(small.mul_(ones({2, 3})), ValueError);  // would need to grow
  EXPECT_EQ(values(small), (std::vector<double>{1, 1, 1}));
  Tensor f = ones({2}, kFloat32);
  f.add_(ones({2}, kFloat64));  // float64 result cast back into float32 is allowed
  EXPECT_EQ(values(f), (std::vector<double>{2, 2}));
  Tensor z = zeros({3}, kInt32);
  EXPECT_THROW(div_(z, 0, "floor"), Error);
  z = from_vector<int32_t>({7, -7, 8});
  div_(z, 2, "floor");
  EXPECT_EQ(values(z), (std::vector<double>{3, -4, 4}));
}

TEST(Compare, AllOpsAndPromotion) {
  Tensor a = random_tensor({17, 13}, kFloat32, Layout::Transposed, 3, -2, 2);
  Tensor b = random_tensor({13}, kInt64, Layout::Contiguous, 4, -2, 2);
  std::vector<double> av = values(a), bv = values(b.expand({17, 13}));
  const std::pair<Tensor, std::function<bool(double, double)>> ops[] = {
      {eq(a, b), [](double x, double y) { return x == y; }}, {ne(a, b), [](double x, double y) { return x != y; }},
      {lt(a, b), [](double x, double y) { return x < y; }},  {le(a, b), [](double x, double y) { return x <= y; }},
      {gt(a, b), [](double x, double y) { return x > y; }},  {ge(a, b), [](double x, double y) { return x >= y; }}};
  for (auto& [r, f] : ops) {
    ASSERT_EQ(r.dtype(), kBool);
    std::vector<double> rv = values(r);
    for (size_t i = 0; i < av.size(); ++i) ASSERT_EQ(rv[i], f(av[i], bv[i])) << i;
  }
  // NaN compares unequal to everything; comparing in the promoted type keeps 2.5 > 2.
  Tensor n = from_vector<float>({NAN});
  EXPECT_EQ(values(eq(n, n))[0], 0);
  EXPECT_EQ(values(ne(n, n))[0], 1);
  EXPECT_EQ(values(gt(from_vector<float>({2.5f}), 2))[0], 1);
  EXPECT_EQ(values(arange(3) == 1), (std::vector<double>{0, 1, 0}));
}

TEST(Logical, TruthValuesOfAnyDtype) {
  Tensor a = from_vector<float>({0, 1, NAN, 0}), b = from_vector<int64_t>({0, 0, 3, 5});
  EXPECT_EQ(values(logical_and(a, b)), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(values(logical_or(a, b)), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(values(logical_xor(a, b)), (std::vector<double>{0, 1, 0, 1}));
}

TEST(Ternary, AddcmulAddcdivLerpClampWhere) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    Tensor s = random_tensor({9, 7}, dt, Layout::Transposed, 1), t1 = random_tensor({7}, dt, Layout::Contiguous, 2);
    Tensor t2 = random_tensor({9, 1}, dt, Layout::Strided, 3, 0.5, 2);
    std::vector<double> sv = values(s), av = values(t1.expand({9, 7})), bv = values(t2.expand({9, 7}));
    std::vector<double> rm, rd, rl;
    for (size_t i = 0; i < sv.size(); ++i) {
      rm.push_back(sv[i] + 0.5 * av[i] * bv[i]);
      rd.push_back(sv[i] + 0.5 * av[i] / bv[i]);
      const double w = bv[i] / 2;
      rl.push_back(sv[i] + w * (av[i] - sv[i]));
    }
    const double tol = 4 * rtol_for(dt) + 1e-6;
    EXPECT_TRUE(all_close(values(addcmul(s, t1, t2, 0.5)), values(from_vector<double>(rm).to(dt)), tol, tol));
    EXPECT_TRUE(all_close(values(addcdiv(s, t1, t2, 0.5)), values(from_vector<double>(rd).to(dt)), tol, tol));
    EXPECT_TRUE(all_close(values(lerp(s, t1.expand({9, 7}), div(t2, 2).to(dt))), values(from_vector<double>(rl).to(dt)), tol, tol));
  }
  EXPECT_THROW(addcdiv(arange(3), arange(3), arange(3)), TypeError);

  Tensor x = from_vector<float>({1, NAN, 5, -2});
  std::vector<double> c = values(clamp(x, 0.0, 3.0));
  EXPECT_EQ(c[0], 1);
  EXPECT_TRUE(std::isnan(c[1]));
  EXPECT_EQ(c[2], 3);
  EXPECT_EQ(c[3], 0);
  EXPECT_EQ(values(clamp(x, 3.0, 2.0))[0], 2);  // min > max gives max
  EXPECT_EQ(values(clamp(x, {}, 0.0))[2], 0);
  EXPECT_EQ(values(clamp(x, from_vector<float>({2, 2, 2, 2}), {}))[0], 2);
  EXPECT_EQ(clamp(arange(4), 1, 2).dtype(), kInt64);
  EXPECT_EQ(values(clamp(arange(4), 1, 2)), (std::vector<double>{1, 1, 2, 2}));
  Tensor y = arange(4, kFloat32);
  y.clamp_(1, 2);
  EXPECT_EQ(values(y), (std::vector<double>{1, 1, 2, 2}));
  EXPECT_THROW(clamp(x, {}, {}), ValueError);

  Tensor cond = from_vector<bool>({true, false, true});
  Tensor w = where(cond, arange(3), from_vector<float>({10, 20, 30}));
  EXPECT_EQ(w.dtype(), kFloat32);
  EXPECT_EQ(values(w), (std::vector<double>{0, 20, 2}));
  EXPECT_EQ(values(where(cond.reshape({3, 1}), 1.0, 0.0)), (std::vector<double>{1, 0, 1}));
  EXPECT_THROW(where(arange(3), arange(3), arange(3)), TypeError);
}

}  // namespace
}  // namespace flambeau::testing

namespace flambeau::testing {
namespace {

TEST(Binary, InPlaceVariantsMatchOutOfPlace) {
  Tensor a = random_tensor({13, 7}, kFloat32, Layout::Contiguous, 31, 0.5, 3);
  Tensor b = random_tensor({7}, kFloat32, Layout::Contiguous, 32, 0.5, 3);
  const std::pair<std::function<Tensor(const Tensor&, const Tensor&)>, std::function<void(Tensor&, const Tensor&)>> ops[] = {
      {[](auto& x, auto& y) { return remainder(x, y); }, [](Tensor& x, auto& y) { x.remainder_(y); }},
      {[](auto& x, auto& y) { return pow(x, y); }, [](Tensor& x, auto& y) { x.pow_(y); }},
      {[](auto& x, auto& y) { return atan2(x, y); }, [](Tensor& x, auto& y) { x.atan2_(y); }},
      {[](auto& x, auto& y) { return floor_divide(x, y); }, [](Tensor& x, auto& y) { floor_divide_(x, y); }},
      {[](auto& x, auto& y) { return addcmul(x, y, y, 2); }, [](Tensor& x, auto& y) { addcmul_(x, y, y, 2); }},
      {[](auto& x, auto& y) { return addcdiv(x, y, y, 2); }, [](Tensor& x, auto& y) { addcdiv_(x, y, y, 2); }},
      {[](auto& x, auto& y) { return lerp(x, y, y); }, [](Tensor& x, auto& y) { lerp_(x, y, y); }},
      {[](auto& x, auto& y) { return clamp(x, y, {}); }, [](Tensor& x, auto& y) { x.clamp_(y); }},
  };
  for (auto& [out_of_place, in_place] : ops) {
    Tensor want = out_of_place(a, b);
    Tensor x = a.clone();
    void* before = x.data_ptr();
    in_place(x, b);
    EXPECT_EQ(x.data_ptr(), before);
    EXPECT_TRUE(bitwise_equal(x, want));
  }
  Tensor i = arange(4);
  EXPECT_THROW(i.atan2_(ones({4})), TypeError);  // float result into int64
  EXPECT_EQ(values(i), (std::vector<double>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace flambeau::testing

namespace flambeau::testing {
namespace {

TEST(Binary, InPlaceWithAnAliasingInput) {
  Tensor a = arange(9, kFloat32).reshape({3, 3});
  std::vector<double> av = values(a), at = values(a.t());
  a.add_(a.t());  // reads must see the old values
  std::vector<double> got = values(a);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(got[i], av[i] + at[i]);
  Tensor b = arange(6, kFloat32);
  b.slice(0, 1).copy_(b.slice(0, 0, 5));  // overlapping shift
  EXPECT_EQ(values(b), (std::vector<double>{0, 0, 1, 2, 3, 4}));
  std::ostringstream os;
  os << kBFloat16;
  EXPECT_EQ(os.str(), "flambeau.bfloat16");
}

}  // namespace
}  // namespace flambeau::testing
