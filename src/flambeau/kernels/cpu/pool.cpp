// Pooling kernels (pool.h): direct loops over each output's window, one plane per task.
// The window rules are torch's: a max window visits input positions start + j * dilation
// inside the input; an average window is clipped to the padded bounds for its divisor and
// to the input for its sum; an adaptive bin is [floor(i * in / out), ceil((i + 1) * in / out)).
#include "flambeau/kernels/cpu/pool.h"

#include <algorithm>
#include <array>
#include <vector>
#include <cmath>
#include <limits>
#include <type_traits>

#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd_pool.h"

namespace flambeau::kernels {
namespace {

// Note [Deterministic pooling]: work is split over planes only. A forward output reads its
// window in d, h, w order; a backward scatters the outputs of one plane in output order
// into that plane's gradient, which no other task touches. So every value is computed by
// the same operations in the same order with any number of threads.
template <class F>
void for_planes(const PoolGeometry& g, const F& f) {
  const int64_t work = std::max<int64_t>(1, g.in_volume() + g.out_volume());
  parallel_for(0, g.planes, std::max<int64_t>(1, 32768 / work), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) f(p);
  });
}

// The positions a max window visits along one dim: first, first + step, ... < end.
struct Range {
  int64_t first, end, step;
};
Range max_window(const PoolGeometry& g, int dim, int64_t o) {
  int64_t start = o * g.stride[dim] - g.pad[dim];
  const int64_t end = std::min(start + (g.kernel[dim] - 1) * g.dilation[dim] + 1, g.in[dim]);
  while (start < 0) start += g.dilation[dim];
  return {start, end, g.dilation[dim]};
}

// An average window along one dim: [lo, hi) inside the input, and its length in the padded bounds.
struct AvgRange {
  int64_t lo, hi, padded;
};
AvgRange avg_window(const PoolGeometry& g, int dim, int64_t o) {
  const int64_t start = o * g.stride[dim] - g.pad[dim];
  const int64_t end = std::min(start + g.kernel[dim], g.in[dim] + g.pad[dim]);
  return {std::max<int64_t>(start, 0), std::min(end, g.in[dim]), end - start};
}

Range adaptive_bin(const PoolGeometry& g, int dim, int64_t o) {
  const int64_t in = g.in[dim], out = g.out[dim];
  return {o * in / out, ((o + 1) * in + out - 1) / out, 1};
}

// f(od, oh, ow, window d, window h, window w) for each output of a plane, in order.
template <class Window, class F>
void each_output(const PoolGeometry& g, Window window, const F& f) {
  for (int64_t od = 0; od < g.out[0]; ++od) {
    const auto wd = window(g, 0, od);
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      const auto wh = window(g, 1, oh);
      for (int64_t ow = 0; ow < g.out[2]; ++ow) f(wd, wh, window(g, 2, ow));
    }
  }
}

// The maximum over the positions of three ranges; its index starts at the first position.
template <class T>
void window_max(const PoolGeometry& g, const T* x, Range d, Range h, Range w, T* y, int64_t* idx) {
  const int64_t H = g.in[1], W = g.in[2];
  int64_t best = (d.first * H + h.first) * W + w.first;
  constexpr bool floating = std::is_floating_point_v<T>;
  T m = floating ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  for (int64_t i = d.first; i < d.end; i += d.step)
    for (int64_t j = h.first; j < h.end; j += h.step)
      for (int64_t k = w.first; k < w.end; k += w.step) {
        const int64_t at = (i * H + j) * W + k;
        const T v = x[at];
        // Selects, not branches: which position wins is data-dependent (random on random data).
        bool take = v > m;
        if constexpr (floating) take = take || v != v;  // NaN wins
        m = take ? v : m;
        best = take ? at : best;
      }
  *y = m;
  *idx = best;
}

using Ranges = std::array<std::vector<Range>, 3>;

// max_forward on channels-last x and y: each output's channels side by side, each channel
// visiting its window in the same order as window_max (so the same values and indices).
template <class T>
void max_forward_channels_last(const PoolGeometry& g, const Ranges& ranges, const T* x, T* y, int64_t* idx) {
  const int64_t C = g.channels_last, iv = g.in_volume(), H = g.in[1], W = g.in[2];
  const int64_t rows = g.planes / C * g.out[0] * g.out[1];  // output rows (n, od, oh)
  constexpr bool simd = std::is_floating_point_v<T>;
  const T lowest = simd ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  parallel_for(0, rows, 1, [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> window;
    for (int64_t r = r0; r < r1; ++r) {
      const Range& d = ranges[0][size_t(r / g.out[1] % g.out[0])];
      const Range& h = ranges[1][size_t(r % g.out[1])];
      const T* xn = x + r / (g.out[0] * g.out[1]) * iv * C;
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const Range& w = ranges[2][size_t(ow)];
        window.clear();
        for (int64_t i = d.first; i < d.end; i += d.step)
          for (int64_t j = h.first; j < h.end; j += h.step)
            for (int64_t k = w.first; k < w.end; k += w.step) window.push_back((i * H + j) * W + k);
        const int64_t first = (d.first * H + h.first) * W + w.first, o = (r * g.out[2] + ow) * C;
        if constexpr (simd) {
          if (iv < (int64_t(1) << 31)) {
            max_pool_channels_last_output(xn, window.data(), int64_t(window.size()), first, C, y + o, idx + o);
            continue;
          }
        }
        T* m = y + o;
        int64_t* best = idx + o;
        std::fill(m, m + C, lowest);
        std::fill(best, best + C, first);
        for (const int64_t at : window)
          for (int64_t c = 0; c < C; ++c) {
            const T v = xn[at * C + c];
            bool take = v > m[c];
            if constexpr (simd) take = take || v != v;  // NaN wins
            m[c] = take ? v : m[c];
            best[c] = take ? at : best[c];
          }
      }
    }
  });
}

