// The built-in FlexAttention mods: masks (noop, causal, sliding window, prefix-LM, document,
// and/or combinations, index offsets for sliced masks) with closed-form block classification
// where one exists, and score mods (ALiBi, tanh softcap, learnable relative bias, chains).
#include <algorithm>
#include <cmath>

#include "flambeau/core/op_hook.h"
#include "flambeau/nn/flex_attention.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::attention {

Dual tanh(Dual a) {
  const float t = std::tanh(a.v);
  return {t, a.d * (1 - t * t)};
}
Dual exp(Dual a) {
  const float e = std::exp(a.v);
  return {e, a.d * e};
}

BlockKind MaskMod::classify(const Tile& t) const {
  std::vector<uint8_t> row(size_t(std::max<int64_t>(t.cols, 1)));
  bool any = false, all = true;
  for (int64_t r = 0; r < t.rows && (all || !any); ++r) {
    eval(Tile{t.b, t.h, t.q0 + r, 1, t.kv0, t.cols, t.cols}, row.data());
    int64_t n = 0;
    for (int64_t c = 0; c < t.cols; ++c) n += row[size_t(c)];
    any |= n > 0, all &= n == t.cols;
  }
  return all ? BlockKind::full : any ? BlockKind::partial : BlockKind::empty;
}

void MaskMod::apply(const Tile& t, float* s, uint8_t* scratch) const {
  eval(t, scratch);
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c)
      if (!scratch[r * t.ld + c]) s[r * t.ld + c] = -INFINITY;
}

namespace {

// A mask allowed where lo <= q_idx - kv_idx <= hi (causal: [0, inf), window: [0, w]).
struct DiagonalBand final : MaskMod {
  int64_t lo, hi;
  const char* nm;
  DiagonalBand(int64_t l, int64_t h, const char* n) : lo(l), hi(h), nm(n) {}
  void eval(const Tile& t, uint8_t* out) const override {
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) {
        const int64_t d = t.q0 + r - t.kv0 - c;
        out[r * t.ld + c] = uint8_t(d >= lo && d <= hi);
      }
  }
  void apply(const Tile& t, float* s, uint8_t*) const override {
    for (int64_t r = 0; r < t.rows; ++r) {  // allowed: kv in [q - hi, q - lo]
      const int64_t q = t.q0 + r;
      const int64_t c0 = std::clamp<int64_t>(hi == INT64_MAX ? 0 : q - hi - t.kv0, 0, t.cols);
      const int64_t c1 = std::clamp<int64_t>(q - lo - t.kv0 + 1, c0, t.cols);
      std::fill(s + r * t.ld, s + r * t.ld + c0, -INFINITY);
      std::fill(s + r * t.ld + c1, s + r * t.ld + t.cols, -INFINITY);
    }
  }
  BlockKind classify(const Tile& t) const override {
    const int64_t dmin = t.q0 - (t.kv0 + t.cols - 1), dmax = t.q0 + t.rows - 1 - t.kv0;
    if (dmax < lo || dmin > hi) return BlockKind::empty;
    return dmin >= lo && dmax <= hi ? BlockKind::full : BlockKind::partial;
  }
  std::string name() const override { return nm; }
};

struct Noop final : MaskMod {
  void eval(const Tile& t, uint8_t* out) const override {
    for (int64_t r = 0; r < t.rows; ++r) std::fill(out + r * t.ld, out + r * t.ld + t.cols, uint8_t(1));
  }
  BlockKind classify(const Tile&) const override { return BlockKind::full; }
  std::string name() const override { return "noop_mask"; }
};

struct PrefixLM final : MaskMod {
  int64_t prefix;
  DiagonalBand causal{0, INT64_MAX, "causal"};
  explicit PrefixLM(int64_t p) : prefix(p) {}
  void eval(const Tile& t, uint8_t* out) const override {
    causal.eval(t, out);
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols && t.kv0 + c < prefix; ++c) out[r * t.ld + c] = 1;
  }
  BlockKind classify(const Tile& t) const override {
    if (t.kv0 + t.cols <= prefix) return BlockKind::full;
    const BlockKind k = causal.classify(t);
    return k == BlockKind::full || t.kv0 >= prefix ? k : MaskMod::classify(t);
  }
  std::string name() const override { return "prefix_lm_mask(" + std::to_string(prefix) + ")"; }
};

