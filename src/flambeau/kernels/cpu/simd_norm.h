// Row kernels of LayerNorm and RMSNorm (nn/normalization.cpp), Highway with run-time
// dispatch. One call handles one contiguous row of n elements; sums use a fixed order, so
// a row always gives the same bits.
#pragma once
#include <cstdint>

namespace flambeau::kernels {

// y = (x - mean) * rstd * w + b, with mean and rstd = 1 / sqrt(var + eps) of the row
// written to *mean and *rstd. rms: the mean is taken as 0 (var is then the mean square).
// w and b may be null (no scale, no shift).
void norm_row_forward(const float* x, const float* w, const float* b, float* y, int64_t n, bool rms, double eps,
                      float* mean, float* rstd);
void norm_row_forward(const double* x, const double* w, const double* b, double* y, int64_t n, bool rms,
                      double eps, double* mean, double* rstd);

// The backward of one row, from the saved mean and rstd: with xhat = (x - mean) * rstd and
// g = dy * w, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) (rms: without mean(g)).
// Adds dy * xhat into dw_acc and dy into db_acc. dx, w, dw_acc, db_acc may be null.
void norm_row_backward(const float* x, const float* dy, const float* w, float mean, float rstd, int64_t n, bool rms,
                       float* dx, float* dw_acc, float* db_acc);
void norm_row_backward(const double* x, const double* dy, const double* w, double mean, double rstd, int64_t n,
                       bool rms, double* dx, double* dw_acc, double* db_acc);

}  // namespace flambeau::kernels
