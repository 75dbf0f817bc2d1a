// nn::functional::linear_cross_entropy (the chunked fused kernel) against its composite
// reference cross_entropy(linear(x, W, b), y) + z-loss: loss and the gradients of x, W and
// b over every combination of options, float64 and float32, chunk and tile boundaries,
// threads; autograd behaviour (upstream gradients, retain_graph, no_grad, weight tying);
// bfloat16; memory; errors; the LinearCrossEntropyLoss module.
#include "flambeau/core/allocator.h"
#include "flambeau/core/parallel.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

namespace F = nn::functional;

struct Options {
  std::string reduction = "mean";
  bool ignored = false, smoothing = false, class_weight = false, z = false, bias = false, probs = false;
};

struct Inputs {
  Tensor x, w, b, target, cw;
};

// x [N, D], W [V, D] in [-1, 1) (logits of a few units), targets with some ignored rows.
Inputs make_inputs(int64_t N, int64_t D, int64_t V, DType dt, const Options& o, uint64_t seed) {
  Inputs in;
  in.x = random_tensor({N, D}, dt, Layout::Contiguous, seed, -1, 1).requires_grad_();
  in.w = random_tensor({V, D}, dt, Layout::Contiguous, seed + 1, -1, 1).requires_grad_();
  if (o.bias) in.b = random_tensor({V}, dt, Layout::Contiguous, seed + 2, -1, 1).requires_grad_();
  if (o.class_weight) in.cw = random_tensor({V}, dt, Layout::Contiguous, seed + 3, 0.5, 2);
  if (o.probs) {
    in.target = softmax(random_tensor({N, V}, dt, Layout::Contiguous, seed + 4, -2, 2), 1);
  } else {
    std::vector<double> t = random_values(N, seed + 5, 0, double(V), true);
    if (o.ignored)
      for (size_t i = 0; i < t.size(); i += 3) t[i] = -100;
    in.target = from_vector<double>(t).to(kInt64);
  }
  return in;
}

struct Result {
  Tensor loss, gx, gw, gb;
};

// Loss and gradients (upstream: ones for scalars, a fixed random tensor for "none").
Result run(const Inputs& in, const Options& o, bool fused, std::optional<int64_t> chunk = {}) {
  for (const Tensor* t : {&in.x, &in.w, &in.b})
    if (t->defined()) const_cast<Tensor*>(t)->set_grad(Tensor());
  auto opt = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  const double s = o.smoothing ? 0.1 : 0.0, z = o.z ? 0.05 : 0.0;
  Result r;
  r.loss = fused ? F::linear_cross_entropy(in.x, in.w, in.target, opt(in.b), opt(in.cw), o.reduction, -100, s, z, chunk)
                 : F::linear_cross_entropy_reference(in.x, in.w, in.target, opt(in.b), opt(in.cw), o.reduction, -100,
                                                     s, z);
  const Tensor g = o.reduction == "none"
                       ? random_tensor(r.loss.sizes(), r.loss.dtype(), Layout::Contiguous, 99, 0.5, 1.5)
                       : Tensor();
  r.loss.backward(g);
  r.gx = in.x.grad(), r.gw = in.w.grad();
  if (in.b.defined()) r.gb = in.b.grad();
  return r;
}

::testing::AssertionResult close(const Tensor& a, const Tensor& b, double rel, const std::string& what) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << what << ": defined differs";
  if (!a.defined()) return ::testing::AssertionSuccess();
  if (a.sizes() != b.sizes()) return ::testing::AssertionFailure() << what << ": shapes differ";
  double scale = 0;
  for (double v : values(b)) scale = std::max(scale, std::fabs(v));
  auto r = all_close(values(a), values(b), rel, rel * std::max(scale, 1e-30));
  if (!r) r << " (" << what << ")";
  return r;
}

std::string describe(const Options& o) {
  return o.reduction + (o.ignored ? " ignored" : "") + (o.smoothing ? " smoothing" : "") +
         (o.class_weight ? " weight" : "") + (o.z ? " z" : "") + (o.bias ? " bias" : "") + (o.probs ? " probs" : "");
}

std::vector<Options> all_options() {
  std::vector<Options> out;
  for (const char* red : {"mean", "sum", "none"})
    for (int bits = 0; bits < 64; ++bits) {
      Options o;
      o.reduction = red;
      o.ignored = bits & 1, o.smoothing = bits & 2, o.class_weight = bits & 4, o.z = bits & 8, o.bias = bits & 16;
      o.probs = bits & 32;
      if (o.probs && o.ignored) continue;  // ignore_index applies to class indices only
      out.push_back(o);
    }
  return out;
}