// The maximum of each window (max_window or adaptive_bin) and its index. The windows along
// each dim are the same for every plane: they are worked out once.
template <class T, class Window>
void max_forward(const PoolGeometry& g, Window window, const T* x, T* y, int64_t* idx) {
  const int64_t iv = g.in_volume(), ov = g.out_volume();
  Ranges ranges;
  for (int dim = 0; dim < 3; ++dim)
    for (int64_t o = 0; o < g.out[dim]; ++o) ranges[size_t(dim)].push_back(window(g, dim, o));
  if (g.channels_last > 0) return max_forward_channels_last(g, ranges, x, y, idx);
  for_planes(g, [&](int64_t p) {
    const T* xp = x + p * iv;
    int64_t o = p * ov;
    for (const Range& d : ranges[0])
      for (const Range& h : ranges[1])
        for (const Range& w : ranges[2]) {
          window_max(g, xp, d, h, w, y + o, idx + o);
          ++o;
        }
  });
}

}  // namespace

template <class T>
void max_pool_forward(const PoolGeometry& g, const T* x, T* y, int64_t* idx) {
  max_forward(g, max_window, x, y, idx);
}

template <class T>
void adaptive_max_pool_forward(const PoolGeometry& g, const T* x, T* y, int64_t* idx) {
  max_forward(g, adaptive_bin, x, y, idx);
}

template <class T>
void max_pool_backward(const PoolGeometry& g, const T* gy, const int64_t* idx, T* gx) {
  const int64_t iv = g.in_volume(), ov = g.out_volume();
  if (g.channels_last > 0) {  // each (image, block of channels) a task, outputs added in order as below
    constexpr int64_t kBlock = 64;
    const int64_t C = g.channels_last, blocks = (C + kBlock - 1) / kBlock;
    parallel_for(0, g.planes / C * blocks, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t n = t / blocks, c0 = t % blocks * kBlock, c1 = std::min(C, c0 + kBlock);
        T* gn = gx + n * iv * C;
        for (int64_t i = 0; i < iv; ++i) std::fill(gn + i * C + c0, gn + i * C + c1, T(0));
        for (int64_t o = n * ov; o < (n + 1) * ov; ++o)
          for (int64_t c = c0; c < c1; ++c) {
            const int64_t at = idx[o * C + c];
            if (at >= 0 && at < iv) gn[at * C + c] += gy[o * C + c];
          }
      }
    });
    return;
  }
  for_planes(g, [&](int64_t p) {
    T* gp = gx + p * iv;
    std::fill(gp, gp + iv, T(0));
    for (int64_t o = p * ov; o < (p + 1) * ov; ++o)
      if (idx[o] >= 0 && idx[o] < iv) gp[idx[o]] += gy[o];
  });
}

namespace {
int64_t avg_divisor(bool count_include_pad, int64_t divisor_override, AvgRange d, AvgRange h, AvgRange w) {
  if (divisor_override != 0) return divisor_override;
  if (count_include_pad) return d.padded * h.padded * w.padded;
  return (d.hi - d.lo) * (h.hi - h.lo) * (w.hi - w.lo);
}
bool empty(AvgRange d, AvgRange h, AvgRange w) { return d.lo >= d.hi || h.lo >= h.hi || w.lo >= w.hi; }
}  // namespace

template <class T>
void avg_pool_forward(const PoolGeometry& g, bool count_include_pad, int64_t divisor_override, const T* x, T* y) {
  const int64_t iv = g.in_volume(), ov = g.out_volume(), H = g.in[1], W = g.in[2];
  for_planes(g, [&](int64_t p) {
    const T* xp = x + p * iv;
    T* yp = y + p * ov;
    each_output(g, avg_window, [&](AvgRange d, AvgRange h, AvgRange w) {
      if (empty(d, h, w)) {
        *yp++ = T(0);
        return;
      }
      T sum = 0;
      for (int64_t i = d.lo; i < d.hi; ++i)
        for (int64_t j = h.lo; j < h.hi; ++j)
          for (int64_t k = w.lo; k < w.hi; ++k) sum += xp[(i * H + j) * W + k];
      const int64_t div = avg_divisor(count_include_pad, divisor_override, d, h, w);
      if constexpr (std::is_integral_v<T>) {  // integer division truncates, as torch's; x / -1 cannot trap
        *yp++ = div == -1 ? T(uint64_t(0) - uint64_t(sum)) : T(sum / div);
        return;
      }
      *yp++ = sum / T(div);
    });
  });
}

