// linear_cross_entropy: the language-model head fused with its loss, as PyTorch 2.13's
// torch.nn.functional.linear_cross_entropy, plus a z-loss. Included by functional.h.
#pragma once
#include <optional>
#include <string>

#include "flambeau/core/tensor.h"

namespace flambeau::nn::functional {

// cross_entropy(linear(input, linear_weight, linear_bias), target, weight, ignore_index,
// reduction, label_smoothing), plus z_loss * logsumexp(logits)^2 per counted row, computed
// without ever building the [N, num_classes] logits: rows are processed `chunk_size` at a
// time (chosen from the sizes and the cache when not given) and vocabulary tiles sized to
// the cache, accumulating in float32 (float64 for float64 inputs).
//
// input [N, in_features] or [in_features]; linear_weight [C, in_features] (input's dtype:
// float32, float64, bfloat16 or float16); linear_bias [C]; weight [C] per-class weights.
// target: class indices (integer, [N] or []; ignore_index marks rows that count for
// nothing) or class probabilities (floating, the logits' shape [N, C] or [C]).
// reduction "none" gives the loss per row; "mean" divides the sum by the total weight
// of the counted targets (class indices) or by N (probabilities), as cross_entropy.
//
// z-loss (PaLM): z_loss * lse_i^2 is added to row i's loss when the row is counted (not
// ignored), without the class weight; "mean" divides it by the same normaliser as the
// cross-entropy (the number of counted rows when there are no class weights).
//
// Gradients: with "mean" / "sum", the forward computes the gradients of input,
// linear_weight and linear_bias (those that require grad) in the same pass as the loss,
// and backward scales them by the upstream gradient (handing them over without a copy
// when it is 1). With "none", backward recomputes the logits chunk by chunk. Under no_grad,
// or when nothing requires grad, only the loss is computed and nothing is saved. A
// probability target or class weight that requires grad falls back to the composite
// reference (which differentiates them too).
Tensor linear_cross_entropy(const Tensor& input, const Tensor& linear_weight, const Tensor& target,
                            const std::optional<Tensor>& linear_bias = {}, const std::optional<Tensor>& weight = {},
                            const std::string& reduction = "mean", int64_t ignore_index = -100,
                            double label_smoothing = 0.0, double z_loss = 0.0,
                            std::optional<int64_t> chunk_size = {});

// The composite reference of linear_cross_entropy (linear, then cross_entropy, plus the
// z-loss from logsumexp), differentiated by autograd; builds the full logits.
Tensor linear_cross_entropy_reference(const Tensor& input, const Tensor& linear_weight, const Tensor& target,
                                      const std::optional<Tensor>& linear_bias = {},
                                      const std::optional<Tensor>& weight = {}, const std::string& reduction = "mean",
                                      int64_t ignore_index = -100, double label_smoothing = 0.0,
                                      double z_loss = 0.0);

}  // namespace flambeau::nn::functional
