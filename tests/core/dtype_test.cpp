// dtypes: torch.promote_types for every pair, result_type with wrapped numbers and 0-dim
// tensors, Half/BFloat16 rounding, and float -> integer casts, all against PyTorch 2.13.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "test_util.h"

using namespace flambeau;

namespace {
const DType kAll[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

// Integer contents of t (any integral or bool dtype), exactly.
std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.to(kInt64).contiguous();
  const int64_t* p = c.data<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}
}  // namespace

TEST(DType, NamesAndSizes) {
  const char* names[] = {"bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"};
  const size_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_STREQ(dtype_name(kAll[i]), names[i]);
    EXPECT_EQ(itemsize(kAll[i]), sizes[i]);
    EXPECT_EQ(is_floating(kAll[i]), i >= 6);
    EXPECT_EQ(is_integral(kAll[i], false), i >= 1 && i <= 5);
    EXPECT_EQ(is_integral(kAll[i], true), i <= 5);
  }
}

TEST(DType, PromoteTypesMatchesTorch) {
  // torch.promote_types(row, column), rows and columns in kAll's order.
  constexpr DType b1 = kBool, u1 = kUInt8, i1 = kInt8, i2 = kInt16, i4 = kInt32, i8 = kInt64, f2 = kFloat16,
                  bf = kBFloat16, f4 = kFloat32, f8 = kFloat64;
  const DType expected[10][10] = {
      {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8},
      {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8},
      {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8},
      {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8},
      {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8},
      {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8},
      {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8},
      {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8},
      {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8},
      {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8},
  };
  for (int a = 0; a < 10; ++a)
    for (int b = 0; b < 10; ++b)
      EXPECT_EQ(promote_types(kAll[a], kAll[b]), expected[a][b])
          << dtype_name(kAll[a]) << " + " << dtype_name(kAll[b]) << " gave " << dtype_name(promote_types(kAll[a], kAll[b]));
}

TEST(DType, ResultTypeWithScalarsAndZeroDim) {
  Tensor i64 = arange(3), i32 = arange(3).to(kInt32), f16 = ones({2}, kFloat16), b = ones({2}, kBool);
  EXPECT_EQ(result_type(i64, Tensor(2.5)), kFloat32);
  EXPECT_EQ(result_type(i32, scalar_tensor(1)), kInt32);  // 0-dim int64 does not widen
  EXPECT_EQ(result_type(i64, scalar_tensor(1.0, kFloat64)), kFloat64);
  EXPECT_EQ(result_type(f16, Tensor(2.5)), kFloat16);
  EXPECT_EQ(result_type(b, Tensor(1)), kInt64);
  EXPECT_EQ(result_type(scalar_tensor(1), Tensor(2.5)), kFloat32);
  EXPECT_EQ(result_type(scalar_tensor(1, kInt32), Tensor(5)), kInt32);
  EXPECT_EQ(result_type(ones({1}, kUInt8), Tensor(-1)), kUInt8);
  EXPECT_EQ(result_type(b, Tensor(2.5)), kFloat32);
  EXPECT_EQ(result_type(b, Tensor(true)), kBool);
  EXPECT_EQ(result_type(ones({1}, kInt8), scalar_tensor(1.0, kFloat16)), kFloat16);
  EXPECT_EQ(result_type(ones({1}, kBFloat16), scalar_tensor(1.0, kFloat64)), kBFloat16);
  EXPECT_EQ(result_type(scalar_tensor(1, kInt8), scalar_tensor(1, kInt16)), kInt16);
  EXPECT_EQ(result_type(scalar_tensor(true), Tensor(2)), kInt64);
  EXPECT_EQ(result_type(scalar_tensor(1.0, kFloat16), Tensor(2.5)), kFloat16);
  EXPECT_EQ(result_type({i32, ones({2}, kInt16), Tensor(3)}), kInt32);
  // the ops use it
  EXPECT_EQ((i64 + 2.5).dtype(), kFloat32);
  EXPECT_EQ((i32 + scalar_tensor(1)).dtype(), kInt32);
  EXPECT_EQ((f16 * 2.5).dtype(), kFloat16);
  EXPECT_EQ((b + 1).dtype(), kInt64);
}

