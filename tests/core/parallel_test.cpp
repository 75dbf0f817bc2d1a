// Threading: the thread-count settings, parallel_for's coverage and serial fallbacks,
// exceptions crossing threads, and parallel_reduce's thread-count independence.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <tuple>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "test_util.h"

using namespace flambeau;

namespace {
// Sets the thread count for one test and puts the old one back afterwards.
class Parallel : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = get_num_threads(); }
  void TearDown() override { set_num_threads(saved_); }
  int saved_ = 1;
};

// Calls parallel_for and returns the sub-ranges it handed out, sorted.
std::vector<std::pair<int64_t, int64_t>> ranges_of(int64_t begin, int64_t end, int64_t grain) {
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> out;
  parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    out.emplace_back(b, e);
  });
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST_F(Parallel, SetAndGetNumThreads) {
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  set_num_threads(3);
  EXPECT_EQ(get_num_threads(), 3);
  EXPECT_THROW(set_num_threads(0), ValueError);
  EXPECT_THROW(set_num_threads(-2), ValueError);
  EXPECT_EQ(get_num_threads(), 3);  // a rejected value changes nothing
  EXPECT_FALSE(in_parallel_region());
}

TEST_F(Parallel, CoversTheRangeExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (auto [begin, end, grain] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {0, 1000, 1}, {5, 1005, 7}, {-50, 77, 1}, {0, 100003, 1000}, {3, 4, 0}, {0, 64, 16}}) {
      SCOPED_TRACE(::testing::Message() << threads << " threads, [" << begin << ", " << end << ") grain " << grain);
      std::vector<std::atomic<int>> hits(size_t(end - begin));
      parallel_for(begin, end, grain, [&](int64_t b, int64_t e) {
        ASSERT_LE(begin, b);
        ASSERT_LT(b, e);
        ASSERT_LE(e, end);
        for (int64_t i = b; i < e; ++i) hits[size_t(i - begin)]++;
      });
      for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << "index " << int64_t(i) + begin;
      // the pieces tile the range with no gap or overlap
      auto r = ranges_of(begin, end, grain);
      ASSERT_FALSE(r.empty());
      EXPECT_EQ(r.front().first, begin);
      EXPECT_EQ(r.back().second, end);
      for (size_t i = 1; i < r.size(); ++i) EXPECT_EQ(r[i].first, r[i - 1].second);
      EXPECT_LE(r.size(), size_t(threads));
    }
  }
  // empty and reversed ranges call nothing
  bool called = false;
  parallel_for(5, 5, 1, [&](int64_t, int64_t) { called = true; });
  parallel_for(9, 2, 1, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST_F(Parallel, UsesSeveralThreadsAboveTheGrain) {
  set_num_threads(2);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> inside{0};
  parallel_for(0, 1000, 10, [&](int64_t, int64_t) {
    if (in_parallel_region()) ++inside;
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(inside.load(), 2);
  // pieces are not smaller than the grain: 30 elements with grain 10 use at most 3 pieces
  set_num_threads(8);
  EXPECT_LE(ranges_of(0, 30, 10).size(), 3u);
  EXPECT_EQ(ranges_of(0, 20, 10).size(), 2u);
}

TEST_F(Parallel, SmallRangesRunOnTheCallingThread) {
  set_num_threads(2);
  const std::thread::id me = std::this_thread::get_id();
  int calls = 0;
  std::thread::id where;
  std::pair<int64_t, int64_t> got;
  parallel_for(10, 110, 100, [&](int64_t b, int64_t e) {  // exactly the grain: serial
    ++calls;
    where = std::this_thread::get_id();
    got = {b, e};
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(where, me);
  EXPECT_EQ(got, std::make_pair(int64_t(10), int64_t(110)));
  // one thread: serial whatever the size
  set_num_threads(1);
  calls = 0;
  parallel_for(0, 1000000, 1, [&](int64_t b, int64_t e) {
    ++calls;
    where = std::this_thread::get_id();
    got = {b, e};
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(where, me);
  EXPECT_EQ(got, std::make_pair(int64_t(0), int64_t(1000000)));
  // nested: the inner loop runs serially inside the outer piece
  set_num_threads(2);
  std::atomic<int> inner_calls{0};
  parallel_for(0, 100, 1, [&](int64_t, int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    parallel_for(0, 1000, 1, [&](int64_t b, int64_t e) {
      ++inner_calls;
      EXPECT_EQ(std::this_thread::get_id(), outer);
      EXPECT_EQ(b, 0);
      EXPECT_EQ(e, 1000);
    });
  });
  EXPECT_EQ(inner_calls.load(), 2);
}

TEST_F(Parallel, ExceptionsPropagate) {
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    try {
      parallel_for(0, 1000, 1, [](int64_t b, int64_t e) {
        if (b <= 999 && 999 < e) throw IndexError("[test] index 999 is bad");
      });
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const IndexError& err) {
      EXPECT_STREQ(err.what(), "[test] index 999 is bad");
    }
    // every piece throwing still gives one exception
    EXPECT_THROW(parallel_for(0, 1000, 1, [](int64_t, int64_t) { throw std::runtime_error("x"); }),
                 std::runtime_error);
    // the pool still works afterwards
    std::atomic<int64_t> sum{0};
    parallel_for(0, 100, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
    EXPECT_EQ(sum.load(), 4950);
  }
  EXPECT_THROW(parallel_reduce<int64_t>(0, 100, 10, 0, [](int64_t b, int64_t) -> int64_t {
    if (b == 50) throw ValueError("[test] piece 5");
    return 0;
  }, [](int64_t a, int64_t b) { return a + b; }), ValueError);
}

TEST_F(Parallel, ReduceIsIndependentOfThreadCount) {
  // float sums are order-sensitive: identical bits mean identical pieces and combine order
  std::vector<float> x(100003);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f / float(i + 1) * ((i % 3) ? 1.0f : -3.0f) + 1e3f * float(i % 7);
  auto run = [&](int64_t piece) {
    return parallel_reduce<float>(
        0, int64_t(x.size()), piece, 0.0f,
        [&](int64_t b, int64_t e) {
          float s = 0;
          for (int64_t i = b; i < e; ++i) s += x[size_t(i)];
          return s;
        },
        [](float a, float b) { return a + b; });
  };
  for (int64_t piece : {1, 7, 1000, 4096, 200000}) {
    set_num_threads(1);
    const float one = run(piece);
    set_num_threads(2);
    const float two = run(piece);
    set_num_threads(3);
    const float three = run(piece);
    EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(two)) << "piece " << piece;
    EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(three)) << "piece " << piece;
    // the documented order: pieces summed left to right, each from its start
    float want = 0;
    for (size_t b = 0; b < x.size(); b += size_t(piece)) {
      float s = 0;
      for (size_t i = b; i < std::min(x.size(), b + size_t(piece)); ++i) s += x[i];
      want = want + s;
    }
    EXPECT_EQ(std::bit_cast<uint32_t>(one), std::bit_cast<uint32_t>(want)) << "piece " << piece;
  }
  // pieces are [begin + k * piece, ...) with a short last one; empty range gives identity
  set_num_threads(2);
  auto pieces = parallel_reduce<std::vector<std::pair<int64_t, int64_t>>>(
      3, 26, 5, {}, [](int64_t b, int64_t e) { return std::vector<std::pair<int64_t, int64_t>>{{b, e}}; },
      [](auto a, const auto& b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
      });
  EXPECT_EQ(pieces, (std::vector<std::pair<int64_t, int64_t>>{{3, 8}, {8, 13}, {13, 18}, {18, 23}, {23, 26}}));
  EXPECT_EQ(parallel_reduce<int>(4, 4, 3, 42, [](int64_t, int64_t) { return 1; }, [](int a, int b) { return a + b; }),
            42);
  // a non-commutative combine shows the order is kept
  auto order = parallel_reduce<int64_t>(0, 9, 1, 0, [](int64_t b, int64_t) { return b + 1; },
                                        [](int64_t a, int64_t b) { return a * 10 + b; });
  EXPECT_EQ(order, 123456789);
}

TEST_F(Parallel, ForEachVisitsEveryItemOnceAndRethrows) {
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for_each(n, [&](int64_t i) { ++hits[size_t(i)]; });
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[size_t(i)].load(), 1) << threads << " threads, n " << n;
    }
    try {
      parallel_for_each(100, [](int64_t i) {
        if (i == 37) throw IndexError("[test] item 37 is bad");
      });
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const IndexError& err) {
      EXPECT_STREQ(err.what(), "[test] item 37 is bad");
    }
    EXPECT_THROW(parallel_for_each(50, [](int64_t) { throw std::runtime_error("x"); }), std::runtime_error);
  }
}
