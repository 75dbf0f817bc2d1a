// Tensor::str() against PyTorch 2.13's repr (with "torch." written "flambeau."): every
// expected string below was printed by torch for the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "test_util.h"

using namespace flambeau;

namespace {
Tensor f32(const std::vector<float>& v, std::optional<Dims> shape = {}) { return from_vector<float>(v, shape); }
// float(i) / d for i in [0, n): torch.arange(n, dtype=float32) / d
Tensor ramp(int64_t n, float d, Dims shape) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(float(i) / d);
  return from_vector<float>(v, shape);
}
}  // namespace

TEST(Print, FloatRanks) {
  EXPECT_EQ(f32({1.5f, -2.25f, 3.0f}).str(), "tensor([ 1.5000, -2.2500,  3.0000])");
  EXPECT_EQ(f32({1.5f, 2.0f, -3.125f, 4.0f}, Dims{2, 2}).str(),
            "tensor([[ 1.5000,  2.0000],\n"
            "        [-3.1250,  4.0000]])");
  EXPECT_EQ(ramp(24, 3.0f, {2, 3, 4}).str(),
            R"(tensor([[[0.0000, 0.3333, 0.6667, 1.0000],
         [1.3333, 1.6667, 2.0000, 2.3333],
         [2.6667, 3.0000, 3.3333, 3.6667]],

        [[4.0000, 4.3333, 4.6667, 5.0000],
         [5.3333, 5.6667, 6.0000, 6.3333],
         [6.6667, 7.0000, 7.3333, 7.6667]]]))");
  EXPECT_EQ(f32({1.0f, -2.5f}, Dims{2, 1}).str(), "tensor([[ 1.0000],\n        [-2.5000]])");
}

TEST(Print, NonContiguousInputs) {
  EXPECT_EQ(f32({1.5f, 2.0f, -3.125f, 4.0f}, Dims{2, 2}).t().str(),
            "tensor([[ 1.5000, -3.1250],\n"
            "        [ 2.0000,  4.0000]])");
  EXPECT_EQ(arange(12).to(kFloat32).view({3, 4}).slice(1, {}, {}, 2).str(),
            "tensor([[ 0.,  2.],\n        [ 4.,  6.],\n        [ 8., 10.]])");
  EXPECT_EQ(scalar_tensor(3.0).expand({2, 3}).str(), "tensor([[3., 3., 3.],\n        [3., 3., 3.]])");
  // float64 views that reshape to a strided 1-D view (the formatter reads a copy)
  Tensor d = from_vector<double>({1.5, 9.0, 1e-5, 9.0, 250.0, 9.0});
  EXPECT_EQ(d.slice(0, {}, {}, 2).str(), "tensor([1.5000e+00, 1.0000e-05, 2.5000e+02], dtype=flambeau.float64)");
  EXPECT_EQ(d.slice(0, 0, 1).expand({3}).str(), "tensor([1.5000, 1.5000, 1.5000], dtype=flambeau.float64)");
}

TEST(Print, IntegerValuedFloats) {
  EXPECT_EQ(f32({1, 2, -30}).str(), "tensor([  1.,   2., -30.])");
  EXPECT_EQ(zeros({2, 2}).str(), "tensor([[0., 0.],\n        [0., 0.]])");
  EXPECT_EQ(from_vector<BFloat16>({BFloat16(256.0f), BFloat16(-3.0f)}).str(),
            "tensor([256.,  -3.], dtype=flambeau.bfloat16)");
}

