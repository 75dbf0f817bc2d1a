// Convolution by im2col + GEMM: each image's input patches are unfolded into a [C_in/g *
// kernel volume, output volume] matrix (cols) and multiplied with the weight. A kernel of
// 1 with stride 1 and no padding multiplies the input itself.
#include "flambeau/kernels/cpu/conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::kernels {
namespace {

// Note [Deterministic convolution]: how work is cut depends only on the problem and the
// machine's processor count, never on set_num_threads. With at least one image per
// processor, images are spread over threads and each runs single-threaded GEMMs; with fewer,
// images run in order and each GEMM is split by gemm_f32/f64 (Note [Deterministic GEMM]).
// The weight gradient sums the batch in min(N, processors) fixed blocks of images, each
// into its own partial, and adds the partials in block order.
int64_t processors() {
  static const int64_t procs = std::clamp<int64_t>(omp_get_num_procs(), 1, 64);
  return procs;
}

template <class T>
void gemm(bool one_thread, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty sum: c = beta * c, with no NaN kept from c when beta is 0
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  if (one_thread) gemm_1t(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);
  else if constexpr (std::is_same_v<T, float>) gemm_f32(ta, tb, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
  else gemm_f64(ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// The output positions [lo, hi) of one row whose input index o * stride + off is inside [0, size).
struct Span {
  int64_t lo, hi;
};
Span valid_span(int64_t count, int64_t stride, int64_t off, int64_t size) {
  const int64_t lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  const int64_t hi = size - 1 - off < 0 ? 0 : std::min(count, (size - 1 - off) / stride + 1);
  return {std::min(lo, hi), hi};
}

bool is_pointwise(const ConvGeometry& g) {
  return g.kernel_volume() == 1 && g.stride == std::array<int64_t, 3>{1, 1, 1} &&
         g.pad == std::array<int64_t, 3>{0, 0, 0};
}

// Calls f(row, channel, kd, kh, kw) for the rows of cols in [r0, r1).
template <class F>
void for_rows(const ConvGeometry& g, int64_t r0, int64_t r1, const F& f) {
  const auto& k = g.kernel;
  for (int64_t r = r0; r < r1; ++r) {
    int64_t rest = r;
    const int64_t kw = rest % k[2];
    rest /= k[2];
    const int64_t kh = rest % k[1];
    rest /= k[1];
    const int64_t kd = rest % k[0];
    f(r, rest / k[0], kd, kh, kw);
  }
}

// A range of output rows (od, oh flattened) whose columns one unfolded tile holds.
struct Rows {
  int64_t begin, end;
};

// Visits one row of a tile of cols: f(dst_col, src_row, span, off) for each output row
// (od, oh) of `rows` whose input row exists, z(dst_col) for each whose input row is padding.
template <class F, class Z>
void for_row_pieces(const ConvGeometry& g, Rows rows, int64_t kd, int64_t kh, int64_t kw, const F& f, const Z& z) {
  const auto &in = g.in, &out = g.out, &s = g.stride, &p = g.pad, &d = g.dilation;
  const Span w = valid_span(out[2], s[2], kw * d[2] - p[2], in[2]);
  for (int64_t r = rows.begin; r < rows.end; ++r) {
    const int64_t od = r / out[1], oh = r % out[1];
    const int64_t id = od * s[0] - p[0] + kd * d[0], ih = oh * s[1] - p[1] + kh * d[1];
    const int64_t col = (r - rows.begin) * out[2];
    if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1]) z(col);
    else f(col, (id * in[1] + ih) * in[2], w, kw * d[2] - p[2]);
  }
}

// cols[Cg * kvol, columns of `rows`] from one group's channels x[Cg, D, H, W]; ld: the row
// stride of cols (0: the tile's own width).
template <class T>
void im2col(const ConvGeometry& g, Rows rows, const T* x, int64_t channels, T* cols, bool parallel, int64_t ld = 0) {
  const int64_t ow = g.out[2], kvol = g.kernel_volume(), sw = g.stride[2];
  const int64_t L = ld ? ld : (rows.end - rows.begin) * ow;
  const int64_t vol = g.in_volume();
  parallel_for(0, channels * kvol, parallel ? 1 : channels * kvol, [&](int64_t r0, int64_t r1) {
    for_rows(g, r0, r1, [&](int64_t r, int64_t c, int64_t kd, int64_t kh, int64_t kw) {
      T* dst = cols + r * L;
      const T* src = x + c * vol;
      for_row_pieces(
          g, rows, kd, kh, kw,
          [&](int64_t col, int64_t row, Span span, int64_t off) {
            T* o = dst + col;
            std::fill(o, o + span.lo, T(0));
            const T* i = src + row + off;
            if (sw == 1) std::memcpy(o + span.lo, i + span.lo, size_t(span.hi - span.lo) * sizeof(T));
            else
              for (int64_t j = span.lo; j < span.hi; ++j) o[j] = i[j * sw];
            std::fill(o + span.hi, o + ow, T(0));
          },
          [&](int64_t col) { std::fill(dst + col, dst + col + ow, T(0)); });
    });
  });
}

// x[Cg, D, H, W] += a tile of cols (the columns of `rows`) folded back. Channels are
// independent, so they split over threads with no race.
template <class T>
void col2im(const ConvGeometry& g, Rows rows, const T* cols, int64_t channels, T* x, bool parallel, int64_t ld = 0) {
  const int64_t kvol = g.kernel_volume(), sw = g.stride[2];
  const int64_t L = ld ? ld : (rows.end - rows.begin) * g.out[2];
  const int64_t vol = g.in_volume();
  parallel_for(0, channels, parallel ? 1 : channels, [&](int64_t c0, int64_t c1) {
    for_rows(g, c0 * kvol, c1 * kvol, [&](int64_t r, int64_t c, int64_t kd, int64_t kh, int64_t kw) {
      const T* src = cols + r * L;
      T* dst = x + c * vol;
      for_row_pieces(
          g, rows, kd, kh, kw,
          [&](int64_t col, int64_t row, Span span, int64_t off) {
            T* o = dst + row + off;
            const T* i = src + col;
            for (int64_t j = span.lo; j < span.hi; ++j) o[j * sw] += i[j];
          },
          [](int64_t) {});
    });
  });
}

struct GroupDims {
  int64_t cin, cout, K, L;  // per group: channels in / out, rows of cols, output volume
};
GroupDims group_dims(const ConvGeometry& g) {
  const int64_t cin = g.in_channels / g.groups;
  return {cin, g.out_channels / g.groups, cin * g.kernel_volume(), g.out_volume()};
}

// Runs body(n, cols, one_thread) for every image: spread over threads (one per chunk, its
// own cols) or in order with threaded products, per Note [Deterministic convolution].
template <class T, class Body>
void for_images(const ConvGeometry& g, int64_t cols_size, const Body& body) {
  const bool by_image = g.batch >= processors();
  if (by_image) {
    parallel_for(0, g.batch, 1, [&](int64_t n0, int64_t n1) {
      std::vector<T> cols(static_cast<size_t>(cols_size));
      for (int64_t n = n0; n < n1; ++n) body(n, cols.data(), true);
    });
  } else {
    std::vector<T> cols(static_cast<size_t>(cols_size));
    for (int64_t n = 0; n < g.batch; ++n) body(n, cols.data(), false);
  }
}

// Output rows per unfolded tile: a tile of cols near 1 MiB stays in cache between its
// unfolding and its product. Depends on the shape only.
int64_t tile_rows(const ConvGeometry& g, int64_t K, size_t elem) {
  const int64_t row_bytes = std::max<int64_t>(1, K * g.out[2] * int64_t(elem));
  return std::clamp<int64_t>((int64_t(1) << 20) / row_bytes, 1, std::max<int64_t>(1, g.out[0] * g.out[1]));
}

// f(rows, columns) for the tiles of output rows, in order.
template <class F>
void for_tiles(const ConvGeometry& g, int64_t per_tile, const F& f) {
  const int64_t total = g.out[0] * g.out[1];
  for (int64_t r0 = 0; r0 < total; r0 += per_tile) {
    const Rows rows{r0, std::min(total, r0 + per_tile)};
    f(rows, (rows.end - rows.begin) * g.out[2]);
  }
}

// Note [Packed images]: a small output (the deep layers of a ResNet: 8x8, 4x4, 2x2) makes
// each image's GEMM too narrow to run near peak, so images are packed side by side: a pack's
// patches are one cols matrix [K, images * L] and each product covers the whole pack. The
// pack size depends only on the shape; packs take the place of images in
// Note [Deterministic convolution].
constexpr int64_t kPackColumns = 1024;
int64_t pack_images(const ConvGeometry& g) {
  return std::clamp<int64_t>(kPackColumns / std::max<int64_t>(g.out_volume(), 1), 1, std::max<int64_t>(g.batch, 1));
}

// body(n0, n1, buffer, one_thread) for each pack of images [n0, n1) of at most `per` images.
template <class T, class Body>
void for_packs(const ConvGeometry& g, int64_t per, int64_t buffer_size, const Body& body) {
  const int64_t packs = (g.batch + per - 1) / per;
  auto run = [&](int64_t p0, int64_t p1, bool one_thread) {
    std::vector<T> buffer(static_cast<size_t>(buffer_size));
    for (int64_t p = p0; p < p1; ++p) body(p * per, std::min(g.batch, (p + 1) * per), buffer.data(), one_thread);
  };
  if (packs >= processors()) parallel_for(0, packs, 1, [&](int64_t p0, int64_t p1) { run(p0, p1, true); });
  else run(0, packs, false);
}

// Copies between images' [C, L] blocks (image stride `image`) and a pack's [C, n * L] matrix.
template <class T>
void gather_pack(const T* src, int64_t image, int64_t n, int64_t C, int64_t L, T* dst) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < C; ++c) std::memcpy(dst + c * n * L + j * L, src + j * image + c * L, size_t(L) * sizeof(T));
}
template <class T>
void scatter_pack(const T* src, int64_t n, int64_t C, int64_t L, T* dst, int64_t image) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < C; ++c) std::memcpy(dst + j * image + c * L, src + c * n * L + j * L, size_t(L) * sizeof(T));
}

