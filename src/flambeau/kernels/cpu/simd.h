// SIMD kernels on contiguous arrays, compiled for several instruction sets (Highway) and
// picked at run time for the machine's CPU. Ops see only float or double arrays; other
// dtypes are converted around them by the elementwise engine.
#pragma once
#include <cstdint>

#include "flambeau/core/half.h"
#include "flambeau/core/op_list.h"

namespace flambeau::kernels {

enum class UnaryOp : uint8_t {
#define FLB_ENUM(name, kind, ...) name,
  FLB_UNARY_OPS(FLB_ENUM)
#undef FLB_ENUM
  gelu_erf,
  gelu_tanh,
};
void unary_f32(UnaryOp op, const float* x, float* y, int64_t n);
void unary_f64(UnaryOp op, const double* x, double* y, int64_t n);

// The binary ops with SIMD kernels; maximum/minimum propagate NaN.
enum class SimdBinaryOp : uint8_t { add, sub, mul, div, maximum, minimum };
void binary_f32(SimdBinaryOp op, const float* a, const float* b, float* y, int64_t n);
void binary_f64(SimdBinaryOp op, const double* a, const double* b, double* y, int64_t n);

void f32_to_bf16(const float* x, BFloat16* y, int64_t n);
void bf16_to_f32(const BFloat16* x, float* y, int64_t n);
void f32_to_f16(const float* x, Half* y, int64_t n);
void f16_to_f32(const Half* x, float* y, int64_t n);

// Reductions of a contiguous array, in a fixed order (the same result on every call).
// Sums accumulate in double beyond blocks of 512 elements (kBlock in simd_reduce.cpp).
double sum_f32(const float* x, int64_t n);
// sum_f32 of x[i] * x[i] without storing them (the same bits).
double sum_sq_f32(const float* x, int64_t n);
double sum_f64(const double* x, int64_t n);
// NaN if any element is NaN; -inf (max) / +inf (min) for n == 0.
float max_f32(const float* x, int64_t n);
double max_f64(const double* x, int64_t n);
float min_f32(const float* x, int64_t n);
double min_f64(const double* x, int64_t n);

// x = exp(x - shift) in place, returning the sum of the results (a softmax numerator).
double exp_shift_sum_f32(float* x, int64_t n, float shift);
double exp_shift_sum_f64(double* x, int64_t n, double shift);

// The two above by overload, for kernels templated on float / double.
inline float max_of(const float* x, int64_t n) { return max_f32(x, n); }
inline double max_of(const double* x, int64_t n) { return max_f64(x, n); }
inline double exp_shift_sum(float* x, int64_t n, float shift) { return exp_shift_sum_f32(x, n, shift); }
inline double exp_shift_sum(double* x, int64_t n, double shift) { return exp_shift_sum_f64(x, n, shift); }

// softmax (or log_softmax) of one contiguous row.
void softmax_row_f32(const float* x, float* y, int64_t n, bool log);
void softmax_row_f64(const double* x, double* y, int64_t n, bool log);

}  // namespace flambeau::kernels
