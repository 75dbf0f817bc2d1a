// Resampling kernels (resample.h): per-dim taps with torch's formulas (UpSample.h:
// area_pixel_compute_scale / _source_index, guard_index_and_lambda, nearest_idx, the cubic
// coefficients with A = -0.75 and clamped border access), then one loop over outputs that
// reads (forward) or scatters into (backward) the tensor product of the taps.
#include "flambeau/kernels/cpu/resample.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "flambeau/core/cpu_info.h"
#include "flambeau/core/parallel.h"

namespace flambeau::kernels {
namespace {

// torch's compute_scales_value: 1 / scale when a positive scale was given, else in / out.
template <class T>
T scales_value(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0. ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / static_cast<T>(out);
}

template <class T>
T area_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / static_cast<T>(out - 1) : T(0);
  return scales_value<T>(scale, in, out);
}

// Note [Fused multiply-add as torch]: torch compiles its forward kernels and the linear
// backward (aten/native/cpu) for AVX2 / AVX-512 with contraction on, so a * b + c there is
// one fma; its bicubic backward (aten/native) is built without. `fused` follows that, so
// float64 results are torch's bits.
template <class T>
T source_index(T scale, int64_t o, bool align_corners, bool cubic, bool fused) {
  if (align_corners) return scale * static_cast<T>(o);
  const T src = fused ? std::fma(scale, static_cast<T>(o) + T(0.5), T(-0.5))
                      : scale * (static_cast<T>(o) + T(0.5)) - T(0.5);
  return !cubic && src < T(0) ? T(0) : src;
}

// torch floors through floorf (a float) in its index helpers.
template <class T>
int64_t floor_f(T v) {
  return static_cast<int64_t>(std::floor(static_cast<float>(v)));
}

// guard_index_and_lambda.
template <class T>
void guard(T real, int64_t in, int64_t& index, T& lambda) {
  index = std::min(floor_f(real), in - 1);
  lambda = std::min(std::max(real - static_cast<T>(index), T(0)), T(1));
}

template <class T>
T cubic1(T x, T A, bool fused) {
  if (fused) return std::fma(std::fma(A + 2, x, -(A + 3)) * x, x, T(1));
  return ((A + 2) * x - (A + 3)) * x * x + 1;
}
template <class T>
T cubic2(T x, T A, bool fused) {
  if (fused) return std::fma(std::fma(std::fma(A, x, -(5 * A)), x, 8 * A), x, -(4 * A));
  return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
}

}  // namespace

template <class T>
Taps<T> resample_taps(ResampleMode mode, int64_t in, int64_t out, bool align_corners, std::optional<double> scale,
                      bool backward) {
  Taps<T> t;
  t.n = mode == ResampleMode::Linear ? 2 : mode == ResampleMode::Cubic ? 4 : 1;
  t.index.resize(size_t(out * t.n));
  t.weight.resize(size_t(out * t.n));
  const bool fused = !(backward && mode == ResampleMode::Cubic);  // Note [Fused multiply-add as torch]
  for (int64_t o = 0; o < out; ++o) {
    int64_t* ix = &t.index[size_t(o * t.n)];
    T* w = &t.weight[size_t(o * t.n)];
    switch (mode) {
      case ResampleMode::Nearest:
        w[0] = T(1);
        if (backward) {  // nearest_idx
          if (out == in) ix[0] = o;
          else if (out == 2 * in) ix[0] = o >> 1;
          else ix[0] = std::min(int64_t(std::floor(float(o) * scales_value<float>(scale, in, out))), in - 1);
        } else {  // HelperInterpNearest
          const T s = area_scale<T>(in, out, false, scale);
          ix[0] = std::min(floor_f(source_index<T>(s, o, true, false, fused)), in - 1);
        }
        break;
      case ResampleMode::NearestExact:
        w[0] = T(1);
        if (backward) {  // nearest_exact_idx
          const float s = scales_value<float>(scale, in, out);
          ix[0] = std::min(floor_f((double(o) + 0.5) * double(s)), in - 1);
        } else {  // HelperInterpNearestExact
          const T s = area_scale<T>(in, out, false, scale);
          ix[0] = std::min(floor_f(source_index<T>(s, o, false, false, fused) + T(0.5)), in - 1);
        }
        break;
      case ResampleMode::Linear:  // compute_source_index_and_lambda
        if (out == in) {
          ix[0] = ix[1] = o;
          w[0] = T(1), w[1] = T(0);
        } else {
          const T s = area_scale<T>(in, out, align_corners, scale);
          T l1;
          guard(source_index<T>(s, o, align_corners, false, fused), in, ix[0], l1);
          ix[1] = ix[0] + (ix[0] < in - 1 ? 1 : 0);
          w[0] = T(1) - l1, w[1] = l1;
        }
        break;
      case ResampleMode::Cubic: {
        const T s = area_scale<T>(in, out, align_corners, scale);
        int64_t i0;
        T x;
        guard(source_index<T>(s, o, align_corners, true, fused), in, i0, x);
        const T A = T(-0.75);
        w[0] = cubic2<T>(x + T(1), A, fused);
        w[1] = cubic1<T>(x, A, fused);
        const T x2 = T(1) - x;
        w[2] = cubic1<T>(x2, A, fused);
        w[3] = cubic2<T>(x2 + T(1), A, fused);
        for (int64_t j = 0; j < 4; ++j) ix[j] = std::max<int64_t>(std::min(i0 - 1 + j, in - 1), 0);
        break;
      }
    }
  }
  return t;
}

