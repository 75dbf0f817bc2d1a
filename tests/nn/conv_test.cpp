// Convolutions (nn/convolution.cpp over kernels/cpu/conv.cpp) against a direct reference
// loop in float64, forward and the three gradients (by the loop's own adjoint), and the
// same bits on 1 and 2 threads.
#include <cmath>

#include "flambeau/nn/functional.h"
#include "flambeau/nn/modules.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

struct Case {
  Dims x, w;
  Dims stride, padding, dilation;
  int64_t groups;
};

// y[n, co, o] = b[co] + sum over ci in co's group, k: w[co, ci, k] * x[n, g * cin + ci, o * s - p + k * d]
// (2-D), with gx / gw the sums of gy against the same products.
struct Reference {
  std::vector<double> y, gx, gw;
};
Reference reference(const Case& c, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b, const std::vector<double>& gy, const Dims& ys) {
  const int64_t N = c.x[0], Cin = c.x[1], H = c.x[2], W = c.x[3], Cout = c.w[0], cin = c.w[1], KH = c.w[2],
                KW = c.w[3], OH = ys[2], OW = ys[3], cout = Cout / c.groups;
  Reference r{std::vector<double>(size_t(N * Cout * OH * OW)), std::vector<double>(x.size()),
              std::vector<double>(w.size())};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Cout; ++co)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const size_t yi = size_t(((n * Cout + co) * OH + oh) * OW + ow);
          double acc = b[size_t(co)];
          for (int64_t ci = 0; ci < cin; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * c.stride[0] - c.padding[0] + kh * c.dilation[0];
                const int64_t iw = ow * c.stride[1] - c.padding[1] + kw * c.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const size_t xi = size_t(((n * Cin + co / cout * cin + ci) * H + ih) * W + iw);
                const size_t wi = size_t(((co * cin + ci) * KH + kh) * KW + kw);
                acc += w[wi] * x[xi];
                r.gx[xi] += w[wi] * gy[yi];
                r.gw[wi] += x[xi] * gy[yi];
              }
          r.y[yi] = acc;
        }
  return r;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << what << " at " << i;
}

