// Test helper: the ranks of a gloo group as threads of this process (a HashStore for the
// rendezvous), each with its own communicator.
#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "flambeau/distributed/communicator.h"
#include "flambeau/distributed/store.h"

namespace flambeau::distributed {

// Runs body(comm) on `world` threads; an exception on a rank fails the test naming it.
inline void run_ranks(int world, const std::function<void(std::shared_ptr<Communicator>)>& body,
                       Millis timeout = Millis(5000), bool reconfigurable = false) {
  auto store = std::make_shared<HashStore>();
  store->set_timeout(Millis(10000));
  static std::atomic<int> groups{0};
  std::string name = "t" + std::to_string(groups++);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        CommOptions o;
        o.store = store;
        o.rank = r;
        o.size = world;
        o.name = name;
        o.timeout = timeout;
        o.abort_process_on_timeout_or_error = false;
        o.enable_reconfigure = reconfigurable;
        body(new_comm("gloo", kCPU, o));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

}  // namespace flambeau::distributed
