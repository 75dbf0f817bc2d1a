// Shape helpers: Dims (sizes or strides), numel, contiguous strides, dim wrapping,
// broadcasting and printing "(3, 4)".
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "flambeau/core/small_vector.h"

namespace flambeau {

using Dims = SmallVec<int64_t, 6>;

int64_t numel_of(const Dims& shape);
// Overflow-checked size arithmetic (Note [Size overflow]): a*b and a+b, raising ValueError
// "[op] ... overflows int64" instead of wrapping.
int64_t mul_size(int64_t a, int64_t b, const char* op);
int64_t add_size(int64_t a, int64_t b, const char* op);
// numel of a shape being made: raises ValueError naming `op` for a negative size or a
// product that overflows int64.
int64_t checked_numel(const Dims& shape, const char* op);
// checked_numel(shape) * itemsize as a byte count, checked the same way.
size_t checked_nbytes(const Dims& shape, size_t itemsize, const char* op);
Dims contiguous_strides(const Dims& shape);
std::string shape_str(const Dims& shape);  // "(3, 4)", "(5,)", "()"
// Maps a possibly negative dim into [0, ndim); raises IndexError naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// [begin, end) that slice(start, end) picks from a dim of size n: negative bounds count from
// the end, both are clamped to [0, n], and end is at least begin.
std::pair<int64_t, int64_t> slice_bounds(int64_t n, std::optional<int64_t> start, std::optional<int64_t> end);
// The broadcast shape of a and b; raises ValueError naming `op` when they do not broadcast.
Dims broadcast_shapes(const Dims& a, const Dims& b, const char* op);

}  // namespace flambeau
