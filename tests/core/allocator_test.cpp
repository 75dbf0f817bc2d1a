// The caching CPU allocator: size classes, 64-byte alignment, reuse of freed blocks, the
// memory statistics (allocated, peak, cached) and their consistency under several threads.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "test_util.h"

using namespace flambeau;
namespace mem = flambeau::memory;

namespace {
bool aligned64(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }
}  // namespace

TEST(Allocator, BlockSizes) {
  EXPECT_EQ(mem::block_size(1), 64u);
  EXPECT_EQ(mem::block_size(64), 64u);
  EXPECT_EQ(mem::block_size(65), 128u);
  EXPECT_EQ(mem::block_size(4000), 4032u);
  EXPECT_EQ(mem::block_size(4096), 4096u);
  EXPECT_EQ(mem::block_size(4097), 4608u);
  EXPECT_EQ(mem::block_size(5000), 5120u);
  EXPECT_EQ(mem::block_size(size_t(1) << 20), size_t(1) << 20);
  EXPECT_EQ(mem::block_size((size_t(1) << 20) + 1), (size_t(1) << 20) + (size_t(1) << 17));
  // never smaller than asked, a multiple of 64, at most 12.5% waste above 4 KiB
  for (size_t n = 1; n < (size_t(1) << 22); n = n * 5 / 4 + 1) {
    const size_t b = mem::block_size(n);
    EXPECT_GE(b, n);
    EXPECT_EQ(b % 64, 0u);
    if (n > 4096) EXPECT_LE(double(b - n), 0.125 * double(n)) << n;
    EXPECT_EQ(mem::block_size(b), b) << n;  // a class maps to itself
  }
}

TEST(Allocator, AlignmentAndZeroBytes) {
  for (size_t n : {1, 3, 63, 64, 100, 4095, 4097, 100000, 3000000}) {
    void* p = mem::allocate(n);
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(aligned64(p)) << n;
    std::memset(p, 0xab, n);  // the whole request is writable
    mem::release(p, n);
  }
  const size_t before = mem::allocated();
  EXPECT_EQ(mem::allocate(0), nullptr);
  EXPECT_EQ(mem::allocated(), before);
  mem::release(nullptr, 0);
  EXPECT_EQ(mem::allocated(), before);
  // tensors' data pointers are aligned too, whatever the dtype
  for (DType dt : {kBool, kInt16, kFloat32, kFloat64}) {
    Tensor t = empty({7, 3}, dt);
    EXPECT_TRUE(aligned64(t.data_ptr())) << dtype_name(dt);
  }
}

TEST(Allocator, AllocatedCountsBlocks) {
  const size_t base = mem::allocated();
  void* a = mem::allocate(100);
  EXPECT_EQ(mem::allocated(), base + 128);
  void* b = mem::allocate(5000);
  EXPECT_EQ(mem::allocated(), base + 128 + 5120);
  mem::release(a, 100);
  EXPECT_EQ(mem::allocated(), base + 5120);
  mem::release(b, 5000);
  EXPECT_EQ(mem::allocated(), base);
  {
    Tensor t = empty({1000});  // 4000 bytes -> 4032
    EXPECT_EQ(mem::allocated(), base + 4032);
    Tensor v = t.view({10, 100}).t();  // views allocate nothing
    EXPECT_EQ(mem::allocated(), base + 4032);
  }
  EXPECT_EQ(mem::allocated(), base);
  Tensor e = empty({0, 5});
  EXPECT_EQ(mem::allocated(), base);
}

TEST(Allocator, FreedBlockIsReused) {
  mem::empty_cache();
  EXPECT_EQ(mem::cached(), 0u);
  void* p = mem::allocate(1000);  // class 1024
  mem::release(p, 1000);
  EXPECT_EQ(mem::cached(), 1024u);
  void* q = mem::allocate(1000);
  EXPECT_EQ(q, p);
  EXPECT_EQ(mem::cached(), 0u);
  mem::release(q, 1000);
  void* r = mem::allocate(980);  // another request in the same class
  EXPECT_EQ(r, p);
  mem::release(r, 980);
  // a different class does not take it
  void* s = mem::allocate(2000);
  EXPECT_NE(s, p);
  EXPECT_EQ(mem::cached(), 1024u);
  mem::release(s, 2000);
  EXPECT_EQ(mem::cached(), 1024u + 2048u);
  mem::empty_cache();
  EXPECT_EQ(mem::cached(), 0u);

  // through tensors: a temporary's storage comes back for the next one of that size
  void* first = nullptr;
  {
    Tensor t = empty({256, 256});
    first = t.data_ptr();
  }
  EXPECT_EQ(mem::cached(), mem::block_size(256 * 256 * 4));
  Tensor u = empty({256, 256});
  EXPECT_EQ(u.data_ptr(), first);
  EXPECT_EQ(mem::cached(), 0u);
}

