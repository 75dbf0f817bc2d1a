// Resampling kernels on raw pointers: interpolation (nearest, nearest-exact, linear, cubic)
// over 1-3 spatial dims, all read as D, H, W with size-1 dims in front, and its backward.
// Each output reads a tensor product of per-dim taps (input index, weight) computed with
// torch's source-index formulas; work is split over planes only, so results do not depend
// on the thread count (Note [Deterministic resampling] in resample.cpp).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace flambeau::kernels {

enum class ResampleMode { Nearest, NearestExact, Linear, Cubic };

// The taps of one dim: output o reads input index[o * n + j] with weight[o * n + j].
// Antialias taps also set count: output o uses its first count[o] taps, consecutive inputs.
template <class T>
struct Taps {
  int n = 1;
  std::vector<int64_t> index;
  std::vector<T> weight;
  std::vector<int> count;
};

// planes x [D, H, W] -> planes x [OD, OH, OW], both contiguous.
struct ResampleGeometry {
  int64_t planes = 0;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1};
  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t out_volume() const { return out[0] * out[1] * out[2]; }
};

// The taps of a dim of `in` -> `out` for mode; scale is the scale_factor the caller was
// given for the dim (torch maps with 1 / scale then), else the mapping uses in / out.
// backward: nearest modes use the index formulas of torch's backward (a float scale).
template <class T>
Taps<T> resample_taps(ResampleMode mode, int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                      bool backward);

// y = sum over taps of x * weight, nested d(h(w)) as torch's generic kernel.
template <class T>
void resample_forward(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps, const T* x, T* y);
// gx (zeroed here) += the share of each gy, plane by plane in output order. cubic_order:
// the share is gy * wh * ww and w taps are visited outside h taps (torch's bicubic backward),
// else ((wd * wh) * ww) * gy in d, h, w tap order.
template <class T>
void resample_backward(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps, bool cubic_order, const T* gy,
                       T* gx);

// Antialias taps (torch's _compute_indices_min_size_weights_aa): a triangle (linear) or
// cubic (A = -0.5) filter widened by the scale when downsampling, weights normalized.
template <class T>
Taps<T> antialias_taps(bool cubic, int64_t in, int64_t out, bool align_corners, std::optional<double> scale);

// 2-d separable antialias resampling as torch's: along W into a planes x [H, OW] buffer, then
// along H; a dim with in == out is copied. Each sum is x0 * w0 + x1 * w1 + ... in tap order.
template <class T>
void antialias_forward(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw, const T* x, T* y);
// gx (zeroed here) += (ww * wh) * gy per plane in output order, h taps outside w taps.
template <class T>
void antialias_backward(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw, const T* gy, T* gx);

}  // namespace flambeau::kernels
