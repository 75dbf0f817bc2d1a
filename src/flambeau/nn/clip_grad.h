// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_).
#pragma once
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::nn::utils {

// Scales every gradient by min(1, max_norm / (total + 1e-6)), where total is the norm of
// the vector of the gradients' norms (order norm_type), as torch; returns total (0-dim).
// Parameters without a gradient are skipped.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0);
// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace flambeau::nn::utils