namespace {

// Note [Deterministic resampling]: as Note [Deterministic pooling] (pool.cpp): tasks are
// planes; a forward output sums its taps in a fixed order; a backward scatters one plane's
// outputs in output order into that plane's gradient, which no other task touches.
template <class F>
void for_planes(const ResampleGeometry& g, int64_t taps, const F& f) {
  const int64_t work = std::max<int64_t>(1, g.in_volume() + g.out_volume() * taps);
  parallel_for(0, g.planes, std::max<int64_t>(1, 32768 / work), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) f(p);
  });
}

// sum_j t[j] * w[j] as torch's kernel evaluates it (Note [Fused multiply-add as torch]): one
// tap t * w; two t0 * w0 + t1 * w1 (an fma over the second product); more, a running fma.
template <int N, class T>
[[gnu::always_inline]] inline T combine(const T* t, const T* w) {
  if constexpr (N == 1) return t[0] * w[0];
  else if constexpr (N == 2) return std::fma(t[0], w[0], t[1] * w[1]);
  else {
    T acc = t[0] * w[0];
    for (int j = 1; j < N; ++j) acc = std::fma(t[j], w[j], acc);
    return acc;
  }
}

// The loops of one plane with the tap counts (ND, NH, NW) known at compile time, so the
// tap loops unroll; the arithmetic is the same for any counts.
template <int ND, int NH, int NW, class T>
[[gnu::always_inline]] inline void forward_plane(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps, const T* xp, T* yp) {
  const int64_t H = g.in[1], W = g.in[2];
  const Taps<T>&td = taps[0], &th = taps[1], &tw = taps[2];
  const int64_t* iw0 = tw.index.data();
  const T* ww0 = tw.weight.data();
  for (int64_t od = 0; od < g.out[0]; ++od) {
    const int64_t* id = &td.index[size_t(od * ND)];
    const T* wd = &td.weight[size_t(od * ND)];
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      const int64_t* ih = &th.index[size_t(oh * NH)];
      const T* wh = &th.weight[size_t(oh * NH)];
      const T* rows[ND * NH];
      for (int a = 0; a < ND; ++a)
        for (int b = 0; b < NH; ++b) rows[a * NH + b] = xp + (id[a] * H + ih[b]) * W;
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const int64_t* iw = iw0 + ow * NW;
        const T* ww = ww0 + ow * NW;
        T td_[ND];
        for (int a = 0; a < ND; ++a) {
          T th_[NH];
          for (int b = 0; b < NH; ++b) {
            const T* row = rows[a * NH + b];
            T tw_[NW];
            for (int c = 0; c < NW; ++c) tw_[c] = row[iw[c]];
            th_[b] = combine<NW>(tw_, ww);
          }
          td_[a] = combine<NH>(th_, wh);
        }
        *yp++ = combine<ND>(td_, wd);
      }
    }
  }
}

template <int ND, int NH, int NW, class T>
[[gnu::always_inline]] inline void backward_plane(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps, bool cubic_order, const T* gyp,
                    T* gp) {
  const int64_t H = g.in[1], W = g.in[2];
  const Taps<T>&td = taps[0], &th = taps[1], &tw = taps[2];
  for (int64_t od = 0; od < g.out[0]; ++od) {
    const int64_t* id = &td.index[size_t(od * ND)];
    const T* wd = &td.weight[size_t(od * ND)];
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      const int64_t* ih = &th.index[size_t(oh * NH)];
      const T* wh = &th.weight[size_t(oh * NH)];
      T wdh[ND * NH];
      T* rows[ND * NH];
      for (int a = 0; a < ND; ++a)
        for (int b = 0; b < NH; ++b) {
          wdh[a * NH + b] = wd[a] * wh[b];
          rows[a * NH + b] = gp + (id[a] * H + ih[b]) * W;
        }
      for (int64_t ow = 0; ow < g.out[2]; ++ow) {
        const int64_t* iw = &tw.index[size_t(ow * NW)];
        const T* ww = &tw.weight[size_t(ow * NW)];
        const T v = *gyp++;
        if (cubic_order) {  // 2-d only: d has one tap of weight 1
          for (int c = 0; c < NW; ++c)
            for (int b = 0; b < NH; ++b) rows[b][iw[c]] += v * wh[b] * ww[c];
          continue;
        }
        for (int ab = 0; ab < ND * NH; ++ab)
          for (int c = 0; c < NW; ++c) rows[ab][iw[c]] = std::fma(wdh[ab] * ww[c], v, rows[ab][iw[c]]);
      }
    }
  }
}

