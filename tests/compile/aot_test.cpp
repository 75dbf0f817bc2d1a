// Compiled training (aot.h): the joint trace split into a forward that saves what the
// backward reads and a backward from those and the outputs' gradients; both compiled; the
// gradients bitwise equal to eager's (the backward graph replays the ops eager's backward
// runs, in the same order), on the traced inputs and on new ones; saved values are
// version-checked; what cannot be split runs with eager autograd.
#include <gtest/gtest.h>

#include "flambeau/autograd/autograd.h"
#include "flambeau/compile/aot.h"
#include "flambeau/flambeau.h"
#include "test_util.h"

using namespace flambeau;
using namespace flambeau::compiler;
using flambeau::testing::bitwise_equal;

namespace {

Tensor seeded(const Dims& shape, uint64_t seed, bool grad = false) {
  Generator gen(seed);
  Tensor t = randn(shape, kFloat32, gen);
  if (grad) t.requires_grad_(true);
  return t;
}

// The outputs of f at `in`, and the gradients of sum(outputs[0] * weight) for the inputs and
// `params` (cleared first).
std::pair<Tensor, std::vector<Tensor>> run_with_grads(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& f,
                                                      const std::vector<Tensor>& in, const std::vector<Tensor>& params,
                                                      const Tensor& weight) {
  std::vector<Tensor> leaves = in;
  leaves.insert(leaves.end(), params.begin(), params.end());
  for (Tensor& t : leaves) t.set_grad(Tensor());
  const Tensor out = f(in)[0];
  autograd::backward({out}, {weight});
  std::vector<Tensor> grads;
  for (const Tensor& t : leaves) grads.push_back(t.grad());
  return {out.detach(), grads};
}

void expect_same_training(const std::string& backend, const TensorFn& fn, const std::vector<std::vector<Tensor>>& calls,
                          const std::vector<Tensor>& params, const Dims& out_shape) {
  Compiled c = compile(fn, {backend});
  for (size_t k = 0; k < calls.size(); ++k) {
    const Tensor w = seeded(out_shape, 100 + k);
    const auto [eager_out, eager_grads] = run_with_grads(fn, calls[k], params, w);
    for (int rep = 0; rep < 2; ++rep) {  // the traced call, then the compiled one
      const auto [out, grads] = run_with_grads([&](const std::vector<Tensor>& in) { return c(in); }, calls[k], params, w);
      EXPECT_TRUE(bitwise_equal(out, eager_out)) << backend << " call " << k;
      if (rep == 1) {  // the compiled forward's node
        const auto node = c(calls[k])[0].grad_fn();
        ASSERT_TRUE(node);
        EXPECT_EQ(node->name(), "CompiledFunctionBackward");
      }
      ASSERT_EQ(grads.size(), eager_grads.size());
      for (size_t i = 0; i < grads.size(); ++i) {
        ASSERT_EQ(grads[i].defined(), eager_grads[i].defined()) << backend << " grad " << i;
        if (grads[i].defined()) EXPECT_TRUE(bitwise_equal(grads[i], eager_grads[i])) << backend << " grad " << i;
      }
    }
  }
  EXPECT_EQ(c.traces(), 1u);
}

}  // namespace

TEST(CompileTraining, PointwiseChainWithAParameterGivesEagersGradients) {
  const Tensor w = seeded({64}, 7, true), b = seeded({64}, 8, false);
  const TensorFn fn = [&](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const Tensor h = silu(x * w + b);
    return std::vector<Tensor>{tanh(h) * x + exp(h * 0.5)};
  };
  const std::vector<std::vector<Tensor>> calls{{seeded({16, 64}, 1, true)}, {seeded({16, 64}, 2, true)}};
  for (const char* backend : {"cpp", "aot_eager"}) expect_same_training(backend, fn, calls, {w}, {16, 64});
}

TEST(CompileTraining, MlpWithMatmulsAndReductions) {
  const Tensor w1 = seeded({128, 32}, 3, true), w2 = seeded({16, 128}, 4, true), b1 = seeded({128}, 5, true);
  const TensorFn fn = [&](const std::vector<Tensor>& in) {
    const Tensor h = gelu(linear(in[0], w1, b1), "tanh");
    const Tensor y = linear(h, w2);
    return std::vector<Tensor>{softmax(y, -1) * y.sum({-1}, true)};
  };
  const std::vector<std::vector<Tensor>> calls{{seeded({8, 32}, 1, true)}, {seeded({8, 32}, 2, true)}};
  for (const char* backend : {"cpp", "aot_eager"}) expect_same_training(backend, fn, calls, {w1, w2, b1}, {8, 16});
}

TEST(CompileTraining, TheSplitSavesWhatTheBackwardReads) {
  const Tensor x = seeded({4, 8}, 1, true);
  Compiled traced = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0]) * in[0]}; },
                            {"eager"});
  (void)traced({x});
  TrainingGraphs tg;
  std::string why;
  ASSERT_TRUE(split_for_training(traced.graph(0), {x}, &tg, &why)) << why;
  // Forward: exp, mul -> the output, then the saved values (x and exp(x)).
  std::vector<std::string> ops;
  for (const auto& n : tg.forward.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"exp", "mul"})) << tg.forward.str();
  EXPECT_EQ(tg.forward.outputs.size(), 3u) << tg.forward.str();
  // Backward: from the saved values and the output's gradient; no forward op runs again.
  EXPECT_EQ(tg.backward.inputs.size(), 3u) << tg.backward.str();
  EXPECT_EQ(tg.backward.outputs.size(), 1u);
  for (const auto& n : tg.backward.nodes) EXPECT_NE(n.op, "exp") << tg.backward.str();
  EXPECT_EQ(tg.has_grad, (std::vector<bool>{true}));
}

