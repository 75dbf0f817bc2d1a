// The chunked linear cross-entropy kernel: loss rows and (optionally) the gradients of x, W
// and b from one pass over the vocabulary per chunk of rows, through OpenBLAS GEMMs on
// cache-sized tiles. Computes in float32 (float64 for float64 inputs); bfloat16 / float16
// operands are converted tile by tile, never as a whole.
#include "flambeau/nn/linear_cross_entropy_kernel.h"

#include "flambeau/kernels/cpu/blas.h"
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/gemm16.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::detail {
namespace {

// Note [Chunked linear cross-entropy]
// Rows are taken in chunks of m; the vocabulary in tiles of vt columns, so that an [m, vt]
// logits tile (about 2 MiB) stays in the last-level cache between its GEMM and the passes
// over it, and GEMMs are big enough for OpenBLAS to run near its peak. Per chunk:
//  A. each tile, in parallel: logits = x_c W_t^T + b_t (GEMM); then, per row and while the
//     tile is in cache, the target logit, the weighted logit sums that label smoothing and
//     probability targets need, the tile max m_t, and e = exp(logit - m_t) in place with
//     its sum s_t.
//  R. each row: lse = M + log(sum_t s_t exp(m_t - M)) over the tiles in order; the loss.
//  B. (gradients) each tile, in parallel: dlogits = g * (alpha p - beta onehot - gamma w)
//     in place, with p = e exp(m_t - lse) (no second exp of the logits); then grad_b and
//     grad_W[tile] += dlogits_t^T x_c (GEMM).
//  C. grad_x[chunk] = dlogits @ W (GEMM over the whole vocabulary, in column tiles of D).
// With fewer than kMinItems tiles (a small vocabulary), A and the dlogits pass of B also
// split the chunk's rows, and grad_W splits D's columns, so that every core has work; each
// row's and each output element's arithmetic is the same however they are split.
// That is the unfused path's three GEMMs and no [N, V] tensor. Tile shapes depend on the
// problem and the machine only, never on the thread count, and every sum runs in a fixed
// order, so results are bitwise identical with any number of threads.
//
// Per row, with lse the logsumexp, s the smoothing, z the z-loss coefficient, w the class
// weights (ones when none, W = sum w), V classes:
//   index target t: loss = (1-s) w_t (lse - l_t) + s/V (W lse - sum_c w_c l_c) + z lse^2
//                   dloss/dl_c = alpha p_c - (1-s) w_t [c = t] - s/V w_c,
//                   alpha = (1-s) w_t + s/V W + 2 z lse
//   probabilities q = (1-s) target + s/V:
//                   loss = Q lse - sum_c w_c q_c l_c + z lse^2, Q = sum_c w_c q_c
//                   dloss/dl_c = (Q + 2 z lse) p_c - w_c q_c

// c[m, n] = a[m, k] @ b[k, n] + beta * c, row-major; a / b given transposed when ta / tb.
template <class T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
          T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  kernels::gemm_1t(ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc);  // on this thread (Note [Deterministic GEMM])
}


// A block of a row-major matrix src [*, cols] as T: rows [r0, r0 + rows), columns
// [c0, c0 + n). Points into src when it is already T, else converts into `buf`.
struct Block {
  const void* p;
  int64_t ld;
};
template <class T>
Block block_as(const Tensor& src, int64_t cols, int64_t r0, int64_t rows, int64_t c0, int64_t n, std::vector<T>& buf) {
  if (src.dtype() == dtype_v<T>) return {src.data<T>() + r0 * cols + c0, cols};
  if constexpr (std::is_same_v<T, float>) {
    buf.resize(size_t(rows * n));
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t off = (r0 + r) * cols + c0;
      if (src.dtype() == kBFloat16) kernels::bf16_to_f32(src.data<BFloat16>() + off, buf.data() + r * n, n);
      else kernels::f16_to_f32(src.data<Half>() + off, buf.data() + r * n, n);
    }
    return {buf.data(), n};
  }
  FLB_CHECK(false, Error, "[linear_cross_entropy] internal: no conversion from ", dtype_name(src.dtype()));
  return {};
}