TEST(Print, SciMode) {
  EXPECT_EQ(f32({1e-5f, 1.0f, 2.0f}).str(), "tensor([1.0000e-05, 1.0000e+00, 2.0000e+00])");
  EXPECT_EQ(f32({1e9f, 1.0f}).str(), "tensor([1.0000e+09, 1.0000e+00])");
  EXPECT_EQ(f32({1e7f, 1.0f}).str(), "tensor([1.0000e+07, 1.0000e+00])");  // int-valued, ratio > 1000
  EXPECT_EQ(f32({1e-3f, 10.0f}).str(), "tensor([1.0000e-03, 1.0000e+01])");
  EXPECT_EQ(f32({0.5f, 1000.0f}).str(), "tensor([5.0000e-01, 1.0000e+03])");
  EXPECT_EQ(f32({-1e-5f, 1e3f}).str(), "tensor([-1.0000e-05,  1.0000e+03])");
  EXPECT_EQ(f32({123456.789f, 1.5f}).str(), "tensor([1.2346e+05, 1.5000e+00])");
  EXPECT_EQ(from_vector<double>({0.00015, 0.25}).str(), "tensor([1.5000e-04, 2.5000e-01], dtype=flambeau.float64)");
  EXPECT_EQ(f32({0.1f, 1e8f}).str(), "tensor([1.0000e-01, 1.0000e+08])");
  EXPECT_EQ(f32({0.0001f, 0.5f}).str(), "tensor([1.0000e-04, 5.0000e-01])");
  EXPECT_EQ(f32({12345.678f, 0.5f}).str(), "tensor([1.2346e+04, 5.0000e-01])");
  EXPECT_EQ(f32({100.0f, -0.5f}).str(), "tensor([100.0000,  -0.5000])");
  EXPECT_EQ(from_vector<double>({1e100, 1.0}).str(), "tensor([1.0000e+100,  1.0000e+00], dtype=flambeau.float64)");
  EXPECT_EQ(f32({1e-5f, 1, NAN, -2}, Dims{2, 2}).str(),
            "tensor([[ 1.0000e-05,  1.0000e+00],\n"
            "        [        nan, -2.0000e+00]])");
  EXPECT_EQ(f32({-INFINITY, 2.5f, 1e-5f}).str(), "tensor([      -inf, 2.5000e+00, 1.0000e-05])");
}

TEST(Print, NanInfAndNegativeZero) {
  EXPECT_EQ(f32({NAN, INFINITY, -INFINITY, 1.5f}).str(), "tensor([   nan,    inf,   -inf, 1.5000])");
  EXPECT_EQ(f32({NAN, INFINITY}).str(), "tensor([nan, inf])");
  EXPECT_EQ(f32({1, INFINITY}).str(), "tensor([1., inf])");
  EXPECT_EQ(f32({-0.0f, 1.0f}).str(), "tensor([-0., 1.])");
  EXPECT_EQ(f32({-0.0f, 0.0f}).str(), "tensor([-0., 0.])");
  EXPECT_EQ(from_vector<Half>({Half(NAN), Half(2.5f), Half(-1.0f)}).str(),
            "tensor([    nan,  2.5000, -1.0000], dtype=flambeau.float16)");
}

TEST(Print, IntegerAndBoolDTypes) {
  EXPECT_EQ(from_vector<int64_t>({1, -20, 300}).str(), "tensor([  1, -20, 300])");
  EXPECT_EQ(from_vector<int32_t>({1, 2, 3, -4}, Dims{2, 2}).str(),
            "tensor([[ 1,  2],\n        [ 3, -4]], dtype=flambeau.int32)");
  EXPECT_EQ(from_vector<uint8_t>({0, 255, 7}).str(), "tensor([  0, 255,   7], dtype=flambeau.uint8)");
  EXPECT_EQ(from_vector<int8_t>({-128, 5}).str(), "tensor([-128,    5], dtype=flambeau.int8)");
  EXPECT_EQ(from_vector<int16_t>({-300, 2}, Dims{2, 1}).str(),
            "tensor([[-300],\n        [   2]], dtype=flambeau.int16)");
  EXPECT_EQ(from_vector<int64_t>({INT64_MIN, 1}).str(), "tensor([-9223372036854775808,                    1])");
  EXPECT_EQ(from_vector<bool>({true, false, true}).str(), "tensor([ True, False,  True])");
  EXPECT_EQ(from_vector<bool>({true, false, false, false}, Dims{2, 2}).str(),
            "tensor([[ True, False],\n        [False, False]])");
}

