// Caching CPU allocator. Requests are rounded to size classes (64-byte multiples up to
// 4 KiB, then 8 classes per power of two, so at most 12.5% waste); freed blocks wait
// in per-class free lists up to a cap, and allocation failures flush the cache once.
#include "flambeau/core/allocator.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "flambeau/core/error.h"

namespace flambeau::memory {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMaxCachedBytes = size_t(4) << 30;

struct State {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void*>> free_lists;
  size_t allocated = 0, peak = 0, cached = 0;
};
State& state() {
  static State* s = new State();  // never destroyed: tensors may die after static teardown
  return *s;
}

void flush_locked(State& s) {
  for (auto& [size, blocks] : s.free_lists)
    for (void* p : blocks) std::free(p);
  s.free_lists.clear();
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
  size_t size = block_size(nbytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  void* p = nullptr;
  auto it = s.free_lists.find(size);
  if (it != s.free_lists.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    s.cached -= size;
  } else {
    p = std::aligned_alloc(kAlign, size);
    if (!p) {
      flush_locked(s);
      p = std::aligned_alloc(kAlign, size);
    }
    FLB_CHECK(p, Error, "[allocate] out of memory allocating ", nbytes, " bytes");
  }
  s.allocated += size;
  s.peak = std::max(s.peak, s.allocated);
  return p;
}

void release(void* ptr, size_t nbytes) {
  if (!ptr) return;
  size_t size = block_size(nbytes);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.allocated -= size;
  if (s.cached + size > kMaxCachedBytes) {
    std::free(ptr);
    return;
  }
  s.free_lists[size].push_back(ptr);
  s.cached += size;
}

size_t allocated() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().allocated;
}
size_t max_allocated() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().peak;
}
void reset_peak_stats() {
  std::lock_guard<std::mutex> lock(state().mu);
  state().peak = state().allocated;
}
size_t cached() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().cached;
}
void empty_cache() {
  std::lock_guard<std::mutex> lock(state().mu);
  flush_locked(state());
}

}  // namespace flambeau::memory
