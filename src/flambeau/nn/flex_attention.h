// FlexAttention (torch.nn.attention.flex_attention's): attention whose scores pass through a
// score_mod (score, b, h, q_idx, kv_idx) -> score and a mask_mod (b, h, q_idx, kv_idx) ->
// bool, with a BlockMask that lets the kernel skip blocks the mask rules out.
//
// C++ callables are taken as templates and wrapped into a ScoreMod / MaskMod whose virtual
// functions work on whole tiles: the per-element loop is instantiated for the callable (so it
// is inlined), and the kernel pays one indirect call per tile. Built-in mods (causal,
// sliding window, prefix-LM, document, ALiBi, tanh softcap, learnable relative bias) are
// native structs with parameters, used by the Python bindings too.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::nn::attention {

// A rectangle of the score matrix of batch b, query head h: rows [q0, q0 + rows), columns
// [kv0, kv0 + cols); element (r, c) of a buffer lives at r * ld + c.
struct Tile {
  int64_t b = 0, h = 0, q0 = 0, rows = 0, kv0 = 0, cols = 0, ld = 0;
};

enum class BlockKind : uint8_t { empty, partial, full, unknown };

// A mask_mod on tiles. true (1) = attend.
class MaskMod {
 public:
  virtual ~MaskMod() = default;
  // out[r * t.ld + c] = mask(b, h, q0 + r, kv0 + c).
  virtual void eval(const Tile& t, uint8_t* out) const = 0;
  // s[r * t.ld + c] = -inf where the mask is false (scratch: t.rows * t.ld bytes). The default
  // goes through eval(); band masks fill their ranges directly.
  virtual void apply(const Tile& t, float* s, uint8_t* scratch) const;
  // The kind of a whole tile (empty: nothing attends, full: everything does). The default
  // evaluates it; mods with a closed form (causal, windows) answer without looking.
  virtual BlockKind classify(const Tile& t) const;
  // Raises ValueError when the mod cannot serve these sizes (a doc-id tensor too short ...).
  virtual void check(int64_t /*B*/, int64_t /*H*/, int64_t /*Q_LEN*/, int64_t /*KV_LEN*/) const {}
  virtual std::string name() const { return "mask_mod"; }
};
using MaskModPtr = std::shared_ptr<const MaskMod>;

// A score_mod on tiles (scores already scaled, float32).
class ScoreMod {
 public:
  virtual ~ScoreMod() = default;
  virtual void forward(const Tile& t, float* s) const = 0;  // s = mod(s) in place
  // Backward through the mod: s holds the raw (unmodded) scores, ds the gradient w.r.t. the
  // modded ones, replaced by the gradient w.r.t. the raw ones. grads: one float64 accumulator
  // per captured() tensor (same numel, contiguous), or nullptr when not wanted.
  virtual void backward(const Tile& t, const float* s, float* ds, double* const* grads) const = 0;
  // Tensors the mod reads that may require grad (their gradients come from backward()).
  virtual std::vector<Tensor> captured() const { return {}; }
  // Validates the sizes; called by flex_attention before each run (mods re-read their
  // tensors here, so in-place updates of a bias table between steps are seen).
  virtual void check(int64_t /*B*/, int64_t /*H*/, int64_t /*Q_LEN*/, int64_t /*KV_LEN*/) const {}
  virtual std::string name() const { return "score_mod"; }
};
using ScoreModPtr = std::shared_ptr<const ScoreMod>;

// Forward-mode dual number: lets a generic C++ score_mod ([](auto s, ...)) be differentiated
// without writing its derivative. Supports + - * / with floats, tanh, exp, min/max-free math.
struct Dual {
  float v = 0, d = 0;
};
inline Dual operator+(Dual a, Dual b) { return {a.v + b.v, a.d + b.d}; }
inline Dual operator-(Dual a, Dual b) { return {a.v - b.v, a.d - b.d}; }
inline Dual operator*(Dual a, Dual b) { return {a.v * b.v, a.d * b.v + a.v * b.d}; }
inline Dual operator/(Dual a, Dual b) { return {a.v / b.v, (a.d * b.v - a.v * b.d) / (b.v * b.v)}; }
inline Dual operator-(Dual a) { return {-a.v, -a.d}; }
inline Dual operator+(Dual a, double b) { return {a.v + float(b), a.d}; }
inline Dual operator+(double b, Dual a) { return {a.v + float(b), a.d}; }
inline Dual operator-(Dual a, double b) { return {a.v - float(b), a.d}; }
inline Dual operator-(double b, Dual a) { return {float(b) - a.v, -a.d}; }
inline Dual operator*(Dual a, double b) { return {a.v * float(b), a.d * float(b)}; }
inline Dual operator*(double b, Dual a) { return {a.v * float(b), a.d * float(b)}; }
inline Dual operator/(Dual a, double b) { return {a.v / float(b), a.d / float(b)}; }
Dual tanh(Dual a);
Dual exp(Dual a);
inline float derivative_of(Dual a) { return a.d; }
inline float derivative_of(double) { return 0.f; }  // the mod ignores the score

