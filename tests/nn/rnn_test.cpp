// The fused recurrence (nn/rnn_layer.cpp) against its composite reference (per-step matmul,
// sigmoid / tanh and products, differentiated by autograd) in float64: LSTM with and without
// projection, GRU and RNN, forward and every gradient; the modules' parameter names and
// shapes; the same bits on 1 and 2 threads; argument errors.
#include "flambeau/nn/modules.h"
#include "flambeau/nn/rnn.h"
#include "flambeau/ops/ops.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

namespace F = nn::functional;

Tensor rnd(const Dims& s, uint64_t seed) { return random_tensor(s, kFloat64, Layout::Contiguous, seed, -1, 1); }

// One layer forward, composite: returns {out [T, B, P], h_n, c_n}.
std::vector<Tensor> reference(F::RnnMode mode, const Tensor& x, const Tensor& h0, const Tensor& c0,
                              const Tensor& w_ih, const Tensor& w_hh, const Tensor& b, const Tensor& b_hh,
                              const Tensor& w_hr) {
  const int64_t T = x.size(0), H = w_hh.size(0) / F::rnn_gates(mode);
  Tensor h = h0, c = c0;
  std::vector<Tensor> outs;
  for (int64_t t = 0; t < T; ++t) {
    Tensor gx = add(matmul(x.select(0, t), w_ih.transpose(0, 1)), b);
    Tensor gh = matmul(h, w_hh.transpose(0, 1));
    if (mode == F::RnnMode::lstm) {
      Tensor g = add(gx, gh);
      Tensor i = sigmoid(g.narrow(1, 0, H)), f = sigmoid(g.narrow(1, H, H)), gg = tanh(g.narrow(1, 2 * H, H)),
             o = sigmoid(g.narrow(1, 3 * H, H));
      c = add(mul(f, c), mul(i, gg));
      h = mul(o, tanh(c));
      if (w_hr.defined()) h = matmul(h, w_hr.transpose(0, 1));
    } else if (mode == F::RnnMode::gru) {
      gh = add(gh, b_hh);
      Tensor r = sigmoid(add(gx.narrow(1, 0, H), gh.narrow(1, 0, H)));
      Tensor z = sigmoid(add(gx.narrow(1, H, H), gh.narrow(1, H, H)));
      Tensor n = tanh(add(gx.narrow(1, 2 * H, H), mul(r, gh.narrow(1, 2 * H, H))));
      h = add(mul(sub(h, n), z), n);
    } else {
      h = tanh(add(gx, gh));
    }
    outs.push_back(h);
  }
  return {stack(outs, 0), h, c};
}

struct Setup {
  F::RnnMode mode;
  int64_t proj;
};

class RnnLayerTest : public ::testing::TestWithParam<Setup> {};

TEST_P(RnnLayerTest, FusedMatchesCompositeWithGradients) {
  const auto [mode, proj] = GetParam();
  const int64_t T = 5, B = 3, I = 4, H = 6, G = F::rnn_gates(mode), P = proj ? proj : H;
  const bool lstm = mode == F::RnnMode::lstm;
  std::vector<Tensor> leaves = {rnd({T, B, I}, 1), rnd({B, P}, 2), rnd({B, H}, 3), rnd({G * H, I}, 4),
                                rnd({G * H, P}, 5), rnd({G * H}, 6), rnd({G * H}, 7), rnd({P, H}, 8)};
  auto run = [&](bool fused) {
    std::vector<Tensor> in;
    for (const Tensor& t : leaves) in.push_back(t.clone().requires_grad_(true));
    const Tensor c0 = lstm ? in[2] : Tensor(), w_hr = proj ? in[7] : Tensor();
    const Tensor b_hh = mode == F::RnnMode::gru ? in[6] : Tensor();
    const Tensor b = mode == F::RnnMode::gru ? in[5] : add(in[5], in[6]);
    std::vector<Tensor> r;
    if (fused) {
      const Tensor xw = F::linear(in[0].reshape({T * B, I}), in[3], b);
      r = F::rnn_layer(mode, xw, in[1], c0, in[4], b_hh, w_hr, std::vector<int64_t>(size_t(T), B), false);
      r[0] = r[0].reshape({T, B, P});
    } else {
      r = reference(mode, in[0], in[1], c0, in[3], in[4], b, b_hh, w_hr);
    }
    Tensor loss = add(sum(mul(r[0], rnd(r[0].sizes(), 11))), sum(mul(r[1], rnd(r[1].sizes(), 12))));
    if (lstm) loss = add(loss, sum(mul(r[2], rnd(r[2].sizes(), 13))));
    loss.backward();
    std::vector<std::vector<double>> v = {values(r[0]), values(r[1])};
    for (const Tensor& t : in) v.push_back(t.grad().defined() ? values(t.grad()) : std::vector<double>{});
    return v;
  };
  const auto fused = run(true), composite = run(false);
  ASSERT_EQ(fused.size(), composite.size());
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(all_close(fused[i], composite[i], 1e-12, 1e-12)) << i;
}

