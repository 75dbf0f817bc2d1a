// scaled_dot_product_attention (torch.nn.functional's): a tiled, flash-style CPU kernel
// that never builds the L x S score matrix: online softmax over key tiles forward, and a
// backward that recomputes the scores from the saved logsumexp. Deterministic: every
// gradient element is summed in a fixed order whatever the thread count.
#pragma once
#include <optional>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::nn {

// q [..., Hq, L, E], k [..., Hkv, S, E], v [..., Hkv, S, Ev] (or 3-D [..., L, E]);
// attn_mask: bool (true: attend) or additive float, broadcastable to [..., Hq, L, S];
// is_causal: query i sees keys j <= i (top-left aligned, as PyTorch); scale defaults to
// 1/sqrt(E); enable_gqa lets Hq be a multiple of Hkv. dropout_p > 0 takes the
// (differentiable) composite path. float32 and float64. Rows that can see no key give 0.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false, std::optional<double> scale = {},
                                    bool enable_gqa = false);

// The same, its fused path calling the two ops below itself (the op hook reports them when
// this is called outside any op: what compiled training traces, so the backward is an op).
Tensor scaled_dot_product_attention_decomposed(const Tensor& q, const Tensor& k, const Tensor& v,
                                               const std::optional<Tensor>& attn_mask, double dropout_p,
                                               bool is_causal, std::optional<double> scale, bool enable_gqa);

// The fused kernel (float32, float64; no dropout, no gradient to the mask): {out, logsumexp
// [B, Hq, L, 2] (row max, log of the row sum)} with leading dims folded into B, and its
// backward from them: {dq, dk, dv}.
std::vector<Tensor> scaled_dot_product_flash_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                                       const std::optional<Tensor>& attn_mask, bool is_causal,
                                                       double scale);
std::vector<Tensor> scaled_dot_product_flash_attention_backward(const Tensor& grad_out, const Tensor& q,
                                                                const Tensor& k, const Tensor& v, const Tensor& out,
                                                                const Tensor& lse,
                                                                const std::optional<Tensor>& attn_mask,
                                                                bool is_causal, double scale);

}  // namespace flambeau::nn