namespace detail {
template <class F>
class MaskModFn final : public MaskMod {
 public:
  explicit MaskModFn(F f) : f_(std::move(f)) {}
  void eval(const Tile& t, uint8_t* out) const override {
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) out[r * t.ld + c] = uint8_t(bool(f_(t.b, t.h, t.q0 + r, t.kv0 + c)));
  }
  BlockKind classify(const Tile& t) const override {  // stops at the first row that mixes
    bool any = false, all = true;
    for (int64_t r = 0; r < t.rows && (all || !any); ++r) {
      int n = 0;
      for (int64_t c = 0; c < t.cols; ++c) n += bool(f_(t.b, t.h, t.q0 + r, t.kv0 + c));
      any |= n > 0, all &= n == t.cols;
    }
    return all ? BlockKind::full : any ? BlockKind::partial : BlockKind::empty;
  }

 private:
  F f_;
};

template <class F>
class ScoreModFn final : public ScoreMod {
 public:
  explicit ScoreModFn(F f) : f_(std::move(f)) {}
  void forward(const Tile& t, float* s) const override {
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) {
        float& x = s[r * t.ld + c];
        x = float(f_(x, t.b, t.h, t.q0 + r, t.kv0 + c));
      }
  }
  void backward(const Tile& t, const float* s, float* ds, double* const*) const override {
    static_assert(std::is_invocable_v<const F&, Dual, int64_t, int64_t, int64_t, int64_t>,
                  "flex_attention: a score_mod used with autograd must accept a generic score ([](auto s, ...)) "
                  "so that its derivative can be taken with attention::Dual");
    if constexpr (std::is_invocable_v<const F&, Dual, int64_t, int64_t, int64_t, int64_t>)
      for (int64_t r = 0; r < t.rows; ++r)
        for (int64_t c = 0; c < t.cols; ++c) {
          const int64_t at = r * t.ld + c;
          ds[at] *= derivative_of(f_(Dual{s[at], 1.f}, t.b, t.h, t.q0 + r, t.kv0 + c));
        }
  }

 private:
  F f_;
};
}  // namespace detail

// Type-erased mods from C++ callables: mask(b, h, q_idx, kv_idx) -> bool and
// score(s, b, h, q_idx, kv_idx) -> s (indices int64). Already-erased pointers pass through.
template <class F>
MaskModPtr make_mask_mod(F f) {
  if constexpr (std::is_convertible_v<F, MaskModPtr>) return f;
  else return std::make_shared<detail::MaskModFn<F>>(std::move(f));
}
template <class F>
ScoreModPtr make_score_mod(F f) {
  if constexpr (std::is_convertible_v<F, ScoreModPtr>) return f;
  else return std::make_shared<detail::ScoreModFn<F>>(std::move(f));
}

// ---- Built-in mods -------------------------------------------------------------------------
MaskModPtr noop_mask();                      // attends everywhere
MaskModPtr causal_mask();                    // q_idx >= kv_idx
MaskModPtr sliding_window_mask(int64_t w);   // causal and q_idx - kv_idx <= w
MaskModPtr prefix_lm_mask(int64_t prefix);   // kv_idx < prefix or causal
// doc_ids int [S] or [B, S] (row of batch b, or 0 when 1): same document on both sides.
MaskModPtr document_mask(const Tensor& doc_ids);
// Logical combinations (an empty list gives noop / nothing).
MaskModPtr and_masks(std::vector<MaskModPtr> mods);
MaskModPtr or_masks(std::vector<MaskModPtr> mods);
template <class... M>
MaskModPtr and_masks(M... m) { return and_masks(std::vector<MaskModPtr>{make_mask_mod(std::move(m))...}); }
template <class... M>
MaskModPtr or_masks(M... m) { return or_masks(std::vector<MaskModPtr>{make_mask_mod(std::move(m))...}); }

ScoreModPtr alibi(const Tensor& slopes);          // s + slopes[h] * (kv_idx - q_idx); slopes [H]
ScoreModPtr tanh_softcap(double cap);             // cap * tanh(s / cap)
// s + table[h, q_idx - kv_idx + N - 1] with table [H, 2N - 1] or [1, 2N - 1] (or [2N - 1]),
// N >= max(Q_LEN, KV_LEN); the table may require grad.
ScoreModPtr relative_bias(const Tensor& table);
// Applies mods left to right.
ScoreModPtr chain_score_mods(std::vector<ScoreModPtr> mods);

