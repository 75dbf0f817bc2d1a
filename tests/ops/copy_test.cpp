// copy_ and to(): every dtype pair against the scalar conversion rules, the SIMD
// float32 <-> bfloat16 path against the scalar one, the tiled transpose copy, broadcasting.
#include <bit>
#include <cstring>

#include "flambeau/kernels/cpu/cast.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

const DType kAll[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

TEST(Copy, EveryDtypePairMatchesScalarCast) {
  const std::vector<double> src_vals = {0, 1, -1, 2.5, -2.5, 127, 128, 255, 256, -129, 40000, 3e9, -3e9, 1e20,
                                        0.1, 65504, 65520, 1e-8, NAN, INFINITY, -INFINITY, -0.0};
  for (DType sdt : kAll)
    for (DType ddt : kAll) {
      Tensor src = from_vector<double>(src_vals).to(sdt);
      for (Layout layout : {Layout::Contiguous, Layout::Strided}) {
        Tensor dst = layout == Layout::Contiguous ? empty({int64_t(src_vals.size())}, ddt)
                                                  : empty({int64_t(src_vals.size()) * 2}, ddt).slice(0, {}, {}, 2);
        dst.copy_(src);
        // Reference: element by element through the scalar rules.
        visit_dtype(sdt, [&]<class S>() {
          visit_dtype(ddt, [&]<class D>() {
            Tensor s = src.contiguous();
            for (int64_t i = 0; i < s.numel(); ++i) {
              D want = kernels::cast_value<D>(s.data<S>()[i]);
              D got = dst.contiguous().data<D>()[i];
              ASSERT_EQ(std::memcmp(&want, &got, sizeof(D)), 0)
                  << dtype_name(sdt) << " -> " << dtype_name(ddt) << " element " << i << " (" << src_vals[i] << ")";
            }
          });
        });
      }
    }
}

TEST(Copy, FloatToIntegerLikePyTorch) {
  Tensor x = from_vector<float>({3e9f, -1, 300, NAN, 40000});
  EXPECT_EQ(values(x.to(kInt32)), (std::vector<double>{-2147483648.0, -1, 300, -2147483648.0, 40000}));
  EXPECT_EQ(values(x.to(kUInt8)), (std::vector<double>{0, 255, 44, 0, 64}));
  EXPECT_EQ(values(x.to(kInt16)), (std::vector<double>{0, -1, 300, 0, -25536}));
  EXPECT_EQ(values(x.to(kInt8)), (std::vector<double>{0, -1, 44, 0, 64}));
  EXPECT_EQ(values(x.to(kBool)), (std::vector<double>{1, 1, 1, 1, 1}));
}

TEST(Copy, SimdBFloat16MatchesScalarRounding) {
  // Random bit patterns (every exponent, NaNs included) plus ties and edge values.
  std::mt19937 gen(1);
  std::vector<float> v;
  for (int i = 0; i < 100003; ++i) v.push_back(std::bit_cast<float>(uint32_t(gen())));
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0x7fc00001u, 0xffc00000u,
                        0x00000001u, 0x80000000u, 0x7f800001u})
    v.push_back(std::bit_cast<float>(bits));
  Tensor t = from_vector<float>(v);
  for (DType dt : {kBFloat16, kFloat16}) {
    Tensor simd = t.to(dt);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t got, want = dt == kBFloat16 ? BFloat16(v[i]).bits : Half(v[i]).bits;
      std::memcpy(&got, static_cast<char*>(simd.data_ptr()) + 2 * i, 2);
      const bool nan = std::isnan(v[i]);
      if (nan) {
        ASSERT_TRUE(std::isnan(dt == kBFloat16 ? float(BFloat16::from_bits(got)) : float(Half::from_bits(got)))) << i;
      } else {
        ASSERT_EQ(got, want) << dtype_name(dt) << " " << v[i] << " bits " << std::bit_cast<uint32_t>(v[i]);
      }
    }
    // And back: exact, NaN stays NaN.
    Tensor back = simd.to(kFloat32);
    for (size_t i = 0; i < v.size(); i += 97) {
      const float want = dt == kBFloat16 ? float(BFloat16(v[i])) : float(Half(v[i]));
      const float got = back.data<float>()[i];
      ASSERT_TRUE((std::isnan(want) && std::isnan(got)) || want == got) << i;
    }
  }
  // Round to nearest even at the tie, overflow to inf.
  EXPECT_EQ(BFloat16(std::bit_cast<float>(0x3f808000u)).bits, 0x3f80);
  EXPECT_EQ(BFloat16(std::bit_cast<float>(0x3f818000u)).bits, 0x3f82);
  EXPECT_EQ(Half(65520.0f).bits, 0x7c00);
  EXPECT_EQ(Half(65519.0f).bits, 0x7bff);
}

TEST(Copy, TransposedCopiesOfEveryItemSize) {
  for (DType dt : {kUInt8, kInt16, kFloat32, kFloat64})
    for (const Dims& shape : {Dims{100, 77}, Dims{64, 128}, Dims{3, 5000}, Dims{1000, 17}}) {
      Tensor base = random_tensor(shape, dt, Layout::Contiguous, 4, 0, 100);
      Tensor t = base.t().contiguous();
      ASSERT_TRUE(t.is_contiguous());
      ASSERT_EQ(t.sizes(), (Dims{shape[1], shape[0]}));
      std::vector<double> b = values(base), got = values(t);
      for (int64_t i = 0; i < shape[0]; ++i)
        for (int64_t j = 0; j < shape[1]; ++j) ASSERT_EQ(got[size_t(j * shape[0] + i)], b[size_t(i * shape[1] + j)]);
      // Same through a transposed destination.
      Tensor dst = empty({shape[1], shape[0]}, dt).t();
      dst.copy_(base);
      EXPECT_EQ(values(dst), b);
    }
}

TEST(Copy, BroadcastSourceAndErrors) {
  Tensor dst = zeros({3, 4});
  dst.copy_(from_vector<float>({1, 2, 3, 4}));
  EXPECT_EQ(values(dst), (std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}));
  dst.copy_(from_vector<double>({7}).reshape({}));
  EXPECT_EQ(values(dst), std::vector<double>(12, 7.0));
  EXPECT_THROW(dst.copy_(ones({2, 4})), ValueError);
  EXPECT_THROW(dst.copy_(ones({1, 3, 4})), ValueError);
  EXPECT_EQ(values(dst), std::vector<double>(12, 7.0));
  Tensor a = arange(5, kFloat32);
  EXPECT_EQ(a.to(kFloat32).data_ptr(), a.data_ptr());  // same dtype: no copy
  EXPECT_NE(a.clone().data_ptr(), a.data_ptr());
}

}  // namespace
}  // namespace flambeau::testing
