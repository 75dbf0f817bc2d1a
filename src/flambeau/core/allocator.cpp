// Caching CPU allocator. Requests are rounded to size classes (64-byte multiples up to
// 4 KiB, then 8 classes per power of two, so at most 12.5% waste); freed blocks wait
// in per-class free lists (an array indexed by class, behind a spin lock: the common
// path costs a few dozen instructions) up to a cap, and allocation failures flush the
// cache once.
#include "flambeau/core/allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <new>

#include <sys/mman.h>
#include <thread>
#include <vector>

#include "flambeau/core/error.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::memory {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kMaxCachedBytes = size_t(4) << 30;

constexpr int kClasses = 64 + 52 * 8;

// Index of a block size's class: 64-byte steps up to 4 KiB, then 8 per power of two.
int class_index(size_t block) {
  if (block <= 4096) return int(block / kAlign) - 1;
  const int e = std::bit_width(block) - 1;
  return 64 + (e - 12) * 8 + int(block >> (e - 3)) - 8;
}

// Uncontended lock/unlock is two atomic operations; waiters yield.
class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

struct State {
  SpinLock mu;
  std::array<std::vector<void*>, kClasses> free_lists;
  size_t allocated = 0, peak = 0, cached = 0;
};

struct Guard {
  explicit Guard(SpinLock& l) : lock(l) { lock.lock(); }
  ~Guard() { lock.unlock(); }
  SpinLock& lock;
};
State& state() {
  static State* s = new State();  // never destroyed: tensors may die after static teardown
  return *s;
}

// Large blocks are 2 MiB aligned and advised as huge pages: fewer page faults on first
// touch and fewer TLB misses when streaming (the machine's THP mode is "madvise").
void* system_alloc(size_t size) {
  if (size < kHugePage) return std::aligned_alloc(kAlign, size);  // size is a multiple of 64
  void* p = nullptr;
  if (posix_memalign(&p, kHugePage, size) != 0) return nullptr;  // no size-multiple rule here
  madvise(p, size, MADV_HUGEPAGE);
  return p;
}

void flush_locked(State& s) {
  for (auto& blocks : s.free_lists) {
    for (void* p : blocks) std::free(p);
    blocks.clear();
  }
  s.cached = 0;
}

}  // namespace

size_t block_size(size_t nbytes) {
  if (nbytes <= 4096) return (nbytes + kAlign - 1) / kAlign * kAlign;
  size_t step = std::bit_floor(nbytes) / 8;
  return (nbytes + step - 1) / step * step;
}

void* allocate(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  // Past 2^62 bytes no machine has the memory, and block_size's rounding could wrap.
  FLB_CHECK(nbytes <= (size_t(1) << 62), Error, "[allocate] out of memory: cannot allocate ", nbytes, " bytes");
  size_t size = block_size(nbytes);
  State& s = state();
  Guard lock(s.mu);
  void* p = nullptr;
  std::vector<void*>& list = s.free_lists[class_index(size)];
  if (!list.empty()) {
    p = list.back();
    list.pop_back();
    s.cached -= size;
  } else {
    p = system_alloc(size);
    if (!p) {
      flush_locked(s);
      p = system_alloc(size);
    }
    FLB_CHECK(p, Error, "[allocate] out of memory: cannot allocate ", nbytes, " bytes");
  }
  s.allocated += size;
  s.peak = std::max(s.peak, s.allocated);
  if (profiler::memory_enabled()) [[unlikely]]
    profiler::record_memory(int64_t(size), int64_t(s.allocated));
  return p;
}

void release(void* ptr, size_t nbytes) {
  if (!ptr) return;
  size_t size = block_size(nbytes);
  State& s = state();
  Guard lock(s.mu);
  s.allocated -= size;
  if (profiler::memory_enabled()) [[unlikely]]
    profiler::record_memory(-int64_t(size), int64_t(s.allocated));
  if (s.cached + size > kMaxCachedBytes) {
    std::free(ptr);
    return;
  }
  s.free_lists[class_index(size)].push_back(ptr);
  s.cached += size;
}

size_t allocated() {
  Guard lock(state().mu);
  return state().allocated;
}
size_t max_allocated() {
  Guard lock(state().mu);
  return state().peak;
}
void reset_peak_stats() {
  Guard lock(state().mu);
  state().peak = state().allocated;
}
size_t cached() {
  Guard lock(state().mu);
  return state().cached;
}
void empty_cache() {
  Guard lock(state().mu);
  flush_locked(state());
}

}  // namespace flambeau::memory
