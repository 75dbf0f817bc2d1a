// The channels-last max pooling kernel (kernels/cpu/pool.cpp), Highway with run-time
// dispatch: one output position, its channels side by side.
#pragma once
#include <cstdint>

namespace flambeau::kernels {

// For each channel c < channels: y[c] = the maximum of x[at * channels + c] over the window
// positions at = positions[0 .. count) in order, idx[c] = the position that gave it (NaN
// wins, a later NaN over an earlier one; ties: the first), as window_max in pool.cpp does;
// -inf and `first` for an empty window. Positions must be below 2^31.
void max_pool_channels_last_output(const float* x, const int64_t* positions, int64_t count, int64_t first,
                                   int64_t channels, float* y, int64_t* idx);
void max_pool_channels_last_output(const double* x, const int64_t* positions, int64_t count, int64_t first,
                                   int64_t channels, double* y, int64_t* idx);

}  // namespace flambeau::kernels