struct Document final : MaskMod {
  Tensor src;            // as given
  mutable Tensor ids;    // int64 [B or 1, S] contiguous (a view of src when it already is)
  // When every row of ids is non-decreasing (packed sequences), a document is one run of
  // positions [run_lo, run_hi) and each query row's mask is that band: no per-element test.
  mutable bool runs = false;
  mutable std::vector<int64_t> run_lo, run_hi;  // per position of each row
  explicit Document(const Tensor& d) {
    FLB_CHECK(d.dim() == 1 || d.dim() == 2, ValueError, "[document_mask] expected doc ids [S] or [B, S], got ",
              shape_str(d.sizes()));
    FLB_CHECK(is_integral(d.dtype(), false), TypeError, "[document_mask] doc ids must be integers, got ",
              dtype_name(d.dtype()));
    src = d;
    refresh();
  }
  const int64_t* row_ids(int64_t b) const { return ids.data<int64_t>() + row_base(b); }
  int64_t row_base(int64_t b) const { return (ids.size(0) == 1 ? 0 : b) * ids.size(1); }
  void eval(const Tile& t, uint8_t* out) const override {
    const int64_t* row = row_ids(t.b);
    for (int64_t r = 0; r < t.rows; ++r) {
      const int64_t dq = row[t.q0 + r];
      for (int64_t c = 0; c < t.cols; ++c) out[r * t.ld + c] = uint8_t(row[t.kv0 + c] == dq);
    }
  }
  void apply(const Tile& t, float* s, uint8_t* scratch) const override {
    if (!runs) return MaskMod::apply(t, s, scratch);
    const int64_t base = row_base(t.b);
    for (int64_t r = 0; r < t.rows; ++r) {
      const int64_t q = base + t.q0 + r;
      const int64_t c0 = std::clamp<int64_t>(run_lo[size_t(q)] - t.kv0, 0, t.cols);
      const int64_t c1 = std::clamp<int64_t>(run_hi[size_t(q)] - t.kv0, c0, t.cols);
      std::fill(s + r * t.ld, s + r * t.ld + c0, -INFINITY);
      std::fill(s + r * t.ld + c1, s + r * t.ld + t.cols, -INFINITY);
    }
  }
  BlockKind classify(const Tile& t) const override {
    if (!runs) return MaskMod::classify(t);
    // Runs tile the positions, so rows q0..last together see [run_lo[q0], run_hi[last]).
    const int64_t first = row_base(t.b) + t.q0, last = first + t.rows - 1, kv1 = t.kv0 + t.cols;
    if (run_hi[size_t(last)] <= t.kv0 || run_lo[size_t(first)] >= kv1) return BlockKind::empty;
    const bool one_run = run_lo[size_t(last)] == run_lo[size_t(first)];
    return one_run && run_lo[size_t(first)] <= t.kv0 && run_hi[size_t(first)] >= kv1 ? BlockKind::full
                                                                                        : BlockKind::partial;
  }
  void refresh() const {
    ids = (src.dim() == 1 ? src.unsqueeze(0) : src).to(kInt64).contiguous();
    const int64_t R = ids.size(0), S = ids.size(1);
    const int64_t* p = ids.data<int64_t>();
    runs = true;
    for (int64_t i = 0; i < R * S && runs; ++i) runs = i % S == 0 || p[i - 1] <= p[i];
    if (!runs) return;
    run_lo.resize(size_t(R * S)), run_hi.resize(size_t(R * S));
    for (int64_t i = 0; i < R * S;) {  // runs never cross a row: each row's end closes one
      int64_t j = i + 1;
      while (j % S != 0 && p[j] == p[i]) ++j;
      std::fill(run_lo.begin() + i, run_lo.begin() + j, i % S);
      std::fill(run_hi.begin() + i, run_hi.begin() + j, (j - 1) % S + 1);
      i = j;
    }
  }
  void check(int64_t B, int64_t, int64_t L, int64_t S) const override {
    refresh();  // picks up in-place changes made since construction
    FLB_CHECK(ids.size(1) >= std::max(L, S) && (ids.size(0) == 1 || ids.size(0) >= B), ValueError,
              "[document_mask] doc ids of shape ", shape_str(ids.sizes()), " do not cover batch ", B, " and length ",
              std::max(L, S));
  }
  std::string name() const override { return "document_mask"; }
};

