// FlexAttention forward kernel: for each (batch, head, query tile) walk the mask's partial
// then full KV blocks, merged into spans of up to 256 keys; per tile: scores by a small SIMD
// GEMM against the window-transposed keys, score_mod, mask_mod (partial blocks only), online
// softmax in float32, acc += P @ V. Short queries (decode) split each row's block list into
// fixed chunks run in parallel and merged by their logsumexp, in chunk order, so the result
// does not depend on the thread count.
#include "flambeau/kernels/cpu/blas.h"

#include <cmath>
#include <limits>

#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/kernels/cpu/simd_gemm_small.h"
#include "flambeau/nn/flex_internal.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::nn::attention::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int64_t kDecodeChunk = 32;    // decode: KV blocks per parallel chunk
constexpr int64_t kSmallGemmMin = 4096;  // smaller products go to OpenBLAS

// Running softmax state of the rows of one query tile.
struct State {
  std::vector<float> m, l, acc;
  State(int64_t rows, int64_t ev) : m(size_t(rows), kNegInf), l(size_t(rows), 0.f), acc(size_t(rows * ev), 0.f) {}
};

// One unit of parallel work: query tile rows [q0, q0 + rows) of (b, h), list entries [e0, e1).
struct Work {
  int64_t b, h, qb, q0, rows, e0, e1;
  bool whole;  // covers the row's whole list: finalize directly
};

int64_t entries(const Problem& p, int64_t b, int64_t h, int64_t qb) { return p.part.count(b, h, qb) + p.full.count(b, h, qb); }

void run(const Problem& p, const Work& w, State& st) {
  const profiler::Scope scope("flex_attention forward tile", profiler::EventKind::Kernel);
  std::vector<float> s(size_t(w.rows * kTk));
  std::vector<uint8_t> mbuf(size_t(w.rows * kTk));
  std::vector<Span> spans;
  spans_of(p, w.b, w.h, w.qb, w.e0, w.e1, spans);
  const int64_t hk = w.b * p.Hkv + w.h / p.G;
  for (const Span& sp : spans) {
    const Tile t{w.b, w.h, w.q0, w.rows, sp.kv0, sp.cols, kTk};
    score_tile(p, t, sp.partial, s.data(), nullptr, mbuf.data());
    for (int64_t r = 0; r < t.rows; ++r) {
      float* sr = s.data() + r * kTk;
      const float mx = std::max(st.m[size_t(r)], kernels::max_f32(sr, t.cols));
      if (mx == kNegInf) {  // nothing visible yet in this row
        std::fill(sr, sr + t.cols, 0.f);
        continue;
      }
      const float corr = std::exp(st.m[size_t(r)] - mx);
      const float sum = kernels::exp_shift_sum_fast_f32(sr, t.cols, mx);
      st.l[size_t(r)] = st.l[size_t(r)] * corr + sum;
      st.m[size_t(r)] = mx;
      if (corr != 1.f)
        for (int64_t d = 0; d < p.Ev; ++d) st.acc[size_t(r * p.Ev + d)] *= corr;
    }
    sgemm(false, false, t.rows, p.Ev, t.cols, 1.f, s.data(), kTk, p.v + (hk * p.S + sp.kv0) * p.Ev, p.Ev, 1.f,
          st.acc.data(), p.Ev);
  }
}