template <class T>
void forward_packed(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y, int64_t per) {
  const GroupDims d = group_dims(g);
  const Rows all{0, g.out[0] * g.out[1]};
  for_packs<T>(g, per, (d.K + d.cout) * per * d.L, [&](int64_t n0, int64_t n1, T* buf, bool one_thread) {
    const int64_t n = n1 - n0, cols_n = n * d.L;
    T *cols = buf, *out = buf + d.K * cols_n;
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      for (int64_t j = 0; j < n; ++j)
        im2col(g, all, x + ((n0 + j) * g.in_channels + gi * d.cin) * g.in_volume(), d.cin, cols + j * d.L, !one_thread,
               cols_n);
      gemm(one_thread, false, false, d.cout, cols_n, d.K, w + gi * d.cout * d.K, d.K, cols, cols_n, T(0), out, cols_n);
      if (bias)
        for (int64_t c = 0; c < d.cout; ++c)
          for (int64_t i = 0; i < cols_n; ++i) out[c * cols_n + i] += bias[gi * d.cout + c];
      scatter_pack(out, n, d.cout, d.L, y + (n0 * g.out_channels + gi * d.cout) * d.L, g.out_channels * d.L);
    }
  });
}

template <class T>
void backward_input_packed(const ConvGeometry& g, const T* gy, const T* w, T* gx, int64_t per) {
  const GroupDims d = group_dims(g);
  const Rows all{0, g.out[0] * g.out[1]};
  for_packs<T>(g, per, (d.K + d.cout) * per * d.L, [&](int64_t n0, int64_t n1, T* buf, bool one_thread) {
    const int64_t n = n1 - n0, cols_n = n * d.L;
    T *cols = buf, *gyb = buf + d.K * cols_n;
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      gather_pack(gy + (n0 * g.out_channels + gi * d.cout) * d.L, g.out_channels * d.L, n, d.cout, d.L, gyb);
      gemm(one_thread, true, false, d.K, cols_n, d.cout, w + gi * d.cout * d.K, d.K, gyb, cols_n, T(0), cols, cols_n);
      for (int64_t j = 0; j < n; ++j) {
        T* gxg = gx + ((n0 + j) * g.in_channels + gi * d.cin) * g.in_volume();
        std::fill(gxg, gxg + d.cin * g.in_volume(), T(0));
        col2im(g, all, cols + j * d.L, d.cin, gxg, !one_thread, cols_n);
      }
    }
  });
}

