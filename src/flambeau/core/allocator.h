// The CPU allocator: 64-byte aligned blocks, a cache of freed blocks (so that large
// temporaries do not pay page faults again), and the memory statistics every memory
// benchmark uses. Safe to call from many threads.
#pragma once
#include <cstddef>
#include <cstdint>

namespace flambeau::memory {

// Returns a 64-byte aligned block of at least `nbytes` (nullptr for 0 bytes).
void* allocate(size_t nbytes);
// Returns a block from allocate(); `nbytes` must be the size that was asked for.
void release(void* ptr, size_t nbytes);

// Bytes in blocks handed out and not yet released (block sizes, i.e. rounded up).
size_t allocated();
// Highest value of allocated() since the start or the last reset_peak_stats().
size_t max_allocated();
void reset_peak_stats();
// Bytes held in the cache of freed blocks, and a way to give them back to the system.
size_t cached();
void empty_cache();
// The size class a request of `nbytes` is served from (what allocated() counts).
size_t block_size(size_t nbytes);

}  // namespace flambeau::memory