// The plane loops built for FMA hardware (std::fma becomes one instruction; elsewhere it is a
// libm call with the same result), chosen at run time from cpu_info().
template <int ND, int NH, int NW, class T>
[[gnu::target("fma")]] void forward_plane_fma(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps,
                                             const T* xp, T* yp) {
  forward_plane<ND, NH, NW, T>(g, taps, xp, yp);
}
template <int ND, int NH, int NW, class T>
[[gnu::target("fma")]] void backward_plane_fma(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps,
                                              bool cubic_order, const T* gyp, T* gp) {
  backward_plane<ND, NH, NW, T>(g, taps, cubic_order, gyp, gp);
}
template <int ND, int NH, int NW, class T>
void forward_plane_plain(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps, const T* xp, T* yp) {
  forward_plane<ND, NH, NW, T>(g, taps, xp, yp);
}
template <int ND, int NH, int NW, class T>
void backward_plane_plain(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps, bool cubic_order,
                          const T* gyp, T* gp) {
  backward_plane<ND, NH, NW, T>(g, taps, cubic_order, gyp, gp);
}

// f.template operator()<ND, NH, NW>() for the tap counts of the modes (1, 2 or 4 per dim;
// leading dims of 1-d and 2-d inputs have one tap).
template <class T, class F>
void with_counts(const std::array<Taps<T>, 3>& t, const F& f) {
  const int key = t[0].n * 100 + t[1].n * 10 + t[2].n;
  switch (key) {
    case 111: return f.template operator()<1, 1, 1>();
    case 112: return f.template operator()<1, 1, 2>();
    case 122: return f.template operator()<1, 2, 2>();
    case 222: return f.template operator()<2, 2, 2>();
    case 144: return f.template operator()<1, 4, 4>();
    case 114: return f.template operator()<1, 1, 4>();
    case 444: return f.template operator()<4, 4, 4>();
    default: throw std::logic_error("[resample] unexpected tap counts");
  }
}

}  // namespace

template <class T>
void resample_forward(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps, const T* x, T* y) {
  const int64_t iv = g.in_volume(), ov = g.out_volume();
  with_counts(taps, [&]<int ND, int NH, int NW>() {
    const bool fma = cpu_info().fma;
    for_planes(g, ND * NH * NW, [&](int64_t p) {
      if (fma) forward_plane_fma<ND, NH, NW, T>(g, taps, x + p * iv, y + p * ov);
      else forward_plane_plain<ND, NH, NW, T>(g, taps, x + p * iv, y + p * ov);
    });
  });
}

template <class T>
void resample_backward(const ResampleGeometry& g, const std::array<Taps<T>, 3>& taps, bool cubic_order, const T* gy,
                       T* gx) {
  const int64_t iv = g.in_volume(), ov = g.out_volume();
  with_counts(taps, [&]<int ND, int NH, int NW>() {
    const bool fma = cpu_info().fma;
    for_planes(g, ND * NH * NW, [&](int64_t p) {
      T* gp = gx + p * iv;
      std::fill(gp, gp + iv, T(0));
      // The bicubic backward is torch's unfused one: the plain build (no contraction there).
      if (fma && !cubic_order) backward_plane_fma<ND, NH, NW, T>(g, taps, cubic_order, gy + p * ov, gp);
      else backward_plane_plain<ND, NH, NW, T>(g, taps, cubic_order, gy + p * ov, gp);
    });
  });
}

#define FLB_RESAMPLE_INSTANTIATE(T)                                                                            \
  template Taps<T> resample_taps<T>(ResampleMode, int64_t, int64_t, bool, std::optional<double>, bool);       \
  template void resample_forward<T>(const ResampleGeometry&, const std::array<Taps<T>, 3>&, const T*, T*);    \
  template void resample_backward<T>(const ResampleGeometry&, const std::array<Taps<T>, 3>&, bool, const T*, T*);
FLB_RESAMPLE_INSTANTIATE(float)
FLB_RESAMPLE_INSTANTIATE(double)
#undef FLB_RESAMPLE_INSTANTIATE

}  // namespace flambeau::kernels