TEST(DType, HalfAndBFloat16FromFloatMatchTorch) {
  struct Case {
    uint32_t f;
    uint16_t half, bf16;
  };
  // float32 bits -> torch's .to(float16) and .to(bfloat16) bits
  const Case cases[] = {
      {0x3f800000u, 0x3c00, 0x3f80},  // 1.0
      {0x3dcccccdu, 0x2e66, 0x3dcd},  // 0.1
      {0xbdcccccdu, 0xae66, 0xbdcd},  // -0.1
      {0x3eaaaaabu, 0x3555, 0x3eab},  // 1/3
      {0x477fe000u, 0x7bff, 0x4780},  // 65504 (half max)
      {0x477fef00u, 0x7bff, 0x4780},  // 65519
      {0x477ff000u, 0x7c00, 0x4780},  // 65520 -> inf in half
      {0x47c35000u, 0x7c00, 0x47c3},  // 1e5
      {0xc7c35000u, 0xfc00, 0xc7c3},  // -1e5
      {0x33800000u, 0x0001, 0x3380},  // 2^-24, smallest half subnormal
      {0x33000000u, 0x0000, 0x3300},  // 2^-25: tie, to even (0)
      {0x33c00000u, 0x0002, 0x33c0},  // 3 * 2^-25: tie, to even (2)
      {0x32800000u, 0x0000, 0x3280},  // 2^-26
      {0x38800000u, 0x0400, 0x3880},  // 2^-14, smallest half normal
      {0x387fc000u, 0x03ff, 0x3880},  // largest half subnormal
      {0x3f801000u, 0x3c00, 0x3f80},  // 1 + 2^-11: tie, to even
      {0x3f803000u, 0x3c02, 0x3f80},  // 1 + 3 * 2^-11: tie, to even
      {0x3f802000u, 0x3c01, 0x3f80},  // 1 + 2^-10
      {0x80000000u, 0x8000, 0x8000},  // -0.0
      {0x7f800000u, 0x7c00, 0x7f80},  // inf
      {0xff800000u, 0xfc00, 0xff80},  // -inf
      {0x7f61b1e6u, 0x7c00, 0x7f62},  // 3e38
      {0x7f7fc99eu, 0x7c00, 0x7f80},  // 3.4e38 -> inf in bfloat16
      {0x000116c2u, 0x0000, 0x0001},  // 1e-40 (float subnormal)
      {0x00010000u, 0x0000, 0x0001},  // 2^-133
      {0x3f808000u, 0x3c04, 0x3f80},  // 1 + 2^-8: bfloat16 tie, to even
      {0x3f818000u, 0x3c0c, 0x3f82},  // 1 + 3 * 2^-8: bfloat16 tie, to even
      {0x3f808008u, 0x3c04, 0x3f81},  // just above a bfloat16 tie
      {0x437f8000u, 0x5bfc, 0x4380},  // 255.5
      {0x322bcc77u, 0x0000, 0x322c},  // 1e-8
      {0x387ba882u, 0x03ef, 0x387c},  // 6e-5
      {0x3eaaa000u, 0x3555, 0x3eab},  // 0.333251953125
  };
  std::vector<float> in;
  for (const Case& c : cases) {
    const float f = std::bit_cast<float>(c.f);
    in.push_back(f);
    EXPECT_EQ(Half(f).bits, c.half) << std::hexfloat << f;
    EXPECT_EQ(BFloat16(f).bits, c.bf16) << std::hexfloat << f;
  }
  // the same through tensor casts (the conversion kernels), and from float64
  for (DType src : {kFloat32, kFloat64}) {
    Tensor t = from_vector<float>(in).to(src);
    Tensor h = t.to(kFloat16), bf = t.to(kBFloat16);
    for (size_t i = 0; i < in.size(); ++i) {
      EXPECT_EQ(h.data<Half>()[i].bits, cases[i].half) << dtype_name(src) << " " << std::hexfloat << in[i];
      EXPECT_EQ(bf.data<BFloat16>()[i].bits, cases[i].bf16) << dtype_name(src) << " " << std::hexfloat << in[i];
    }
  }
}

