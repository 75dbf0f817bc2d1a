// Entry points shared by gemm16.cpp and the ISA-specific 16-bit GEMM kernels.
#pragma once
#include <cstdint>

#include "flambeau/core/allocator.h"
#include "flambeau/core/half.h"

namespace flambeau::kernels {

// Uninitialised scratch from flambeau's caching allocator (64-byte aligned; a block reused
// from the cache costs no page faults).
template <class T>
class Scratch {
 public:
  explicit Scratch(int64_t n) : bytes_(size_t(n) * sizeof(T)), p_(static_cast<T*>(memory::allocate(bytes_))) {}
  ~Scratch() { memory::release(p_, bytes_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return p_; }

 private:
  size_t bytes_;
  T* p_;
};

// The AVX512-BF16 kernel (gemm16_avx512.cpp): same contract as gemm16, m, n, k > 0. Only call
// it where cpu_info() reports AVX512-BF16 and AVX-512 core.
template <class Out>
void gemm_bf16_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const BFloat16* a,
                      int64_t lda, const BFloat16* b, int64_t ldb, float beta, Out* c, int64_t ldc);

// c[i, j] = Out(alpha * s[i, j] + beta * c[i, j]) for an m x n block (s row stride lds),
// rounded once; beta == 0 never reads c. Out is float, BFloat16 or Half.
template <class Out>
void store_scaled(int64_t m, int64_t n, const float* s, int64_t lds, float alpha, float beta, Out* c, int64_t ldc);

// The portable path: op(a), op(b) widened to float32, then the float32 GEMM (gemm_f32).
template <class T, class Out>
void gemm16_widened(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                    int64_t lda, const T* b, int64_t ldb, float beta, Out* c, int64_t ldc);

}  // namespace flambeau::kernels
