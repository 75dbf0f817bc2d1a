// Factories: empty/zeros/ones/full, arange, linspace, eye, the *_like forms, scalar_tensor,
// from_vector, item() and fill_, with expected values and dtypes taken from PyTorch 2.13.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

using namespace flambeau;
using flambeau::testing::values;
using flambeau::testing::error_of;
using flambeau::testing::contains;

namespace {
using V = std::vector<int64_t>;
using D = std::vector<double>;
const DType kAll[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

}  // namespace

TEST(Factory, EmptyZerosOnes) {
  for (DType dt : kAll) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor e = empty({2, 3}, dt);
    EXPECT_EQ(e.dtype(), dt);
    EXPECT_EQ(e.sizes().vec(), (V{2, 3}));
    EXPECT_EQ(e.strides().vec(), (V{3, 1}));
    EXPECT_EQ(e.storage_offset(), 0);
    EXPECT_TRUE(e.device() == kCPU);
    EXPECT_EQ(values(zeros({2, 3}, dt)), D(6, 0.0));
    EXPECT_EQ(values(ones({3, 2}, dt)), D(6, 1.0));
  }
  EXPECT_EQ(zeros({}).dim(), 0);
  EXPECT_EQ(zeros({}).item<double>(), 0.0);
  EXPECT_EQ(ones({0, 4}).numel(), 0);
  EXPECT_EQ(empty({5}).dtype(), kFloat32);
}

TEST(Factory, FullInfersDTypeFromScalar) {
  Tensor b = full({2, 2}, true);
  EXPECT_EQ(b.dtype(), kBool);
  EXPECT_EQ(values(b), D(4, 1.0));
  Tensor i = full({3}, 7);
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_EQ(values(i), D(3, 7.0));
  Tensor f = full({2}, 2.5);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(values(f), D(2, 2.5));
  Tensor x = full({2}, -2.7, kInt32);
  EXPECT_EQ(x.dtype(), kInt32);
  EXPECT_EQ(values(x), D(2, -2.0));
  EXPECT_EQ(values(full({2}, 3, kFloat64)), D(2, 3.0));
  EXPECT_EQ(values(full({1}, 0.1, kFloat64)), D(1, 0.1));
  EXPECT_EQ(values(full({1}, 0.1)), D(1, double(0.1f)));

  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.dtype(), kFloat32);
  EXPECT_FALSE(s.impl()->wrapped_number);
  EXPECT_EQ(scalar_tensor(3).dtype(), kInt64);
  EXPECT_EQ(scalar_tensor(false).dtype(), kBool);
  EXPECT_EQ(scalar_tensor(1.5, kFloat16).item<double>(), 1.5);
  Tensor w(2.5);  // a wrapped number keeps the Python float's double
  EXPECT_TRUE(w.impl()->wrapped_number);
  EXPECT_EQ(w.dtype(), kFloat64);
}

