// Stable LSD radix sort of (key, index) pairs, the engine of sort/argsort/topk. Keys are
// unsigned integers whose order is the wanted order (radix_key maps every dtype to one).
// A long array is sorted by all threads: each 8-bit pass counts digits per chunk and
// scatters chunks to offsets laid out digit-major, chunk-minor, which keeps it stable;
// a stable sort has one result, so the output never depends on the thread count.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "flambeau/core/half.h"
#include "flambeau/core/parallel.h"

namespace flambeau::kernels {

template <class K>
struct KeyIndex {
  K key;
  uint32_t index;
};

// An unsigned key ordering values as sort does: ascending numbers, -0.0 equal to 0.0,
// every NaN equal and above +inf. Bitwise-inverting the key gives descending order.
template <class T>
auto radix_key(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    constexpr U sign = U(1) << (8 * sizeof(U) - 1);
    if (std::isnan(v)) return U(~U(0));
    const U b = std::bit_cast<U>(v == 0 ? T(0) : v);
    return (b & sign) ? U(~b) : U(b | sign);
  } else if constexpr (std::is_same_v<T, bool>) {
    return uint8_t(v);
  } else if constexpr (std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return U(U(v) ^ (U(1) << (8 * sizeof(U) - 1)));
  } else {
    return v;
  }
}

// Sorts a[0, n) by key, stably; tmp is scratch of n pairs. Returns the buffer that holds
// the result (a or tmp). Uses the thread pool when n is large and we are not already
// inside a parallel region.
template <class K>
KeyIndex<K>* radix_sort(KeyIndex<K>* a, KeyIndex<K>* tmp, int64_t n) {
  if (n <= 1) return a;
  constexpr int64_t kMinChunk = int64_t(1) << 16;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), n / kMinChunk));
  const int64_t per = (n + chunks - 1) / chunks;
  std::vector<int64_t> hist(size_t(chunks) * 256);
  for (int shift = 0; shift < int(8 * sizeof(K)); shift += 8) {
    std::fill(hist.begin(), hist.end(), 0);
    parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        int64_t* h = hist.data() + c * 256;
        for (int64_t i = c * per, e = std::min(n, i + per); i < e; ++i) ++h[(a[i].key >> shift) & 0xff];
      }
    });
    // A pass where every key has the same digit changes nothing.
    int64_t total_first = 0;
    const int64_t digit0 = (a[0].key >> shift) & 0xff;
    for (int64_t c = 0; c < chunks; ++c) total_first += hist[size_t(c * 256 + digit0)];
    if (total_first == n) continue;
    int64_t run = 0;
    for (int d = 0; d < 256; ++d)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t count = hist[size_t(c * 256 + d)];
        hist[size_t(c * 256 + d)] = run;
        run += count;
      }
    parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        int64_t* off = hist.data() + c * 256;
        for (int64_t i = c * per, e = std::min(n, i + per); i < e; ++i) tmp[off[(a[i].key >> shift) & 0xff]++] = a[i];
      }
    });
    std::swap(a, tmp);
  }
  return a;
}

}  // namespace flambeau::kernels