// The weight gradient of images [n0, n1) added into acc (or written, when `first`), a pack at a time.
template <class T>
void backward_weight_packed(const ConvGeometry& g, const T* x, const T* gy, T* acc, int64_t n0, int64_t n1, int64_t per,
                            bool first, bool one_thread, std::vector<T>& buf) {
  const GroupDims d = group_dims(g);
  const Rows all{0, g.out[0] * g.out[1]};
  buf.resize(size_t((d.K + d.cout) * per * d.L));
  for (int64_t p0 = n0; p0 < n1; p0 += per) {
    const int64_t n = std::min(n1, p0 + per) - p0, cols_n = n * d.L;
    T *cols = buf.data(), *gyb = buf.data() + d.K * cols_n;
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      for (int64_t j = 0; j < n; ++j)
        im2col(g, all, x + ((p0 + j) * g.in_channels + gi * d.cin) * g.in_volume(), d.cin, cols + j * d.L, !one_thread,
               cols_n);
      gather_pack(gy + (p0 * g.out_channels + gi * d.cout) * d.L, g.out_channels * d.L, n, d.cout, d.L, gyb);
      gemm(one_thread, false, true, d.cout, d.K, cols_n, gyb, cols_n, cols, cols_n, T(first && p0 == n0 ? 0 : 1),
           acc + gi * d.cout * d.K, d.K);
    }
  }
}