struct Combine final : MaskMod {
  std::vector<MaskModPtr> mods;
  bool is_and;
  Combine(std::vector<MaskModPtr> m, bool a) : mods(std::move(m)), is_and(a) {}
  void eval(const Tile& t, uint8_t* out) const override {
    const uint8_t init = is_and ? 1 : 0;
    for (int64_t r = 0; r < t.rows; ++r) std::fill(out + r * t.ld, out + r * t.ld + t.cols, init);
    std::vector<uint8_t> tmp(size_t(t.rows * t.cols));
    for (const auto& m : mods) {
      m->eval(Tile{t.b, t.h, t.q0, t.rows, t.kv0, t.cols, t.cols}, tmp.data());
      for (int64_t r = 0; r < t.rows; ++r)
        for (int64_t c = 0; c < t.cols; ++c) {
          uint8_t& o = out[r * t.ld + c];
          o = is_and ? uint8_t(o & tmp[size_t(r * t.cols + c)]) : uint8_t(o | tmp[size_t(r * t.cols + c)]);
        }
    }
  }
  void apply(const Tile& t, float* s, uint8_t* scratch) const override {
    if (!is_and) return MaskMod::apply(t, s, scratch);
    for (const auto& m : mods) m->apply(t, s, scratch);  // each child masks its part
  }
  BlockKind classify(const Tile& t) const override {
    // and: one empty child empties the block, all full fill it (or: the mirror); else look.
    const BlockKind stop = is_and ? BlockKind::empty : BlockKind::full;
    bool all_same = true;
    for (const auto& m : mods) {
      const BlockKind k = m->classify(t);
      if (k == stop) return stop;
      all_same &= k == (is_and ? BlockKind::full : BlockKind::empty);
    }
    if (all_same) return is_and ? BlockKind::full : BlockKind::empty;
    return MaskMod::classify(t);
  }
  void check(int64_t B, int64_t H, int64_t L, int64_t S) const override {
    for (const auto& m : mods) m->check(B, H, L, S);
  }
  std::string name() const override {
    std::string s = is_and ? "and_masks(" : "or_masks(";
    for (size_t i = 0; i < mods.size(); ++i) s += (i ? ", " : "") + mods[i]->name();
    return s + ")";
  }
};

struct Alibi final : ScoreMod {
  Tensor src;
  mutable Tensor slopes;  // float32 [H] (a view of src when it already is)
  explicit Alibi(const Tensor& s) {
    FLB_CHECK(s.dim() == 1 && s.is_floating_point(), ValueError, "[alibi] expected float slopes [H], got ",
              shape_str(s.sizes()), " ", dtype_name(s.dtype()));
    src = s.detach();
    slopes = src.to(kFloat32).contiguous();
  }
  void forward(const Tile& t, float* s) const override {
    const float m = slopes.data<float>()[t.h];
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) s[r * t.ld + c] += m * float(t.kv0 + c - t.q0 - r);
  }
  void backward(const Tile&, const float*, float*, double* const*) const override {}
  void check(int64_t, int64_t H, int64_t, int64_t) const override {
    slopes = src.to(kFloat32).contiguous();
    FLB_CHECK(slopes.size(0) == H, ValueError, "[alibi] ", slopes.size(0), " slopes for ", H, " query heads");
  }
  std::string name() const override { return "alibi"; }
};

struct Softcap final : ScoreMod {
  float cap;
  explicit Softcap(double c) : cap(float(c)) {
    FLB_CHECK(c > 0, ValueError, "[tanh_softcap] cap must be positive, got ", c);
  }
  void forward(const Tile& t, float* s) const override {
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) s[r * t.ld + c] = cap * std::tanh(s[r * t.ld + c] / cap);
  }
  void backward(const Tile& t, const float* s, float* ds, double* const*) const override {
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) {
        const float th = std::tanh(s[r * t.ld + c] / cap);
        ds[r * t.ld + c] *= 1 - th * th;
      }
  }
  std::string name() const override { return "tanh_softcap"; }
};

struct RelativeBias final : ScoreMod {
  Tensor table;  // as given (may require grad)
  mutable Tensor data;  // float32 [Ht, 2N - 1] contiguous (a view of the table when it already is)
  int64_t n = 0;
  explicit RelativeBias(const Tensor& t) : table(t) {
    FLB_CHECK((t.dim() == 1 || t.dim() == 2) && t.is_floating_point() && t.size(-1) % 2 == 1, ValueError,
              "[relative_bias] expected a float table [H, 2N - 1] or [2N - 1], got ", shape_str(t.sizes()), " ",
              dtype_name(t.dtype()));
    refresh();
    n = (data.size(1) + 1) / 2;
  }
  const float* row(int64_t h) const { return data.data<float>() + (data.size(0) == 1 ? 0 : h) * data.size(1); }
  void forward(const Tile& t, float* s) const override {
    const float* tb = row(t.h) + (n - 1);
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) s[r * t.ld + c] += tb[t.q0 + r - t.kv0 - c];
  }
  void backward(const Tile& t, const float*, float* ds, double* const* grads) const override {
    if (!grads || !grads[0]) return;
    double* g = grads[0] + (data.size(0) == 1 ? 0 : t.h) * data.size(1) + (n - 1);
    for (int64_t r = 0; r < t.rows; ++r)
      for (int64_t c = 0; c < t.cols; ++c) g[t.q0 + r - t.kv0 - c] += ds[r * t.ld + c];
  }
  std::vector<Tensor> captured() const override { return {table}; }
  void refresh() const { data = (table.dim() == 1 ? table.unsqueeze(0) : table).detach().to(kFloat32).contiguous(); }
  void check(int64_t, int64_t H, int64_t L, int64_t S) const override {
    refresh();  // an optimizer may have updated the table in place
    FLB_CHECK(n >= std::max(L, S) && (data.size(0) == 1 || data.size(0) == H), ValueError, "[relative_bias] table ",
              shape_str(table.sizes()), " does not cover ", H, " heads and offsets up to ", std::max(L, S) - 1);
  }
  std::string name() const override { return "relative_bias"; }
};

