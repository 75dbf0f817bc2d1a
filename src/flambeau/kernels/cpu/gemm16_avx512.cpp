// bfloat16 GEMM on AVX512-BF16 (vdpbf16ps): both operands are packed once into panels that
// interleave pairs of k (B: 32 columns a panel, A: 12 rows a panel, zero padded), then tiles of
// C are computed by a 12 x 32 register-blocked micro-kernel into a float32 scratch tile, k in
// blocks of kKc taken in ascending order; the last block scales, rounds and writes C (edge
// micro-tiles through the scratch and store_scaled).
// Only gemm16.cpp calls in, and only on CPUs with AVX512-BF16 (Note [16-bit GEMM paths]).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/gemm16_internal.h"

namespace flambeau::kernels {
namespace {

constexpr int64_t kMr = 12, kNr = 32;  // micro-tile of C
// k per block (even); the sum over k visits blocks in order. Long blocks win on Zen 4 (the B
// micro-panel streams from L2 well, and C's scratch is read and written once per block):
// 1024 x 1024 bf16 175 -> 193 GFLOP/s per core against 384.
constexpr int64_t kKc = 2048;

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 on its own intrinsics' undefined vectors

// Packs op(x) (element (i, p) at x[i * rs + p * cs]) for rows [0, rows) into panels of R rows:
// panel q holds, for each pair of k, R x 2 values (i, 2t), (i, 2t + 1). kp = ceil(k / 2).
// Rows and k beyond the matrix are zero.
void pack_panel(const uint16_t* x, int64_t rs, int64_t cs, int64_t nr, int64_t k, int64_t R, uint16_t* d) {
  const int64_t kp = (k + 1) / 2;
  if (nr < R || (k & 1)) std::memset(d, 0, size_t(kp * R * 2) * sizeof(uint16_t));
  if (rs == 1 && cs != 1 && nr == 32 && R == 32) {  // 32 adjacent rows: interleave two k at a time
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                        37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (int64_t t = 0; t < k / 2; ++t) {
      const __m512i v0 = _mm512_loadu_si512(x + 2 * t * cs), v1 = _mm512_loadu_si512(x + (2 * t + 1) * cs);
      _mm512_store_si512(d + t * 64, _mm512_permutex2var_epi16(v0, lo, v1));
      _mm512_store_si512(d + t * 64 + 32, _mm512_permutex2var_epi16(v0, hi, v1));
    }
    if (k & 1)
      for (int64_t r = 0; r < 32; ++r) d[(k / 2) * 64 + 2 * r] = x[(k - 1) * cs + r];
  } else if (rs == 1 && cs != 1) {  // rows adjacent in memory: read along them
    for (int64_t p = 0; p < k; ++p) {
      const uint16_t* src = x + p * cs;
      uint16_t* dp = d + (p >> 1) * R * 2 + (p & 1);
      for (int64_t r = 0; r < nr; ++r) dp[2 * r] = src[r];
    }
  } else if (cs == 1) {  // pairs of k adjacent in memory: 32-bit moves, written in order
    uint32_t* d32 = reinterpret_cast<uint32_t*>(d);
    for (int64_t t = 0; t < k / 2; ++t)
      for (int64_t r = 0; r < nr; ++r) std::memcpy(d32 + t * R + r, x + r * rs + 2 * t, 4);
    if (k & 1)
      for (int64_t r = 0; r < nr; ++r) d[((k / 2) * R + r) * 2] = x[r * rs + k - 1];
  } else {
    for (int64_t r = 0; r < nr; ++r)
      for (int64_t p = 0; p < k; ++p) d[((p >> 1) * R + r) * 2 + (p & 1)] = x[r * rs + p * cs];
  }
}

// Where a micro-tile's last k block goes: straight into C, scaled and rounded (a full tile).
template <class Out>
struct Final {
  Out* c;
  int64_t ldc;
  float alpha, beta;
};

// 16 floats of C: load as float (bf16 widened exactly), store rounded to nearest even as
// BFloat16::from_float does (NaN stays a quiet NaN).
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const BFloat16* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
inline void store16(BFloat16* p, __m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(r));
}

// A 12 x 32 micro-tile over kp pairs of k: s (+)= a-panel . b-panel (s: float scratch, row
// stride lds, read when accumulating). With fin, the result goes to C instead of s.
template <class Out>
void micro_12x32(int64_t kp, const uint16_t* a, const uint16_t* b, float* s, int64_t lds, bool accumulate,
                 const Final<Out>* fin) {
  __m512 acc[kMr][2];
  for (int r = 0; r < kMr; ++r) acc[r][0] = _mm512_setzero_ps(), acc[r][1] = _mm512_setzero_ps();
  const int32_t* ap = reinterpret_cast<const int32_t*>(a);
  for (int64_t t = 0; t < kp; ++t) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b + t * 64), b1 = (__m512bh)_mm512_load_si512(b + t * 64 + 32);
    for (int r = 0; r < kMr; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(ap[t * kMr + r]);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  for (int r = 0; r < kMr; ++r) {
    float* sr = s + r * lds;
    for (int h = 0; h < 2; ++h) {
      __m512 v = accumulate ? _mm512_add_ps(_mm512_load_ps(sr + 16 * h), acc[r][h]) : acc[r][h];
      if (!fin) {
        _mm512_store_ps(sr + 16 * h, v);
        continue;
      }
      Out* cr = fin->c + r * fin->ldc + 16 * h;
      v = _mm512_mul_ps(v, _mm512_set1_ps(fin->alpha));
      if (fin->beta != 0.f) v = _mm512_add_ps(v, _mm512_mul_ps(load16(cr), _mm512_set1_ps(fin->beta)));
      store16(cr, v);
    }
  }
}

#pragma GCC diagnostic pop
#pragma GCC pop_options

void pack_pairs(const uint16_t* x, int64_t rs, int64_t cs, int64_t rows, int64_t k, int64_t R, uint16_t* dst) {
  const int64_t kp = (k + 1) / 2, panels = (rows + R - 1) / R;
  parallel_for(0, panels, 4, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q)
      pack_panel(x + q * R * rs, rs, cs, std::min(R, rows - q * R), k, R, dst + q * kp * R * 2);
  });
}

}  // namespace

