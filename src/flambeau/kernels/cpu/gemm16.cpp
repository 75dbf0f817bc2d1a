// 16-bit GEMM: picks the kernel for this CPU once (Note [16-bit GEMM paths]) and runs it over
// tiles of C on flambeau's threads. The float32 path widens the operands and runs the float32
// GEMM; the AVX512-BF16 kernel lives in gemm16_avx512.cpp; AMX goes through oneDNN.
#include "flambeau/kernels/cpu/gemm16.h"

#include <omp.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "flambeau/core/cpu_info.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/kernels/cpu/gemm16_internal.h"
#include "flambeau/kernels/cpu/gemm_bf16.h"
#include "flambeau/kernels/cpu/simd.h"

namespace flambeau::kernels {

// Note [16-bit GEMM paths]
// - AMX-BF16 (Intel Sapphire Rapids and later, once Linux grants the tile permission):
//   oneDNN's matmul, called on fixed row tiles, each on one thread (so its blocking, and the
//   bits of the result, do not depend on the thread count). Never called with an empty
//   dimension (oneDNN 2.6 dies with SIGFPE there on AMX).
// - AVX512-BF16 (Zen 4, Cooper Lake, Sapphire Rapids without the AMX permission): flambeau's
//   own packed kernel (gemm16_avx512.cpp), vdpbf16ps on pairs of k.
// - Everything else, and float16 everywhere: widen to float32 and run the float32 GEMM. No
//   x86 CPU before AMX-FP16 / AVX10.2 has a float16 dot product that accumulates in float32
//   (AVX512-FP16's FMAs accumulate in float16), so float32 is also the fastest exact path.
// The path depends only on the CPU, and each path splits C over m and n only, with the sum
// over k in one fixed order: bitwise identical results with 1 or N threads.
namespace {

enum class Path { kAmxOneDnn, kAvx512Bf16, kFloat32 };

Path bf16_path() {
  static const Path path = [] {
    const CpuInfo& c = cpu_info();
    if (c.can_amx_bf16() && onednn_built()) return Path::kAmxOneDnn;
    if (c.avx512_bf16 && c.has_avx512_core()) return Path::kAvx512Bf16;
    return Path::kFloat32;
  }();
  return path;
}

// Keeps OpenMP libraries called from here (oneDNN) on the calling thread.
class OneOmpThread {
 public:
  OneOmpThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOmpThread() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

void widen_row(const BFloat16* x, float* y, int64_t n) { bf16_to_f32(x, y, n); }
void widen_row(const Half* x, float* y, int64_t n) { f16_to_f32(x, y, n); }
void round_row(const float* x, BFloat16* y, int64_t n) { f32_to_bf16(x, y, n); }
void round_row(const float* x, Half* y, int64_t n) { f32_to_f16(x, y, n); }

// The stored matrix x ([rows, cols], row stride ld) widened to a dense float32 one, a row at a time.
template <class T>
void widen(int64_t rows, int64_t cols, const T* x, int64_t ld, float* out) {
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) widen_row(x + i * ld, out + i * cols, cols);
  });
}

}  // namespace

template <class Out>
void store_scaled(int64_t m, int64_t n, const float* s, int64_t lds, float alpha, float beta, Out* c, int64_t ldc) {
  std::vector<float> row(std::is_same_v<Out, float> ? 0 : size_t(n));
  for (int64_t i = 0; i < m; ++i) {
    const float* si = s + i * lds;
    Out* ci = c + i * ldc;
    if constexpr (std::is_same_v<Out, float>) {
      for (int64_t j = 0; j < n; ++j) ci[j] = beta != 0.f ? alpha * si[j] + beta * ci[j] : alpha * si[j];
    } else {
      for (int64_t j = 0; j < n; ++j) row[size_t(j)] = beta != 0.f ? alpha * si[j] + beta * float(ci[j]) : alpha * si[j];
      round_row(row.data(), ci, n);
    }
  }
}

// store_scaled over all m rows of a dense s ([m, n]), on flambeau's threads.
template <class Out>
void store_all(int64_t m, int64_t n, const float* s, float alpha, float beta, Out* c, int64_t ldc) {
  parallel_for(0, m, std::max<int64_t>(1, 16384 / n), [&](int64_t r0, int64_t r1) {
    store_scaled(r1 - r0, n, s + r0 * n, n, alpha, beta, c + r0 * ldc, ldc);
  });
}

