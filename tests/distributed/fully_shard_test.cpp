// The C++ FullyShardedModel (FSDP2) on the gloo backend, ranks as threads of one process: a
// net of odd-sized layers (7 and 3 rows: padded shards, and on 4 ranks a rank with no rows)
// trains like one process on the whole batch; a block's parameters hold memory only around
// its forward and backward; local/full round trips; the clipped global norm.
#include <gtest/gtest.h>

#include <cmath>

#include "distributed/ranks.h"
#include "test_util.h"
#include "flambeau/distributed/fsdp.h"
#include "flambeau/distributed/fully_shard.h"
#include "flambeau/flambeau.h"
#include "flambeau/nn/clip_grad.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/modules.h"

using namespace flambeau;
using namespace flambeau::distributed;

namespace {

// first: Linear(5, 7) (root), blocks: two Linear(7, 7) called through their hooks, head:
// Linear(7, 3) (root). Weights from a fixed seed.
struct Net : nn::Module {
  Net() : Module("Net") {
    first = register_module("first", std::make_shared<nn::Linear>(5, 7));
    for (const char* name : {"b0", "b1"}) blocks.push_back(register_module(name, std::make_shared<nn::Linear>(7, 7)));
    head = register_module("head", std::make_shared<nn::Linear>(7, 3));
    Generator gen(7);
    autograd::NoGradGuard no_grad;
    for (Tensor p : parameters()) p.copy_(randn(p.sizes(), kFloat32, gen) * 0.5);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = (*first)(x);
    for (const auto& b : blocks) h = tanh(b->call({h}));
    return (*head)(h);
  }
  std::shared_ptr<nn::Linear> first, head;
  std::vector<std::shared_ptr<nn::Module>> blocks;
};

constexpr int64_t kRows = 12;  // the global batch: divides by 1, 2, 3 and 4

Tensor batch_x() { return sin(arange(0, kRows * 5, 1, kFloat32).reshape({kRows, 5})); }
Tensor batch_y() { return cos(arange(0, kRows * 3, 1, kFloat32).reshape({kRows, 3})); }

optim::AdamOptions adam() {
  optim::AdamOptions o;
  o.lr = 0.05;
  o.weight_decay = 0.01;
  return o;
}

void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const Tensor g = got.contiguous(), w = want.contiguous();
  for (int64_t i = 0; i < g.numel(); ++i)
    ASSERT_NEAR(g.data<float>()[i], w.data<float>()[i], tol * (1 + std::abs(w.data<float>()[i]))) << what << " [" << i << "]";
}

}  // namespace

class FullyShard : public ::testing::TestWithParam<int> {};

