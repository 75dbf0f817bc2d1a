// nn::functional: the fused layer_norm / rms_norm against their composite formulas
// (values and gradients), gradcheck, thread independence, errors; dropout; the losses
// against hand-computed references (weights, ignore_index, label smoothing, reductions).
#include "test_util.h"

namespace flambeau::testing {
namespace {

namespace F = nn::functional;

Dims last_dims(int64_t k) {
  Dims d;
  for (int64_t i = -k; i < 0; ++i) d.push_back(i);
  return d;
}

// The composite formulas, differentiated by autograd.
Tensor layer_norm_ref(const Tensor& x, int64_t k, std::optional<Tensor> w, std::optional<Tensor> b, double eps) {
  const Tensor m = mean(x, last_dims(k), true), v = var(x, last_dims(k), 0, true);
  Tensor y = mul(sub(x, m), rsqrt(add(v, eps)));
  if (w) y = mul(y, *w);
  if (b) y = add(y, *b);
  return y;
}
Tensor rms_norm_ref(const Tensor& x, int64_t k, std::optional<Tensor> w, double eps) {
  Tensor y = mul(x, rsqrt(add(mean(mul(x, x), last_dims(k), true), eps)));
  return w ? mul(y, *w) : y;
}

Tensor leaf(Tensor t) { return t.requires_grad_(); }

struct NormCase {
  Dims shape;
  int64_t k;  // normalized dims
  Layout layout;
};

// Fused vs composite in float64: values and the gradients of x, weight and bias.
TEST(FusedNorm, MatchesCompositeValuesAndGradients) {
  // Row lengths cross the SIMD tail and the kernels' 512-element sum blocks.
  const NormCase cases[] = {{{3, 5, 7}, 1, Layout::Contiguous},  {{4, 6, 10}, 2, Layout::Transposed},
                            {{2, 1031}, 1, Layout::Strided},     {{3, 9}, 1, Layout::Broadcast},
                            {{17}, 1, Layout::Contiguous},       {{2, 3, 2, 5}, 3, Layout::Contiguous}};
  for (bool rms : {false, true})
    for (const NormCase& c : cases)
      for (int affine = 0; affine < 3; ++affine) {  // none, weight, weight + bias
        const Dims ns(c.shape.data() + (c.shape.size() - size_t(c.k)), size_t(c.k));
        const Tensor x = leaf(random_tensor(c.shape, kFloat64, c.layout, 1));
        std::optional<Tensor> w, b;
        std::vector<Tensor> inputs{x};
        if (affine >= 1) inputs.push_back(*(w = leaf(random_tensor(ns, kFloat64, Layout::Contiguous, 2))));
        if (affine == 2 && !rms) inputs.push_back(*(b = leaf(random_tensor(ns, kFloat64, Layout::Contiguous, 3))));
        const Tensor got = rms ? F::rms_norm(x, ns, w, 1e-6) : F::layer_norm(x, ns, w, b, 1e-5);
        const Tensor want = rms ? rms_norm_ref(x, c.k, w, 1e-6) : layer_norm_ref(x, c.k, w, b, 1e-5);
        const std::string what = std::string(rms ? "rms " : "layer ") + shape_str(c.shape) + " " +
                                 layout_name(c.layout) + " affine " + std::to_string(affine);
        EXPECT_EQ(got.sizes(), c.shape) << what;
        EXPECT_TRUE(all_close(values(got), values(want), 1e-12, 1e-12)) << what;
        const Tensor g = random_tensor(c.shape, kFloat64, Layout::Contiguous, 4);
        const auto got_grads = autograd::grad({got}, inputs, {g});
        const auto want_grads = autograd::grad({want}, inputs, {g});
        for (size_t i = 0; i < inputs.size(); ++i)
          EXPECT_TRUE(all_close(values(got_grads[i]), values(want_grads[i]), 1e-10, 1e-11)) << what << " grad " << i;
      }
}

TEST(FusedNorm, Float32AndReducedFloatsAgainstFloat64) {
  const Tensor x64 = random_tensor({8, 300}, kFloat64, Layout::Contiguous, 5);
  const Tensor w64 = random_tensor({300}, kFloat64, Layout::Contiguous, 6);
  const Tensor want = layer_norm_ref(x64, 1, w64, {}, 1e-5);
  const Tensor got = F::layer_norm(x64.to(kFloat32), {300}, w64.to(kFloat32));
  EXPECT_EQ(got.dtype(), kFloat32);
  EXPECT_TRUE(all_close(values(got), values(want), 1e-5, 1e-5));
  for (DType dt : {kBFloat16, kFloat16}) {
    const Tensor r = F::rms_norm(x64.to(dt), {300});
    EXPECT_EQ(r.dtype(), dt);
    // Computed in float32 from the rounded input, then rounded once.
    const Tensor ref = rms_norm_ref(x64.to(dt).to(kFloat64), 1, {}, dt == kBFloat16 ? 0x1p-7 : 0x1p-10);
    EXPECT_TRUE(all_close(values(r), values(ref), rtol_for(dt), 1e-3)) << dtype_name(dt);
  }
}

TEST(FusedNorm, RmsNormDefaultEpsIsTheMachineEpsilon) {
  // mean(x^2) = 1e-8 is below float32's epsilon (1.19e-7) but far above float64's.
  const Tensor x32 = full({2, 4}, 1e-4, kFloat32), x64 = full({2, 4}, 1e-4, kFloat64);
  EXPECT_NEAR(F::rms_norm(x32, {4}).flatten()[0].item<double>(), 1e-4 / std::sqrt(1e-8 + 0x1p-23), 1e-6);
  EXPECT_NEAR(F::rms_norm(x64, {4}).flatten()[0].item<double>(), 1.0, 1e-7);
}

TEST(FusedNorm, Gradcheck) {
  std::string report;
  const Tensor x = leaf(random_tensor({3, 2, 4}, kFloat64, Layout::Contiguous, 7));
  const Tensor w = leaf(random_tensor({2, 4}, kFloat64, Layout::Contiguous, 8));
  const Tensor b = leaf(random_tensor({2, 4}, kFloat64, Layout::Contiguous, 9));
  EXPECT_TRUE(autograd::gradcheck([](const std::vector<Tensor>& in) { return F::layer_norm(in[0], {2, 4}, in[1], in[2]); },
                                  {x, w, b}, 1e-6, 1e-5, 1e-3, &report))
      << report;
  EXPECT_TRUE(autograd::gradcheck([](const std::vector<Tensor>& in) { return F::rms_norm(in[0], {4}, in[1].select(0, 0), 1e-3); },
                                  {x, w}, 1e-6, 1e-5, 1e-3, &report))
      << report;
}

TEST(FusedNorm, SameBitsWithOneOrTwoThreads) {
  ThreadGuard guard;
  // 2000 rows of 70: nine row blocks for the weight and bias gradients.
  const Tensor x = leaf(random_tensor({2000, 70}, kFloat32, Layout::Contiguous, 10));
  const Tensor w = leaf(random_tensor({70}, kFloat32, Layout::Contiguous, 11));
  const Tensor b = leaf(random_tensor({70}, kFloat32, Layout::Contiguous, 12));
  const Tensor g = random_tensor({2000, 70}, kFloat32, Layout::Contiguous, 13);
  for (bool rms : {false, true}) {
    std::vector<std::vector<Tensor>> runs;
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      const Tensor y = rms ? F::rms_norm(x, {70}, w) : F::layer_norm(x, {70}, w, b);
      std::vector<Tensor> r{y};
      for (const Tensor& t : autograd::grad({y}, rms ? std::vector<Tensor>{x, w} : std::vector<Tensor>{x, w, b}, {g}))
        r.push_back(t);
      runs.push_back(r);
    }
    for (size_t i = 0; i < runs[0].size(); ++i) EXPECT_TRUE(bitwise_equal(runs[0][i], runs[1][i])) << rms << " " << i;
  }
}

TEST(FusedNorm, EmptyRowsAndNoGradInputs) {
  const Tensor x = leaf(zeros({0, 5}, kFloat64));
  const Tensor w = leaf(ones({5}, kFloat64));
  const Tensor y = F::layer_norm(x, {5}, w);
  EXPECT_EQ(y.sizes(), (Dims{0, 5}));
  const auto grads = autograd::grad({sum(y)}, {x, w});
  EXPECT_EQ(grads[0].sizes(), (Dims{0, 5}));
  EXPECT_EQ(values(grads[1]), std::vector<double>(5, 0.0));
  // Only the weight requires grad: dweight still right.
  const Tensor xs = random_tensor({4, 5}, kFloat64, Layout::Contiguous, 14);
  const Tensor dw = autograd::grad({sum(F::layer_norm(xs, {5}, w))}, {w})[0];
  const Tensor dw_ref = autograd::grad({sum(layer_norm_ref(xs, 1, w, {}, 1e-5))}, {w})[0];
  EXPECT_TRUE(all_close(values(dw), values(dw_ref), 1e-12, 1e-12));
}

TEST(FusedNorm, Errors) {
  const Tensor x = ones({2, 3});
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::layer_norm(x, {4}); }),
                       "[layer_norm] normalized_shape (4,) expects an input of shape (*, 4), got (2, 3)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::rms_norm(x, {2, 3, 1}); }), "[rms_norm] normalized_shape"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::layer_norm(x, {}); }), "at least one dim"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::layer_norm(x, {3}, ones({2})); }),
                       "[layer_norm] weight of shape (2,) does not match normalized_shape (3,)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::layer_norm(x, {3}, ones({3}), ones({3, 1})); }),
                       "[layer_norm] bias of shape (3, 1)"));
  EXPECT_TRUE(contains(error_of<TypeError>([&] { F::layer_norm(ones({2, 3}, kInt64), {3}); }),
                       "[layer_norm] expected a floating point input, got int64"));
}

