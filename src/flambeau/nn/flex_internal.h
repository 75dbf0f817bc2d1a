// Pieces shared by the FlexAttention files: dynamic scheduling over independent work items
// and read access to a BlockMask's block lists with batch/head broadcasting.
#pragma once
#include "flambeau/core/parallel.h"
#include "flambeau/nn/flex_attention.h"

namespace flambeau::nn::attention::detail {

// f(i) for i in [0, n), items handed out one at a time (costs vary: causal rows), through
// core/parallel (an exception in f is re-raised in the caller). Each item writes only its
// own outputs, so results do not depend on the schedule.
template <class F>
void for_each_item(int64_t n, const F& f) {
  parallel_for_each(n, f);
}

// One list of blocks: count and indices (int32), for a (b, h, row) of a [B, H, rows(, n)] pair.
struct BlockList {
  const int32_t* num = nullptr;
  const int32_t* idx = nullptr;
  int64_t B = 0, H = 0, rows = 0, width = 0;
  BlockList() = default;
  BlockList(const Tensor& n, const Tensor& i)
      : num(n.defined() ? n.data<int32_t>() : nullptr), idx(i.defined() ? i.data<int32_t>() : nullptr) {
    if (num) B = n.size(0), H = n.size(1), rows = n.size(2), width = i.size(3);
  }
  int64_t row_of(int64_t b, int64_t h, int64_t r) const { return ((B == 1 ? 0 : b) * H + (H == 1 ? 0 : h)) * rows + r; }
  int64_t count(int64_t b, int64_t h, int64_t r) const { return num ? num[row_of(b, h, r)] : 0; }
  const int32_t* at(int64_t b, int64_t h, int64_t r) const { return idx + row_of(b, h, r) * width; }
};

// Kernel tile sizes: query rows and (at most) key columns per score tile.
constexpr int64_t kTq = 128, kTk = 256;
// k and v are also kept transposed in windows of kTk keys: [B * Hkv, windows, E, kLdT] (the
// padded row stride keeps the GEMM's k-loop off a single cache set).
constexpr int64_t kLdT = kTk + 16;
// Up to this many queries the forward splits each row's KV blocks over the cores (decode).
constexpr int64_t kDecodeMaxLen = 16;

// One call, inputs as contiguous float32 [B, H, len, dim].
struct Problem {
  int64_t B = 0, Hq = 0, Hkv = 0, L = 0, S = 0, E = 0, Ev = 0, G = 1;
  float scale = 1;
  const float *q = nullptr, *k = nullptr, *v = nullptr;
  const float *kt = nullptr, *vt = nullptr;  // k, v in windows (see kLdT); kt null: decode, vt: backward
  // Where key column kv of (b * Hkv + kv head) hk starts in kt (dim E) or vt (dim Ev).
  const float* t_at(const float* t, int64_t hk, int64_t kv, int64_t dim) const {
    return t + ((hk * ((S + kTk - 1) / kTk) + kv / kTk) * dim) * kLdT + kv % kTk;
  }
  int64_t qbs = 128, kbs = 128, nq = 0, nk = 0;  // mask blocks
  BlockList part, full, qpart, qfull;            // kv-major, then q-major lists
  const MaskMod* mask = nullptr;
  const ScoreMod* mod = nullptr;
};

// A run of key columns [kv0, kv0 + cols) of one kind (partial: mask_mod evaluated).
struct Span {
  int64_t kv0, cols;
  bool partial;
};
// The spans of list entries [e0, e1) of row (b, h, qb): partial blocks, then full ones;
// consecutive blocks of one kind merge into spans within one kTk-aligned window.
void spans_of(const Problem& p, int64_t b, int64_t h, int64_t qb, int64_t e0, int64_t e1, std::vector<Span>& out);

// s (rows x cols, ld kTk) = scale * q k^T of a tile, then score_mod, then mask (partial).
void score_tile(const Problem& p, const Tile& t, bool partial, float* s, float* raw, uint8_t* mbuf);

// c[m, n] = alpha * op(a) @ op(b) + beta * c, float32, row-major (the small-tile GEMM, or
// OpenBLAS for tiny or b-transposed products).
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Forward into out [B, Hq, L, Ev] and stats [B, Hq, L, 2]: per row the max score m and
// ls = log sum exp(s - m) (both -inf for empty rows); lse = m + ls. Kept apart so that
// backward forms s - lse as (s - m) - ls, which keeps the precision of large scores.
void forward(const Problem& p, float* out, float* stats);
// Backward: dq, dk, dv (zeroed, float32, q/k/v's shapes) and the score_mod's captured
// gradients (float64, one per captured tensor; nullptr where not wanted). dlse: the
// gradient of the logsumexp output [B, Hq, L], or nullptr when none flowed.
void backward(const Problem& p, const float* out, const float* stats, const float* dout, const float* dlse, float* dq,
              float* dk, float* dv, const std::vector<double*>& captured_grads);

// The ordered transpose of (num [B, H, R], idx [B, H, R, C]) -> ([B, H, C], [B, H, C, R]),
// entries ascending.
std::pair<Tensor, Tensor> transpose_ordered(const Tensor& num, const Tensor& idx, int64_t cols);

}  // namespace flambeau::nn::attention::detail
