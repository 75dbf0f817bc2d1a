// Pooling (nn/pooling.cpp over kernels/cpu/pool.cpp) against direct reference loops in
// float64: max (values, indices, gradient), average (both divisors) and adaptive average,
// forward and backward; the same bits on 1 and 2 threads; bad input named and refused;
// integer inputs; max_unpool (nn/unpooling.cpp) against max_pool's indices; lp_pool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "flambeau/nn/functional.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

namespace F = nn::functional;

struct Window {
  int64_t k[2], s[2], p[2], d[2];
};

// y[plane, oh, ow] for a [P, H, W] input: max (with its flat index) or average.
struct Ref {
  std::vector<double> y, gx;
  std::vector<int64_t> idx;
};
Ref reference(const std::vector<double>& x, const std::vector<double>& gy, int64_t P, int64_t H, int64_t W,
              int64_t OH, int64_t OW, const Window& w, bool max, bool count_include_pad) {
  Ref r{std::vector<double>(size_t(P * OH * OW)), std::vector<double>(x.size(), 0.0),
        std::vector<int64_t>(size_t(P * OH * OW))};
  for (int64_t p = 0; p < P; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const size_t o = size_t((p * OH + oh) * OW + ow);
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t at = -1, inside = 0, padded = 0;
        for (int64_t i = 0; i < w.k[0]; ++i)
          for (int64_t j = 0; j < w.k[1]; ++j) {
            const int64_t h = oh * w.s[0] - w.p[0] + i * w.d[0], c = ow * w.s[1] - w.p[1] + j * w.d[1];
            if (h < H + w.p[0] && c < W + w.p[1]) ++padded;
            if (h < 0 || h >= H || c < 0 || c >= W) continue;
            const double v = x[size_t((p * H + h) * W + c)];
            ++inside;
            sum += v;
            if (at < 0 || v > best) best = v, at = h * W + c;
          }
        const double div = double(count_include_pad ? padded : inside);
        r.y[o] = max ? best : sum / div;
        r.idx[o] = at;
        if (max) {
          r.gx[size_t(p * H * W + at)] += gy[o];
          continue;
        }
        for (int64_t i = 0; i < w.k[0]; ++i)
          for (int64_t j = 0; j < w.k[1]; ++j) {
            const int64_t h = oh * w.s[0] - w.p[0] + i, c = ow * w.s[1] - w.p[1] + j;
            if (h >= 0 && h < H && c >= 0 && c < W) r.gx[size_t((p * H + h) * W + c)] += gy[o] / div;
          }
      }
  return r;
}

TEST(Pooling, MaxAndAvgPool2dMatchTheReferenceLoop) {
  const std::vector<Window> windows = {{{3, 3}, {2, 2}, {1, 1}, {1, 1}}, {{2, 3}, {1, 2}, {1, 0}, {2, 1}},
                                       {{4, 2}, {3, 1}, {2, 1}, {1, 1}}};
  const int64_t N = 2, C = 3, H = 9, W = 8;
  for (const Window& w : windows)
    for (bool max : {true, false})
      for (bool cip : {true, false}) {
        if (!max && (w.d[0] != 1 || w.d[1] != 1)) continue;
        Tensor x = random_tensor({N, C, H, W}, kFloat64, Layout::Contiguous, 3);
        x.requires_grad_(true);
        const Dims k = {w.k[0], w.k[1]}, s = {w.s[0], w.s[1]}, p = {w.p[0], w.p[1]}, d = {w.d[0], w.d[1]};
        Tensor y, idx;
        if (max) std::tie(y, idx) = F::max_pool2d_with_indices(x, k, s, p, d);
        else y = F::avg_pool2d(x, k, s, p, false, cip);
        const int64_t OH = y.size(2), OW = y.size(3);
        EXPECT_EQ(OH, (H + 2 * w.p[0] - w.d[0] * (w.k[0] - 1) - 1) / w.s[0] + 1);
        const Tensor gy = random_tensor(y.sizes(), kFloat64, Layout::Contiguous, 4);
        y.backward(gy);
        const Ref r = reference(values(x), values(gy), N * C, H, W, OH, OW, w, max, cip);
        EXPECT_TRUE(all_close(values(y), r.y, 1e-15, 1e-15));
        EXPECT_TRUE(all_close(values(x.grad()), r.gx, 1e-14, 1e-14));
        if (max) {
          const std::vector<double> got = values(idx);
          for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(int64_t(got[i]), r.idx[i]) << i;
        }
      }
}

