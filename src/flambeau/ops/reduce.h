// Reduction planning shared by the reduction ops and softmax.
#pragma once
#include "flambeau/core/tensor.h"

namespace flambeau::ops {

// A reduction of `x` (contiguous, compute dtype) laid out as [outer, r, inner]; the result
// has out_shape (outer * inner elements).
struct ReducePlan {
  Tensor x;
  int64_t outer = 1, r = 1, inner = 1;
  Dims out_shape;
};

// How many elements of t each output of reducing `dims` (empty: all) sums.
int64_t reduced_count(const Tensor& t, const Dims& dims);

// The shape of reducing `dims` (empty: all) of t; checks the dims.
Dims reduced_shape(const char* op, const Tensor& t, const Dims& dims, bool keepdim);

// Plans reducing `dims` (empty: all) of t, converting it to `compute` first.
ReducePlan plan_reduction(const char* op, const Tensor& t, const Dims& dims, bool keepdim, DType compute);

// y_i = log sum_{j <= i} exp(x_j) of one row, in double (logcumsumexp and its backward).
void logcumsumexp_row(const double* x, double* y, int64_t n);

}  // namespace flambeau::ops