struct Chain final : ScoreMod {
  std::vector<ScoreModPtr> mods;
  explicit Chain(std::vector<ScoreModPtr> m) : mods(std::move(m)) {}
  void forward(const Tile& t, float* s) const override {
    for (const auto& m : mods) m->forward(t, s);
  }
  void backward(const Tile& t, const float* s, float* ds, double* const* grads) const override {
    // Rebuild each mod's input, then walk back from the last mod.
    std::vector<std::vector<float>> ins(mods.size());
    std::vector<float> cur(size_t(t.rows * t.ld));
    for (int64_t r = 0; r < t.rows; ++r) std::copy(s + r * t.ld, s + r * t.ld + t.cols, cur.begin() + r * t.ld);
    for (size_t i = 0; i < mods.size(); ++i) {
      ins[i] = cur;
      mods[i]->forward(t, cur.data());
    }
    size_t off = 0;
    std::vector<size_t> first(mods.size());
    for (size_t i = 0; i < mods.size(); ++i) first[i] = off, off += mods[i]->captured().size();
    for (size_t i = mods.size(); i-- > 0;) mods[i]->backward(t, ins[i].data(), ds, grads ? grads + first[i] : nullptr);
  }
  std::vector<Tensor> captured() const override {
    std::vector<Tensor> all;
    for (const auto& m : mods)
      for (auto& c : m->captured()) all.push_back(c);
    return all;
  }
  void check(int64_t B, int64_t H, int64_t L, int64_t S) const override {
    for (const auto& m : mods) m->check(B, H, L, S);
  }
  std::string name() const override { return "chain"; }
};

}  // namespace

MaskModPtr noop_mask() { return std::make_shared<Noop>(); }
MaskModPtr causal_mask() { return std::make_shared<DiagonalBand>(0, INT64_MAX, "causal_mask"); }
MaskModPtr sliding_window_mask(int64_t w) {
  FLB_CHECK(w >= 0, ValueError, "[sliding_window_mask] window must be >= 0, got ", w);
  return std::make_shared<DiagonalBand>(0, w, "sliding_window_mask");
}
MaskModPtr prefix_lm_mask(int64_t prefix) {
  FLB_CHECK(prefix >= 0, ValueError, "[prefix_lm_mask] prefix length must be >= 0, got ", prefix);
  return std::make_shared<PrefixLM>(prefix);
}
FLB_OP(document_mask,
       (const Tensor& doc_ids),
       (doc_ids), MaskModPtr) { return std::make_shared<Document>(doc_ids); }
MaskModPtr and_masks(std::vector<MaskModPtr> mods) {
  for (const auto& m : mods) FLB_CHECK(m, ValueError, "[and_masks] got a null mask_mod");
  return std::make_shared<Combine>(std::move(mods), true);
}
MaskModPtr or_masks(std::vector<MaskModPtr> mods) {
  for (const auto& m : mods) FLB_CHECK(m, ValueError, "[or_masks] got a null mask_mod");
  return std::make_shared<Combine>(std::move(mods), false);
}
FLB_OP(alibi, (const Tensor& slopes), (slopes), ScoreModPtr) { return std::make_shared<Alibi>(slopes); }
ScoreModPtr tanh_softcap(double cap) { return std::make_shared<Softcap>(cap); }
FLB_OP(relative_bias,
       (const Tensor& table),
       (table), ScoreModPtr) { return std::make_shared<RelativeBias>(table); }
ScoreModPtr chain_score_mods(std::vector<ScoreModPtr> mods) {
  for (const auto& m : mods) FLB_CHECK(m, ValueError, "[chain_score_mods] got a null score_mod");
  return std::make_shared<Chain>(std::move(mods));
}

}  // namespace flambeau::nn::attention
