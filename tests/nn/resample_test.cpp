// Resampling (nn/resample.cpp over kernels/cpu/resample.cpp and conv.cpp's im2col) against
// direct reference formulas in float64: bilinear with align_corners (known values), antialiased
// bilinear halving (the triangle filter and its transpose), nearest 2x, pixel_shuffle's index
// map, unfold / fold as adjoints; the same bits on 1 and 2 threads; bad input named and refused.
#include <cmath>

#include "flambeau/nn/functional.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

namespace F = nn::functional;

TEST(Resample, BilinearAlignCornersIsTheLinearMap) {
  // x[h, w] = h + 10 w is reproduced exactly at align_corners: y[i, j] = i * 2/4 + 10 * j * 3/6.
  std::vector<double> v;
  for (int h = 0; h < 3; ++h)
    for (int w = 0; w < 4; ++w) v.push_back(h + 10.0 * w);
  const Tensor x = from_vector<double>(v, Dims{1, 1, 3, 4});
  const Tensor y = F::interpolate(x, Dims{5, 7}, {}, "bilinear", true);
  std::vector<double> want;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) want.push_back(i * 0.5 + 10.0 * j * 0.5);
  EXPECT_TRUE(all_close(values(y), want, 1e-14, 1e-14));
}

TEST(Resample, AntialiasBilinearHalvingIsTheTriangleFilter) {
  // in = 2 out: support 2, taps (1, 3, 3, 1) / 8 inside, (3, 3, 1) / 7 and (1, 3, 3) / 7 at the borders.
  Tensor x = from_vector<double>({0, 1, 2, 3, 4, 5, 6, 7}, Dims{1, 1, 1, 8});
  x.requires_grad_(true);
  const Tensor y = F::interpolate(x, Dims{1, 4}, {}, "bilinear", {}, {}, true);
  EXPECT_TRUE(all_close(values(y), {5.0 / 7, 2.5, 4.5, 44.0 / 7}, 1e-15, 1e-15));
  EXPECT_EQ(y.grad_fn()->name(), "UpsampleBilinear2DAaBackward0");
  y.backward(from_vector<double>({7, 8, 8, 7}, Dims{1, 1, 1, 4}));  // the transpose of the taps
  EXPECT_TRUE(all_close(values(x.grad()), {3, 4, 4, 4, 4, 4, 4, 3}, 1e-14, 1e-14));
}

TEST(Resample, NearestTwiceRepeatsAndItsGradientSums) {
  Tensor x = from_vector<double>({1, 2, 3}, Dims{1, 1, 3});
  x.requires_grad_(true);
  const Tensor y = F::interpolate(x, {}, std::vector<double>{2.0});
  EXPECT_TRUE(all_close(values(y), {1, 1, 2, 2, 3, 3}, 0, 0));
  y.backward(from_vector<double>({1, 2, 3, 4, 5, 6}, Dims{1, 1, 6}));
  EXPECT_TRUE(all_close(values(x.grad()), {3, 7, 11}, 0, 0));
  EXPECT_EQ(y.grad_fn()->name(), "UpsampleNearest1DBackward0");
}

TEST(Resample, PixelShuffleMovesChannelsIntoSpace) {
  std::vector<double> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = i;
  const Tensor x = from_vector<double>(v, Dims{1, 4, 2, 2});
  const Tensor y = F::pixel_shuffle(x, 2);
  EXPECT_EQ(y.sizes(), (Dims{1, 1, 4, 4}));
  // y[0, 0, 2h + i, 2w + j] = x[0, 2i + j, h, w]
  std::vector<double> want(16);
  for (int h = 0; h < 2; ++h)
    for (int w = 0; w < 2; ++w)
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) want[size_t((2 * h + i) * 4 + 2 * w + j)] = (2 * i + j) * 4 + h * 2 + w;
  EXPECT_TRUE(all_close(values(y), want, 0, 0));
  EXPECT_TRUE(all_close(values(F::pixel_unshuffle(y, 2)), v, 0, 0));
}

TEST(Resample, FoldIsTheAdjointOfUnfold) {
  const Tensor x = random_tensor({2, 3, 7, 6}, kFloat64, Layout::Contiguous, 5);
  const Tensor cols = F::unfold(x, {3, 2}, {1, 2}, {1}, {2, 1});
  const Tensor c = random_tensor(cols.sizes(), kFloat64, Layout::Contiguous, 6);
  const double lhs = values((cols * c).sum())[0], rhs = values((x * F::fold(c, {7, 6}, {3, 2}, {1, 2}, {1}, {2, 1})).sum())[0];
  EXPECT_NEAR(lhs, rhs, 1e-12 * std::max(1.0, std::abs(lhs)));
}

TEST(Resample, SameBitsOnOneAndTwoThreads) {
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<double> all;
    for (const char* mode : {"nearest", "bilinear", "bicubic"}) {
      Tensor x = random_tensor({4, 8, 17, 19}, kFloat32, Layout::Contiguous, 8);
      x.requires_grad_(true);
      const Tensor y = F::interpolate(x, {}, std::vector<double>{1.7, 2.3}, mode);
      y.backward(y);
      for (const Tensor& t : {y, x.grad()}) {
        const std::vector<double> v = values(t);
        all.insert(all.end(), v.begin(), v.end());
      }
    }
    runs.push_back(all);
  }
  set_num_threads(2);
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(Resample, BadInputNamesTheOp) {
  const Tensor x = ones({2, 3, 8, 8});
  const std::string both = error_of<ValueError>([&] { F::interpolate(x, Dims{4, 4}, std::vector<double>{2, 2}); });
  EXPECT_TRUE(contains(both, "[interpolate] only one of size or scale_factor")) << both;
  const std::string len = error_of<ValueError>([&] { F::interpolate(x, Dims{4}); });
  EXPECT_TRUE(contains(len, "[interpolate]") && contains(len, "[8, 8]") && contains(len, "[4]")) << len;
  EXPECT_THROW(F::interpolate(x, Dims{4, 4}, {}, "nearest", true), ValueError);
  EXPECT_THROW(F::interpolate(x, Dims{4}, {}, "linear"), ValueError);
  EXPECT_THROW(F::interpolate(x, Dims{4, 4}, {}, "trilinear"), NotImplementedError);
  const std::string aa = error_of<ValueError>([&] { F::interpolate(x, Dims{4, 4}, {}, "nearest", {}, {}, true); });
  EXPECT_TRUE(contains(aa, "[interpolate] Anti-alias")) << aa;
  const std::string ps = error_of<ValueError>([&] { F::pixel_shuffle(x, 2); });
  EXPECT_TRUE(contains(ps, "[pixel_shuffle]") && contains(ps, "input.size(-3)=3")) << ps;
  const std::string fold = error_of<ValueError>([&] { F::fold(ones({1, 12, 8}), {4, 4}, {2}); });
  EXPECT_TRUE(contains(fold, "[fold]") && contains(fold, "3 * 3 = 9")) << fold;
}

}  // namespace
}  // namespace flambeau::testing
