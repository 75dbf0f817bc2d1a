// Shared machinery of the indexing ops (index.cpp, mask.cpp, advanced_index.cpp): index
// validation, restrided views, and the two kernels every indexing op reduces to: a read
// at per-element offsets (gather) and a write at per-element offsets (put).
#pragma once
#include "flambeau/ops/elementwise.h"

namespace flambeau::ops {

// `index` as a contiguous int64 tensor; TypeError unless it is int64 (or int32 when
// `allow_int32`).
Tensor index_to_int64(const char* op, const Tensor& index, bool allow_int32);

// Raises "[op] index 7 is out of bounds for dimension 1 with size 5" for the first
// (row-major) element of `index64` (contiguous int64) outside [0, size), or outside
// [-size, size) when `wrap`. Returns whether any element is negative.
bool check_index_range(const char* op, const Tensor& index64, int64_t dim, int64_t size, bool wrap);

// index64 with negative entries moved up by `size` (itself when none is negative).
Tensor wrap_negative(const Tensor& index64, int64_t size, bool has_negative);

// A view of t's storage with the given geometry (no bounds check: callers guarantee it).
Tensor restride(const Tensor& t, const Dims& sizes, const Dims& strides, int64_t offset);

// out[p] = element at (address of src[p]) + offsets[p] * scale bytes, for every position p
// of out; src and offsets (int64) are views of out's shape.
void gather_with_offsets(const Tensor& out, const Tensor& src, const Tensor& offsets, int64_t scale);

// The mirror write: element at (address of dst[p]) + offsets[p] * scale bytes = values[p]
// (added to it when `accumulate`, then serially in a fixed order so that repeated
// offsets sum deterministically). values has dst's dtype; all three share one shape.
void put_with_offsets(const Tensor& dst, const Tensor& values, const Tensor& offsets, int64_t scale,
                      bool accumulate);

// Row-major flat positions (int64, 1-D) of the nonzero elements of t.
Tensor nonzero_flat(const Tensor& t);

// The unsigned integer type of a dtype's width, for moving elements as bits.
template <class F>
decltype(auto) visit_bits(DType dtype, F&& f) {
  switch (itemsize(dtype)) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    default: return f.template operator()<uint64_t>();
  }
}

}  // namespace flambeau::ops