// Every option combination in float64, across chunk boundaries (13 rows = 5 + 5 + 3).
TEST(LinearCrossEntropy, MatchesReferenceFloat64AllOptions) {
  for (const Options& o : all_options()) {
    const Inputs in = make_inputs(13, 6, 4500, kFloat64, o, 7);
    const Result f = run(in, o, true, 5), r = run(in, o, false);
    const std::string d = describe(o);
    EXPECT_TRUE(close(f.loss, r.loss, 1e-10, "loss " + d));
    EXPECT_TRUE(close(f.gx, r.gx, 1e-10, "grad x " + d));
    EXPECT_TRUE(close(f.gw, r.gw, 1e-10, "grad W " + d));
    EXPECT_TRUE(close(f.gb, r.gb, 1e-10, "grad b " + d));
  }
}

// Several vocabulary tiles (V = 20000 > 8192 columns a tile), with every term in play.
TEST(LinearCrossEntropy, MatchesReferenceAcrossVocabularyTiles) {
  for (bool probs : {false, true})
    for (const char* red : {"mean", "none"}) {
      Options o;
      o.reduction = red, o.probs = probs, o.ignored = !probs;
      o.smoothing = o.class_weight = o.z = o.bias = true;
      const Inputs in = make_inputs(5, 3, 20000, kFloat64, o, 17);
      const Result f = run(in, o, true), r = run(in, o, false);
      const std::string d = describe(o);
      EXPECT_TRUE(close(f.loss, r.loss, 1e-10, "loss " + d));
      EXPECT_TRUE(close(f.gx, r.gx, 1e-10, "grad x " + d));
      EXPECT_TRUE(close(f.gw, r.gw, 1e-10, "grad W " + d));
      EXPECT_TRUE(close(f.gb, r.gb, 1e-10, "grad b " + d));
    }
}

TEST(LinearCrossEntropy, MatchesReferenceFloat32AllOptions) {
  for (const Options& o : all_options()) {
    const Inputs in = make_inputs(24, 16, 300, kFloat32, o, 11);
    const Result f = run(in, o, true, 7), r = run(in, o, false);
    const std::string d = describe(o);
    EXPECT_TRUE(close(f.loss, r.loss, 1e-5, "loss " + d));
    EXPECT_TRUE(close(f.gx, r.gx, 1e-5, "grad x " + d));
    EXPECT_TRUE(close(f.gw, r.gw, 1e-5, "grad W " + d));
    EXPECT_TRUE(close(f.gb, r.gb, 1e-5, "grad b " + d));
  }
}

// One sample ([in_features] input, 0-dim target), automatic chunk size, several tiles.
TEST(LinearCrossEntropy, SingleSampleAndAutoChunk) {
  for (bool probs : {false, true}) {
    Options o;
    o.probs = probs, o.bias = true, o.smoothing = true, o.z = true;
    Inputs in = make_inputs(1, 5, 9000, kFloat64, o, 3);
    in.x = in.x.detach().reshape({5}).requires_grad_();
    in.target = probs ? in.target.reshape({9000}) : in.target.reshape({});
    for (const char* red : {"mean", "none"}) {
      o.reduction = red;
      const Result f = run(in, o, true), r = run(in, o, false);
      EXPECT_EQ(f.loss.dim(), 0);
      EXPECT_TRUE(close(f.loss, r.loss, 1e-10, "loss"));
      EXPECT_TRUE(close(f.gx, r.gx, 1e-10, "grad x"));
      EXPECT_TRUE(close(f.gw, r.gw, 1e-10, "grad W"));
    }
  }
}