// Note [oneDNN convolutions]: float32 convolutions run oneDNN's direct kernels where oneDNN
// is built in and has one for the problem (its im2col + GEMM ones are not taken), but not
// where im2col + GEMM (on oneDNN's sgemm, Note [float32 GEMM]) measured faster on ResNet-18's
// shapes (docs/PERFORMANCE.md; FLAMBEAU_ONEDNN_F32=0 turns oneDNN off for comparisons):
// depthwise and pointwise kernels (a direct kernel and a plain GEMM here), gradients of
// outputs of 4 positions or fewer (the packed GEMMs of Note [Packed images] win by up to 2x),
// and input gradients to fewer than 16 channels (a 3-channel stem's: 2.6x slower in oneDNN).
// float64 stays on im2col + GEMM. Forward and input gradient (also the transposed
// convolution's forward): each result element is one sum that oneDNN computes in one thread.
// Weight gradient: the batch blocks of Note [Deterministic convolution], each block one
// single-threaded oneDNN call, the partials added in block order (with one block the
// threaded GEMMs stay). So the bits do not depend on the thread count (tests/python/test_conv.py).
enum class Product { forward, input, weight };
bool onednn_takes(const ConvGeometry& g, Product p) {
  if (!onednn_f32() || (g.groups > 1 && g.groups == g.in_channels) || g.kernel_volume() == 1) return false;
  if (p == Product::forward) return true;
  return g.out_volume() > 4 && (p == Product::weight || g.in_channels / g.groups >= 16);
}