TEST(Factory, ArangeDTypeAndValues) {
  Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_EQ(values(a), (D{0, 1, 2, 3, 4}));
  EXPECT_EQ(values(arange(0, 5, 2)), (D{0, 2, 4}));
  EXPECT_EQ(arange(5.0).dtype(), kFloat32);
  EXPECT_EQ(arange(0, 5, 0.5).dtype(), kFloat32);
  EXPECT_EQ(values(arange(0, 1, 0.25)), (D{0.0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(values(arange(10, 0, -3)), (D{10, 7, 4, 1}));
  EXPECT_EQ(values(arange(-5, 5, 3)), (D{-5, -2, 1, 4}));
  EXPECT_EQ(values(arange(0, -7, -2)), (D{0, -2, -4, -6}));
  EXPECT_EQ(values(arange(1, 0, -0.3)),
            (D{1.0, 0.699999988079071, 0.4000000059604645, 0.10000000149011612}));
  Tensor tenth = arange(0, 1, 0.1);
  EXPECT_EQ(values(tenth), (D{0.0, 0.10000000149011612, 0.20000000298023224, 0.30000001192092896,
                              0.4000000059604645, 0.5, 0.6000000238418579, 0.699999988079071,
                              0.800000011920929, 0.8999999761581421}));
  EXPECT_EQ(values(arange(1, 2.5)), (D{1.0, 2.0}));
  EXPECT_EQ(values(arange(0.5, 3)), (D{0.5, 1.5, 2.5}));
  EXPECT_EQ(values(arange(-1.5, 1.5, 0.5)), (D{-1.5, -1.0, -0.5, 0.0, 0.5, 1.0}));
  Tensor d = arange(0, 1, 0.3, kFloat64);
  EXPECT_EQ(d.dtype(), kFloat64);
  EXPECT_EQ(values(d), (D{0.0, 0.3, 0.6, 0.8999999999999999}));
  Tensor i32 = arange(3, kInt32);
  EXPECT_EQ(i32.dtype(), kInt32);
  EXPECT_EQ(values(i32), (D{0, 1, 2}));
  EXPECT_EQ(values(arange(3, kFloat64)), (D{0, 1, 2}));
  EXPECT_EQ(arange(5, 5).sizes().vec(), (V{0}));
  EXPECT_EQ(arange(5, 5).dtype(), kInt64);
}

TEST(Factory, ArangeErrors) {
  EXPECT_TRUE(contains(error_of<ValueError>([] { arange(0, 5, 0); }), "step must be nonzero"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { arange(0.0, 5.0, 0.0); }), "step must be nonzero"));
  const std::string sign = "upper bound and lower bound inconsistent with step sign";
  EXPECT_TRUE(contains(error_of<ValueError>([] { arange(0, 5, -1); }), sign));
  EXPECT_TRUE(contains(error_of<ValueError>([] { arange(5, 0, 1); }), sign));
  EXPECT_TRUE(contains(error_of<ValueError>([] { arange(5.0, 0.0, 0.5); }), sign));
  EXPECT_TRUE(contains(error_of<ValueError>([] { arange(0, 5, -1); }), "[arange]"));
  EXPECT_THROW(arange(0.0, NAN), ValueError);
  EXPECT_THROW(arange(0.0, INFINITY), ValueError);
}

TEST(Factory, Linspace) {
  EXPECT_EQ(values(linspace(0, 1, 5)), (D{0.0, 0.25, 0.5, 0.75, 1.0}));
  EXPECT_EQ(linspace(0, 1, 5).dtype(), kFloat32);
  EXPECT_EQ(linspace(-1, 1, 0).sizes().vec(), (V{0}));
  EXPECT_EQ(values(linspace(3, 7, 1)), (D{3.0}));
  EXPECT_THROW(linspace(0, 1, -1), ValueError);
  // both endpoints are exact
  for (int64_t n : {2, 3, 7, 10, 101, 1000}) {
    std::vector<double> v = values(linspace(0.1, 0.7, n));
    EXPECT_EQ(v.front(), double(0.1f)) << n;
    EXPECT_EQ(v.back(), double(0.7f)) << n;
    std::vector<double> w = values(linspace(0.1, 0.7, n, kFloat64));
    EXPECT_EQ(w.front(), 0.1) << n;
    EXPECT_EQ(w.back(), 0.7) << n;
  }
  // torch: linspace(0.1, 0.7, 7) (float32); allow one float32 ulp
  EXPECT_TRUE(flambeau::testing::all_close(
      values(linspace(0.1, 0.7, 7)),
      {0.10000000149011612, 0.19999998807907104, 0.29999998211860657, 0.4000000059604645, 0.5,
       0.6000000238418579, 0.699999988079071},
      1.2e-7, 0));
  EXPECT_EQ(values(linspace(-2.5, 4.25, 10)), (D{-2.5, -1.75, -1.0, -0.25, 0.5, 1.25, 2.0, 2.75, 3.5, 4.25}));
  EXPECT_EQ(values(linspace(0, 1, 4, kFloat64)), (D{0.0, 0.3333333333333333, 0.6666666666666667, 1.0}));
  EXPECT_EQ(values(linspace(1, 0, 6, kFloat64)), (D{1.0, 0.8, 0.6, 0.4, 0.2, 0.0}));
  Tensor li = linspace(0, 10, 11, kInt64);
  EXPECT_EQ(li.dtype(), kInt64);
  EXPECT_EQ(values(li), (D{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(values(linspace(0, 1, 3, kFloat16)), (D{0.0, 0.5, 1.0}));
  // integer dtypes: torch truncates the ends to the dtype before stepping
  struct IntCase {
    double start, end;
    int64_t steps;
    D want;
  };
  const IntCase int_cases[] = {{0, 10, 4, {0, 3, 6, 10}},          {0, 10, 7, {0, 1, 3, 5, 6, 8, 10}},
                               {-5, 5, 4, {-5, -1, 1, 5}},         {0, 1, 5, {0, 0, 0, 0, 1}},
                               {0.5, 10.7, 5, {0, 2, 5, 7, 10}},   {-2.5, 3.9, 6, {-2, -1, 0, 1, 2, 3}},
                               {10, 0, 4, {10, 6, 3, 0}},          {3.5, 7, 1, {3}}};
  for (const IntCase& c : int_cases) {
    EXPECT_EQ(values(linspace(c.start, c.end, c.steps, kInt64)), c.want) << c.start << " " << c.end << " " << c.steps;
    EXPECT_EQ(values(linspace(c.start, c.end, c.steps, kInt32)), c.want) << c.start << " " << c.end << " " << c.steps;
  }
}

TEST(Factory, Eye) {
  Tensor e = eye(3);
  EXPECT_EQ(e.sizes().vec(), (V{3, 3}));
  EXPECT_EQ(e.dtype(), kFloat32);
  EXPECT_EQ(values(e), (D{1, 0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(values(eye(2, 4)), (D{1, 0, 0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(values(eye(3, 2)), (D{1, 0, 0, 1, 0, 0}));
  Tensor ei = eye(2, 2, kInt32);
  EXPECT_EQ(ei.dtype(), kInt32);
  EXPECT_EQ(values(ei), (D{1, 0, 0, 1}));
  EXPECT_EQ(values(eye(2, 2, kBool)), (D{1, 0, 0, 1}));
  EXPECT_EQ(eye(0).sizes().vec(), (V{0, 0}));
  EXPECT_EQ(eye(2, 0).sizes().vec(), (V{2, 0}));
  EXPECT_THROW(eye(-1), ValueError);
}

TEST(Factory, LikeForms) {
  Tensor base = arange(6).view({2, 3}).t();  // int64, (3, 2), not contiguous
  Tensor e = empty_like(base);
  EXPECT_EQ(e.sizes().vec(), (V{3, 2}));
  EXPECT_EQ(e.dtype(), kInt64);
  EXPECT_NE(e.storage(), base.storage());
  EXPECT_EQ(empty_like(base, kFloat16).dtype(), kFloat16);
  Tensor z = zeros_like(base, kFloat64);
  EXPECT_EQ(z.dtype(), kFloat64);
  EXPECT_EQ(values(z), D(6, 0.0));
  Tensor o = ones_like(base);
  EXPECT_EQ(o.dtype(), kInt64);
  EXPECT_EQ(values(o), D(6, 1.0));
  Tensor f = full_like(base, 2.5);  // keeps int64: 2.5 -> 2
  EXPECT_EQ(f.dtype(), kInt64);
  EXPECT_EQ(values(f), D(6, 2.0));
  EXPECT_EQ(values(full_like(base, 2.5, kFloat32)), D(6, 2.5));
  EXPECT_EQ(values(base), (D{0, 3, 1, 4, 2, 5}));  // untouched
}

TEST(Factory, ItemAndFromVector) {
  Tensor f = from_vector<float>({1.5f, -2.0f, 3.25f});
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_EQ(f.sizes().vec(), (V{3}));
  EXPECT_EQ(values(f), (D{1.5, -2.0, 3.25}));
  Tensor m = from_vector<int32_t>({1, 2, 3, 4, 5, 6}, Dims{2, 3});
  EXPECT_EQ(m.dtype(), kInt32);
  EXPECT_EQ(m.strides().vec(), (V{3, 1}));
  EXPECT_EQ(values(m.select(1, 2)), (D{3, 6}));
  EXPECT_THROW(from_vector<double>({1, 2, 3}, Dims{2, 2}), ValueError);
  EXPECT_EQ(from_vector<double>({}).numel(), 0);
  EXPECT_EQ(from_vector<uint8_t>({255}).item<int64_t>(), 255);

  Scalar s = f[2].item();
  EXPECT_TRUE(s.is_floating());
  EXPECT_EQ(s.to_double(), 3.25);
  EXPECT_EQ(f[1].item<int64_t>(), -2);
  Scalar i = m[1][0].item();
  EXPECT_TRUE(i.is_integral());
  EXPECT_EQ(i.to_int(), 4);
  Scalar b = from_vector<bool>({true}).item();
  EXPECT_TRUE(b.is_bool());
  EXPECT_TRUE(b.to_bool());
  EXPECT_EQ(from_vector<int64_t>({int64_t(1) << 62}).item<int64_t>(), int64_t(1) << 62);
  EXPECT_EQ(scalar_tensor(0.5, kBFloat16).item<double>(), 0.5);
  EXPECT_EQ(m.slice(0, 1).slice(1, 2).item<int>(), 6);  // one element, any dim
  EXPECT_THROW(f.item(), ValueError);
  EXPECT_THROW(empty({0}).item(), ValueError);
}

TEST(Factory, Fill) {
  Tensor f = zeros({2, 2});
  f.fill_(-3.7);
  EXPECT_EQ(values(f), D(4, double(-3.7f)));
  Tensor i = zeros({2}, kInt64);
  i.fill_(-3.7);
  EXPECT_EQ(values(i), (D{-3, -3}));
  Tensor b = zeros({2}, kBool);
  b.fill_(2);
  EXPECT_EQ(values(b), (D{1, 1}));
  Tensor h = zeros({3}, kFloat16);
  h.fill_(0.1);
  EXPECT_EQ(h[0].item<double>(), double(float(Half(0.1f))));
  // fill_ through a strided view only touches that view
  Tensor m = zeros({3, 4});
  m.slice(1, 1, {}, 2).fill_(5);
  EXPECT_EQ(values(m), (D{0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 5}));
  m.zero_();
  EXPECT_EQ(values(m), D(12, 0.0));
  Tensor& r = m.fill_(1);
  EXPECT_EQ(&r, &m);
  Tensor z = scalar_tensor(0.0);
  z.fill_(9);
  EXPECT_EQ(z.item<double>(), 9.0);
}

TEST(Factory, DevicesAndNegativeDims) {
  EXPECT_THROW(empty({2}, kFloat32, Device("cuda")), NotImplementedError);
  EXPECT_THROW(zeros({2}, kFloat32, Device("cuda:0")), NotImplementedError);
  EXPECT_THROW(full({2}, 1.0, {}, Device(DeviceType::CUDA, 1)), NotImplementedError);
  EXPECT_TRUE(contains(error_of<NotImplementedError>([] { empty({2}, kFloat32, Device("cuda")); }), "[empty]"));
  EXPECT_NO_THROW(empty({2}, kFloat32, Device("cpu")));
  Device d("cuda:1");
  EXPECT_EQ(d.type, DeviceType::CUDA);
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.str(), "cuda:1");
  EXPECT_EQ(Device("cpu").str(), "cpu");
  EXPECT_TRUE(Device("cpu") == kCPU);
  EXPECT_THROW(Device("tpu"), ValueError);

  const std::string msg = error_of<ValueError>([] { empty({2, -1}); });
  EXPECT_TRUE(contains(msg, "negative dimension -1")) << msg;
  EXPECT_TRUE(contains(msg, "(2, -1)")) << msg;
  EXPECT_THROW(zeros({-3}), ValueError);
  EXPECT_THROW(ones({1, -2}), ValueError);
  EXPECT_THROW(full({-1}, 1), ValueError);
}