TEST(Allocator, PeakTracksTheMaximum) {
  const size_t base = mem::allocated();
  mem::reset_peak_stats();
  EXPECT_EQ(mem::max_allocated(), base);
  void* a = mem::allocate(size_t(1) << 20);
  void* b = mem::allocate(size_t(1) << 20);
  EXPECT_EQ(mem::max_allocated(), base + (size_t(2) << 20));
  mem::release(a, size_t(1) << 20);
  EXPECT_EQ(mem::max_allocated(), base + (size_t(2) << 20));  // peak stays
  EXPECT_EQ(mem::allocated(), base + (size_t(1) << 20));
  void* c = mem::allocate(64);  // below the old peak: no change
  EXPECT_EQ(mem::max_allocated(), base + (size_t(2) << 20));
  mem::reset_peak_stats();
  EXPECT_EQ(mem::max_allocated(), base + (size_t(1) << 20) + 64);
  mem::release(b, size_t(1) << 20);
  mem::release(c, 64);
  EXPECT_EQ(mem::max_allocated(), base + (size_t(1) << 20) + 64);
  mem::reset_peak_stats();
  EXPECT_EQ(mem::max_allocated(), base);
  {
    Tensor t = zeros({1 << 18});  // 1 MiB
    Tensor u = t.clone();
  }
  // both 1 MiB blocks were live at once (plus at most a few small temporaries)
  EXPECT_GE(mem::max_allocated(), base + (size_t(2) << 20));
  EXPECT_LE(mem::max_allocated(), base + (size_t(2) << 20) + 4096);
  EXPECT_EQ(mem::allocated(), base);
}

TEST(Allocator, ManyThreadsAtOnce) {
  mem::empty_cache();
  const size_t base = mem::allocated();
  mem::reset_peak_stats();
  constexpr int kThreads = 8, kRounds = 2000;
  std::atomic<int> errors{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      while (!go.load()) std::this_thread::yield();
      std::vector<std::pair<unsigned char*, size_t>> held;
      for (int r = 0; r < kRounds; ++r) {
        const size_t n = 1 + size_t((r * 7919 + id * 104729) % 20000);
        auto* p = static_cast<unsigned char*>(mem::allocate(n));
        if (!aligned64(p)) ++errors;
        std::memset(p, id + 1, n);
        held.emplace_back(p, n);
        if (held.size() > 16 || r % 3 == 0) {
          // no other thread wrote into our block while we held it
          auto [q, m] = held.front();
          for (size_t i = 0; i < m; i += 61)
            if (q[i] != id + 1) ++errors;
          mem::release(q, m);
          held.erase(held.begin());
        }
        if (r % 100 == 0) (void)mem::max_allocated(), (void)mem::cached();
      }
      for (auto [q, m] : held) mem::release(q, m);
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mem::allocated(), base);
  EXPECT_GT(mem::max_allocated(), base);
  EXPECT_LE(mem::max_allocated(), base + size_t(kThreads) * 17 * mem::block_size(20000));
  EXPECT_GT(mem::cached(), 0u);
  mem::empty_cache();
  EXPECT_EQ(mem::cached(), 0u);

  // tensors made and dropped on several threads leave the count where it was
  std::vector<std::thread> workers;
  for (int id = 0; id < 4; ++id)
    workers.emplace_back([id, &errors] {
      for (int r = 0; r < 200; ++r) {
        Tensor t = full({r + 1, 3}, id);
        if (t[r][2].item<int64_t>() != id) ++errors;
      }
    });
  for (std::thread& t : workers) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(mem::allocated(), base);
}
