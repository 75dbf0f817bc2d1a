// FlexAttention backward, deterministic without atomics (Note [Flex backward order]).
// Both passes rebuild P = exp(score - lse) tile by tile from the saved logsumexp.
//
// Note [Flex backward order]
// With at least kFusedMinItems (batch, kv head) pairs and no captured gradient, one pass per
// pair walks its kv tiles in order and accumulates dK, dV and the dQ of the pair's query
// heads (nobody else writes them). Otherwise two passes: dK and dV parallel over (batch,
// kv head, kv block), each item owning its rows of dK/dV and walking the query blocks of the
// q-major lists (query heads of a GQA group one after another, partial blocks then full
// ones); then dQ parallel over (batch, query head, query block), walking the kv-major lists.
// Gradients of captured tensors (a bias table) are accumulated during the dQ pass into one
// float64 buffer per fixed group of work items (the grouping depends only on the shapes),
// summed in group order at the end. Every sum thus runs in an order fixed by the inputs,
// whatever the thread count or schedule; the choice of path depends only on the shapes.
#include <cmath>
#include <limits>

#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/kernels/cpu/simd_gemm_small.h"
#include "flambeau/nn/flex_internal.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::nn::attention::detail {
namespace {

constexpr int64_t kMaxGradGroups = 16;
// With at least this many (batch, kv head) pairs (a shape-only rule, so the choice never
// depends on the thread count) and no captured gradients, one pass computes dQ, dK and dV.
constexpr int64_t kFusedMinItems = 8;

struct Scratch {
  std::vector<float> s, raw, dp;
  std::vector<uint8_t> mbuf;
  Scratch() : s(size_t(kTq * kTk)), raw(size_t(kTq * kTk)), dp(size_t(kTq * kTk)), mbuf(size_t(kTq * kTk)) {}
};

// For tile t: sc.s = P, sc.dp = dS w.r.t. the raw scores (before score_mod); grads as in
// ScoreMod::backward.
void tile_grads(const Problem& p, const Tile& t, bool partial, const float* stats, const float* dout, const float* drow,
                Scratch& sc, double* const* grads) {
  const profiler::Scope scope("flex_attention backward tile", profiler::EventKind::Kernel);
  float *s = sc.s.data(), *dp = sc.dp.data();
  score_tile(p, t, partial, s, p.mod ? sc.raw.data() : nullptr, sc.mbuf.data());
  const int64_t row0 = (t.b * p.Hq + t.h) * p.L + t.q0, hk = t.b * p.Hkv + t.h / p.G;
  for (int64_t r = 0; r < t.rows; ++r) {
    float* sr = s + r * kTk;
    const float m = stats[2 * (row0 + r)], ls = stats[2 * (row0 + r) + 1];
    if (std::isinf(ls)) {
      std::fill(sr, sr + t.cols, 0.f);
      continue;
    }
    for (int64_t c = 0; c < t.cols; ++c) sr[c] -= m;  // P = exp((s - m) - ls)
    kernels::exp_shift_sum_fast_f32(sr, t.cols, ls);
  }
  kernels::gemm_small_f32(t.rows, t.cols, p.Ev, 1.f, dout + row0 * p.Ev, p.Ev, 1, p.t_at(p.vt, hk, t.kv0, p.Ev), kLdT,
                          0.f, dp, kTk);
  for (int64_t r = 0; r < t.rows; ++r) {
    const float d = drow[row0 + r];
    for (int64_t c = 0; c < t.cols; ++c) dp[r * kTk + c] = s[r * kTk + c] * (dp[r * kTk + c] - d);
  }
  if (p.mod) p.mod->backward(t, sc.raw.data(), dp, grads);
}

// The tiles [q0, q0 + rows) of query block qb.
template <class F>
void q_tiles(const Problem& p, int64_t qb, const F& f) {
  for (int64_t q0 = qb * p.qbs; q0 < std::min(p.L, (qb + 1) * p.qbs); q0 += kTq)
    f(q0, std::min({kTq, p.L - q0, (qb + 1) * p.qbs - q0}));
}

}  // namespace