// ---- dropout, linear -------------------------------------------------------------------------

TEST(Dropout, MasksScalesAndErrors) {
  const Tensor x = leaf(full({20000}, 3.0, kFloat64));
  EXPECT_EQ(F::dropout(x, 0.3, false).impl(), x.impl());
  EXPECT_EQ(F::dropout(x, 0.0, true).impl(), x.impl());
  EXPECT_EQ(values(F::dropout(x, 1.0, true)), std::vector<double>(20000, 0.0));
  Generator g1(7), g2(7);
  const Tensor a = F::dropout(x, 0.25, true, g1), b = F::dropout(x, 0.25, true, g2);
  EXPECT_TRUE(bitwise_equal(a, b));
  int64_t kept = 0;
  for (double v : values(a)) {
    EXPECT_TRUE(v == 0.0 || v == 4.0) << v;  // 3 / (1 - 0.25)
    kept += v != 0.0;
  }
  EXPECT_NEAR(double(kept) / 20000, 0.75, 0.015);
  // The gradient is the same mask and scale.
  const Tensor gx = autograd::grad({sum(a)}, {x})[0];
  EXPECT_TRUE(all_close(values(gx), values(div(a, 3.0)), 1e-15, 0));
  for (double p : {-0.1, 1.5})
    EXPECT_TRUE(contains(error_of<ValueError>([&] { F::dropout(x, p); }),
                         "[dropout] dropout probability has to be between 0 and 1"));
}

