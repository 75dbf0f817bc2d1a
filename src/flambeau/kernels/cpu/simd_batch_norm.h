// Channels-last batch_norm kernels (nn/batch_norm.cpp), Highway with run-time dispatch. Each
// call takes `rows` contiguous rows of `channels` values (channels-last: one image position's
// channels side by side); arrays indexed by channel (centre, sums, scale, ...) have
// `channels` entries. A sum over the rows follows Note [Batch norm order] in
// nn/batch_norm.cpp: row r goes to double lane r % 8, one sum per lane in row order, the lanes
// added as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)). All arithmetic is double and unfused,
// so the bits are those of the row-major loops there.
#pragma once
#include <cstdint>

namespace flambeau::kernels {

// sums[c] = the sum of x (centre null) or of (x - centre[c])^2 over channel c.
void batch_norm_cl_sums(const float* x, int64_t rows, int64_t channels, const double* centre, double* sums);
void batch_norm_cl_sums(const double* x, int64_t rows, int64_t channels, const double* centre, double* sums);
// sum_dy[c] = the sum of dy, sum_dy_xc[c] = the sum of dy * (x - centre[c]).
void batch_norm_cl_grad_sums(const float* x, const float* dy, int64_t rows, int64_t channels, const double* centre,
                             double* sum_dy, double* sum_dy_xc);
void batch_norm_cl_grad_sums(const double* x, const double* dy, int64_t rows, int64_t channels, const double* centre,
                             double* sum_dy, double* sum_dy_xc);
// y = x * scale[c] + shift[c].
void batch_norm_cl_affine(const float* x, int64_t rows, int64_t channels, const double* scale, const double* shift,
                          float* y);
void batch_norm_cl_affine(const double* x, int64_t rows, int64_t channels, const double* scale, const double* shift,
                          double* y);
// dx = (dy - a[c] - (x - mean[c]) * rstd[c] * k[c]) * scale[c].
struct BatchNormGradCoefficients {
  const double *mean, *rstd, *a, *k, *scale;
};
void batch_norm_cl_dx(const float* x, const float* dy, int64_t rows, int64_t channels,
                      const BatchNormGradCoefficients& q, float* dx);
void batch_norm_cl_dx(const double* x, const double* dy, int64_t rows, int64_t channels,
                      const BatchNormGradCoefficients& q, double* dx);

}  // namespace flambeau::kernels
