// Antialias resampling kernels (resample.h): torch's _compute_indices_min_size_weights_aa taps
// with its mixed float / double arithmetic, the separable forward (W then H, a dim of equal
// sizes copied) and the backward scatter, planes as tasks (Note [Deterministic resampling]).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "flambeau/core/cpu_info.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/resample.h"

namespace flambeau::kernels {
namespace {

// torch's area_pixel_compute_scale in T.
template <class T>
T aa_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  return scale && *scale > 0. ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / static_cast<T>(out);
}

// The filters as torch's aa_filter; the cubic polynomials contract to fma as its cpu build.
template <class T>
T aa_filter(T x, bool cubic) {
  x = std::abs(x);
  if (!cubic) return x < T(1) ? T(1) - x : T(0);
  const T A = T(-0.5);
  if (x < T(1)) return std::fma(std::fma(A + 2, x, -(A + 3)) * x, x, T(1));
  if (x < T(2)) return std::fma(std::fma(std::fma(A, x, -(5 * A)), x, 8 * A), x, -(4 * A));
  return T(0);
}

// Note [Antialias sums]: torch's interpolate_aa_single_dim writes out = t0 * w0, then
// out += tj * wj, and GCC vectorizes the products and, in the FMA build, contracts the scalar
// tail into fma; this is the same expression compiled the same way, which gave torch's bits
// in float64 and float32 on an AVX-512 machine. An explicit fma chain was off by an ulp on
// downscales, so the expression is left to the compiler; tests allow roundoff.
template <class T>
[[gnu::always_inline]] inline T aa_sum(const T* t, int64_t stride, const T* w, int count) {
  T acc = t[0] * w[0];
  for (int j = 1; j < count; ++j) acc += t[j * stride] * w[j];
  return acc;
}

// One plane: rows x [W] -> rows x [OW] (stride 1), or [H] x cols -> [OH] x cols (stride cols).
template <class T>
[[gnu::always_inline]] inline void aa_pass(const Taps<T>& t, bool along_w, int64_t rows, int64_t cols_in,
                                           int64_t cols_out, const T* x, T* y) {
  const int64_t out = int64_t(t.count.size());
  if (along_w) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o)
        y[r * cols_out + o] =
            aa_sum(x + r * cols_in + t.index[size_t(o * t.n)], 1, &t.weight[size_t(o * t.n)], t.count[size_t(o)]);
  } else {
    for (int64_t o = 0; o < out; ++o)
      for (int64_t c = 0; c < cols_in; ++c)
        y[o * cols_in + c] =
            aa_sum(x + t.index[size_t(o * t.n)] * cols_in + c, cols_in, &t.weight[size_t(o * t.n)], t.count[size_t(o)]);
  }
}

template <class T>
[[gnu::always_inline]] inline void aa_forward_plane(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw,
                                                    const T* x, T* y, std::vector<T>& buf) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  const bool dw = W != OW, dh = H != OH;
  if (!dw && !dh) {
    std::memcpy(y, x, size_t(H * W) * sizeof(T));
    return;
  }
  if (dw && !dh) return aa_pass(tw, true, H, W, OW, x, y);
  const T* src = x;
  if (dw) {
    buf.resize(size_t(H * OW));
    aa_pass(tw, true, H, W, OW, x, buf.data());
    src = buf.data();
  }
  aa_pass(th, false, H, OW, OW, src, y);
}

template <class T>
[[gnu::always_inline]] inline void aa_backward_plane(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw,
                                                     const T* gy, T* gx) {
  const int64_t W = g.in[2];
  for (int64_t oh = 0; oh < g.out[1]; ++oh) {
    const T* wy = &th.weight[size_t(oh * th.n)];
    const int ny = th.count[size_t(oh)];
    T* base = gx + th.index[size_t(oh * th.n)] * W;
    for (int64_t ow = 0; ow < g.out[2]; ++ow) {
      const T v = *gy++;
      const T* wx = &tw.weight[size_t(ow * tw.n)];
      const int nx = tw.count[size_t(ow)];
      T* p0 = base + tw.index[size_t(ow * tw.n)];
      for (int a = 0; a < ny; ++a) {
        T* p = p0 + a * W;
        for (int b = 0; b < nx; ++b) p[b] = std::fma(wx[b] * wy[a], v, p[b]);
      }
    }
  }
}