// Transposed and sliced-with-step x, W and bias give the same results as contiguous ones.
TEST(LinearCrossEntropy, NonContiguousInputs) {
  Options o;
  o.bias = true, o.smoothing = true;
  const Inputs in = make_inputs(6, 5, 40, kFloat64, o, 23);
  const Result want = run(in, o, false);
  for (Layout l : {Layout::Transposed, Layout::Strided}) {
    Inputs v = in;
    v.x = random_tensor({6, 5}, kFloat64, l, 0), v.w = random_tensor({40, 5}, kFloat64, l, 0);
    v.b = random_tensor({40}, kFloat64, l, 0);
    for (auto [dst, src] : {std::pair{&v.x, &in.x}, std::pair{&v.w, &in.w}, std::pair{&v.b, &in.b}}) {
      dst->copy_(src->detach());
      dst->requires_grad_();
    }
    EXPECT_FALSE(v.w.is_contiguous());
    const Result got = run(v, o, true, 4);
    EXPECT_TRUE(close(got.loss, want.loss, 1e-12, std::string("loss ") + layout_name(l)));
    EXPECT_TRUE(close(got.gx, want.gx, 1e-12, std::string("grad x ") + layout_name(l)));
    EXPECT_TRUE(close(got.gw, want.gw, 1e-12, std::string("grad W ") + layout_name(l)));
    EXPECT_TRUE(close(got.gb, want.gb, 1e-12, std::string("grad b ") + layout_name(l)));
  }
}

// Bitwise the same with 1 and 2 threads; chunk sizes change only rounding.
TEST(LinearCrossEntropy, DeterministicAcrossThreadsAndChunks) {
  Options o;
  o.bias = true, o.ignored = true, o.smoothing = true;
  const Inputs in = make_inputs(70, 96, 9000, kFloat32, o, 5);  // 2 vocabulary tiles
  const int threads = get_num_threads();
  set_num_threads(1);
  const Result one = run(in, o, true, 16);
  set_num_threads(2);
  const Result two = run(in, o, true, 16);
  set_num_threads(threads);
  EXPECT_TRUE(bitwise_equal(one.loss, two.loss));
  EXPECT_TRUE(bitwise_equal(one.gx, two.gx));
  EXPECT_TRUE(bitwise_equal(one.gw, two.gw));
  EXPECT_TRUE(bitwise_equal(one.gb, two.gb));
  for (int64_t chunk : {1, 33, 70}) {
    const Result c = run(in, o, true, chunk);
    EXPECT_TRUE(close(c.loss, one.loss, 1e-5, "loss"));
    EXPECT_TRUE(close(c.gw, one.gw, 1e-5, "grad W"));
  }
}

TEST(LinearCrossEntropy, UpstreamGradientRetainGraphAndNoGrad) {
  Options o;
  o.bias = true;
  Inputs in = make_inputs(9, 4, 50, kFloat64, o, 21);
  const Result ref = run(in, o, true);
  // 2.5 * loss: every gradient scales; retain_graph lets a second backward add the same again.
  Tensor loss = F::linear_cross_entropy(in.x, in.w, in.target, in.b);
  for (Tensor* t : {&in.x, &in.w, &in.b}) t->set_grad(Tensor());
  mul(loss, 2.5).backward({}, true);
  EXPECT_TRUE(close(in.w.grad(), mul(ref.gw, 2.5), 1e-12, "scaled grad W"));
  loss.backward();
  EXPECT_TRUE(close(in.w.grad(), mul(ref.gw, 3.5), 1e-12, "accumulated grad W"));
  EXPECT_TRUE(close(in.b.grad(), mul(ref.gb, 3.5), 1e-12, "accumulated grad b"));
  EXPECT_TRUE(contains(error_of<Error>([&] { loss.backward(); }), "a second time"));
  // reduction="none" recomputes in backward, so retain_graph works there too.
  Tensor rows = F::linear_cross_entropy(in.x, in.w, in.target, {}, {}, "none");
  in.x.set_grad(Tensor());
  rows.backward(ones_like(rows), true);
  const Tensor first = in.x.grad().clone();
  rows.backward(ones_like(rows));
  EXPECT_TRUE(close(in.x.grad(), mul(first, 2.0), 1e-12, "none twice"));
  {
    autograd::NoGradGuard no_grad;
    const Tensor l = F::linear_cross_entropy(in.x, in.w, in.target, in.b);
    EXPECT_FALSE(l.requires_grad());
    EXPECT_TRUE(close(l, ref.loss, 1e-12, "no_grad loss"));
  }
  // Only W requires grad: only W gets a gradient.
  const Tensor x = in.x.detach();
  in.w.set_grad(Tensor());
  F::linear_cross_entropy(x, in.w, in.target, {}, {}, "sum").backward();
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(in.w.grad().defined());
}