template <class T>
void avg_pool_backward(const PoolGeometry& g, bool count_include_pad, int64_t divisor_override, const T* gy, T* gx) {
  const int64_t iv = g.in_volume(), ov = g.out_volume(), H = g.in[1], W = g.in[2];
  for_planes(g, [&](int64_t p) {
    T* gp = gx + p * iv;
    const T* gyp = gy + p * ov;
    std::fill(gp, gp + iv, T(0));
    each_output(g, avg_window, [&](AvgRange d, AvgRange h, AvgRange w) {
      const T v = *gyp++;
      if (empty(d, h, w)) return;
      const T share = v / T(avg_divisor(count_include_pad, divisor_override, d, h, w));
      for (int64_t i = d.lo; i < d.hi; ++i)
        for (int64_t j = h.lo; j < h.hi; ++j)
          for (int64_t k = w.lo; k < w.hi; ++k) gp[(i * H + j) * W + k] += share;
    });
  });
}

// As torch: the sum divided by each bin length in turn (d, h, w).
template <class T>
void adaptive_avg_pool_forward(const PoolGeometry& g, const T* x, T* y) {
  const int64_t iv = g.in_volume(), ov = g.out_volume(), H = g.in[1], W = g.in[2];
  for_planes(g, [&](int64_t p) {
    const T* xp = x + p * iv;
    T* yp = y + p * ov;
    each_output(g, adaptive_bin, [&](Range d, Range h, Range w) {
      T sum = 0;
      for (int64_t i = d.first; i < d.end; ++i)
        for (int64_t j = h.first; j < h.end; ++j)
          for (int64_t k = w.first; k < w.end; ++k) sum += xp[(i * H + j) * W + k];
      *yp++ = sum / T(d.end - d.first) / T(h.end - h.first) / T(w.end - w.first);
    });
  });
}

template <class T>
void adaptive_avg_pool_backward(const PoolGeometry& g, const T* gy, T* gx) {
  const int64_t iv = g.in_volume(), ov = g.out_volume(), H = g.in[1], W = g.in[2];
  for_planes(g, [&](int64_t p) {
    T* gp = gx + p * iv;
    const T* gyp = gy + p * ov;
    std::fill(gp, gp + iv, T(0));
    each_output(g, adaptive_bin, [&](Range d, Range h, Range w) {
      const T share = *gyp++ / T(d.end - d.first) / T(h.end - h.first) / T(w.end - w.first);
      for (int64_t i = d.first; i < d.end; ++i)
        for (int64_t j = h.first; j < h.end; ++j)
          for (int64_t k = w.first; k < w.end; ++k) gp[(i * H + j) * W + k] += share;
    });
  });
}

#define FLB_POOL_INSTANTIATE(T)                                                                           \
  template void max_pool_forward<T>(const PoolGeometry&, const T*, T*, int64_t*);                        \
  template void adaptive_max_pool_forward<T>(const PoolGeometry&, const T*, T*, int64_t*);               \
  template void max_pool_backward<T>(const PoolGeometry&, const T*, const int64_t*, T*);                 \
  template void avg_pool_forward<T>(const PoolGeometry&, bool, int64_t, const T*, T*);                   \
  template void avg_pool_backward<T>(const PoolGeometry&, bool, int64_t, const T*, T*);                  \
  template void adaptive_avg_pool_forward<T>(const PoolGeometry&, const T*, T*);                         \
  template void adaptive_avg_pool_backward<T>(const PoolGeometry&, const T*, T*);
FLB_POOL_INSTANTIATE(float)
FLB_POOL_INSTANTIATE(double)
#undef FLB_POOL_INSTANTIATE

// Integer inputs (forward only, as torch: max pooling of any integer type, average of int64).
#define FLB_POOL_INSTANTIATE_INT(T)                                                                       \
  template void max_pool_forward<T>(const PoolGeometry&, const T*, T*, int64_t*);                        \
  template void adaptive_max_pool_forward<T>(const PoolGeometry&, const T*, T*, int64_t*);
FLB_POOL_INSTANTIATE_INT(uint8_t)
FLB_POOL_INSTANTIATE_INT(int8_t)
FLB_POOL_INSTANTIATE_INT(int16_t)
FLB_POOL_INSTANTIATE_INT(int32_t)
FLB_POOL_INSTANTIATE_INT(int64_t)
#undef FLB_POOL_INSTANTIATE_INT
template void avg_pool_forward<int64_t>(const PoolGeometry&, bool, int64_t, const int64_t*, int64_t*);

}  // namespace flambeau::kernels
