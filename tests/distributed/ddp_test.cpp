// The C++ DistributedDataParallel and Reducer on the gloo backend, ranks as threads of one
// process: parameters broadcast from rank 0, gradients equal to one process's on the whole
// batch (2 ranks: the average of two values is exact up to the matmul's own rounding),
// no_sync, the error for an unused parameter, bucket layout. The Python tests
// (tests/python/test_ddp.py) cover the rest in real processes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <thread>

#include "flambeau/distributed/ddp.h"
#include "flambeau/distributed/engines.h"
#include "flambeau/flambeau.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/modules.h"
#include "distributed/ranks.h"

using namespace flambeau;
using namespace flambeau::distributed;

namespace {

void with_ranks(int world, const std::function<void(std::shared_ptr<Communicator>)>& body) {
  run_ranks(world, body, Millis(10000));
}

// A known Linear(5, 3): weight[i][j] = (i * 5 + j) % 7 / 7 - 0.4 (+ offset), bias 0.1 * i.
std::shared_ptr<nn::Linear> known_linear(float offset = 0) {
  auto l = std::make_shared<nn::Linear>(5, 3);
  autograd::NoGradGuard no_grad;
  for (int64_t i = 0; i < 15; ++i) l->weight.data<float>()[i] = float(i % 7) / 7.0f - 0.4f + offset;
  for (int64_t i = 0; i < 3; ++i) l->bias.data<float>()[i] = 0.1f * float(i) + offset;
  return l;
}

// Row b of the global batch: x[b][j] = sin(b * 5 + j), target[b][k] = cos(b + k).
Tensor rows_x(int64_t from, int64_t n) {
  Tensor x = empty({n, 5});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < 5; ++j) x.data<float>()[b * 5 + j] = std::sin(float((from + b) * 5 + j));
  return x;
}
Tensor rows_y(int64_t from, int64_t n) {
  Tensor y = empty({n, 3});
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < 3; ++k) y.data<float>()[b * 3 + k] = std::cos(float(from + b + k));
  return y;
}

void expect_close(const Tensor& got, const Tensor& want, float tol, const char* what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    EXPECT_NEAR(got.data<float>()[i], want.data<float>()[i], tol * (1 + std::abs(want.data<float>()[i])))
        << what << " [" << i << "]";
}

constexpr int64_t kRows = 4;  // per rank

}  // namespace

TEST(DistributedDataParallel, BroadcastsThenAveragesLikeOneProcessOnTheWholeBatch) {
  const int world = 2;
  // One process, the whole batch.
  auto ref = known_linear();
  nn::functional::mse_loss((*ref)(rows_x(0, world * kRows)), rows_y(0, world * kRows)).backward();
  with_ranks(world, [&](std::shared_ptr<Communicator> comm) {
    int r = comm->rank();
    auto model = known_linear(r == 0 ? 0.0f : 1.0f);  // rank 1 starts elsewhere
    DistributedDataParallel ddp(model, comm);
    expect_close(model->weight, ref->weight, 0, "broadcast weight");
    Tensor loss = nn::functional::mse_loss(ddp(rows_x(r * kRows, kRows)), rows_y(r * kRows, kRows));
    loss.backward();
    expect_close(model->weight.grad(), ref->weight.grad(), 1e-6f, "weight grad");
    expect_close(model->bias.grad(), ref->bias.grad(), 1e-6f, "bias grad");
    EXPECT_EQ(ddp.reducer().timeline().front().what, "launch");
  });
}

TEST(DistributedDataParallel, NoSyncAccumulatesThenReducesTheSum) {
  with_ranks(2, [&](std::shared_ptr<Communicator> comm) {
    int r = comm->rank();
    auto model = known_linear();
    DistributedDataParallel ddp(model, comm);
    {
      auto guard = ddp.no_sync();
      nn::functional::mse_loss(ddp(rows_x(r * kRows, kRows)), rows_y(r * kRows, kRows)).backward();
    }
    Tensor local = model->weight.grad().clone();  // this rank's own gradient, not reduced
    nn::functional::mse_loss(ddp(rows_x(100 + r * kRows, kRows)), rows_y(100 + r * kRows, kRows)).backward();
    // Reference: both micro-batches on both ranks, averaged.
    auto ref = known_linear();
    for (int q = 0; q < 2; ++q) {
      nn::functional::mse_loss((*ref)(rows_x(q * kRows, kRows)), rows_y(q * kRows, kRows)).backward();
      nn::functional::mse_loss((*ref)(rows_x(100 + q * kRows, kRows)), rows_y(100 + q * kRows, kRows)).backward();
    }
    Tensor want = ref->weight.grad().clone();
    want.div_(2);
    expect_close(model->weight.grad(), want, 1e-6f, "accumulated then averaged");
    bool changed = false;  // the reduced gradient is not this rank's own
    for (int64_t i = 0; i < local.numel(); ++i) changed |= local.data<float>()[i] != model->weight.grad().data<float>()[i];
    EXPECT_TRUE(changed);
  });
}

TEST(DistributedDataParallel, UnusedParameterIsAClearErrorUnlessAllowed) {
  with_ranks(2, [&](std::shared_ptr<Communicator> comm) {
    auto used = known_linear();
    auto unused = known_linear();
    for (bool allow : {false, true}) {
      DDPOptions o;
      o.find_unused_parameters = allow;
      Reducer reducer({used->weight, used->bias, unused->weight}, comm, o, {"used.weight", "used.bias", "unused.weight"});
      reducer.prepare_for_forward();
      Tensor loss = (*used)(rows_x(0, kRows)).sum();
      if (allow) {
        loss.backward();
        expect_close(unused->weight.grad(), zeros({3, 5}), 0, "unused gradient");
      } else {
        try {
          loss.backward();
          ADD_FAILURE() << "no error for an unused parameter";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("unused.weight"), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("find_unused_parameters"), std::string::npos) << e.what();
        }
      }
    }
  });
}

TEST(DistributedDataParallel, BucketsInReverseOrderWithTheFirstOneSmall) {
  with_ranks(1, [&](std::shared_ptr<Communicator> comm) {
    std::vector<Tensor> params;
    for (int64_t n : {1000, 300000, 10, 300000}) params.push_back(zeros({n}).requires_grad_());
    DDPOptions o;
    o.first_bucket_cap_bytes = 4000;
    o.bucket_cap_bytes = 1 << 20;
    Reducer reducer(params, comm, o);
    std::vector<std::vector<size_t>> want = {{3}, {2, 1}, {0}};
    EXPECT_EQ(reducer.bucket_indices(), want);
    EXPECT_THROW(Reducer({params[0], params[0]}, comm), ValueError);
  });
}