// Built for FMA hardware or plain (std::fma is then a libm call with the same result).
template <class T>
[[gnu::target("fma")]] void aa_forward_fma(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw,
                                           const T* x, T* y, std::vector<T>& buf) {
  aa_forward_plane(g, th, tw, x, y, buf);
}
template <class T>
void aa_forward_plain(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw, const T* x, T* y,
                      std::vector<T>& buf) {
  aa_forward_plane(g, th, tw, x, y, buf);
}
template <class T>
[[gnu::target("fma")]] void aa_backward_fma(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw,
                                            const T* gy, T* gx) {
  aa_backward_plane(g, th, tw, gy, gx);
}
template <class T>
void aa_backward_plain(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw, const T* gy, T* gx) {
  aa_backward_plane(g, th, tw, gy, gx);
}

template <class T>
int64_t aa_grain(const ResampleGeometry& g, const Taps<T>& tw) {
  const int64_t n = tw.n;
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, g.in_volume() + g.out_volume() * n * 2));
}

}  // namespace

template <class T>
Taps<T> antialias_taps(bool cubic, int64_t in, int64_t out, bool align_corners, std::optional<double> opt) {
  const T scale = aa_scale<T>(in, out, align_corners, opt);
  const double half = (cubic ? 4 : 2) * 0.5;
  const T support = scale >= 1.0 ? static_cast<T>(half * scale) : static_cast<T>(half);
  const T invscale = scale >= 1.0 ? static_cast<T>(1.0 / scale) : T(1);
  Taps<T> t;
  t.n = int(std::ceil(support)) * 2 + 1;
  t.index.assign(size_t(out * t.n), 0);
  t.weight.assign(size_t(out * t.n), T(0));
  t.count.assign(size_t(out), 0);
  for (int64_t o = 0; o < out; ++o) {
    const T center = static_cast<T>(double(scale) * (double(o) + 0.5));
    const int64_t xmin = std::max<int64_t>(static_cast<int64_t>(double(center - support) + 0.5), 0);
    const int64_t xsize = std::clamp<int64_t>(
        std::min<int64_t>(static_cast<int64_t>(double(center + support) + 0.5), in) - xmin, 0, t.n);
    int64_t* ix = &t.index[size_t(o * t.n)];
    T* w = &t.weight[size_t(o * t.n)];
    T total = T(0);
    for (int64_t j = 0; j < xsize; ++j) {
      w[j] = aa_filter<T>(static_cast<T>((double(static_cast<T>(j + xmin) - center) + 0.5) * double(invscale)), cubic);
      total += w[j];
    }
    if (total != T(0))
      for (int64_t j = 0; j < xsize; ++j) w[j] /= total;
    for (int64_t j = 0; j < t.n; ++j) ix[j] = xmin + std::min<int64_t>(j, std::max<int64_t>(xsize - 1, 0));
    // An empty window (only when in < 1, refused upstream) would read nothing: keep one tap of weight 0.
    t.count[size_t(o)] = int(std::max<int64_t>(xsize, 1));
  }
  return t;
}

template <class T>
void antialias_forward(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw, const T* x, T* y) {
  const int64_t iv = g.in_volume(), ov = g.out_volume();
  const bool fma = cpu_info().fma;
  parallel_for(0, g.planes, aa_grain(g, tw), [&](int64_t p0, int64_t p1) {
    std::vector<T> buf;
    for (int64_t p = p0; p < p1; ++p) {
      if (fma) aa_forward_fma<T>(g, th, tw, x + p * iv, y + p * ov, buf);
      else aa_forward_plain<T>(g, th, tw, x + p * iv, y + p * ov, buf);
    }
  });
}

template <class T>
void antialias_backward(const ResampleGeometry& g, const Taps<T>& th, const Taps<T>& tw, const T* gy, T* gx) {
  const int64_t iv = g.in_volume(), ov = g.out_volume();
  const bool fma = cpu_info().fma;
  parallel_for(0, g.planes, aa_grain(g, tw), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      T* gp = gx + p * iv;
      std::fill(gp, gp + iv, T(0));
      if (fma) aa_backward_fma<T>(g, th, tw, gy + p * ov, gp);
      else aa_backward_plain<T>(g, th, tw, gy + p * ov, gp);
    }
  });
}

#define FLB_RESAMPLE_AA_INSTANTIATE(T)                                                                        \
  template Taps<T> antialias_taps<T>(bool, int64_t, int64_t, bool, std::optional<double>);                   \
  template void antialias_forward<T>(const ResampleGeometry&, const Taps<T>&, const Taps<T>&, const T*, T*); \
  template void antialias_backward<T>(const ResampleGeometry&, const Taps<T>&, const Taps<T>&, const T*, T*);
FLB_RESAMPLE_AA_INSTANTIATE(float)
FLB_RESAMPLE_AA_INSTANTIATE(double)
#undef FLB_RESAMPLE_AA_INSTANTIATE

}  // namespace flambeau::kernels