TEST(CompileTraining, ASavedValueChangedInPlaceBeforeBackwardRaises) {
  Compiled c = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0])}; }, {"cpp"});
  const Tensor x = seeded({32}, 1, true);
  (void)c({x});
  Tensor y = c({x})[0];  // the compiled call; the backward reads y (exp saves its output)
  {
    autograd::NoGradGuard no_grad;
    y.mul_(2.0);
  }
  EXPECT_THROW(autograd::backward({y.sum()}), Error);
}

TEST(CompileTraining, OnlyTheInputsThatRequireGradGetGradients) {
  const Tensor x = seeded({8, 8}, 1, true), y = seeded({8, 8}, 2, false);
  Compiled c = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sigmoid(in[0] * in[1])}; },
                       {"cpp"});
  (void)c({x, y});
  const Tensor out = c({x, y})[0];
  ASSERT_TRUE(out.grad_fn());
  EXPECT_EQ(out.grad_fn()->name(), "CompiledFunctionBackward");
  autograd::backward({out.sum()});
  ASSERT_TRUE(x.grad().defined());
  EXPECT_FALSE(y.grad().defined());
  const Tensor s = sigmoid(x.detach() * y);
  EXPECT_TRUE(bitwise_equal(x.grad(), ones({8, 8}) * (s * (1 - s)) * y));
}

TEST(CompileTraining, WhatCannotBeSplitRunsWithEagerAutograd) {
  // An output that is an input: no compiled node, eager autograd instead.
  Compiled c = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] * in[0], in[0]}; },
                       {"cpp"});
  Tensor x = seeded({4, 4}, 1, true);
  (void)c({x});
  const std::vector<Tensor> out = c({x});
  EXPECT_EQ(out[0].grad_fn()->name(), "MulBackward0");
  autograd::backward({(out[0] + out[1]).sum()});
  const Tensor compiled_grad = x.grad();
  x.set_grad(Tensor());
  autograd::backward({(x * x + x).sum()});
  EXPECT_TRUE(bitwise_equal(compiled_grad, x.grad()));
}

TEST(CompileTraining, NoGradCallsUseTheInferenceGraph) {
  const Tensor w = seeded({16}, 3, true);
  Compiled c = compile([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{relu(in[0] * w)}; }, {"cpp"});
  const Tensor x = seeded({4, 16}, 1);
  (void)c({x});
  {
    autograd::NoGradGuard no_grad;
    (void)c({x});
    const Tensor out = c({x})[0];
    EXPECT_FALSE(out.requires_grad());
  }
  EXPECT_EQ(c.traces(), 2u);  // grad mode is guarded
}

// rms_norm and layer_norm run as their fused kernel's two ops in the joint trace (the
// forward returns the row statistics its backward reads): eager's bits.
TEST(CompileTraining, FusedNormsRunAsTheirKernelsOps) {
  const Tensor g = seeded({64}, 3, true), b = seeded({64}, 4, true), w = seeded({64, 64}, 5, true);
  const TensorFn fn = [&](const std::vector<Tensor>& in) {
    const Tensor h = nn::functional::rms_norm(in[0], {64}, g);
    const Tensor y = in[0] + silu(linear(h, w));
    return std::vector<Tensor>{nn::functional::layer_norm(y, {64}, g, b)};
  };
  const std::vector<std::vector<Tensor>> calls{{seeded({8, 64}, 1, true)}, {seeded({8, 64}, 2, true)}};
  expect_same_training("cpp", fn, calls, {g, b, w}, {8, 64});
}

// Attention's fused kernel runs as its two ops in the joint trace (the forward returns the
// logsumexp its backward reads): the gradients are eager's bits.
TEST(CompileTraining, AttentionBackwardIsTheFusedKernelsOp) {
  const Tensor wq = seeded({32, 32}, 3, true);
  const TensorFn fn = [&](const std::vector<Tensor>& in) {
    const Tensor q = linear(in[0], wq).view({2, 16, 4, 8}).transpose(1, 2);
    const Tensor k = in[0].view({2, 16, 4, 8}).transpose(1, 2);
    return std::vector<Tensor>{nn::scaled_dot_product_attention(q, k, k, {}, 0.0, true).transpose(1, 2).reshape({2, 16, 32})};
  };
  const std::vector<std::vector<Tensor>> calls{{seeded({2, 16, 32}, 1, true)}, {seeded({2, 16, 32}, 2, true)}};
  expect_same_training("cpp", fn, calls, {wq}, {2, 16, 32});
  Compiled c = compile(fn, {"cpp"});
  (void)c(calls[0]);
  TrainingGraphs tg;
  std::string why;
  ASSERT_TRUE(split_for_training(c.graph(0), calls[0], &tg, &why)) << why;
  EXPECT_NE(tg.backward.str().find("scaled_dot_product_flash_attention_backward"), std::string::npos)
      << tg.backward.str();
}