template <class T>
void forward(const ConvGeometry& g, const T* x, const T* w, const T* bias, T* y) {
  const profiler::Scope scope("conv_forward", profiler::EventKind::Kernel);
  if constexpr (std::is_same_v<T, float>)
    if (onednn_takes(g, Product::forward) && onednn_conv_forward(g, x, w, bias, y)) return;
  if (const int64_t per = pack_images(g); per > 1) return forward_packed(g, x, w, bias, y, per);
  const GroupDims d = group_dims(g);
  const bool direct = is_pointwise(g);
  const int64_t per_tile = tile_rows(g, d.K, sizeof(T));
  for_images<T>(g, direct ? 0 : d.K * per_tile * g.out[2], [&](int64_t n, T* cols, bool one_thread) {
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      const T* xg = x + (n * g.in_channels + gi * d.cin) * g.in_volume();
      const T* wg = w + gi * d.cout * d.K;
      T* yg = y + (n * g.out_channels + gi * d.cout) * d.L;
      if (bias)
        for (int64_t c = 0; c < d.cout; ++c) std::fill(yg + c * d.L, yg + (c + 1) * d.L, bias[gi * d.cout + c]);
      const T beta = T(bias ? 1 : 0);
      if (direct) {
        gemm(one_thread, false, false, d.cout, d.L, d.K, wg, d.K, xg, d.L, beta, yg, d.L);
        continue;
      }
      for_tiles(g, per_tile, [&](Rows rows, int64_t cols_n) {
        im2col(g, rows, xg, d.cin, cols, !one_thread);
        gemm(one_thread, false, false, d.cout, cols_n, d.K, wg, d.K, cols, cols_n, beta,
             yg + rows.begin * g.out[2], d.L);
      });
    }
  });
}

template <class T>
void backward_input(const ConvGeometry& g, const T* gy, const T* w, T* gx) {
  const profiler::Scope scope("conv_backward_input", profiler::EventKind::Kernel);
  if constexpr (std::is_same_v<T, float>)
    if (onednn_takes(g, Product::input) && onednn_conv_backward_input(g, gy, w, gx)) return;
  if (const int64_t per = pack_images(g); per > 1) return backward_input_packed(g, gy, w, gx, per);
  const GroupDims d = group_dims(g);
  const bool direct = is_pointwise(g);
  const int64_t per_tile = tile_rows(g, d.K, sizeof(T));
  for_images<T>(g, direct ? 0 : d.K * per_tile * g.out[2], [&](int64_t n, T* cols, bool one_thread) {
    for (int64_t gi = 0; gi < g.groups; ++gi) {
      const T* gyg = gy + (n * g.out_channels + gi * d.cout) * d.L;
      T* gxg = gx + (n * g.in_channels + gi * d.cin) * g.in_volume();
      const T* wg = w + gi * d.cout * d.K;
      if (direct) {
        gemm(one_thread, true, false, d.K, d.L, d.cout, wg, d.K, gyg, d.L, T(0), gxg, d.L);
        continue;
      }
      std::fill(gxg, gxg + d.cin * g.in_volume(), T(0));
      for_tiles(g, per_tile, [&](Rows rows, int64_t cols_n) {
        gemm(one_thread, true, false, d.K, cols_n, d.cout, wg, d.K, gyg + rows.begin * g.out[2], d.L, T(0), cols,
             cols_n);
        col2im(g, rows, cols, d.cin, gxg, !one_thread);
      });
    }
  });
}

// gw += the partials of blocks 1 .. blocks-1 (block 0 summed into gw), in block order.
template <class T>
void add_partials(T* gw, const T* partial, int64_t blocks, int64_t size) {
  for (int64_t b = 1; b < blocks; ++b)
    for (int64_t i = 0; i < size; ++i) gw[i] += partial[(b - 1) * size + i];
}