TEST(DType, DoubleToReducedRoundsThroughFloat) {
  // torch casts float64 -> float32 -> float16/bfloat16 (two roundings), not directly
  Tensor d = from_vector<double>({1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-8 + 0x1p-40, 65519.999999});
  Tensor h = d.to(kFloat16), b = d.to(kBFloat16);
  EXPECT_EQ(h.data<Half>()[0].bits, 0x3c00);
  EXPECT_EQ(h.data<Half>()[1].bits, 0x3c04);
  EXPECT_EQ(h.data<Half>()[2].bits, 0x7c00);
  EXPECT_EQ(b.data<BFloat16>()[0].bits, 0x3f80);
  EXPECT_EQ(b.data<BFloat16>()[1].bits, 0x3f80);
  EXPECT_EQ(b.data<BFloat16>()[2].bits, 0x4780);
}

TEST(DType, NaNStaysNaN) {
  for (float n : {NAN, -NAN, std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffc00001u)}) {
    EXPECT_TRUE(std::isnan(float(Half(n)))) << std::bit_cast<uint32_t>(n);
    EXPECT_TRUE(std::isnan(float(BFloat16(n)))) << std::bit_cast<uint32_t>(n);
  }
  EXPECT_EQ(Half(NAN).bits, 0x7e00);  // torch: 32256
  Tensor t = from_vector<float>({NAN, 1.0f});
  EXPECT_TRUE(std::isnan(t.to(kFloat16)[0].item<double>()));
  EXPECT_TRUE(std::isnan(t.to(kBFloat16)[0].item<double>()));
  EXPECT_TRUE(std::isnan(t.to(kFloat16).to(kFloat32)[0].item<double>()));
}

TEST(DType, HalfToFloatMatchesTorch) {
  EXPECT_EQ(float(Half::from_bits(0x0001)), 0x1p-24f);
  EXPECT_EQ(float(Half::from_bits(0x03ff)), 0x1.ff8p-15f);
  EXPECT_EQ(float(Half::from_bits(0x0400)), 0x1p-14f);
  EXPECT_EQ(float(Half::from_bits(0x7bff)), 65504.0f);
  EXPECT_EQ(float(Half::from_bits(0x3c00)), 1.0f);
  EXPECT_EQ(float(Half::from_bits(0x8001)), -0x1p-24f);
  EXPECT_EQ(float(Half::from_bits(0x7c00)), INFINITY);
  EXPECT_EQ(float(Half::from_bits(0xfc00)), -INFINITY);
  EXPECT_EQ(float(Half::from_bits(0x3555)), 0x1.554p-2f);
  EXPECT_TRUE(std::signbit(float(Half::from_bits(0x8000))));
  EXPECT_TRUE(std::isnan(float(Half::from_bits(0x7e00))));
  EXPECT_EQ(float(BFloat16::from_bits(0x3f81)), 0x1.02p0f);
}

// Every finite value round-trips, and every midpoint between neighbours rounds to the
// even one while the floats just beside it round to the nearer neighbour.
TEST(DType, HalfRoundsToNearestEvenEverywhere) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float lo = float(Half::from_bits(uint16_t(h)));
    ASSERT_EQ(Half(lo).bits, h);
    ASSERT_EQ(Half(-lo).bits, h | 0x8000);
    const float hi = h + 1 < 0x7c00 ? float(Half::from_bits(uint16_t(h + 1))) : 65536.0f;
    const float mid = (lo + hi) / 2;
    ASSERT_EQ(Half(mid).bits, (h & 1) ? h + 1 : h) << std::hex << h;
    ASSERT_EQ(Half(std::nextafter(mid, 0.0f)).bits, h) << std::hex << h;
    ASSERT_EQ(Half(std::nextafter(mid, INFINITY)).bits, h + 1) << std::hex << h;
  }
}