TEST(Linear, MatchesMatmul) {
  const Tensor x = random_tensor({3, 4}, kFloat64, Layout::Contiguous, 1);
  const Tensor w = random_tensor({5, 4}, kFloat64, Layout::Contiguous, 2);
  const Tensor b = random_tensor({5}, kFloat64, Layout::Contiguous, 3);
  EXPECT_TRUE(all_close(values(F::linear(x, w, b)), values(add(matmul(x, w.t()), b)), 1e-14, 1e-14));
  EXPECT_TRUE(all_close(values(F::linear(x, w)), values(matmul(x, w.t())), 1e-14, 1e-14));
}

// ---- losses ----------------------------------------------------------------------------------

// torch's cross_entropy over class indices for logits [N, C], by hand.
double cross_entropy_ref(const std::vector<double>& x, int64_t n, int64_t c, const std::vector<int64_t>& t,
                         const std::vector<double>& w, double smoothing, const std::string& reduction,
                         std::vector<double>* per_sample = nullptr) {
  double total = 0, weight_total = 0;
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, x[size_t(i * c + j)]);
    for (int64_t j = 0; j < c; ++j) s += std::exp(x[size_t(i * c + j)] - mx);
    auto logp = [&](int64_t j) { return x[size_t(i * c + j)] - mx - std::log(s); };
    double li = 0;
    if (t[size_t(i)] != -100) {
      const double wt = w.empty() ? 1 : w[size_t(t[size_t(i)])];
      double smooth = 0;
      for (int64_t j = 0; j < c; ++j) smooth -= (w.empty() ? 1 : w[size_t(j)]) * logp(j);
      li = (1 - smoothing) * -wt * logp(t[size_t(i)]) + smoothing / double(c) * smooth;
      weight_total += wt;
    }
    if (per_sample) per_sample->push_back(li);
    total += li;
  }
  return reduction == "mean" ? total / weight_total : total;
}