TEST(Pooling, AdaptiveAvgPoolBinsCoverTheInput) {
  // in 5 -> out 3: bins [0, 2), [1, 4), [3, 5).
  Tensor x = from_vector<double>({1, 2, 3, 4, 5}, Dims{1, 1, 5});
  EXPECT_TRUE(all_close(values(F::adaptive_avg_pool1d(x, {3})), {1.5, 3.0, 4.5}, 0, 0));
  auto [v, i] = F::adaptive_max_pool1d_with_indices(x, {3});
  EXPECT_TRUE(all_close(values(v), {2, 4, 5}, 0, 0));
  EXPECT_TRUE(all_close(values(i), {1, 3, 4}, 0, 0));
}

TEST(Pooling, SameBitsOnOneAndTwoThreads) {
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<double> all;
    for (int which = 0; which < 3; ++which) {
      Tensor x = random_tensor({4, 8, 17, 19}, kFloat32, Layout::Contiguous, 8);
      x.requires_grad_(true);
      const Tensor y = which == 0   ? F::max_pool3d(x, {2, 3, 3}, {1, 2, 2}, {1, 1, 1})
                       : which == 1 ? F::avg_pool2d(x, {3}, {2}, {1}, true, false)
                                    : F::adaptive_avg_pool2d(x, {5, 7});
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

TEST(Pooling, BadInputNamesTheOp) {
  const Tensor x = ones({2, 3, 8, 8});
  const std::string pad = error_of<ValueError>([&] { F::max_pool2d(x, {3}, {}, {2}); });
  EXPECT_TRUE(contains(pad, "[max_pool2d] pad should be at most half of kernel size")) << pad;
  const std::string small = error_of<ValueError>([&] { F::avg_pool2d(x, {20}); });
  EXPECT_TRUE(contains(small, "[avg_pool2d]") && contains(small, "(3x0x0)")) << small;
  const std::string rank = error_of<ValueError>([&] { F::adaptive_max_pool3d(x.select(0, 0), {2}); });
  EXPECT_TRUE(contains(rank, "[adaptive_max_pool3d]") && contains(rank, "(3, 8, 8)")) << rank;
  EXPECT_THROW(F::max_pool1d(x, {2}), ValueError);
  EXPECT_THROW(F::avg_pool3d(ones({1, 1, 4, 4, 4}), {2}, {}, {0}, false, true, 0), ValueError);
  EXPECT_THROW(F::max_pool2d(ones({1, 1, 4, 4}, kBool), {2}), NotImplementedError);
  EXPECT_THROW(F::max_pool1d(ones({1, 1, 4}, kInt64), {2}), NotImplementedError);  // torch: values-only is floating
  EXPECT_THROW(F::avg_pool2d(ones({1, 1, 4, 4}, kInt32), {2}), NotImplementedError);
  EXPECT_THROW(F::adaptive_max_pool2d(ones({1, 1, 4, 4}, kInt64), {2}), NotImplementedError);
}

TEST(Pooling, IntegerInputs) {
  // max over [[-7, -1, 3, -4], [5, 5, -9, 2]] in 2x2 windows; int64 averages truncate toward zero.
  const Tensor x = from_vector<int64_t>({-7, -1, 3, -4, 5, 5, -9, 2}, Dims{1, 1, 2, 4});
  auto [v, i] = F::max_pool2d_with_indices(x.to(kInt8), {2});
  EXPECT_EQ(v.dtype(), kInt8);
  EXPECT_EQ(values(v), (std::vector<double>{5, 3}));
  EXPECT_EQ(values(i), (std::vector<double>{4, 2}));
  // A window of padding only keeps its first input position and the lowest value.
  const Tensor lowest = full({1, 1, 1, 1}, Scalar(int64_t(-128)), kInt8);
  auto [lv, li] = F::max_pool2d_with_indices(lowest, {2}, {1}, {1});
  EXPECT_EQ(values(lv), (std::vector<double>{-128, -128, -128, -128}));
  EXPECT_EQ(values(li), (std::vector<double>{0, 0, 0, 0}));
  const Tensor avg = F::avg_pool2d(x, {1, 2});
  EXPECT_EQ(avg.dtype(), kInt64);
  EXPECT_EQ(values(avg), (std::vector<double>{-4, 0, 5, -3}));
  EXPECT_EQ(values(F::avg_pool2d(x, {1, 2}, {}, {0}, false, true, -3)), (std::vector<double>{2, 0, -3, 2}));
  EXPECT_EQ(values(F::max_pool1d_with_indices(x.select(0, 0).select(0, 0), {2}).first),
            (std::vector<double>{-1, 3, 5, 2}));
}

TEST(Pooling, MaxUnpoolInvertsMaxPoolAtTheMaxima) {
  Tensor x = random_tensor({2, 3, 6, 7}, kFloat64, Layout::Contiguous, 11);
  auto [v, i] = F::max_pool2d_with_indices(x, {2, 3}, {2, 2}, {1, 1});
  Tensor vg = v.detach();
  vg.requires_grad_(true);
  const Tensor y = F::max_unpool2d(vg, i, {2, 3}, {2, 2}, {1, 1}, {6, 7});
  EXPECT_EQ(y.sizes(), x.sizes());
  const std::vector<double> xs = values(x), ys = values(y), is = values(i), vs = values(v);
  std::vector<double> want(ys.size(), 0.0);
  const int64_t in_plane = v.size(2) * v.size(3), out_plane = 6 * 7;
  for (size_t j = 0; j < is.size(); ++j) want[size_t(int64_t(j) / in_plane * out_plane + int64_t(is[j]))] = vs[j];
  EXPECT_EQ(ys, want);
  // The backward gathers the upstream gradient at the indices.
  const Tensor gy = random_tensor(y.sizes(), kFloat64, Layout::Contiguous, 12);
  y.backward(gy);
  const std::vector<double> gys = values(gy), gv = values(vg.grad());
  for (size_t j = 0; j < is.size(); ++j)
    EXPECT_EQ(gv[j], gys[size_t(int64_t(j) / in_plane * out_plane + int64_t(is[j]))]) << j;
  EXPECT_EQ(y.grad_fn()->name(), "MaxUnpool2DBackward0");
  // Default sizes: (in - 1) * stride + kernel - 2 * padding; 1-d and 3-d forms.
  EXPECT_EQ(F::max_unpool1d(ones({2, 3}), zeros({2, 3}, kInt64), {2}).sizes(), (Dims{2, 6}));
  EXPECT_EQ(F::max_unpool3d(ones({1, 1, 2, 2, 2}), zeros({1, 1, 2, 2, 2}, kInt64), {2}, {}, {0}, {1, 1, 3, 4, 5})
                .sizes(),
            (Dims{1, 1, 3, 4, 5}));
}

TEST(Pooling, MaxUnpoolBadInput) {
  const Tensor v = ones({1, 2, 2, 2}), i = zeros({1, 2, 2, 2}, kInt64);
  const std::string range = error_of<IndexError>([&] { F::max_unpool2d(v, add(i, Tensor(Scalar(16))), {2}); });
  EXPECT_TRUE(contains(range, "[max_unpool2d] found an invalid max index: 16 (output volumes are of size 4x4)"))
      << range;
  const std::string size = error_of<ValueError>([&] { F::max_unpool2d(v, i, {2}, {}, {0}, {6, 5}); });
  EXPECT_TRUE(contains(size, "[max_unpool2d] invalid output_size (6, 5) (dim 0 must be between 2 and 6)")) << size;
  EXPECT_THROW(F::max_unpool2d(v, i.to(kInt32), {2}), TypeError);
  EXPECT_THROW(F::max_unpool2d(v, i.narrow(1, 0, 1), {2}), ValueError);
  EXPECT_THROW(F::max_unpool2d(v.select(0, 0).select(0, 0), i.select(0, 0).select(0, 0), {2}), ValueError);
  EXPECT_THROW(F::max_unpool2d(v, i, {2}, {}, {0}, {2, 4, 4}), ValueError);
  EXPECT_THROW(F::max_unpool3d(v.unsqueeze(0), i.unsqueeze(0), {2}, {0}), ValueError);
  EXPECT_THROW(F::max_unpool2d(v.to(kInt64), i, {2}), NotImplementedError);
}

TEST(Pooling, LpPoolIsThePNormOfEachWindow) {
  const Tensor x = random_tensor({2, 3, 7}, kFloat64, Layout::Contiguous, 13, 0.5, 2.0);
  const std::vector<double> xs = values(x);
  const std::vector<double> y2 = values(F::lp_pool1d(x, 2.0, {3}, {2}));  // windows at 0, 2, 4
  const std::vector<double> yinf = values(F::lp_pool1d(x, std::numeric_limits<double>::infinity(), {3}, {2}));
  ASSERT_EQ(y2.size(), size_t(2 * 3 * 3));
  for (size_t plane = 0; plane < 6; ++plane)
    for (size_t o = 0; o < 3; ++o) {
      double sum = 0, mx = 0;
      for (size_t j = 0; j < 3; ++j) {
        const double a = xs[plane * 7 + o * 2 + j];
        sum += a * a;
        mx = std::max(mx, std::abs(a));
      }
      EXPECT_NEAR(y2[plane * 3 + o], std::sqrt(sum), 1e-14);
      EXPECT_EQ(yinf[plane * 3 + o], mx);
    }
  const std::string small = error_of<ValueError>([&] { F::lp_pool2d(ones({1, 1, 2, 2}), 2.0, {3}); });
  EXPECT_TRUE(contains(small, "[lp_pool2d]") && contains(small, "Output size is too small")) << small;
}

}  // namespace
}  // namespace flambeau::testing
