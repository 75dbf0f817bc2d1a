// Pooling kernels on raw pointers: max, average and adaptive (average, max) pooling over
// 1-3 spatial dims, all read as D, H, W with size-1 dims in front, and their backwards.
// Every plane (one (N, C) pair) is one task and each plane's work runs in a fixed order, so
// results do not depend on the thread count (Note [Deterministic pooling] in pool.cpp).
#pragma once
#include <array>
#include <cstdint>

namespace flambeau::kernels {

// T is float or double; the max forwards also take the integer types and avg_pool_forward
// int64 (integer inputs have no gradient).
// planes x [D, H, W] -> planes x [OD, OH, OW], both contiguous. kernel / stride / pad /
// dilation are unused by the adaptive kernels (their bins come from in and out).
struct PoolGeometry {
  int64_t planes = 0;
  // > 0: x and y (and their gradients, and the indices) are channels-last, [planes /
  // channels_last, D, H, W, channels_last] (the max kernels only).
  int64_t channels_last = 0;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, pad{0, 0, 0},
      dilation{1, 1, 1};
  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t out_volume() const { return out[0] * out[1] * out[2]; }
};

// y = the window maximum (NaN wins; ties: the first in window order), idx = its flat index
// in the input plane (d * H * W + h * W + w).
template <class T>
void max_pool_forward(const PoolGeometry& g, const T* x, T* y, int64_t* idx);
template <class T>
void adaptive_max_pool_forward(const PoolGeometry& g, const T* x, T* y, int64_t* idx);
// gx (zeroed here) += gy at idx, plane by plane: the backward of both max kernels.
template <class T>
void max_pool_backward(const PoolGeometry& g, const T* gy, const int64_t* idx, T* gx);

// y = the window sum / divisor: divisor_override when not 0, else the window clipped to the
// padded bounds (count_include_pad) or to the input.
template <class T>
void avg_pool_forward(const PoolGeometry& g, bool count_include_pad, int64_t divisor_override, const T* x, T* y);
template <class T>
void avg_pool_backward(const PoolGeometry& g, bool count_include_pad, int64_t divisor_override, const T* gy, T* gx);

// Bin i of a dim covers [floor(i * in / out), ceil((i + 1) * in / out)).
template <class T>
void adaptive_avg_pool_forward(const PoolGeometry& g, const T* x, T* y);
template <class T>
void adaptive_avg_pool_backward(const PoolGeometry& g, const T* gy, T* gx);

}  // namespace flambeau::kernels