TEST(Losses, CrossEntropyClassIndices) {
  const int64_t n = 6, c = 4;
  const Tensor x = leaf(random_tensor({n, c}, kFloat64, Layout::Contiguous, 20));
  const std::vector<int64_t> t{0, 3, 1, -100, 2, 3};
  const Tensor target = from_vector(t);
  const Tensor w = random_tensor({c}, kFloat64, Layout::Contiguous, 21, 0.5, 1.5);
  for (double s : {0.0, 0.2})
    for (bool weighted : {false, true})
      for (const std::string red : {"mean", "sum", "none"}) {
        const std::string what = red + " smoothing " + std::to_string(s) + (weighted ? " weighted" : "");
        std::vector<double> per;
        const double want = cross_entropy_ref(values(x), n, c, t, weighted ? values(w) : std::vector<double>{}, s,
                                              red, &per);
        const Tensor got = F::cross_entropy(x, target, weighted ? std::optional<Tensor>(w) : std::nullopt, -100, red, s);
        if (red == "none") EXPECT_TRUE(all_close(values(got), per, 1e-12, 1e-14)) << what;
        else EXPECT_NEAR(got.item<double>(), want, 1e-12) << what;
      }
  // The gradient of the composite, checked numerically.
  std::string report;
  EXPECT_TRUE(autograd::gradcheck(
      [&](const std::vector<Tensor>& in) { return F::cross_entropy(in[0], target, w, -100, "mean", 0.1); }, {x}, 1e-6,
      1e-6, 1e-4, &report))
      << report;
}

TEST(Losses, CrossEntropyExtraDimsAndSingleSample) {
  // [N, C, d] is the same as [N * d, C] with the class dim last.
  const Tensor x = random_tensor({2, 3, 4}, kFloat64, Layout::Contiguous, 22);
  const Tensor t = from_vector<int64_t>({0, 2, 1, 1, 2, 0, -100, 1}, Dims{2, 4});
  const Tensor flat_x = x.permute({0, 2, 1}).reshape({8, 3}), flat_t = t.reshape({8});
  EXPECT_NEAR(F::cross_entropy(x, t, {}, -100, "mean", 0.1).item<double>(),
              F::cross_entropy(flat_x, flat_t, {}, -100, "mean", 0.1).item<double>(), 1e-14);
  const Tensor none = F::cross_entropy(x, t, {}, -100, "none");
  EXPECT_EQ(none.sizes(), (Dims{2, 4}));
  EXPECT_TRUE(all_close(values(none), values(F::cross_entropy(flat_x, flat_t, {}, -100, "none")), 1e-14, 0));
  // A single sample [C] with a 0-dim target.
  const Tensor one = F::cross_entropy(x[0].select(1, 0), scalar_tensor(int64_t(2)), {}, -100, "none");
  EXPECT_EQ(one.dim(), 0);
  EXPECT_NEAR(one.item<double>(), -log_softmax(x[0].select(1, 0), 0)[2].item<double>(), 1e-14);
}