// Fewer (tile) work items than this: split rows / columns too (Note [Chunked linear cross-entropy]).
constexpr int64_t kMinItems = 8;

int64_t round_up(int64_t x, int64_t k) { return std::max<int64_t>(k, (x + k - 1) / k * k); }

template <class T>
class Chunked {
 public:
  explicit Chunked(const LceArgs& a) : a_(a) {
    N_ = a.x.size(0), D_ = a.x.size(1), V_ = a.w.size(0);
    bs_ = std::clamp<int64_t>(a.chunk > 0 ? a.chunk : lce_auto_chunk(N_, D_, V_), 1, std::max<int64_t>(N_, 1));
    vt_ = a.vocab_tile > 0 ? a.vocab_tile : std::clamp<int64_t>((int64_t(1) << 19) / bs_ / 16 * 16, 256, 8192);
    vt_ = std::min(vt_, std::max<int64_t>(V_, 1));
    tiles_ = (V_ + vt_ - 1) / vt_;
    // Rows of the logits buffer 64 bytes past a multiple of 64: a power-of-two V would put
    // every row of a tile in the same cache sets.
    ld_ = (V_ + 15) / 16 * 16 + 64 / int64_t(sizeof(T));
    static const int64_t procs = std::clamp<int64_t>(omp_get_num_procs(), 1, 64);
    dt_ = std::max<int64_t>(64, ((D_ + procs - 1) / procs + 15) / 16 * 16);
    if (a.x.dtype() == dtype_v<T>) x_ = a.x.data<T>();
    else {
      xc_ = a.x.to(dtype_v<T>).contiguous();
      x_ = xc_.data<T>();
    }
    b_ = ptr(a.bias), cw_ = ptr(a.class_weight), probs_ = ptr(a.probs), scale_ = ptr(a.row_scale);
    tgt_ = a.target.defined() ? a.target.data<int64_t>() : nullptr;
    s_ = a.label_smoothing, z_ = a.z_loss;
    wsum_ = double(V_);
    if (cw_) {
      wsum_ = 0;
      for (int64_t c = 0; c < V_; ++c) wsum_ += double(cw_[c]);
    }
    grads_ = a.row_scale.defined() && (a.want_grad_x || a.want_grad_w || a.want_grad_b);
  }

