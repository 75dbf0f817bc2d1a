// 16-bit GEMM (bfloat16 / float16 operands, float32 accumulation): the one entry point that
// matmul, linear, attention and the fused losses use for 16-bit products. The kernel is
// chosen once per process from the CPU's capabilities (AMX, AVX512-BF16, AVX512-FP16, or a
// float32 path); gemm16_backend() names it.
//
// Determinism: the work is split over m and n only, each element's sum over k runs in one
// fixed order, so results are bitwise identical with 1 or N threads.
#pragma once
#include <cstdint>

#include "flambeau/core/half.h"

namespace flambeau::kernels {

// c[m, n] = alpha * op(a) @ op(b) + beta * c, row-major; op(x) = x^T when its flag is set
// (a is [m, k] or, transposed, stored [k, m] with leading dimension lda; likewise b).
// T is BFloat16 or Half; Out is float, BFloat16 or Half (rounded once, after the epilogue).
// beta == 0 never reads c. Runs on flambeau's threads unless called inside a parallel region.
template <class T, class Out>
void gemm16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda,
            const T* b, int64_t ldb, float beta, Out* c, int64_t ldc);

// True when bfloat16 (is_bf16) or float16 products run on 16-bit hardware here, not widened.
bool gemm16_native(bool is_bf16);

// Which kernel runs 16-bit GEMMs of this element type here ("AVX512-BF16", "float32 (AVX2)", ...).
const char* gemm16_backend(bool is_bf16);

}  // namespace flambeau::kernels
