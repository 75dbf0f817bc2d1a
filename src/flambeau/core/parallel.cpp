// OpenMP-backed implementation of parallel_for and the thread-count settings.
#include "flambeau/core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>

#include "flambeau/core/error.h"

namespace flambeau {
namespace {
std::atomic<int> g_num_threads{0};  // 0: not set, use OpenMP's default

// OpenMP's default team size, read when the library loads: omp_get_max_threads() is not a
// reliable default later (openblas_set_num_threads changes it for the process, and
// kernels::gemm_1t lowers it around each BLAS call).
int default_threads() {
  static const int n = omp_get_max_threads();
  return n;
}
[[maybe_unused]] const int g_default_read_at_load = default_threads();
}  // namespace

void set_num_threads(int n) {
  FLB_CHECK(n > 0, ValueError, "[set_num_threads] expected a positive thread count, got ", n);
  g_num_threads = n;
  omp_set_num_threads(n);
}

int get_num_threads() {
  int n = g_num_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : default_threads();
}

bool in_parallel_region() { return omp_in_parallel(); }

namespace detail {
void run_parallel(int64_t begin, int64_t end, int64_t grain,
                  const std::function<void(int64_t, int64_t)>& f) {
  int64_t n = end - begin;
  int64_t max_by_grain = std::max<int64_t>(1, (n + grain - 1) / std::max<int64_t>(grain, 1));
  int nt = int(std::min<int64_t>(get_num_threads(), max_by_grain));
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), count = omp_get_num_threads();
    int64_t chunk = (n + count - 1) / count;
    int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
    if (b < e) {
      try {
        f(b, e);
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

void run_each(int64_t n, const std::function<void(int64_t)>& f) {
  const int nt = get_num_threads();
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
  for (int64_t i = 0; i < n; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;  // an item failed: take no more
    try {
      f(i);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}
}  // namespace detail

}  // namespace flambeau