template <class Out>
void gemm_bf16_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda,
                      const BFloat16* b, int64_t ldb, float beta, Out* c, int64_t ldc) {
  const int64_t kp = (k + 1) / 2, mp = (m + kMr - 1) / kMr, np = (n + kNr - 1) / kNr;
  // op(b)^T is [n, k]: its element (j, p) is op(b)(p, j).
  Scratch<uint16_t> ap(mp * kp * kMr * 2), bp(np * kp * kNr * 2);
  const uint16_t* a16 = reinterpret_cast<const uint16_t*>(a);
  const uint16_t* b16 = reinterpret_cast<const uint16_t*>(b);
  pack_pairs(a16, ta ? 1 : lda, ta ? lda : 1, m, k, kMr, ap.get());
  pack_pairs(b16, tb ? ldb : 1, tb ? 1 : ldb, n, k, kNr, bp.get());

  // Tiles of C: up to 16 x 8 micro-tiles (192 x 256), smaller when that leaves threads idle,
  // splitting the panels evenly (15 + 15 + 14, not 16 + 16 + 12) so the threads finish
  // together. The tile shape never changes the arithmetic, only who does it.
  const int64_t threads = get_num_threads();
  auto ceil_div = [](int64_t x, int64_t y) { return (x + y - 1) / y; };
  auto even = [&](int64_t panels, int64_t most) { return ceil_div(panels, ceil_div(panels, most)); };
  int64_t tm = even(mp, 16), tn = even(np, 8);
  while (((mp + tm - 1) / tm) * ((np + tn - 1) / tn) < 2 * threads && (tm > 2 || tn > 1))
    (tm >= 2 * tn && tm > 2) ? tm = even(mp, (tm + 1) / 2) : tn = even(np, (tn + 1) / 2);
  const int64_t tiles_m = (mp + tm - 1) / tm, tiles_n = (np + tn - 1) / tn;
  const int64_t lds = tn * kNr;
  parallel_for(0, tiles_m * tiles_n, 1, [&](int64_t t0, int64_t t1) {
    Scratch<float> s(tm * kMr * lds);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pm0 = (t / tiles_n) * tm, pn0 = (t % tiles_n) * tn;
      const int64_t pm1 = std::min(mp, pm0 + tm), pn1 = std::min(np, pn0 + tn);
      for (int64_t q0 = 0; q0 < kp; q0 += kKc / 2) {
        const int64_t qn = std::min(kKc / 2, kp - q0);
        const bool last = q0 + qn == kp;
        for (int64_t pn = pn0; pn < pn1; ++pn) {
          const uint16_t* bpan = bp.get() + (pn * kp + q0) * kNr * 2;
          for (int64_t pm = pm0; pm < pm1; ++pm) {
            const int64_t i0 = pm * kMr, j0 = pn * kNr, rows = std::min(kMr, m - i0), cols = std::min(kNr, n - j0);
            float* st = s.get() + (pm - pm0) * kMr * lds + (pn - pn0) * kNr;
            const Final<Out> fin{c + i0 * ldc + j0, ldc, alpha, beta};
            const bool direct = last && rows == kMr && cols == kNr;  // a full micro-tile: straight to C
            micro_12x32<Out>(qn, ap.get() + (pm * kp + q0) * kMr * 2, bpan, st, lds, q0 > 0, direct ? &fin : nullptr);
            if (last && !direct) store_scaled(rows, cols, st, lds, alpha, beta, fin.c, ldc);
          }
        }
      }
    }
  });
}

template void gemm_bf16_avx512<float>(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t,
                                      const BFloat16*, int64_t, float, float*, int64_t);
template void gemm_bf16_avx512<BFloat16>(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t,
                                         const BFloat16*, int64_t, float, BFloat16*, int64_t);

}  // namespace flambeau::kernels
