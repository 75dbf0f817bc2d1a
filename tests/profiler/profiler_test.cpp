// The profiler: op events nested in user ranges, backward nodes linked to their forward
// ops, memory events summing to zero, no events lost across threads, the trace's JSON.
#include "flambeau/profiler/profiler.h"

#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "flambeau/flambeau.h"

namespace flambeau {
namespace {

using profiler::Event;
using profiler::EventKind;

int64_t count(const std::vector<Event>& events, const std::string& name) {
  int64_t n = 0;
  for (const Event& e : events) n += e.name == name;
  return n;
}
const Event& first(const std::vector<Event>& events, const std::string& name) {
  for (const Event& e : events)
    if (e.name == name) return e;
  throw std::runtime_error("no event " + name);
}

TEST(Profiler, OpsNestInsideUserRanges) {
  const Tensor a = ones({64, 64}), b = ones({64, 64});
  profiler::Options opt;
  opt.record_shapes = true;
  profiler::start(opt);
  {
    const profiler::RecordFunction range("my_range");
    const Tensor c = matmul(a, b);
    const Tensor d = add(c, b);
  }
  const std::vector<Event> events = profiler::stop();
  ASSERT_EQ(count(events, "my_range"), 1);
  ASSERT_EQ(count(events, "matmul"), 1);
  ASSERT_EQ(count(events, "add"), 1);
  const Event& r = first(events, "my_range");
  const Event& mm = first(events, "matmul");
  const Event& add_e = first(events, "add");
  EXPECT_EQ(r.kind, EventKind::UserRange);
  EXPECT_EQ(mm.kind, EventKind::Op);
  EXPECT_LE(r.start_ns, mm.start_ns);
  EXPECT_LE(mm.end_ns, add_e.start_ns);
  EXPECT_LE(add_e.end_ns, r.end_ns);
  EXPECT_EQ(mm.tid, r.tid);
  EXPECT_EQ(mm.shapes, "[[64, 64], [64, 64]]");
  EXPECT_NE(mm.correlation, add_e.correlation);
  // The GEMM inside matmul is a kernel event within the op's range.
  bool kernel_inside = false;
  for (const Event& e : events)
    if (e.kind == EventKind::Kernel && e.name == "sgemm" && e.start_ns >= mm.start_ns && e.end_ns <= mm.end_ns)
      kernel_inside = true;
  EXPECT_TRUE(kernel_inside);
  const auto rows = profiler::key_averages(events, false);
  for (const auto& row : rows)
    if (row.key == "my_range") {
      EXPECT_EQ(row.count, 1);
      EXPECT_LT(row.self_cpu_time_total_us, row.cpu_time_total_us);
    }
  const std::string t = profiler::table(rows, "self_cpu_time_total", 10);
  EXPECT_NE(t.find("my_range"), std::string::npos);
  EXPECT_THROW(profiler::table(rows, "bogus", 1), ValueError);
}

TEST(Profiler, BackwardNodesCarryTheirForwardOpsSequenceNumber) {
  const Tensor x = ones({8, 8}).requires_grad_(true);
  profiler::start({});
  const Tensor y = mul(x, x);
  const Tensor s = sum(y);
  s.backward();
  const std::vector<Event> events = profiler::stop();
  const Event& fwd = first(events, "mul");
  ASSERT_GE(fwd.seq, 0);
  bool linked = false;
  for (const Event& e : events)
    if (e.kind == EventKind::Backward && e.seq == fwd.seq) {
      linked = true;
      EXPECT_GE(e.start_ns, fwd.end_ns);
    }
  EXPECT_TRUE(linked);
  const std::string json = profiler::chrome_trace_json(events, 0, "test");
  EXPECT_NE(json.find("\"ph\": \"s\", \"id\": " + std::to_string(fwd.seq)), std::string::npos);
  EXPECT_NE(json.find("\"ph\": \"f\", \"bp\": \"e\", \"id\": " + std::to_string(fwd.seq)), std::string::npos);
}

TEST(Profiler, MemoryEventsReturnToZero) {
  profiler::Options opt;
  opt.profile_memory = true;
  profiler::start(opt);
  {
    const Tensor a = ones({1000});
    const Tensor b = add(a, a);
  }
  const std::vector<Event> events = profiler::stop();
  int64_t net = 0, n = 0;
  for (const Event& e : events)
    if (e.kind == EventKind::Memory) net += e.bytes, ++n;
  EXPECT_GE(n, 4);  // two blocks allocated, two released
  EXPECT_EQ(net, 0);
}

TEST(Profiler, NoEventIsLostAcrossThreads) {
  constexpr int kThreads = 8, kEach = 3000;  // more than a buffer chunk per thread
  profiler::start({});
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < kEach; ++i) profiler::RecordFunction r("work");
    });
  for (auto& th : threads) th.join();
  const std::vector<Event> events = profiler::stop();
  EXPECT_EQ(count(events, "work"), kThreads * kEach);
  std::map<uint64_t, int> per_thread;
  for (const Event& e : events)
    if (e.name == "work") ++per_thread[e.tid];
  EXPECT_EQ(per_thread.size(), size_t(kThreads));
}

TEST(Profiler, OffRecordsNothingAndStartTwiceIsRefused) {
  { const profiler::RecordFunction r("before"); }
  profiler::start({});
  EXPECT_THROW(profiler::start({}), ValueError);
  const std::vector<Event> events = profiler::stop();
  EXPECT_EQ(count(events, "before"), 0);
  EXPECT_THROW(profiler::stop(), ValueError);
}

}  // namespace
}  // namespace flambeau
