// Shape helpers: Dims (sizes or strides), numel, contiguous strides, dim wrapping,
// broadcasting and printing "(3, 4)".
#pragma once
#include <cstdint>
#include <string>

#include "flambeau/core/small_vector.h"

namespace flambeau {

using Dims = SmallVec<int64_t, 6>;

int64_t numel_of(const Dims& shape);
Dims contiguous_strides(const Dims& shape);
std::string shape_str(const Dims& shape);  // "(3, 4)", "(5,)", "()"
// Maps a possibly negative dim into [0, ndim); raises IndexError naming `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// The broadcast shape of a and b; raises ValueError naming `op` when they do not broadcast.
Dims broadcast_shapes(const Dims& a, const Dims& b, const char* op);

}  // namespace flambeau
