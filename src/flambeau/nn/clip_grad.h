// Gradient clipping (torch.nn.utils.clip_grad_norm_ / clip_grad_value_).
#pragma once
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::nn::utils {

// Scales every gradient by min(1, max_norm / (total + 1e-6)), where total is the norm of
// the vector of the gradients' norms (order norm_type), as torch; returns total (0-dim).
// Parameters without a gradient are skipped.
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0);
// Its two halves (torch.nn.utils.get_total_norm / clip_grads_with_norm_), for a total
// norm combined across processes in between (FSDP's shards): the norm of the tensors'
// norms (0-dim; 0 for none), and the scaling of the gradients by min(1, max_norm /
// (total_norm + 1e-6)).
Tensor get_total_norm(const std::vector<Tensor>& tensors, double norm_type = 2.0);
void clip_grads_with_norm_(const std::vector<Tensor>& parameters, double max_norm, const Tensor& total_norm);
// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace flambeau::nn::utils