template <class T, class Out>
void gemm16_widened(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
                    const T* b, int64_t ldb, float beta, Out* c, int64_t ldc) {
  // The stored matrices are widened as they are; the float32 GEMM applies the transposes.
  const Scratch<float> af(m * k), bf(k * n);
  widen(ta ? k : m, ta ? m : k, a, lda, af.get());
  widen(tb ? n : k, tb ? k : n, b, ldb, bf.get());
  const int64_t lda32 = ta ? m : k, ldb32 = tb ? k : n;
  if constexpr (std::is_same_v<Out, float>) {
    gemm_f32(ta, tb, m, n, k, alpha, af.get(), lda32, bf.get(), ldb32, beta, c, ldc);
  } else {
    const Scratch<float> s(m * n);
    gemm_f32(ta, tb, m, n, k, 1.f, af.get(), lda32, bf.get(), ldb32, 0.f, s.get(), n);
    store_all(m, n, s.get(), alpha, beta, c, ldc);
  }
}

namespace {

// AMX through oneDNN on row tiles of 256 (false: oneDNN declined; nothing was written).
template <class Out>
bool gemm16_amx(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a, int64_t lda,
                const BFloat16* b, int64_t ldb, float beta, Out* c, int64_t ldc) {
  constexpr int64_t kRows = 256;
  const int64_t tiles = (m + kRows - 1) / kRows;
  const Scratch<float> s(m * n);
  std::vector<char> ok(size_t(tiles), 0);
  const int64_t a_row = ta ? 1 : lda, a_col = ta ? lda : 1, b_row = tb ? 1 : ldb, b_col = tb ? ldb : 1;
  parallel_for(0, tiles, 1, [&](int64_t t0, int64_t t1) {
    const OneOmpThread one;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i0 = t * kRows, rows = std::min(kRows, m - i0);
      ok[size_t(t)] = bf16_gemm_onednn(a + i0 * a_row, a_row, a_col, b, b_row, b_col, s.get() + i0 * n, rows, k, n);
    }
  });
  if (std::find(ok.begin(), ok.end(), 0) != ok.end()) return false;
  store_all(m, n, s.get(), alpha, beta, c, ldc);
  return true;
}

}  // namespace

template <class T, class Out>
void gemm16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
            const T* b, int64_t ldb, float beta, Out* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // an empty sum: c = beta * c (beta == 0 never reads c)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = Out(beta != 0.f ? beta * float(c[i * ldc + j]) : 0.f);
    return;
  }
  if constexpr (std::is_same_v<T, BFloat16>) {
    const Path path = bf16_path();
    if (path == Path::kAmxOneDnn && gemm16_amx(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
    if (path != Path::kFloat32)
      return gemm_bf16_avx512(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  gemm16_widened(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

bool gemm16_native(bool is_bf16) { return is_bf16 && bf16_path() != Path::kFloat32; }

const char* gemm16_backend(bool is_bf16) {
  if (!is_bf16) return cpu_info().f16c ? "float32 GEMM (F16C conversion)" : "float32 GEMM";
  switch (bf16_path()) {
    case Path::kAmxOneDnn: return "oneDNN AMX-BF16";
    case Path::kAvx512Bf16: return "flambeau AVX512-BF16";
    default: return "float32 GEMM (no AVX512-BF16 or AMX)";
  }
}

#define FLB_GEMM16(T, Out)                                                                                   \
  template void gemm16<T, Out>(bool, bool, int64_t, int64_t, int64_t, float, const T*, int64_t, const T*, \
                               int64_t, float, Out*, int64_t);                                         \
  template void gemm16_widened<T, Out>(bool, bool, int64_t, int64_t, int64_t, float, const T*, int64_t, \
                                       const T*, int64_t, float, Out*, int64_t);
FLB_GEMM16(BFloat16, float)
FLB_GEMM16(BFloat16, BFloat16)
FLB_GEMM16(Half, float)
FLB_GEMM16(Half, Half)
#undef FLB_GEMM16
template void store_scaled<float>(int64_t, int64_t, const float*, int64_t, float, float, float*, int64_t);
template void store_scaled<BFloat16>(int64_t, int64_t, const float*, int64_t, float, float, BFloat16*, int64_t);
template void store_scaled<Half>(int64_t, int64_t, const float*, int64_t, float, float, Half*, int64_t);

}  // namespace flambeau::kernels
