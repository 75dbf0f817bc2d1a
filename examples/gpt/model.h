// The GPT of flambeau-gpt: token embedding, rotary position embeddings, pre-norm blocks of
// RMSNorm + causal FlexAttention with document masking (optionally a sliding window) and
// RMSNorm + SwiGLU MLP, a final RMSNorm, and an LM head tied to the embedding whose loss is
// the fused linear_cross_entropy (never builds the logits).
#pragma once
#include <array>
#include <memory>
#include <vector>

#include "config.h"
#include "flambeau/nn/flex_attention.h"
#include "flambeau/nn/modules.h"

namespace gpt {

struct Block : flambeau::nn::Module {
  Block(const Config& c);
  std::shared_ptr<flambeau::nn::RMSNorm> attn_norm, mlp_norm;
  std::shared_ptr<flambeau::nn::Linear> wq, wk, wv, wo, w_gate, w_up, w_down;
};

// Keys and values of every layer for positions [0, length) of one sequence (decoding).
struct KVCache {
  std::vector<flambeau::Tensor> k, v;  // per layer [1, H, capacity, head_dim]
  int64_t length = 0;
};

class Gpt : public flambeau::nn::Module {
 public:
  explicit Gpt(const Config& c);
  // Weights from N(0, 0.02) (output projections scaled by 1/sqrt(2 n_layer)), norms at 1,
  // drawn from `seed`.
  void init_weights(uint64_t seed);
  // Final hidden states [B, T, d] of inputs [B, T] whose tokens attend within their document.
  flambeau::Tensor hidden(const flambeau::Tensor& inputs, const flambeau::Tensor& doc_ids);
  // Mean cross-entropy of the next-token targets plus z_loss * logsumexp^2 (fused head).
  flambeau::Tensor loss(const flambeau::Tensor& inputs, const flambeau::Tensor& targets,
                        const flambeau::Tensor& doc_ids, double z_loss);
  // Logits [V] of the next token after feeding `token` at position cache.length.
  flambeau::Tensor decode_step(int64_t token, KVCache& cache);
  KVCache new_cache(int64_t capacity) const;

  const Config config;
  std::shared_ptr<flambeau::nn::Embedding> wte;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<flambeau::nn::RMSNorm> norm;

 private:
  // The q, k, v heads [B, H, T, head_dim] of h [B, T, d_model] at positions
  // [pos0, pos0 + T), q and k rotated by RoPE (one fused op).
  std::array<flambeau::Tensor, 3> qkv(const Block& b, const flambeau::Tensor& h, int64_t pos0) const;
  // qkv as reported to the op hook ("gpt::qkv_rope"); qkv_body does the work.
  std::array<flambeau::Tensor, 3> qkv_body(const Block& b, const flambeau::Tensor& h, int64_t pos0) const;
  flambeau::Tensor mlp(const Block& b, const flambeau::Tensor& h) const;
  // The dtype of the blocks' GEMM operands (config.dtype; Note [bf16 GEMMs] in model.cpp).
  flambeau::DType gemm_dtype() const { return config.dtype == "bf16" ? flambeau::kBFloat16 : flambeau::kFloat32; }
  flambeau::Tensor cos_, sin_;  // [max positions, head_dim / 2]
};

// FLOPs of one training step (forward + backward) on batch x seq_len tokens: 6 per weight
// per token plus the attention's scores and values (causal half counted in full).
double train_step_flops(const Config& c, int64_t batch, int64_t seq_len);

}  // namespace gpt
