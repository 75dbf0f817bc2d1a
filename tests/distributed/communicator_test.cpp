// The communicator on the gloo backend with its ranks as threads of one process (a
// HashStore for rendezvous): results against references, Work states, the cross-rank
// argument check, timeouts, abort() and CANCELED work, reconfigure() from the survivors,
// hooks and the flight recorder. Every wait is bounded by the ops' short timeouts.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "flambeau/distributed/communicator.h"
#include "flambeau/distributed/engines.h"
#include "flambeau/flambeau.h"
#include "distributed/ranks.h"

using namespace flambeau;
using namespace flambeau::distributed;

namespace {

// Runs body(comm) on `world` threads, each with its own communicator of the group.
void with_group(int world, const std::function<void(Communicator&)>& body, Millis timeout = Millis(5000),
                bool reconfigurable = false) {
  run_ranks(world, [&](std::shared_ptr<Communicator> c) { body(*c); }, timeout, reconfigurable);
}

std::vector<float> values(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

}  // namespace

TEST(Communicator, CollectivesGiveTheReference) {
  if (!gloo_available()) GTEST_SKIP() << "built without Gloo";
  with_group(3, [](Communicator& c) {
    const int r = c.rank(), n = c.size();
    Tensor t = full({4}, float(r + 1));
    c.all_reduce(t, RedOpType::SUM, false);
    EXPECT_EQ(values(t), std::vector<float>(4, 6.0f));
    Tensor avg = full({2}, float(r));
    c.all_reduce(avg, RedOpType::AVG, false);
    EXPECT_EQ(values(avg), std::vector<float>(2, 1.0f));
    Tensor out = empty({2 * n});
    c.all_gather_single(out, full({2}, float(r)), false);
    EXPECT_EQ(values(out), (std::vector<float>{0, 0, 1, 1, 2, 2}));
    Tensor rs = empty({2});
    c.reduce_scatter_single(rs, arange(0, 2 * n, 1, kFloat32) * float(r + 1), RedOpType::SUM, false);
    EXPECT_EQ(values(rs), (std::vector<float>{float(2 * r) * 6, float(2 * r + 1) * 6}));
    Tensor b = full({3}, float(r));
    c.broadcast(b, 2, false);
    EXPECT_EQ(values(b), std::vector<float>(3, 2.0f));
    Tensor got = empty({2});
    auto w = c.batch_p2p({{P2POp::Send, full({2}, float(r)), (r + 1) % n}, {P2POp::Recv, got, (r + n - 1) % n}}, true);
    w->wait();
    EXPECT_EQ(values(got), std::vector<float>(2, float((r + n - 1) % n)));
    EXPECT_TRUE(w->is_completed());
    c.barrier(false);
  });
}

TEST(Communicator, WrongArgumentsThrowAtTheCallAndWriteNothing) {
  if (!gloo_available()) GTEST_SKIP() << "built without Gloo";
  with_group(2, [](Communicator& c) {
    Tensor out = full({5}, 7.0f);
    EXPECT_THROW(c.all_gather_single(out, ones({2}), false), ValueError);
    EXPECT_EQ(values(out), std::vector<float>(5, 7.0f));
    EXPECT_THROW(c.broadcast(ones({1}), 2, false), IndexError);
    EXPECT_THROW(c.send(ones({1}), c.rank(), false), ValueError);
    EXPECT_THROW(c.all_reduce(ones({1}), RedOpType::BAND, false), TypeError);
    // Shapes that differ across ranks: both ranks fail; the group stays usable.
    try {
      c.all_reduce(ones({2 + c.rank()}), RedOpType::SUM, false);
      ADD_FAILURE() << "no error";
    } catch (const DistBackendError& e) {
      EXPECT_EQ(e.kind, CommErrorKind::Mismatch);
      EXPECT_NE(std::string(e.what()).find("rank 1: all_reduce (3,) float32"), std::string::npos) << e.what();
    }
    Tensor t = ones({2});
    c.all_reduce(t, RedOpType::SUM, false);
    EXPECT_EQ(values(t), std::vector<float>(2, 2.0f));
  });
}

TEST(Communicator, TimeoutBreaksTheCommunicatorAndCancelsQueuedWork) {
  if (!gloo_available()) GTEST_SKIP() << "built without Gloo";
  with_group(2, [](Communicator& c) {
    c.barrier(false);
    if (c.rank() == 1) {
      std::this_thread::sleep_for(Millis(700));
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto w1 = c.all_reduce(ones({4}), RedOpType::SUM, true, OpOptions{Millis(200), {}});
    auto w2 = c.all_reduce(ones({4}), RedOpType::SUM, true);
    EXPECT_THROW(w1->wait(), DistBackendError);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, Millis(700));
    EXPECT_EQ(w1->status(), Work::Status::TIMEDOUT);
    EXPECT_THROW(w2->wait(), DistBackendError);
    EXPECT_EQ(w2->status(), Work::Status::CANCELED);
    EXPECT_THROW(c.barrier(false), DistBackendError);  // broken: later ops fail at once
    auto entries = c.flight_recorder().entries();
    EXPECT_EQ(entries[entries.size() - 2].state, "failed");
    EXPECT_EQ(entries.back().state, "canceled");
  }, Millis(5000));
}

TEST(Communicator, AbortCancelsPendingWorkFirstWriterWins) {
  if (!gloo_available()) GTEST_SKIP() << "built without Gloo";
  with_group(2, [](Communicator& c) {
    c.barrier(false);
    std::atomic<int> hooks{0};
    c.register_abort_hook([&] { ++hooks; });
    if (c.rank() == 0) {
      auto w = c.all_reduce(ones({4}), RedOpType::SUM, true);  // rank 1 never joins
      std::this_thread::sleep_for(Millis(50));
      c.abort();
      c.abort();
      EXPECT_THROW(w->wait(Millis(2000)), DistBackendError);
      EXPECT_EQ(w->status(), Work::Status::CANCELED);
      EXPECT_TRUE(c.is_aborted());
      EXPECT_EQ(hooks.load(), 1);
      auto t0 = std::chrono::steady_clock::now();
      c.finalize();  // does not wait for Gloo's stuck op (it ends at its 1 s timeout)
      EXPECT_LT(std::chrono::steady_clock::now() - t0, Millis(900));
    } else {
      std::this_thread::sleep_for(Millis(300));
    }
  }, Millis(1000));
}

TEST(Communicator, ReconfigureFromTheSurvivors) {
  if (!gloo_available()) GTEST_SKIP() << "built without Gloo";
  auto handles = std::make_shared<std::vector<std::string>>(3);
  std::atomic<int> ready{0};
  with_group(3, [&](Communicator& c) {
    (*handles)[c.rank()] = c.init_handle();
    ++ready;
    c.barrier(false);
    if (c.rank() == 2) return;  // "dies": never takes part again
    EXPECT_THROW(c.all_reduce(ones({4}), RedOpType::SUM, false, OpOptions{Millis(200), {}}), DistBackendError);
    c.reconfigure("epoch1", {(*handles)[0], (*handles)[1]});
    EXPECT_EQ(c.size(), 2);
    Tensor t = full({3}, float(c.rank() + 1));
    c.all_reduce(t, RedOpType::SUM, false);
    EXPECT_EQ(values(t), std::vector<float>(3, 3.0f));
  }, Millis(5000), true);
}

TEST(Communicator, ReconfigureAddsAJoiner) {
  if (!gloo_available()) GTEST_SKIP() << "built without Gloo";
  auto store = std::make_shared<HashStore>();
  store->set_timeout(Millis(10000));
  auto make = [&](int rank, int size) {
    CommOptions o;
    o.store = store;
    o.rank = rank;
    o.size = size;
    o.name = "join";
    o.timeout = Millis(5000);
    o.abort_process_on_timeout_or_error = false;
    o.enable_reconfigure = true;
    return new_comm("gloo", kCPU, o);
  };
  // Two members and a joiner that starts alone under the same name; all three list the
  // same handles (in the new rank order) and meet under one uuid.
  std::shared_ptr<Communicator> comms[3];
  std::thread t0([&] { comms[0] = make(0, 2); }), t1([&] { comms[1] = make(1, 2); });
  t0.join();
  t1.join();
  comms[2] = make(0, 1);
  std::vector<std::string> handles = {comms[0]->init_handle(), comms[1]->init_handle(), comms[2]->init_handle()};
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> got(3);
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      comms[i]->reconfigure("grow", handles);
      Tensor t = full({2}, float(i + 1));
      comms[i]->all_reduce(t, RedOpType::SUM, false);
      got[i] = values(t);
    });
  for (auto& t : threads) t.join();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(comms[i]->size(), 3);
    EXPECT_EQ(comms[i]->rank(), i);
    EXPECT_EQ(got[i], std::vector<float>(2, 6.0f));
  }
}

TEST(Communicator, HooksSeeEveryOp) {
  if (!gloo_available()) GTEST_SKIP() << "built without Gloo";
  with_group(2, [](Communicator& c) {
    std::vector<std::string> seen;
    int id = c.register_post_hook([&](const OpEvent& ev) { seen.push_back(op_name(ev.op) + std::to_string(ev.seq)); });
    c.all_reduce(ones({1}), RedOpType::SUM, false);
    c.barrier(false);
    c.remove_hook(id);
    c.barrier(false);
    EXPECT_EQ(seen, (std::vector<std::string>{"all_reduce1", "barrier2"}));
    EXPECT_NE(c.dump_flight_recorder().find("\"last_completed_collective\": 3"), std::string::npos);
  });
}

TEST(Communicator, UnknownBackendAndMissingRendezvous) {
  CommOptions o;
  o.store = std::make_shared<HashStore>();
  o.rank = 0;
  o.size = 1;
  EXPECT_THROW(new_comm("nccl", kCPU, o), ValueError);
  o.rank = 3;
  EXPECT_THROW(new_comm("gloo", kCPU, o), ValueError);
}