// ---- BlockMask -----------------------------------------------------------------------------
// Block sparsity of a mask, in PyTorch's "ordered" layout (all int32):
//   kv_num_blocks [B, H, nq]         partial KV blocks per query block,
//   kv_indices    [B, H, nq, nk]     their column indices, packed left,
//   full_kv_*                        the same for blocks where everything attends,
//   q_num_blocks / q_indices [B, H, nk(, nq)] and full_q_*: the transposes (backward).
// B and H may be 1 (broadcast over batch / heads). Partial blocks evaluate mask_mod in the
// kernel; full blocks skip it; absent blocks are skipped.
struct BlockMask {
  int64_t q_len = 0, kv_len = 0, q_block = 128, kv_block = 128;
  Tensor kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices;
  Tensor q_num_blocks, q_indices, full_q_num_blocks, full_q_indices;
  MaskModPtr mask_mod;  // null: noop
  bool sliced = false;  // made by slicing: mask_mod no longer matches b / h (PyTorch raises)

  int64_t batch() const { return kv_num_blocks.size(0); }
  int64_t heads() const { return kv_num_blocks.size(1); }
  int64_t num_q_blocks() const { return kv_indices.size(2); }
  int64_t num_kv_blocks() const { return kv_indices.size(3); }
  // B * H * Q_LEN * KV_LEN, and the percentage of it in no block (PyTorch's sparsity()).
  int64_t numel() const { return batch() * heads() * q_len * kv_len; }
  double sparsity() const;
  // int32 [B, H, nq, nk]: 1 where a block (partial or full) is computed.
  Tensor to_dense() const;
  // Rows b in [b0, b1), heads h in [h0, h1) (rank kept, as PyTorch's __getitem__ code).
  BlockMask slice(int64_t b0, int64_t b1, int64_t h0, int64_t h1) const;
  // Cropped to the top-left new_q_len x new_kv_len corner (for decoding with a shorter q).
  BlockMask adjust(int64_t new_q_len, int64_t new_kv_len) const;
  std::string to_string() const;
};

// Builds a BlockMask from the kv-major tensors (full_* may be undefined); the q-major
// transposes are derived. seq_lengths default to (nq * q_block, nk * kv_block).
BlockMask from_kv_blocks(const Tensor& kv_num_blocks, const Tensor& kv_indices, const Tensor& full_kv_num_blocks = {},
                         const Tensor& full_kv_indices = {}, int64_t q_block = 128, int64_t kv_block = 128,
                         MaskModPtr mask_mod = nullptr, std::optional<std::pair<int64_t, int64_t>> seq_lengths = {});

// Evaluates mask_mod block by block (memory in blocks, never Q_LEN x KV_LEN), in parallel.
// kv_block defaults to q_block.
BlockMask create_block_mask(MaskModPtr mask_mod, int64_t B, int64_t H, int64_t Q_LEN, int64_t KV_LEN,
                            int64_t q_block = 128, std::optional<int64_t> kv_block = {});
template <class M>
BlockMask create_block_mask(M mask_mod, int64_t B, int64_t H, int64_t Q_LEN, int64_t KV_LEN, int64_t block = 128) {
  return create_block_mask(make_mask_mod(std::move(mask_mod)), B, H, Q_LEN, KV_LEN, block, block);
}

// A mask whose partial tiles were evaluated once by rows(b, h, q0, rows) -> uint8/bool tensor
// [rows, KV_LEN] (e.g. a Python mask_mod over index tensors); the partial tiles are stored.
// rows is called serially, block row by block row (memory O(q_block x KV_LEN) per call).
using MaskRowsFn = std::function<Tensor(int64_t b, int64_t h, int64_t q0, int64_t rows)>;
BlockMask create_block_mask_from_rows(const MaskRowsFn& rows, int64_t B, int64_t H, int64_t Q_LEN, int64_t KV_LEN,
                                      int64_t q_block = 128, int64_t kv_block = 128);

// ---- flex_attention ------------------------------------------------------------------------
// q [B, Hq, L, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev] -> out [B, Hq, L, Ev] (q's dtype) and,
// with return_lse, the natural-log logsumexp [B, Hq, L] (float32; -inf for rows that see
// nothing, whose output is 0). float32, bfloat16, float16 (computed in float32). scale
// defaults to 1/sqrt(E); enable_gqa lets Hq be a multiple of Hkv. score_mod / block_mask
// may be null / absent (plain attention). Differentiable in q, k, v and the score_mod's
// captured tensors, with a backward bitwise independent of the thread count.
std::pair<Tensor, Tensor> flex_attention(const Tensor& q, const Tensor& k, const Tensor& v, ScoreModPtr score_mod,
                                         const std::optional<BlockMask>& block_mask = {},
                                         std::optional<double> scale = {}, bool enable_gqa = false,
                                         bool return_lse = false);
template <class F>
std::pair<Tensor, Tensor> flex_attention(const Tensor& q, const Tensor& k, const Tensor& v, F score_mod,
                                         const std::optional<BlockMask>& block_mask = {},
                                         std::optional<double> scale = {}, bool enable_gqa = false,
                                         bool return_lse = false) {
  return flex_attention(q, k, v, make_score_mod(std::move(score_mod)), block_mask, scale, enable_gqa, return_lse);
}

}  // namespace flambeau::nn::attention