// Three AdamW steps with clipping: every rank's whole parameters and gradients equal one
// process's (each rank's loss is the mean of its rows, and FSDP averages over the ranks).
TEST_P(FullyShard, TrainsLikeOneProcessOnTheWholeBatch) {
  const int world = GetParam();
  Net ref;
  optim::AdamW ref_opt(ref.parameters(), adam());
  std::vector<std::vector<Tensor>> ref_grads;
  for (int step = 0; step < 3; ++step) {
    ref_opt.zero_grad();
    nn::functional::mse_loss(ref.forward(batch_x()), batch_y()).backward();
    std::vector<Tensor> g;
    for (const Tensor& p : ref.parameters()) g.push_back(p.grad().clone());
    ref_grads.push_back(g);
    nn::utils::clip_grad_norm_(ref.parameters(), 0.5);
    ref_opt.step();
  }
  run_ranks(world, [&](std::shared_ptr<Communicator> comm) {
    const int r = comm->rank();
    const int64_t rows = kRows / world;
    auto net = std::make_shared<Net>();
    FullyShardedModel fsdp(*net, net->blocks, comm);
    EXPECT_FALSE(fsdp::has_memory(net->blocks[0]->parameters()[0]));
    optim::AdamW opt(fsdp.parameters(), adam());
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      const Tensor out = net->forward(batch_x().narrow(0, r * rows, rows));
      // After forward: the blocks released, the root kept for the backward.
      EXPECT_FALSE(fsdp::has_memory(net->blocks[1]->parameters()[0]));
      EXPECT_TRUE(fsdp::has_memory(net->head->weight));
      nn::functional::mse_loss(out, batch_y().narrow(0, r * rows, rows)).backward();
      for (const Tensor& p : net->parameters()) EXPECT_FALSE(fsdp::has_memory(p));
      for (size_t i = 0; i < fsdp.parameters().size(); ++i)
        expect_close(fsdp.full(i, fsdp.parameters()[i].grad()), ref_grads[step][i], 1e-5,
                     "grad " + std::to_string(i) + " step " + std::to_string(step));
      fsdp.clip_grad_norm_(0.5);
      opt.step();
    }
    const std::vector<Tensor> want = ref.parameters();
    for (size_t i = 0; i < want.size(); ++i)
      expect_close(fsdp.full(i, fsdp.parameters()[i]), want[i], 1e-5, "param " + std::to_string(i));
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, FullyShard, ::testing::Values(1, 2, 3, 4));

TEST(FullyShardedModel, LocalAndFullRoundTripAndShardShapes) {
  run_ranks(3, [&](std::shared_ptr<Communicator> comm) {
    auto net = std::make_shared<Net>();
    const std::vector<Tensor> whole = [&] {
      std::vector<Tensor> w;
      for (const Tensor& p : net->parameters()) w.push_back(p.detach().clone());
      return w;
    }();
    FullyShardedModel fsdp(*net, net->blocks, comm);
    // 7 rows on 3 ranks: 3, 3, 1; 3 rows: 1 each.
    const int64_t sevens[] = {3, 3, 1};
    EXPECT_EQ(fsdp.parameters()[0].size(0), sevens[comm->rank()]);  // first.weight [7, 5]
    for (size_t i = 0; i < whole.size(); ++i) {
      expect_close(fsdp.full(i, fsdp.parameters()[i]), whole[i], 0, "full " + std::to_string(i));
      expect_close(fsdp.local(i, whole[i]), fsdp.parameters()[i], 0, "local " + std::to_string(i));
    }
    EXPECT_EQ(fsdp.local(0, scalar_tensor(3.0)).item<double>(), 3.0);  // a scalar (AdamW's step) as is
  });
}

TEST(FullyShardedModel, AForwardAfterTheGroupIsGoneRaises) {
  auto net = std::make_shared<Net>();
  run_ranks(1, [&](std::shared_ptr<Communicator> comm) {
    FullyShardedModel fsdp(*net, net->blocks, comm);
    (void)net->forward(batch_x());
  });
  // The parameters have no memory left: the modules' hooks raise instead of reading them.
  EXPECT_THROW((void)net->forward(batch_x()), Error);
}

// Reduce-scatters on their own communicator change no bit.
TEST(FullyShardedModel, SeparateReduceScatterCommunicatorChangesNoBit) {
  run_ranks(2, [&](std::shared_ptr<Communicator> comm) {
    std::vector<std::vector<Tensor>> results;
    for (bool separate : {false, true}) {
      auto net = std::make_shared<Net>();
      FullyShardedModel fsdp(*net, net->blocks, comm, separate);
      optim::AdamW opt(fsdp.parameters(), adam());
      for (int step = 0; step < 3; ++step) {
        opt.zero_grad();
        const int64_t rows = kRows / 2;
        const Tensor x = batch_x().narrow(0, comm->rank() * rows, rows), y = batch_y().narrow(0, comm->rank() * rows, rows);
        nn::functional::mse_loss(net->forward(x), y).backward();
        opt.step();
      }
      results.push_back(fsdp.parameters());
    }
    for (size_t i = 0; i < results[0].size(); ++i)
      EXPECT_TRUE(flambeau::testing::bitwise_equal(results[0][i], results[1][i])) << "parameter " << i;
  });
}