void finalize(const Problem& p, const Work& w, const State& st, float* out, float* stats) {
  for (int64_t r = 0; r < w.rows; ++r) {
    const int64_t row = (w.b * p.Hq + w.h) * p.L + w.q0 + r;
    const float l = st.l[size_t(r)], inv = l > 0 ? 1.f / l : 0.f;
    for (int64_t d = 0; d < p.Ev; ++d) out[row * p.Ev + d] = st.acc[size_t(r * p.Ev + d)] * inv;
    stats[2 * row] = l > 0 ? st.m[size_t(r)] : kNegInf;
    stats[2 * row + 1] = l > 0 ? std::log(l) : kNegInf;
  }
}

}  // namespace

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (tb || m * n * k < kSmallGemmMin) {
    kernels::gemm_1t(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  kernels::gemm_small_f32(m, n, k, alpha, a, ta ? 1 : lda, ta ? lda : 1, b, ldb, beta, c, ldc);
}

void spans_of(const Problem& p, int64_t b, int64_t h, int64_t qb, int64_t e0, int64_t e1, std::vector<Span>& out) {
  out.clear();
  const int64_t np = p.part.count(b, h, qb);
  const int32_t* pi = np ? p.part.at(b, h, qb) : nullptr;
  const int32_t* fi = p.full.count(b, h, qb) ? p.full.at(b, h, qb) : nullptr;
  for (int64_t e = e0; e < e1; ++e) {
    const bool partial = e < np;
    const int64_t blk = partial ? pi[e] : fi[e - np];
    const int64_t end = std::min(p.S, (blk + 1) * p.kbs);
    for (int64_t kv0 = blk * p.kbs; kv0 < end;) {
      const int64_t stop = std::min(end, (kv0 / kTk + 1) * kTk);  // the window's end
      Span& last = out.empty() ? out.emplace_back(Span{kv0, 0, partial}) : out.back();
      if (last.kv0 + last.cols == kv0 && last.partial == partial && (last.kv0 / kTk == kv0 / kTk || last.cols == 0))
        last.cols += stop - kv0;
      else
        out.push_back(Span{kv0, stop - kv0, partial});
      kv0 = stop;
    }
  }
}

void score_tile(const Problem& p, const Tile& t, bool partial, float* s, float* raw, uint8_t* mbuf) {
  const int64_t hk = t.b * p.Hkv + t.h / p.G;
  const float* qt = p.q + ((t.b * p.Hq + t.h) * p.L + t.q0) * p.E;
  if (p.kt)
    kernels::gemm_small_f32(t.rows, t.cols, p.E, p.scale, qt, p.E, 1, p.t_at(p.kt, hk, t.kv0, p.E), kLdT, 0.f, s, kTk);
  else
    kernels::dot_rows_f32(t.rows, t.cols, p.E, p.scale, qt, p.E, p.k + (hk * p.S + t.kv0) * p.E, p.E, s, kTk);
  if (raw)
    for (int64_t r = 0; r < t.rows; ++r) std::copy(s + r * kTk, s + r * kTk + t.cols, raw + r * kTk);
  if (p.mod) p.mod->forward(t, s);
  if (partial && p.mask) p.mask->apply(t, s, mbuf);
}

void forward(const Problem& p, float* out, float* stats) {
  // Work items: one per (b, h, query tile), or per chunk of its block list when decoding.
  const bool decode = p.L <= kDecodeMaxLen;
  std::vector<Work> work;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t qb = 0; qb < p.nq; ++qb) {
        const int64_t n = entries(p, b, h, qb), step = decode ? kDecodeChunk : std::max<int64_t>(n, 1);
        for (int64_t q0 = qb * p.qbs; q0 < std::min(p.L, (qb + 1) * p.qbs); q0 += kTq) {
          const int64_t rows = std::min({kTq, p.L - q0, (qb + 1) * p.qbs - q0});
          for (int64_t e0 = 0; e0 < std::max<int64_t>(n, 1); e0 += step)
            work.push_back(Work{b, h, qb, q0, rows, e0, std::min(n, e0 + step), n <= step});
        }
      }
  std::vector<State> parts(work.size(), State(0, 0));
  for_each_item(int64_t(work.size()), [&](int64_t i) {
    const Work& w = work[size_t(i)];
    State st(w.rows, p.Ev);
    run(p, w, st);
    if (w.whole) finalize(p, w, st, out, stats);
    else parts[size_t(i)] = std::move(st);
  });
  // Merge split rows: chunks of a tile are consecutive in `work`, merged left to right.
  for (size_t i = 0; i < work.size();) {
    if (work[i].whole) {
      ++i;
      continue;
    }
    size_t j = i + 1;
    while (j < work.size() && !work[j].whole && work[j].e0 > 0) ++j;
    State total(work[i].rows, p.Ev);
    for (size_t c = i; c < j; ++c)
      for (int64_t r = 0; r < work[i].rows; ++r) {
        const float m1 = parts[c].m[size_t(r)], m = std::max(total.m[size_t(r)], m1);
        if (m == kNegInf) continue;
        const float a = std::exp(total.m[size_t(r)] - m), b = std::exp(m1 - m);
        total.l[size_t(r)] = total.l[size_t(r)] * a + parts[c].l[size_t(r)] * b;
        total.m[size_t(r)] = m;
        for (int64_t d = 0; d < p.Ev; ++d) {
          float& acc = total.acc[size_t(r * p.Ev + d)];
          acc = acc * a + parts[c].acc[size_t(r * p.Ev + d)] * b;
        }
      }
    finalize(p, work[i], total, out, stats);
    i = j;
  }
}

}  // namespace flambeau::nn::attention::detail