TEST(Losses, CrossEntropyClassProbabilities) {
  const int64_t n = 5, c = 3;
  const Tensor x = random_tensor({n, c}, kFloat64, Layout::Contiguous, 23);
  const Tensor p = softmax(random_tensor({n, c}, kFloat64, Layout::Contiguous, 24), 1);
  const Tensor w = random_tensor({c}, kFloat64, Layout::Contiguous, 25, 0.5, 1.5);
  const std::vector<double> xv = values(x), pv = values(p), wv = values(w);
  for (double s : {0.0, 0.3}) {
    std::vector<double> per;
    for (int64_t i = 0; i < n; ++i) {
      double mx = -INFINITY, z = 0, li = 0;
      for (int64_t j = 0; j < c; ++j) mx = std::max(mx, xv[size_t(i * c + j)]);
      for (int64_t j = 0; j < c; ++j) z += std::exp(xv[size_t(i * c + j)] - mx);
      for (int64_t j = 0; j < c; ++j)
        li -= wv[size_t(j)] * (pv[size_t(i * c + j)] * (1 - s) + s / c) * (xv[size_t(i * c + j)] - mx - std::log(z));
      per.push_back(li);
    }
    double total = 0;
    for (double v : per) total += v;
    EXPECT_TRUE(all_close(values(F::cross_entropy(x, p, w, -100, "none", s)), per, 1e-12, 1e-14));
    EXPECT_NEAR(F::cross_entropy(x, p, w, -100, "sum", s).item<double>(), total, 1e-12);
    EXPECT_NEAR(F::cross_entropy(x, p, w, -100, "mean", s).item<double>(), total / n, 1e-12);
  }
}

TEST(Losses, NllLoss) {
  const Tensor lp = log_softmax(random_tensor({4, 5}, kFloat64, Layout::Contiguous, 26), 1);
  const Tensor t = from_vector<int64_t>({4, -1, 0, 2});  // -1 is the ignore_index here
  const Tensor w = from_vector<double>({1, 2, 3, 4, 5});
  const std::vector<double> l = values(lp);
  const double want_sum = -(5 * l[4] + 1 * l[10] + 3 * l[17]);
  EXPECT_NEAR(F::nll_loss(lp, t, w, -1, "sum").item<double>(), want_sum, 1e-13);
  EXPECT_NEAR(F::nll_loss(lp, t, w, -1, "mean").item<double>(), want_sum / (5 + 1 + 3), 1e-13);
  EXPECT_TRUE(all_close(values(F::nll_loss(lp, t, w, -1, "none")), {-5 * l[4], 0, -l[10], -3 * l[17]}, 1e-13, 0));
  // Every target ignored: the mean is 0 / 0, as torch.
  EXPECT_TRUE(std::isnan(F::nll_loss(lp, full({4}, int64_t(-100)), {}).item<double>()));
}

