// bfloat16 GEMM on AVX512-BF16 (vdpbf16ps): both operands are packed once into panels that
// interleave pairs of k (B: 32 columns a panel, A: 12 rows a panel, zero padded), then tiles of
// C are computed by a 12 x 32 register-blocked micro-kernel into a float32 scratch tile, k in
// blocks of kKc taken in ascending order, and rounded once in the epilogue.
// Only gemm16.cpp calls in, and only on CPUs with AVX512-BF16 (Note [16-bit GEMM paths]).
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/gemm16_internal.h"

namespace flambeau::kernels {
namespace {

constexpr int64_t kMr = 12, kNr = 32;  // micro-tile of C
constexpr int64_t kKc = 384;           // k per block (even); the sum over k visits blocks in order

// A 64-byte aligned float/uint16 buffer.
template <class T>
struct Buffer {
  explicit Buffer(int64_t n) : p(static_cast<T*>(::operator new[](size_t(n) * sizeof(T), std::align_val_t(64)))) {}
  ~Buffer() { ::operator delete[](p, std::align_val_t(64)); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* p;
};

// Packs op(x) (element (i, p) at x[i * rs + p * cs]) for rows [0, rows) into panels of R rows:
// panel q holds, for each pair of k, R x 2 values (i, 2t), (i, 2t + 1). kp = ceil(k / 2).
// Rows and k beyond the matrix are zero.
void pack_pairs(const uint16_t* x, int64_t rs, int64_t cs, int64_t rows, int64_t k, int64_t R, uint16_t* dst) {
  const int64_t kp = (k + 1) / 2, panels = (rows + R - 1) / R;
  parallel_for(0, panels, 4, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      uint16_t* d = dst + q * kp * R * 2;
      const int64_t r0 = q * R, nr = std::min(R, rows - r0);
      if (nr < R || (k & 1)) std::memset(d, 0, size_t(kp * R * 2) * sizeof(uint16_t));
      for (int64_t r = 0; r < nr; ++r) {
        const uint16_t* src = x + (r0 + r) * rs;
        if (cs == 1) {
          for (int64_t t = 0; t < k / 2; ++t) std::memcpy(d + (t * R + r) * 2, src + 2 * t, 4);
          if (k & 1) d[((k / 2) * R + r) * 2] = src[k - 1];
        } else {
          for (int64_t p = 0; p < k; ++p) d[((p >> 1) * R + r) * 2 + (p & 1)] = src[p * cs];
        }
      }
    }
  });
}

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")

// c[12 x 32] (+)= a-panel[kp pairs] . b-panel[kp pairs]; c row stride ldc (floats).
void micro_12x32(int64_t kp, const uint16_t* a, const uint16_t* b, float* c, int64_t ldc, bool accumulate) {
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
    float* cr = c + r * ldc;
    if (accumulate) {
      acc[r][0] = _mm512_add_ps(_mm512_load_ps(cr), acc[r][0]);
      acc[r][1] = _mm512_add_ps(_mm512_load_ps(cr + 16), acc[r][1]);
    }
    _mm512_store_ps(cr, acc[r][0]);
    _mm512_store_ps(cr + 16, acc[r][1]);
  }
}

#pragma GCC pop_options

// The scratch tile s (fp32, row stride lds) into c: c = Out(alpha * s + beta * c).
template <class Out>
void store_tile(int64_t rows, int64_t cols, const float* s, int64_t lds, float alpha, float beta, Out* c,
                int64_t ldc) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const float v = alpha * s[i * lds + j];
      c[i * ldc + j] = Out(beta != 0.f ? v + beta * float(c[i * ldc + j]) : v);
    }
}

}  // namespace

template <class Out>
void gemm_bf16_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda,
                      const BFloat16* b, int64_t ldb, float beta, Out* c, int64_t ldc) {
  const int64_t kp = (k + 1) / 2, mp = (m + kMr - 1) / kMr, np = (n + kNr - 1) / kNr;
  // op(b)^T is [n, k]: its element (j, p) is op(b)(p, j).
  Buffer<uint16_t> ap(mp * kp * kMr * 2), bp(np * kp * kNr * 2);
  const uint16_t* a16 = reinterpret_cast<const uint16_t*>(a);
  const uint16_t* b16 = reinterpret_cast<const uint16_t*>(b);
  pack_pairs(a16, ta ? 1 : lda, ta ? lda : 1, m, k, kMr, ap.p);
  pack_pairs(b16, tb ? ldb : 1, tb ? 1 : ldb, n, k, kNr, bp.p);

  // Tiles of C: up to 16 x 8 micro-tiles (192 x 256), smaller when that leaves threads idle.
  // The tile shape never changes the arithmetic, only who does it.
  const int64_t threads = get_num_threads();
  int64_t tm = std::min<int64_t>(16, mp), tn = std::min<int64_t>(8, np);
  while (((mp + tm - 1) / tm) * ((np + tn - 1) / tn) < 2 * threads && (tm > 2 || tn > 1))
    (tm >= 2 * tn && tm > 2) ? tm = (tm + 1) / 2 : tn = (tn + 1) / 2;
  const int64_t tiles_m = (mp + tm - 1) / tm, tiles_n = (np + tn - 1) / tn;
  const int64_t lds = tn * kNr;
  parallel_for(0, tiles_m * tiles_n, 1, [&](int64_t t0, int64_t t1) {
    Buffer<float> s(tm * kMr * lds);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t pm0 = (t / tiles_n) * tm, pn0 = (t % tiles_n) * tn;
      const int64_t pm1 = std::min(mp, pm0 + tm), pn1 = std::min(np, pn0 + tn);
      for (int64_t q0 = 0; q0 < kp; q0 += kKc / 2) {
        const int64_t qn = std::min(kKc / 2, kp - q0);
        for (int64_t pn = pn0; pn < pn1; ++pn) {
          const uint16_t* bpan = bp.p + (pn * kp + q0) * kNr * 2;
          for (int64_t pm = pm0; pm < pm1; ++pm)
            micro_12x32(qn, ap.p + (pm * kp + q0) * kMr * 2, bpan, s.p + (pm - pm0) * kMr * lds + (pn - pn0) * kNr,
                        lds, q0 > 0);
        }
      }
      const int64_t i0 = pm0 * kMr, j0 = pn0 * kNr;
      store_tile(std::min(m, pm1 * kMr) - i0, std::min(n, pn1 * kNr) - j0, s.p, lds, alpha, beta, c + i0 * ldc + j0,
                 ldc);
    }
  });
}

template void gemm_bf16_avx512<float>(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t,
                                      const BFloat16*, int64_t, float, float*, int64_t);
template void gemm_bf16_avx512<BFloat16>(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t,
                                         const BFloat16*, int64_t, float, BFloat16*, int64_t);

}  // namespace flambeau::kernels
