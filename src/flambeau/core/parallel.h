// Threading on OpenMP. parallel_for splits [begin, end) into contiguous pieces, one per
// thread, and runs serially when the range is under `grain` (small tensors pay nothing).
// parallel_reduce cuts the range into pieces of a fixed size that does not depend on the
// thread count and combines their results in order, so float results are bitwise
// identical with 1 or N threads.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace flambeau {

void set_num_threads(int n);
int get_num_threads();
bool in_parallel_region();

namespace detail {
void run_parallel(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& f);
void run_each(int64_t n, const std::function<void(int64_t)>& f);
}

// f(b, e) is called on disjoint sub-ranges that cover [begin, end).
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (end <= begin) return;
  if (end - begin <= grain || get_num_threads() == 1 || in_parallel_region()) {
    f(begin, end);
    return;
  }
  detail::run_parallel(begin, end, grain, f);
}

// f(i) for each i in [0, n), items handed to threads one at a time as they free up (for
// items of uneven cost). Results must not depend on which thread runs an item. The first
// exception thrown by f is re-raised here after the other threads stop taking items.
template <class F>
void parallel_for_each(int64_t n, const F& f) {
  if (n <= 1 || get_num_threads() == 1 || in_parallel_region()) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  detail::run_each(n, f);
}

// Splits [begin, end) into pieces of `piece` elements (the last may be shorter), maps each
// with map(b, e) -> T, and folds the results left to right with combine(T, T) -> T.
template <class T, class Map, class Combine>
T parallel_reduce(int64_t begin, int64_t end, int64_t piece, T identity, const Map& map,
                  const Combine& combine) {
  if (end <= begin) return identity;
  int64_t n_pieces = (end - begin + piece - 1) / piece;
  std::vector<T> partial(n_pieces, identity);
  parallel_for(0, n_pieces, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      partial[i] = map(begin + i * piece, std::min(end, begin + (i + 1) * piece));
  });
  T acc = identity;
  for (const T& p : partial) acc = combine(acc, p);
  return acc;
}

}  // namespace flambeau