TEST(Losses, RegressionAndBinary) {
  const Tensor x = random_tensor({3, 4}, kFloat64, Layout::Contiguous, 27);
  const Tensor y = random_tensor({3, 4}, kFloat64, Layout::Contiguous, 28);
  const std::vector<double> xv = values(x), yv = values(y);
  double se = 0, ae = 0;
  for (size_t i = 0; i < xv.size(); ++i) se += (xv[i] - yv[i]) * (xv[i] - yv[i]), ae += std::abs(xv[i] - yv[i]);
  EXPECT_NEAR(F::mse_loss(x, y).item<double>(), se / 12, 1e-14);
  EXPECT_NEAR(F::mse_loss(x, y, "sum").item<double>(), se, 1e-13);
  EXPECT_NEAR(F::l1_loss(x, y).item<double>(), ae / 12, 1e-14);
  EXPECT_EQ(F::l1_loss(x, y, "none").sizes(), (Dims{3, 4}));
  EXPECT_EQ(F::mse_loss(x, y[0], "none").sizes(), (Dims{3, 4}));  // target broadcasts

  const Tensor t = gt(random_tensor({3, 4}, kFloat64, Layout::Contiguous, 29), 0).to(kFloat64);
  const Tensor w = random_tensor({3, 1}, kFloat64, Layout::Contiguous, 30, 0.5, 1.5);
  const Tensor pw = random_tensor({4}, kFloat64, Layout::Contiguous, 31, 0.5, 2);
  const std::vector<double> tv = values(t), wv = values(w), pwv = values(pw);
  std::vector<double> per;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double sig = 1 / (1 + std::exp(-xv[i]));
    per.push_back(-wv[i / 4] * (pwv[i % 4] * tv[i] * std::log(sig) + (1 - tv[i]) * std::log(1 - sig)));
  }
  EXPECT_TRUE(all_close(values(F::binary_cross_entropy_with_logits(x, t, w, "none", pw)), per, 1e-12, 1e-14));
  double total = 0;
  for (double v : per) total += v;
  EXPECT_NEAR(F::binary_cross_entropy_with_logits(x, t, w, "mean", pw).item<double>(), total / 12, 1e-13);
  // Stable for large logits: log(1 + exp(-100)) would round to 0 but loss ~ 100 stays exact.
  EXPECT_NEAR(F::binary_cross_entropy_with_logits(full({1}, -100.0, kFloat64), ones({1}, kFloat64)).item<double>(), 100,
              1e-12);
}

TEST(Losses, Errors) {
  const Tensor x = ones({4, 3}), t = from_vector<int64_t>({0, 1, 2, 1});
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::cross_entropy(x, t, {}, -100, "avg"); }),
                       "[cross_entropy] reduction must be 'mean', 'sum' or 'none', got 'avg'"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::cross_entropy(x, from_vector<int64_t>({0, 1})); }),
                       "[cross_entropy] expected a target of shape (4,) for input of shape (4, 3), got (2,)"));
  EXPECT_TRUE(contains(error_of<IndexError>([&] { F::cross_entropy(x, from_vector<int64_t>({0, 7, 1, -100})); }),
                       "[cross_entropy] target 7 is out of bounds for 3 classes"));
  EXPECT_TRUE(contains(error_of<IndexError>([&] { F::nll_loss(x, from_vector<int64_t>({0, -2, 1, 1})); }),
                       "[nll_loss] target -2 is out of bounds for 3 classes"));
  EXPECT_TRUE(contains(error_of<TypeError>([&] { F::nll_loss(x, gt(t, 0)); }),
                       "[nll_loss] expected class indices as an integer target"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::cross_entropy(x, ones({4, 2})); }),
                       "[cross_entropy] a class-probability target must have input's shape (4, 3), got (4, 2)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::cross_entropy(x, t, ones({4})); }),
                       "[cross_entropy] weight of shape (4,) does not match the 3 classes"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::cross_entropy(x, t, {}, -100, "mean", 1.5); }),
                       "label_smoothing must be between 0.0 and 1.0"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::cross_entropy(scalar_tensor(1.0), t); }),
                       "[cross_entropy] input must have a class dim"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::mse_loss(x, ones({2})); }), "[mse_loss]"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::l1_loss(x, ones({4}), "max"); }), "[l1_loss] reduction"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::binary_cross_entropy_with_logits(x, ones({4, 1})); }),
                       "[binary_cross_entropy_with_logits] target of shape (4, 1) must have input's shape (4, 3)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::binary_cross_entropy_with_logits(x, x, {}, "mean", ones({2})); }),
                       "pos_weight of shape (2,) does not broadcast"));
}

}  // namespace
}  // namespace flambeau::testing