  LceResult run() {
    LceResult r;
    r.loss_rows = empty({N_}, dtype_v<T>);
    loss_ = r.loss_rows.data<T>();
    if (grads_ && a_.want_grad_x) r.grad_x = empty({N_, D_}, dtype_v<T>);
    if (grads_ && a_.want_grad_w) r.grad_w = N_ > 0 ? empty({V_, D_}, dtype_v<T>) : zeros({V_, D_}, dtype_v<T>);
    if (grads_ && a_.want_grad_b) gb_.assign(size_t(V_), 0.0);
    gx_ = r.grad_x.defined() ? r.grad_x.data<T>() : nullptr;
    gw_ = r.grad_w.defined() ? r.grad_w.data<T>() : nullptr;
    const Tensor logits = empty({bs_, ld_}, dtype_v<T>);
    L_ = logits.data<T>();
    const size_t part = size_t(tiles_ * bs_);
    tmax_.assign(part, 0), tsum_.assign(part, 0), tdot_.assign(part, 0), tq_.assign(part, 0);
    lt_.assign(size_t(bs_), 0), lse_.assign(size_t(bs_), 0), alpha_.assign(size_t(bs_), 0);
    // Row / column blocks per tile: a function of the shapes only (see the Note).
    const int64_t splits = tiles_ > 0 ? (kMinItems + tiles_ - 1) / tiles_ : 1;
    for (int64_t r0 = 0; r0 < N_; r0 += bs_) {
      const int64_t m = std::min(bs_, N_ - r0);
      const bool big = m * vt_ * std::max<int64_t>(D_, 1) >= (int64_t(1) << 16);
      const int64_t rb = round_up((m + splits - 1) / splits, 16);
      // Runs f(tile, first, count) over tiles x blocks of `block` out of `total`, in parallel.
      auto each = [&](int64_t total, int64_t block, const auto& f) {
        const int64_t nb = (total + block - 1) / block, items = tiles_ * nb;
        parallel_for(0, items, big ? 1 : items, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) f(i / nb, i % nb * block, std::min(block, total - i % nb * block));
        });
      };
      each(m, rb, [&](int64_t j, int64_t ra, int64_t mr) { tile_forward(r0, j, ra, mr); });
      reduce_rows(r0, m, r.loss_sum);
      if (!grads_) continue;
      each(m, rb, [&](int64_t j, int64_t ra, int64_t mr) { tile_dlogits(r0, j, ra, mr); });
      if (!gb_.empty()) grad_b_chunk(m);
      if (gw_) each(D_, round_up((D_ + splits - 1) / splits, 16), [&](int64_t j, int64_t d0, int64_t dn) {
        grad_w_tile(r0, m, j, d0, dn);
      });
      if (gx_) grad_x_chunk(r0, m);
    }
    if (!gb_.empty()) {
      r.grad_b = empty({V_}, dtype_v<T>);
      T* gb = r.grad_b.data<T>();
      for (int64_t c = 0; c < V_; ++c) gb[c] = T(gb_[size_t(c)]);
    }
    return r;
  }

 private:
  static const T* ptr(const Tensor& t) { return t.defined() ? t.data<T>() : nullptr; }
  double cweight(int64_t c) const { return cw_ ? double(cw_[c]) : 1.0; }

  // Phase A of Note [Chunked linear cross-entropy] for tile j, rows [ra, ra + mr) of the
  // chunk at r0.
  void tile_forward(int64_t r0, int64_t j, int64_t ra, int64_t mr) {
    const int64_t v0 = j * vt_, n = std::min(vt_, V_ - v0);
    T* C = L_ + v0;
    if (!native_bf16_logits(r0 + ra, mr, v0, n, C + ra * ld_)) {
      std::vector<T> buf;
      const Block w = block_as<T>(a_.w, D_, v0, n, 0, D_, buf);
      gemm<T>(false, true, mr, n, D_, x_ + (r0 + ra) * D_, D_, static_cast<const T*>(w.p), w.ld, T(0), C + ra * ld_,
              ld_);
    }
    const double sv = s_ / double(V_);
    for (int64_t r = ra; r < ra + mr; ++r) {
      T* row = C + r * ld_;
      const int64_t i = r0 + r;
      const size_t k = size_t(j * bs_ + r);
      if (b_)
        for (int64_t c = 0; c < n; ++c) row[c] += b_[v0 + c];
      if (probs_) {
        const T* p = probs_ + i * V_ + v0;
        double dot = 0, q = 0;
        for (int64_t c = 0; c < n; ++c) {
          const double wq = cweight(v0 + c) * ((1 - s_) * double(p[c]) + sv);
          dot += wq * double(row[c]);
          q += wq;
        }
        tdot_[k] = dot, tq_[k] = q;
      } else {
        const int64_t t = tgt_[i];
        if (t >= v0 && t < v0 + n) lt_[size_t(r)] = double(row[t - v0]);
        if (s_ > 0) {
          double dot = 0;
          for (int64_t c = 0; c < n; ++c) dot += cweight(v0 + c) * double(row[c]);
          tdot_[k] = dot;
        }
      }
      const T mx = kernels::max_of(row, n);
      tmax_[k] = double(mx);
      tsum_[k] = kernels::exp_shift_sum(row, n, mx);
    }
  }

  // bfloat16 logits through the 16-bit GEMM where the CPU multiplies bf16 natively (x and W
  // are exact in bf16, so this loses nothing); false: use the float32 path.
  bool native_bf16_logits(int64_t r0, int64_t m, int64_t v0, int64_t n, T* C) {
    if constexpr (!std::is_same_v<T, float>) return false;
    else {
      if (a_.x.dtype() != kBFloat16 || !kernels::gemm16_native(true) || D_ == 0) return false;
      // logits = x W_t^T: W's rows [v0, v0 + n) are op(b)'s columns.
      kernels::gemm16(false, true, m, n, D_, 1.f, a_.x.data<BFloat16>() + r0 * D_, D_,
                      a_.w.data<BFloat16>() + v0 * D_, D_, 0.f, C, ld_);
      return true;
    }
  }

  // Phase R: each row's logsumexp, loss and gradient coefficient alpha.
  void reduce_rows(int64_t r0, int64_t m, double& loss_sum) {
    const double sv = s_ / double(V_);
    for (int64_t r = 0; r < m; ++r) {
      const int64_t i = r0 + r;
      double M = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < tiles_; ++j) M = std::max(M, tmax_[size_t(j * bs_ + r)]);
      double S = 0, dot = 0, Q = 0;
      for (int64_t j = 0; j < tiles_; ++j) {
        const size_t k = size_t(j * bs_ + r);
        S += tsum_[k] * std::exp(tmax_[k] - M);
        dot += tdot_[k], Q += tq_[k];
      }
      const double lse = M + std::log(S);
      double loss = 0, alpha = 0;
      if (probs_) {
        loss = Q * lse - dot + z_ * lse * lse;
        alpha = Q + 2 * z_ * lse;
      } else if (tgt_[i] >= 0) {
        const double wt = cweight(tgt_[i]);
        loss = (1 - s_) * wt * (lse - lt_[size_t(r)]) + z_ * lse * lse;
        if (s_ > 0) loss += sv * (wsum_ * lse - dot);
        alpha = (1 - s_) * wt + sv * wsum_ + 2 * z_ * lse;
      }
      loss_[i] = T(loss);
      loss_sum += loss;
      lse_[size_t(r)] = lse, alpha_[size_t(r)] = alpha;
    }
  }

  // Phase B for tile j, rows [ra, ra + mr) of the chunk at r0: dlogits in place.
  void tile_dlogits(int64_t r0, int64_t j, int64_t ra, int64_t mr) {
    const int64_t v0 = j * vt_, n = std::min(vt_, V_ - v0);
    T* C = L_ + v0;
    const double sv = s_ / double(V_);
    for (int64_t r = ra; r < ra + mr; ++r) {
      T* row = C + r * ld_;
      const int64_t i = r0 + r;
      const double g = double(scale_[i]);
      if (g == 0 || (!probs_ && tgt_[i] < 0)) {
        std::fill_n(row, n, T(0));
        continue;
      }
      const T f = T(g * alpha_[size_t(r)] * std::exp(tmax_[size_t(j * bs_ + r)] - lse_[size_t(r)]));
      if (probs_) {
        const T* p = probs_ + i * V_ + v0;
        const T a = T(g * (1 - s_)), b = T(g * sv);
        if (cw_)
          for (int64_t c = 0; c < n; ++c) row[c] = f * row[c] - cw_[v0 + c] * (a * p[c] + b);
        else
          for (int64_t c = 0; c < n; ++c) row[c] = f * row[c] - (a * p[c] + b);
        continue;
      }
      const T gs = T(g * sv);
      if (s_ > 0 && cw_)
        for (int64_t c = 0; c < n; ++c) row[c] = f * row[c] - gs * cw_[v0 + c];
      else if (s_ > 0)
        for (int64_t c = 0; c < n; ++c) row[c] = f * row[c] - gs;
      else
        for (int64_t c = 0; c < n; ++c) row[c] *= f;
      const int64_t t = tgt_[i];
      if (t >= v0 && t < v0 + n) row[t - v0] -= T(g * (1 - s_) * cweight(t));
    }
  }

  // Phase B: grad_b += the column sums of the chunk's dlogits, rows in order.
  void grad_b_chunk(int64_t m) {
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < V_; ++c) gb_[size_t(c)] += double(L_[r * ld_ + c]);
  }

  // Phase B: grad_W[tile j, columns d0 .. d0 + dn) += dlogits_j^T x_c.
  void grad_w_tile(int64_t r0, int64_t m, int64_t j, int64_t d0, int64_t dn) {
    const int64_t v0 = j * vt_, n = std::min(vt_, V_ - v0);
    gemm<T>(true, false, n, dn, m, L_ + v0, ld_, x_ + r0 * D_ + d0, D_, r0 == 0 ? T(0) : T(1), gw_ + v0 * D_ + d0, D_);
  }

  // Phase C: grad_x of the chunk, in column tiles of D (each a GEMM over the vocabulary).
  void grad_x_chunk(int64_t r0, int64_t m) {
    const int64_t dtiles = (D_ + dt_ - 1) / dt_;
    const bool native = a_.w.dtype() == dtype_v<T>;
    parallel_for(0, dtiles, m * V_ * D_ >= (int64_t(1) << 18) ? 1 : dtiles, [&](int64_t t0, int64_t t1) {
      std::vector<T> buf;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t d0 = t * dt_, dn = std::min(dt_, D_ - d0);
        T* out = gx_ + r0 * D_ + d0;
        if (native) {
          gemm<T>(false, false, m, dn, V_, L_, ld_, a_.w.data<T>() + d0, D_, T(0), out, D_);
          continue;
        }
        constexpr int64_t kVb = 1024;  // converted W rows per step
        for (int64_t v = 0; v < V_; v += kVb) {
          const int64_t vn = std::min(kVb, V_ - v);
          const Block w = block_as<T>(a_.w, D_, v, vn, d0, dn, buf);
          gemm<T>(false, false, m, dn, vn, L_ + v, ld_, static_cast<const T*>(w.p), w.ld, v == 0 ? T(0) : T(1), out,
                  D_);
        }
        if (V_ == 0)
          for (int64_t r = 0; r < m; ++r) std::fill_n(out + r * D_, dn, T(0));
      }
    });
  }

  const LceArgs& a_;
  int64_t N_ = 0, D_ = 0, V_ = 0, bs_ = 1, vt_ = 1, tiles_ = 0, dt_ = 64, ld_ = 1;
  Tensor xc_;
  const T *x_ = nullptr, *b_ = nullptr, *cw_ = nullptr, *probs_ = nullptr, *scale_ = nullptr;
  const int64_t* tgt_ = nullptr;
  double s_ = 0, z_ = 0, wsum_ = 0;
  bool grads_ = false;
  T *loss_ = nullptr, *L_ = nullptr, *gx_ = nullptr, *gw_ = nullptr;
  std::vector<double> gb_, tmax_, tsum_, tdot_, tq_, lt_, lse_, alpha_;
};

}  // namespace

DType lce_compute_dtype(DType input) { return input == kFloat64 ? kFloat64 : kFloat32; }

int64_t lce_auto_chunk(int64_t N, int64_t D, int64_t V) {
  const int64_t budget = std::max<int64_t>(2 * N * D, int64_t(1) << 23);  // elements of the logits buffer
  const int64_t rows = budget / std::max<int64_t>(V, 1);
  return std::clamp<int64_t>(rows >= 32 ? rows / 16 * 16 : rows, 16, 256);
}

LceResult lce_chunked(const LceArgs& args) {
  if (lce_compute_dtype(args.x.dtype()) == kFloat64) return Chunked<double>(args).run();
  return Chunked<float>(args).run();
}

}  // namespace flambeau::nn::detail