TEST(Print, ReducedAndDoubleFloats) {
  EXPECT_EQ(from_vector<BFloat16>({BFloat16(1.5f), BFloat16(2.25f), BFloat16(-3.0f)}).str(),
            "tensor([ 1.5000,  2.2500, -3.0000], dtype=flambeau.bfloat16)");
  EXPECT_EQ(from_vector<Half>({Half(0.1f), Half(2.0f), Half(-3.5f)}).str(),
            "tensor([ 0.1000,  2.0000, -3.5000], dtype=flambeau.float16)");
  EXPECT_EQ(from_vector<double>({0.1, 2.0}).str(), "tensor([0.1000, 2.0000], dtype=flambeau.float64)");
}

TEST(Print, ZeroDim) {
  EXPECT_EQ(scalar_tensor(3.5).str(), "tensor(3.5000)");
  EXPECT_EQ(scalar_tensor(7).str(), "tensor(7)");
  EXPECT_EQ(scalar_tensor(7, kInt32).str(), "tensor(7, dtype=flambeau.int32)");
  EXPECT_EQ(scalar_tensor(true).str(), "tensor(True)");
  EXPECT_EQ(scalar_tensor(NAN).str(), "tensor(nan)");
  EXPECT_EQ(scalar_tensor(-0.0).str(), "tensor(-0.)");
  EXPECT_EQ(scalar_tensor(1.5e-7).str(), "tensor(1.5000e-07)");
  EXPECT_EQ(scalar_tensor(2.0, kFloat16).str(), "tensor(2., dtype=flambeau.float16)");
  EXPECT_EQ(Tensor(2.5).str(), "tensor(2.5000, dtype=flambeau.float64)");
}

TEST(Print, Empty) {
  EXPECT_EQ(empty({0}).str(), "tensor([])");
  EXPECT_EQ(empty({0, 3}).str(), "tensor([], size=(0, 3))");
  EXPECT_EQ(empty({2, 0, 3}).str(), "tensor([], size=(2, 0, 3))");
  EXPECT_EQ(empty({0}, kInt64).str(), "tensor([], dtype=flambeau.int64)");
  EXPECT_EQ(empty({0, 2}, kInt32).str(), "tensor([], size=(0, 2), dtype=flambeau.int32)");
  EXPECT_EQ(empty({0}, kBool).str(), "tensor([], dtype=flambeau.bool)");
  EXPECT_EQ(empty({0}, kFloat64).str(), "tensor([], dtype=flambeau.float64)");
  EXPECT_EQ(Tensor().str(), "tensor(undefined)");
}

TEST(Print, LineWrapping) {
  EXPECT_EQ(ramp(30, 7.0f, {30}).str(),
            R"(tensor([0.0000, 0.1429, 0.2857, 0.4286, 0.5714, 0.7143, 0.8571, 1.0000, 1.1429,
        1.2857, 1.4286, 1.5714, 1.7143, 1.8571, 2.0000, 2.1429, 2.2857, 2.4286,
        2.5714, 2.7143, 2.8571, 3.0000, 3.1429, 3.2857, 3.4286, 3.5714, 3.7143,
        3.8571, 4.0000, 4.1429]))");
  std::vector<int64_t> k;
  for (int64_t i = 0; i < 40; ++i) k.push_back(i * 1000);
  EXPECT_EQ(from_vector<int64_t>(k).str(),
            R"(tensor([    0,  1000,  2000,  3000,  4000,  5000,  6000,  7000,  8000,  9000,
        10000, 11000, 12000, 13000, 14000, 15000, 16000, 17000, 18000, 19000,
        20000, 21000, 22000, 23000, 24000, 25000, 26000, 27000, 28000, 29000,
        30000, 31000, 32000, 33000, 34000, 35000, 36000, 37000, 38000, 39000]))");
}

