// The chunked CPU kernel behind nn::functional::linear_cross_entropy (internal). It never
// builds the [N, V] logits: rows are taken `chunk` at a time, and each chunk's logits are
// computed, reduced and turned into gradients tile by tile in one [chunk, V] buffer. See
// Note [Chunked linear cross-entropy] in linear_cross_entropy_kernel.cpp.
#pragma once
#include "flambeau/core/tensor.h"

namespace flambeau::nn::detail {

struct LceArgs {
  Tensor x;             // [N, D] contiguous; float32, float64, bfloat16 or float16
  Tensor w;             // [V, D] contiguous, x's dtype
  Tensor bias;          // [V] contiguous in the compute dtype, or undefined
  Tensor target;        // [N] int64 class indices, -1 for ignored rows (used when probs is undefined)
  Tensor probs;         // [N, V] contiguous class probabilities in the compute dtype, or undefined
  Tensor class_weight;  // [V] contiguous in the compute dtype, or undefined
  // [N] in the compute dtype: d(result)/d(loss_i), 0 for ignored rows. Undefined: loss only.
  Tensor row_scale;
  double label_smoothing = 0, z_loss = 0;
  int64_t chunk = 0;  // rows per chunk; 0 picks lce_auto_chunk
  int64_t vocab_tile = 0;  // columns per vocabulary tile; 0: about 2 MiB worth of float32
  bool want_grad_x = false, want_grad_w = false, want_grad_b = false;
};

struct LceResult {
  Tensor loss_rows;  // [N] in the compute dtype: each row's loss (0 for ignored rows)
  double loss_sum = 0;  // their sum in double, in row order
  Tensor grad_x, grad_w, grad_b;  // in the compute dtype, when asked for
};

// The compute dtype: float64 for float64 inputs, float32 otherwise.
DType lce_compute_dtype(DType input);

// Rows per chunk: the [chunk, V] logits buffer gets about twice as big as the input x (at
// least 32 MiB worth of float32), between 16 and 256 rows. At N 8192, D 2048, V 131072 that
// is 256 rows, 128 MiB: 6% over the floor of x, W and their gradients.
int64_t lce_auto_chunk(int64_t N, int64_t D, int64_t V);

LceResult lce_chunked(const LceArgs& args);

}  // namespace flambeau::nn::detail