// A head tied to an Embedding: the weight's gradient sums both uses.
TEST(LinearCrossEntropy, WeightTyingAccumulatesBothGradients) {
  auto emb = std::make_shared<nn::Embedding>(40, 8, std::nullopt, kFloat64);
  const Tensor tokens = from_vector<int64_t>({1, 5, 5, 39, 0, 12});
  const Tensor target = from_vector<int64_t>({5, 5, 39, 0, 12, -100});
  std::vector<Tensor> grads;
  for (bool fused : {true, false}) {
    emb->zero_grad();
    const Tensor h = tanh(emb->forward(tokens));
    const Tensor l = fused ? F::linear_cross_entropy(h, emb->weight, target, {}, {}, "mean", -100, 0.0, 0.01)
                           : F::linear_cross_entropy_reference(h, emb->weight, target, {}, {}, "mean", -100, 0.0, 0.01);
    l.backward();
    grads.push_back(emb->weight.grad().clone());
  }
  EXPECT_TRUE(close(grads[0], grads[1], 1e-10, "tied weight grad"));
}

// bfloat16 operands: the float32 result on the same (rounded) values, rounded once.
TEST(LinearCrossEntropy, BFloat16) {
  Options o;
  o.bias = true;
  const Inputs in = make_inputs(20, 32, 700, kBFloat16, o, 13);
  Inputs f32{in.x.detach().to(kFloat32).requires_grad_(), in.w.detach().to(kFloat32).requires_grad_(),
             in.b.detach().to(kFloat32).requires_grad_(), in.target, {}};
  for (const char* red : {"mean", "none"}) {
    o.reduction = red;
    const Result a = run(in, o, true, 8), b = run(f32, o, true, 8);
    EXPECT_EQ(a.loss.dtype(), kBFloat16);
    EXPECT_EQ(a.gw.dtype(), kBFloat16);
    EXPECT_TRUE(close(a.loss, b.loss, 1e-2, "bf16 loss"));
    EXPECT_TRUE(close(a.gx, b.gx, 1e-2, "bf16 grad x"));
    EXPECT_TRUE(close(a.gw, b.gw, 1e-2, "bf16 grad W"));
    EXPECT_TRUE(close(a.gb, b.gb, 1e-2, "bf16 grad b"));
  }
}

// Forward + backward stays at the inputs, their gradients and one [chunk, V] buffer: the
// weight gradient is handed to W.grad without a copy.
TEST(LinearCrossEntropy, PeakMemoryStaysNearTheFloor) {
  const int64_t N = 128, D = 64, V = 8192, chunk = 16;
  const Tensor x = random_tensor({N, D}, kFloat32, Layout::Contiguous, 1, -1, 1).requires_grad_();
  const Tensor w = random_tensor({V, D}, kFloat32, Layout::Contiguous, 2, -1, 1).requires_grad_();
  const Tensor t = from_vector<double>(random_values(N, 3, 0, double(V), true)).to(kInt64);
  const size_t base = memory::allocated();
  memory::reset_peak_stats();
  F::linear_cross_entropy(x, w, t, {}, {}, "mean", -100, 0.0, 0.0, chunk).backward();
  const size_t grads = size_t((N + V) * D * 4), buffer = size_t(chunk * (V + 16) * 4);
  EXPECT_LE(memory::max_allocated() - base, grads + buffer + (size_t(1) << 17));  // + small arrays
  EXPECT_TRUE(w.grad().defined() && x.grad().defined());
}

// No rows, every row ignored ("mean" is 0/0 = NaN with zero gradients, as torch), and a
// probability target that requires grad (the composite reference differentiates it).
TEST(LinearCrossEntropy, EdgeCasesAndTargetGradient) {
  Tensor w = random_tensor({7, 3}, kFloat64, Layout::Contiguous, 1, -1, 1).requires_grad_();
  for (const char* red : {"mean", "sum", "none"}) {
    const Tensor x = zeros({0, 3}, kFloat64).requires_grad_();
    const Tensor l = F::linear_cross_entropy(x, w, zeros({0}, kInt64), {}, {}, red);
    l.backward(ones_like(l));
    EXPECT_EQ(x.grad().sizes(), (Dims{0, 3}));
    EXPECT_EQ(values(w.grad()), std::vector<double>(21, 0.0));
    w.set_grad(Tensor());
  }
  const Tensor x = random_tensor({2, 3}, kFloat64, Layout::Contiguous, 2, -1, 1).requires_grad_();
  const Tensor l = F::linear_cross_entropy(x, w, from_vector<int64_t>({-100, -100}));
  EXPECT_TRUE(std::isnan(l.item<double>()));
  l.backward();
  EXPECT_EQ(values(x.grad()), std::vector<double>(6, 0.0));
  std::vector<Tensor> target_grads;
  for (bool fused : {true, false}) {
    const Tensor p = softmax(random_tensor({2, 7}, kFloat64, Layout::Contiguous, 3, -1, 1), 1).requires_grad_();
    const Tensor y = fused ? F::linear_cross_entropy(x, w, p, {}, {}, "sum", -100, 0.1, 0.01)
                           : F::linear_cross_entropy_reference(x, w, p, {}, {}, "sum", -100, 0.1, 0.01);
    y.backward();
    target_grads.push_back(p.grad());
  }
  EXPECT_TRUE(close(target_grads[0], target_grads[1], 1e-12, "target grad"));
}