TEST(Print, SuffixWrapsToItsOwnLine) {
  EXPECT_EQ(full({9}, 1.2345, kFloat64).str(),
            R"(tensor([1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345],
       dtype=flambeau.float64))");
  EXPECT_EQ(full({17}, 1.2345, kFloat64).str(),
            R"(tensor([1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345,
        1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345, 1.2345],
       dtype=flambeau.float64))");
}

TEST(Print, Summarized) {
  Tensor f = arange(2000).to(kFloat32).view({40, 50});
  EXPECT_EQ(f.str(), R"(tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 4.7000e+01, 4.8000e+01,
         4.9000e+01],
        [5.0000e+01, 5.1000e+01, 5.2000e+01,  ..., 9.7000e+01, 9.8000e+01,
         9.9000e+01],
        [1.0000e+02, 1.0100e+02, 1.0200e+02,  ..., 1.4700e+02, 1.4800e+02,
         1.4900e+02],
        ...,
        [1.8500e+03, 1.8510e+03, 1.8520e+03,  ..., 1.8970e+03, 1.8980e+03,
         1.8990e+03],
        [1.9000e+03, 1.9010e+03, 1.9020e+03,  ..., 1.9470e+03, 1.9480e+03,
         1.9490e+03],
        [1.9500e+03, 1.9510e+03, 1.9520e+03,  ..., 1.9970e+03, 1.9980e+03,
         1.9990e+03]]))");
  EXPECT_EQ(arange(2000).view({40, 50}).str(), R"(tensor([[   0,    1,    2,  ...,   47,   48,   49],
        [  50,   51,   52,  ...,   97,   98,   99],
        [ 100,  101,  102,  ...,  147,  148,  149],
        ...,
        [1850, 1851, 1852,  ..., 1897, 1898, 1899],
        [1900, 1901, 1902,  ..., 1947, 1948, 1949],
        [1950, 1951, 1952,  ..., 1997, 1998, 1999]]))");
  EXPECT_EQ(arange(2000).to(kFloat32).str(),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
            "        1.9990e+03])");
  EXPECT_EQ(arange(1200).to(kFloat32).view({2, 600}).str(),
            R"(tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 5.9700e+02, 5.9800e+02,
         5.9900e+02],
        [6.0000e+02, 6.0100e+02, 6.0200e+02,  ..., 1.1970e+03, 1.1980e+03,
         1.1990e+03]]))");
}

TEST(Print, Summarized3D) {
  std::string expected = "tensor([";
  auto row = [](int64_t b) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "[%4ld, %4ld, %4ld,  ..., %4ld, %4ld, %4ld]", long(b), long(b + 1), long(b + 2),
                  long(b + 7), long(b + 8), long(b + 9));
    return std::string(buf);
  };
  const int64_t blocks[] = {0, 1, 2, -1, 9, 10, 11};
  for (size_t i = 0; i < 7; ++i) {
    if (i) expected += ",\n\n        ";
    if (blocks[i] < 0) {
      expected += "...";
      continue;
    }
    const int64_t rows[] = {0, 1, 2, -1, 7, 8, 9};
    expected += "[";
    for (size_t j = 0; j < 7; ++j) {
      if (j) expected += ",\n         ";
      expected += rows[j] < 0 ? "..." : row(blocks[i] * 100 + rows[j] * 10);
    }
    expected += "]";
  }
  expected += "])";
  Tensor cube = arange(1200).view({12, 10, 10});
  EXPECT_EQ(cube.str(), expected);
  // spot-check against torch's own text for the first and the ellipsis lines
  EXPECT_EQ(cube.str().substr(0, 51), "tensor([[[   0,    1,    2,  ...,    7,    8,    9]");
  EXPECT_NE(cube.str().find("]],\n\n        ...,\n\n        [[ 900,  901,  902,  ...,  907,  908,  909],"),
            std::string::npos);
}

TEST(Print, StreamOperator) {
  std::ostringstream s;
  s << from_vector<int64_t>({1, 2});
  EXPECT_EQ(s.str(), "tensor([1, 2])");
}