TEST(Conv, Conv2dAndItsGradientsMatchTheReferenceLoop) {
  const Case cases[] = {
      {{2, 3, 7, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{3, 4, 9, 7}, {6, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2},
      {{2, 4, 6, 6}, {4, 1, 3, 3}, {1, 2}, {2, 1}, {2, 1}, 4},  // depthwise
      {{2, 5, 4, 6}, {3, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},  // pointwise: no unfolding
  };
  for (const Case& c : cases)
    for (Layout l : {Layout::Contiguous, Layout::Transposed}) {
      Tensor x = random_tensor(c.x, kFloat64, l, 1), w = random_tensor(c.w, kFloat64, Layout::Contiguous, 2);
      Tensor b = random_tensor({c.w[0]}, kFloat64, Layout::Contiguous, 3);
      x.requires_grad_(true), w.requires_grad_(true), b.requires_grad_(true);
      const Tensor y = nn::functional::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
      const Tensor gy = random_tensor(y.sizes(), kFloat64, Layout::Contiguous, 4);
      y.backward(gy);
      const Reference r = reference(c, values(x), values(w), values(b), values(gy), y.sizes());
      expect_near_all(values(y), r.y, "y");
      expect_near_all(values(x.grad()), r.gx, "gx");
      expect_near_all(values(w.grad()), r.gw, "gw");
      expect_near_all(values(b.grad()), values(sum(gy, {0, 2, 3})), "gb");
    }
}

// Note [Channels-last convolutions]: a channels-last input gives channels-last results, the
// values of the reference loop (float32 through oneDNN's NHWC kernels where built in; float64
// through the row-major kernels and copies), and weights laid out channels-last by
// Module::to do the same.
TEST(Conv, ChannelsLastInputGivesChannelsLastResults) {
  const Case c{{2, 16, 7, 6}, {8, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1};
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = random_tensor(c.x, dt, Layout::Contiguous, 11).contiguous(MemoryFormat::ChannelsLast);
    Tensor w = random_tensor(c.w, dt, Layout::Contiguous, 12), b = random_tensor({8}, dt, Layout::Contiguous, 13);
    x.requires_grad_(true), w.requires_grad_(true), b.requires_grad_(true);
    const Tensor y = nn::functional::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    EXPECT_TRUE(y.is_contiguous(MemoryFormat::ChannelsLast) && !y.is_contiguous());
    const Tensor gy = random_tensor(y.sizes(), dt, Layout::Contiguous, 14);
    y.backward(gy);
    EXPECT_TRUE(x.grad().is_contiguous(MemoryFormat::ChannelsLast));
    const Reference r = reference(c, values(x), values(w), values(b), values(gy), y.sizes());
    // float32: sums of 144 products of N(0, 1) values (at most 84 for gw) rounded in float32.
    const double tol = dt == kFloat32 ? 1e-4 : 1e-12;
    for (auto [got, want] : {std::pair{values(y), r.y}, std::pair{values(x.grad()), r.gx},
                             std::pair{values(w.grad()), r.gw}})
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
  }
  nn::Conv layer(2, false, 3, 4, {3}, {});
  layer.to(MemoryFormat::ChannelsLast);
  EXPECT_TRUE(layer.weight.is_contiguous(MemoryFormat::ChannelsLast));
  const Tensor x = random_tensor({1, 3, 5, 5}, kFloat32, Layout::Contiguous, 15);
  EXPECT_TRUE(layer.forward(x).is_contiguous(MemoryFormat::ChannelsLast));  // the weight's layout decides too
}

TEST(MemoryFormat, LayoutsAsTorch) {
  const Tensor t = zeros({2, 3, 4, 5});
  EXPECT_EQ(t.contiguous(MemoryFormat::ChannelsLast).strides(), (Dims{60, 1, 15, 3}));
  EXPECT_EQ(zeros({2, 3, 4, 5, 6}).contiguous(MemoryFormat::ChannelsLast3d).strides(), (Dims{360, 1, 90, 18, 3}));
  EXPECT_EQ(suggest_memory_format(t), MemoryFormat::Contiguous);
  EXPECT_EQ(suggest_memory_format(t.contiguous(MemoryFormat::ChannelsLast)), MemoryFormat::ChannelsLast);
  const Tensor ambiguous = zeros({2, 3, 1, 1});  // contiguous in both formats
  EXPECT_TRUE(ambiguous.is_contiguous(MemoryFormat::ChannelsLast) && ambiguous.is_contiguous());
  EXPECT_EQ(suggest_memory_format(ambiguous), MemoryFormat::Contiguous);
  EXPECT_TRUE(is_non_overlapping_and_dense(t.permute({3, 1, 0, 2})));
  EXPECT_FALSE(is_non_overlapping_and_dense(t.slice(3, 0, 5, 2)));
  EXPECT_FALSE(is_non_overlapping_and_dense(zeros({3}).expand({2, 3})));
  EXPECT_EQ(t.permute({1, 0, 2, 3}).clone(MemoryFormat::Preserve).strides(), t.permute({1, 0, 2, 3}).strides());
  EXPECT_THROW(zeros({2, 3}).contiguous(MemoryFormat::ChannelsLast), ValueError);
  EXPECT_THROW(t.contiguous(MemoryFormat::Preserve), ValueError);
}

TEST(Conv, TransposedConvIsTheInputGradientOfConv) {
  // conv_transpose2d(g, w) equals the gradient of conv2d(x, w) with respect to x for upstream g.
  Tensor x = random_tensor({2, 4, 9, 8}, kFloat64, Layout::Contiguous, 5);
  const Tensor w = random_tensor({6, 2, 3, 3}, kFloat64, Layout::Contiguous, 6);
  x.requires_grad_(true);
  const Tensor y = nn::functional::conv2d(x, w, {}, {2, 2}, {1, 1}, {1, 1}, 2);
  const Tensor g = random_tensor(y.sizes(), kFloat64, Layout::Contiguous, 7);
  y.backward(g);
  const Tensor t = nn::functional::conv_transpose2d(g, w, {}, {2, 2}, {1, 1}, {0, 1}, 2, {1, 1});
  EXPECT_EQ(values(t), values(x.grad()));
}

TEST(Conv, SameBitsOnOneAndTwoThreads) {
  for (int64_t batch : {1, 4, 20}) {  // 4, 20: images packed (one pack; packs over threads)
    std::vector<std::vector<double>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      Tensor x = random_tensor({batch, 6, 17, 19}, kFloat32, Layout::Contiguous, 8);
      Tensor w = random_tensor({8, 6, 3, 3}, kFloat32, Layout::Contiguous, 9);
      x.requires_grad_(true), w.requires_grad_(true);
      const Tensor y = nn::functional::conv2d(x, w, {}, {1, 2}, {1, 1});
      y.backward(ones_like(y));
      std::vector<double> all = values(y), gx = values(x.grad()), gw = values(w.grad());
      all.insert(all.end(), gx.begin(), gx.end());
      all.insert(all.end(), gw.begin(), gw.end());
      runs.push_back(all);
    }
    set_num_threads(2);
    EXPECT_EQ(runs[0], runs[1]) << "batch " << batch;
  }
}

TEST(Conv, BadInputNamesTheOp) {
  const Tensor x = ones({1, 4, 5, 5});
  try {
    nn::functional::conv2d(x, ones({2, 3, 3, 3}));
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("[conv2d]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("(1, 4, 5, 5)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nn::functional::padding_mode_from("conv2d", "full"), ValueError);
  EXPECT_THROW(nn::functional::conv2d(x, ones({2, 4, 3, 3}), {}, {2}, nn::functional::PaddingMode::Same), ValueError);
  const Tensor same = nn::functional::conv2d(x, ones({2, 4, 3, 2}), {}, {1}, nn::functional::PaddingMode::Same);
  EXPECT_EQ(same.sizes(), (Dims{1, 2, 5, 5}));
  EXPECT_THROW(nn::functional::pad(x, {1}), ValueError);
}

TEST(Conv, TransposedOutputSizePicksTheOutputPadding) {
  // in 4, stride 3, kernel 2, padding 1: sizes 9 to 11 (output_padding 0 to 2).
  nn::ConvOptions o;
  o.stride = {3};
  o.padding = {1};
  nn::Conv layer(2, true, 2, 3, {2}, o);
  const Tensor x = random_tensor({1, 2, 4, 4}, kFloat32, Layout::Contiguous, 10);
  EXPECT_EQ(layer.forward(x).sizes(), (Dims{1, 3, 9, 9}));
  EXPECT_EQ(layer.forward(x, {10, 11}).sizes(), (Dims{1, 3, 10, 11}));
  EXPECT_EQ(layer.forward(x, {1, 3, 11, 9}).sizes(), (Dims{1, 3, 11, 9}));
  EXPECT_EQ(layer.forward(x.select(0, 0), {2, 10, 10}).sizes(), (Dims{3, 10, 10}));
  EXPECT_EQ(values(layer.forward(x, {11, 10})),
            values(nn::functional::conv_transpose2d(x, layer.weight, layer.bias, {3}, {1}, {2, 1})));
  const std::string e = error_of<ValueError>([&] { layer.forward(x, {12, 9}); });
  EXPECT_TRUE(contains(e, "[ConvTranspose2d] requested an output size of (12, 9), but valid sizes range from (9, 9) "
                          "to (11, 11) (for an input of (4, 4))"))
      << e;
  const std::string n = error_of<ValueError>([&] { layer.forward(x, {9, 9, 9}); });
  EXPECT_TRUE(contains(n, "[ConvTranspose2d] for 4D input, output_size must have 2 or 4 elements (got 3)")) << n;
}

}  // namespace
}  // namespace flambeau::testing