TEST(LinearCrossEntropy, Errors) {
  const Tensor x = ones({4, 3}), w = ones({10, 3}), t = from_vector<int64_t>({0, 1, 2, 9});
  auto lce = [](auto&&... a) { return F::linear_cross_entropy(a...); };
  EXPECT_TRUE(contains(error_of<ValueError>([&] { lce(x, ones({10, 5}), t); }),
                       "[linear_cross_entropy] input of shape (4, 3) and linear_weight of shape (10, 5) differ in "
                       "in_features (3 vs 5)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { lce(x, w, t, std::nullopt, std::nullopt, "avg"); }),
                       "[linear_cross_entropy] reduction must be 'mean', 'sum' or 'none', got 'avg'"));
  EXPECT_TRUE(contains(error_of<IndexError>([&] { lce(x, w, from_vector<int64_t>({0, 10, 1, -100})); }),
                       "[linear_cross_entropy] target 10 at row 1 is out of bounds for 10 classes"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { lce(x, w, from_vector<int64_t>({0, 1})); }),
                       "[linear_cross_entropy] expected a target of shape (4,) for input of shape (4, 3), got (2,)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { lce(x, w, ones({4, 3})); }),
                       "[linear_cross_entropy] a class-probability target must have the logits' shape (4, 10)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { lce(x, w, t, std::optional<Tensor>(ones({3}))); }),
                       "[linear_cross_entropy] expected linear_bias of shape [10]"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { lce(x, w, t, std::nullopt, std::optional<Tensor>(ones({4}))); }),
                       "[linear_cross_entropy] weight of shape (4,) does not match the 10 classes"));
  EXPECT_TRUE(contains(error_of<TypeError>([&] { lce(x, w.to(kFloat64), t); }),
                       "[linear_cross_entropy] linear_weight (float64) must have input's dtype (float32)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { lce(ones({2, 4, 3}), w, t); }),
                       "[linear_cross_entropy] expected input of shape [N, in_features] or [in_features]"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] {
                         F::linear_cross_entropy(x, w, t, {}, {}, "mean", -100, 0.0, 0.0, int64_t(0));
                       }),
                       "chunk_size must be >= 1"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::linear_cross_entropy(x, w, t, {}, {}, "mean", -100, 0.0, -1.0); }),
                       "z_loss must be finite and >= 0"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { nn::LinearCrossEntropyLoss(3, 10, false, kFloat32, "max"); }),
                       "[LinearCrossEntropyLoss] reduction"));
}

TEST(LinearCrossEntropy, Module) {
  const Tensor cw = random_tensor({30}, kFloat32, Layout::Contiguous, 4, 0.5, 2);
  auto m = std::make_shared<nn::LinearCrossEntropyLoss>(6, 30, true, kFloat32, "sum", cw, -100, 0.1, 0.01);
  EXPECT_EQ(m->linear->weight.sizes(), (Dims{30, 6}));
  EXPECT_EQ(m->parameters().size(), 2u);
  EXPECT_TRUE(m->state_dict().contains("linear.weight"));
  EXPECT_TRUE(m->state_dict().contains("weight"));
  const Tensor x = random_tensor({5, 6}, kFloat32, Layout::Contiguous, 8, -1, 1);
  const Tensor t = from_vector<int64_t>({1, 29, -100, 0, 7});
  const Tensor l = (*m)(x, t);
  const Tensor r = F::linear_cross_entropy_reference(x, m->linear->weight, t, m->linear->bias, cw, "sum", -100, 0.1, 0.01);
  EXPECT_TRUE(close(l, r, 1e-5, "module"));
  l.backward();
  EXPECT_TRUE(m->linear->weight.grad().defined() && m->linear->bias.grad().defined());
}

}  // namespace
}  // namespace flambeau::testing