TEST(DType, BFloat16RoundsToNearestEvenEverywhere) {
  for (uint32_t h = 0; h < 0x7f80; ++h) {
    const float lo = float(BFloat16::from_bits(uint16_t(h)));
    ASSERT_EQ(BFloat16(lo).bits, h);
    ASSERT_EQ(BFloat16(-lo).bits, h | 0x8000);
    const float hi = std::bit_cast<float>((h + 1) << 16);  // 0x7f80: inf
    const uint32_t mid_bits = (h << 16) | 0x8000;           // exactly halfway
    const float mid = std::bit_cast<float>(mid_bits);
    ASSERT_TRUE(lo < mid && mid < hi);
    ASSERT_EQ(BFloat16(mid).bits, (h & 1) ? h + 1 : h) << std::hex << h;
    ASSERT_EQ(BFloat16(std::bit_cast<float>(mid_bits - 1)).bits, h) << std::hex << h;
    ASSERT_EQ(BFloat16(std::bit_cast<float>(mid_bits + 1)).bits, h + 1) << std::hex << h;
  }
}

TEST(DType, FloatToIntCastsMatchTorch) {
  const std::vector<double> in = {3e9, -1.0, 300.0, NAN, 40000.0, -3e9, 2.7, -2.7, 1e20, INFINITY, 128.0, -129.0,
                                  65535.0, 70000.0};
  constexpr int64_t m64 = INT64_MIN, m32 = INT32_MIN;
  struct Row {
    DType dt;
    std::vector<int64_t> want;
  };
  const Row rows[] = {
      {kInt64, {3000000000, -1, 300, m64, 40000, -3000000000, 2, -2, m64, m64, 128, -129, 65535, 70000}},
      {kInt32, {m32, -1, 300, m32, 40000, m32, 2, -2, m32, m32, 128, -129, 65535, 70000}},
      {kInt16, {0, -1, 300, 0, -25536, 0, 2, -2, 0, 0, 128, -129, -1, 4464}},
      {kInt8, {0, -1, 44, 0, 64, 0, 2, -2, 0, 0, -128, 127, -1, 112}},
      {kUInt8, {0, 255, 44, 0, 64, 0, 2, 254, 0, 0, 128, 127, 255, 112}},
      {kBool, std::vector<int64_t>(14, 1)},
  };
  for (DType src : {kFloat32, kFloat64}) {
    Tensor t = from_vector<double>(in).to(src);
    for (const Row& r : rows) {
      Tensor out = t.to(r.dt);
      EXPECT_EQ(out.dtype(), r.dt);
      EXPECT_EQ(ints(out), r.want) << dtype_name(src) << " -> " << dtype_name(r.dt);
      // a strided source goes through the same conversion
      Tensor strided = stack({t, t}, 1).select(1, 1);  // stride 2
      EXPECT_EQ(ints(strided.to(r.dt)), r.want) << dtype_name(src) << " -> " << dtype_name(r.dt) << " (strided)";
    }
  }
  Tensor h = from_vector<float>({300.0f, -1.0f, 40000.0f, NAN, INFINITY}).to(kFloat16);
  EXPECT_EQ(ints(h.to(kInt32)), (std::vector<int64_t>{300, -1, 40000, m32, m32}));
  EXPECT_EQ(ints(h.to(kUInt8)), (std::vector<int64_t>{44, 255, 64, 0, 0}));
  EXPECT_EQ(ints(h.to(kInt8)), (std::vector<int64_t>{44, -1, 64, 0, 0}));
}

TEST(DType, IntNarrowingAndIntToHalf) {
  Tensor t = from_vector<int64_t>({300, -1, 40000, 3000000000});
  EXPECT_EQ(ints(t.to(kInt32)), (std::vector<int64_t>{300, -1, 40000, -1294967296}));
  EXPECT_EQ(ints(t.to(kInt16)), (std::vector<int64_t>{300, -1, -25536, 24064}));
  EXPECT_EQ(ints(t.to(kInt8)), (std::vector<int64_t>{44, -1, 64, 0}));
  EXPECT_EQ(ints(t.to(kUInt8)), (std::vector<int64_t>{44, 255, 64, 0}));
  EXPECT_EQ(flambeau::testing::values(t.to(kFloat16)), (std::vector<double>{300, -1, 40000, INFINITY}));
  EXPECT_EQ(t.to(kInt64).storage(), t.storage());  // same dtype: no copy
}