INSTANTIATE_TEST_SUITE_P(Modes, RnnLayerTest,
                         ::testing::Values(Setup{F::RnnMode::lstm, 0}, Setup{F::RnnMode::lstm, 3},
                                           Setup{F::RnnMode::gru, 0}, Setup{F::RnnMode::rnn_tanh, 0}));

TEST(RnnModules, ParameterNamesShapesAndOutputs) {
  auto m = std::make_shared<nn::LSTM>(3, 4, 2, true, true, 0.0, true, 2, kFloat64);
  const auto p = m->named_parameters();
  ASSERT_EQ(p.size(), 20u);
  EXPECT_EQ(p.item(0).first, "weight_ih_l0");
  EXPECT_EQ(p.item(4).first, "weight_hr_l0");
  EXPECT_EQ(p.item(5).first, "weight_ih_l0_reverse");
  EXPECT_EQ(p.at("weight_ih_l1").sizes(), Dims({16, 4}));
  EXPECT_EQ(p.at("weight_hh_l1").sizes(), Dims({16, 2}));
  const auto r = m->forward(rnd({2, 5, 3}, 1), Tensor(), Tensor());
  EXPECT_EQ(r[0].sizes(), Dims({2, 5, 4}));
  EXPECT_EQ(r[1].sizes(), Dims({4, 2, 2}));
  EXPECT_EQ(r[2].sizes(), Dims({4, 2, 4}));
  auto cell = std::make_shared<nn::GRUCell>(3, 4);
  EXPECT_EQ(cell->weight_ih.sizes(), Dims({12, 3}));
  EXPECT_EQ((*cell)(random_tensor({3}, kFloat32, Layout::Contiguous, 2)).sizes(), Dims({4}));
}

TEST(RnnModules, SameBitsOn1And2Threads) {
  std::vector<Tensor> outs;
  for (int n : {1, 2}) {
    set_num_threads(n);
    manual_seed(5);
    auto m = std::make_shared<nn::LSTM>(8, 16, 2);
    Tensor x = random_tensor({7, 4, 8}, kFloat32, Layout::Contiguous, 3).requires_grad_(true);
    Tensor y = (*m)(x);
    sum(mul(y, y)).backward();
    outs.push_back(y.detach());
    outs.push_back(x.grad());
    for (const Tensor& w : m->parameters()) outs.push_back(w.grad());
  }
  set_num_threads(2);
  const size_t half = outs.size() / 2;
  for (size_t i = 0; i < half; ++i) EXPECT_TRUE(bitwise_equal(outs[i], outs[half + i])) << i;
}

TEST(RnnModules, Errors) {
  EXPECT_TRUE(contains(error_of<ValueError>([] { nn::LSTM(3, 4, 1, true, false, 0.0, false, 4); }),
                       "[LSTM] proj_size has to be smaller than hidden_size"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { nn::RNN(3, 4, 1, "gelu"); }), "[RNN] Unknown nonlinearity 'gelu'"));
  auto m = std::make_shared<nn::GRU>(3, 4);
  EXPECT_TRUE(contains(error_of<Error>([&] { m->forward(zeros({5, 2, 2})); }),
                       "[GRU] input.size(-1) must be equal to input_size. Expected 3, got 2"));
  EXPECT_TRUE(contains(error_of<Error>([&] { m->forward(zeros({5, 2, 3}), zeros({1, 3, 4})); }),
                       "[GRU] Expected hidden size (1, 2, 4), got [1, 3, 4]"));
}

}  // namespace
}  // namespace flambeau::testing