void backward(const Problem& p, const float* out, const float* stats, const float* dout, const float* dlse, float* dq,
              float* dk, float* dv, const std::vector<double*>& captured_grads) {
  // D_i = dO_i . O_i - dlse_i: dS = P (dP - D) then also carries d lse_i / d s_ij = P_ij.
  std::vector<float> drow(size_t(p.B * p.Hq * p.L));
  for_each_item(p.B * p.Hq, [&](int64_t bh) {
    for (int64_t i = bh * p.L; i < (bh + 1) * p.L; ++i) {
      float d = 0;
      for (int64_t e = 0; e < p.Ev; ++e) d += dout[i * p.Ev + e] * out[i * p.Ev + e];
      drow[size_t(i)] = dlse ? d - dlse[i] : d;
    }
  });

  // dK, dV (and dQ when fused): the keys [kv0, kv0 + cols) (inside one kv block and one
  // kTk window) of (b, kv head) bk.
  auto kv_item = [&](int64_t bk, int64_t kb, int64_t kv0, int64_t cols, Scratch& sc, float* dq_or_null) {
    const int64_t b = bk / p.Hkv;
    float* dkt = dk + (bk * p.S + kv0) * p.E;
    float* dvt = dv + (bk * p.S + kv0) * p.Ev;
    for (int64_t g = 0; g < p.G; ++g) {
      const int64_t h = bk % p.Hkv * p.G + g, np = p.qpart.count(b, h, kb), nf = p.qfull.count(b, h, kb);
      for (int64_t e = 0; e < np + nf; ++e) {
        const int64_t qb = e < np ? p.qpart.at(b, h, kb)[e] : p.qfull.at(b, h, kb)[e - np];
        q_tiles(p, qb, [&](int64_t q0, int64_t rows) {
          const Tile t{b, h, q0, rows, kv0, cols, kTk};
          const int64_t row0 = (b * p.Hq + h) * p.L + q0;
          tile_grads(p, t, e < np, stats, dout, drow.data(), sc, nullptr);
          sgemm(true, false, cols, p.Ev, rows, 1.f, sc.s.data(), kTk, dout + row0 * p.Ev, p.Ev, 1.f, dvt, p.Ev);
          sgemm(true, false, cols, p.E, rows, p.scale, sc.dp.data(), kTk, p.q + row0 * p.E, p.E, 1.f, dkt, p.E);
          if (dq_or_null)
            sgemm(false, false, rows, p.E, cols, p.scale, sc.dp.data(), kTk, p.k + (bk * p.S + kv0) * p.E, p.E, 1.f,
                  dq_or_null + row0 * p.E, p.E);
        });
      }
    }
  };
  bool want = false;
  for (double* g : captured_grads) want |= g != nullptr;
  auto kv_block = [&](int64_t bk, int64_t kb, Scratch& sc, float* dq_or_null) {
    const int64_t end = std::min(p.S, (kb + 1) * p.kbs);
    for (int64_t kv0 = kb * p.kbs; kv0 < end;) {
      const int64_t stop = std::min(end, (kv0 / kTk + 1) * kTk);
      kv_item(bk, kb, kv0, stop - kv0, sc, dq_or_null);
      kv0 = stop;
    }
  };
  if (!want && p.B * p.Hkv >= kFusedMinItems) {
    // One pass per (b, kv head): it owns dK, dV and the dQ of its query heads (Note [Flex backward order]).
    for_each_item(p.B * p.Hkv, [&](int64_t bk) {
      Scratch sc;
      for (int64_t kb = 0; kb < p.nk; ++kb) kv_block(bk, kb, sc, dq);
    });
    return;
  }
  for_each_item(p.B * p.Hkv * p.nk, [&](int64_t item) {
    Scratch sc;
    kv_block(item / p.nk, item % p.nk, sc, nullptr);
  });

  // dQ (and captured gradients): items (b, query head, query block).
  const int64_t n_items = p.B * p.Hq * p.nq;
  auto dq_item = [&](int64_t item, Scratch& sc, double* const* grads) {
    const int64_t qb = item % p.nq, h = item / p.nq % p.Hq, b = item / (p.nq * p.Hq), hk = b * p.Hkv + h / p.G;
    std::vector<Span> spans;
    spans_of(p, b, h, qb, 0, p.part.count(b, h, qb) + p.full.count(b, h, qb), spans);
    q_tiles(p, qb, [&](int64_t q0, int64_t rows) {
      float* dqt = dq + ((b * p.Hq + h) * p.L + q0) * p.E;
      for (const Span& sp : spans) {
        tile_grads(p, Tile{b, h, q0, rows, sp.kv0, sp.cols, kTk}, sp.partial, stats, dout, drow.data(), sc, grads);
        sgemm(false, false, rows, p.E, sp.cols, p.scale, sc.dp.data(), kTk, p.k + (hk * p.S + sp.kv0) * p.E, p.E, 1.f,
              dqt, p.E);
      }
    });
  };
  if (!want) {
    for_each_item(n_items, [&](int64_t item) {
      Scratch sc;
      dq_item(item, sc, nullptr);
    });
    return;
  }
  // Captured gradients: groups of consecutive items, one accumulator set per group.
  std::vector<int64_t> numel(captured_grads.size());
  for (size_t i = 0; i < captured_grads.size(); ++i) numel[i] = p.mod->captured()[i].numel();
  const int64_t groups = std::min(n_items, kMaxGradGroups);
  std::vector<std::vector<std::vector<double>>> acc(static_cast<size_t>(groups));
  for_each_item(groups, [&](int64_t g) {
    std::vector<double*> ptrs(captured_grads.size(), nullptr);
    acc[size_t(g)].resize(captured_grads.size());
    for (size_t i = 0; i < captured_grads.size(); ++i)
      if (captured_grads[i]) {
        acc[size_t(g)][i].assign(size_t(numel[i]), 0.0);
        ptrs[i] = acc[size_t(g)][i].data();
      }
    Scratch sc;
    for (int64_t item = g * n_items / groups; item < (g + 1) * n_items / groups; ++item) dq_item(item, sc, ptrs.data());
  });
  for (size_t i = 0; i < captured_grads.size(); ++i)
    if (captured_grads[i])
      for (int64_t g = 0; g < groups; ++g)
        for (int64_t j = 0; j < numel[i]; ++j) captured_grads[i][j] += acc[size_t(g)][i][size_t(j)];
}

}  // namespace flambeau::nn::attention::detail