template <class T>
void backward_weight(const ConvGeometry& g, const T* x, const T* gy, T* gw) {
  const profiler::Scope scope("conv_backward_weight", profiler::EventKind::Kernel);
  const GroupDims d = group_dims(g);
  const bool direct = is_pointwise(g);
  const int64_t size = g.out_channels * d.K, per_tile = tile_rows(g, d.K, sizeof(T));
  std::fill(gw, gw + size, T(0));
  if (g.batch == 0) return;
  const int64_t blocks = std::min(g.batch, processors());
  std::vector<T> partial(size_t((blocks - 1) * size));
  const bool one_thread = blocks > 1;
  const int64_t per = pack_images(g);
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> cols(direct || per > 1 ? 0 : size_t(d.K * per_tile * g.out[2]));
    for (int64_t b = b0; b < b1; ++b) {
      T* acc = b == 0 ? gw : partial.data() + (b - 1) * size;
      const int64_t n0 = b * g.batch / blocks, n1 = (b + 1) * g.batch / blocks;
      if constexpr (std::is_same_v<T, float>) {
        ConvGeometry block = g;
        block.batch = n1 - n0;
        if (one_thread && onednn_takes(g, Product::weight) &&
            onednn_conv_backward_weight_1t(block, x + n0 * g.in_channels * g.in_volume(),
                                           gy + n0 * g.out_channels * g.out_volume(), acc))
          continue;
      }
      if (per > 1) {
        backward_weight_packed(g, x, gy, acc, n0, n1, per, true, one_thread, cols);
        continue;
      }
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t gi = 0; gi < g.groups; ++gi) {
          const T* xg = x + (n * g.in_channels + gi * d.cin) * g.in_volume();
          const T* gyg = gy + (n * g.out_channels + gi * d.cout) * d.L;
          T* accg = acc + gi * d.cout * d.K;
          if (direct) {
            gemm(one_thread, false, true, d.cout, d.K, d.L, gyg, d.L, xg, d.L, T(n == n0 ? 0 : 1), accg, d.K);
            continue;
          }
          for_tiles(g, per_tile, [&](Rows rows, int64_t cols_n) {
            im2col(g, rows, xg, d.cin, cols.data(), !one_thread);
            gemm(one_thread, false, true, d.cout, d.K, cols_n, gyg + rows.begin * g.out[2], d.L, cols.data(),
                 cols_n, T(n == n0 && rows.begin == 0 ? 0 : 1), accg, d.K);
          });
        }
    }
  });
  add_partials(gw, partial.data(), blocks, size);
}

}  // namespace

bool conv_backward_weight_channels_last(const ConvGeometry& g, const float* x, const float* gy, float* gw) {
  const profiler::Scope scope("conv_backward_weight", profiler::EventKind::Kernel);
  const int64_t size = g.out_channels * (g.in_channels / g.groups) * g.kernel_volume();
  std::fill(gw, gw + size, 0.0f);
  if (g.batch == 0) return true;
  const int64_t blocks = std::min(g.batch, processors());
  std::vector<float> partial(size_t((blocks - 1) * size));
  std::vector<char> done(size_t(blocks), 0);
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t n0 = b * g.batch / blocks, n1 = (b + 1) * g.batch / blocks;
      ConvGeometry block = g;
      block.batch = n1 - n0;
      done[size_t(b)] = onednn_conv_backward_weight_1t(block, x + n0 * g.in_channels * g.in_volume(),
                                                       gy + n0 * g.out_channels * g.out_volume(),
                                                       b == 0 ? gw : partial.data() + (b - 1) * size);
    }
  });
  if (std::count(done.begin(), done.end(), 0)) return false;
  add_partials(gw, partial.data(), blocks, size);
  return true;
}

void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y) {
  forward(g, x, w, bias, y);
}
void conv_forward(const ConvGeometry& g, const double* x, const double* w, const double* bias, double* y) {
  forward(g, x, w, bias, y);
}
void conv_backward_input(const ConvGeometry& g, const float* gy, const float* w, float* gx) {
  backward_input(g, gy, w, gx);
}
void conv_backward_input(const ConvGeometry& g, const double* gy, const double* w, double* gx) {
  backward_input(g, gy, w, gx);
}
void conv_backward_weight(const ConvGeometry& g, const float* x, const float* gy, float* gw) {
  backward_weight(g, x, gy, gw);
}
void conv_backward_weight(const ConvGeometry& g, const double* x, const double* gy, double* gw) {
  backward_weight(g, x, gy, gw);
}

// F.unfold / F.fold (nn/resample.cpp): one image's im2col / col2im over all its channels.
#define FLB_UNFOLD(T)                                                                                  \
  void unfold_image(const ConvGeometry& g, const T* x, int64_t channels, T* cols) {                  \
    im2col(g, Rows{0, g.out[0] * g.out[1]}, x, channels, cols, true);                                \
  }                                                                                                  \
  void fold_image(const ConvGeometry& g, const T* cols, int64_t channels, T* x) {                    \
    col2im(g, Rows{0, g.out[0] * g.out[1]}, cols, channels, x, true);                                \
  }
FLB_UNFOLD(float)
FLB_UNFOLD(double)
#undef FLB_UNFOLD

}  // namespace flambeau::kernels
