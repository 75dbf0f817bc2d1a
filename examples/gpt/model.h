// The GPT of flambeau-gpt: token embedding, rotary position embeddings, pre-norm blocks of
// RMSNorm + causal FlexAttention with document masking (optionally a sliding window) and
// RMSNorm + SwiGLU MLP, a final RMSNorm, and an LM head tied to the embedding whose loss is
// the fused linear_cross_entropy (never builds the logits).
#pragma once
#include <array>
#include <memory>
#include <vector>

#include "config.h"
#include "flambeau/graphs/graph.h"
#include "flambeau/nn/flex_attention.h"
#include "flambeau/nn/modules.h"

namespace flambeau::compiler {
class Compiled;
}

namespace gpt {

// The model's fused steps as ops (Note [The GPT's ops] in model.cpp), each backward an op
// too; register_ops() puts them in the op registry (once; the model's constructor calls it).
// dt: the GEMM operands' dtype (float32 or bfloat16); results are float32.
// x @ weight^T, and its gradients {dx, dweight}.
flambeau::Tensor linear16(const flambeau::Tensor& x, const flambeau::Tensor& weight, flambeau::DType dt);
std::vector<flambeau::Tensor> linear16_backward(const flambeau::Tensor& grad, const flambeau::Tensor& x,
                                                const flambeau::Tensor& weight, flambeau::DType dt);
// {silu(h w_gate^T) * (h w_up^T), the GEMM's [N, 2 hid] (gate | up)}, and the gradients
// {dh, dw_gate, dw_up} from the second.
std::vector<flambeau::Tensor> swiglu_op(const flambeau::Tensor& h, const flambeau::Tensor& w_gate,
                                        const flambeau::Tensor& w_up, flambeau::DType dt);
std::vector<flambeau::Tensor> swiglu_backward(const flambeau::Tensor& grad, const flambeau::Tensor& h,
                                              const flambeau::Tensor& w_gate, const flambeau::Tensor& w_up,
                                              const flambeau::Tensor& gu, flambeau::DType dt);
// The q, k, v heads [B, H, T, D] of h [B, T, d] at positions [pos0, pos0 + T), q and k
// rotated by RoPE (cos, sin: [positions, D / 2]), and the gradients {dh, dwq, dwk, dwv}.
std::vector<flambeau::Tensor> qkv_rope(const flambeau::Tensor& h, const flambeau::Tensor& wq,
                                       const flambeau::Tensor& wk, const flambeau::Tensor& wv,
                                       const flambeau::Tensor& cos, const flambeau::Tensor& sin, int64_t n_head,
                                       int64_t pos0, flambeau::DType dt);
std::vector<flambeau::Tensor> qkv_rope_backward(const flambeau::Tensor& grad_q, const flambeau::Tensor& grad_k,
                                                const flambeau::Tensor& grad_v, const flambeau::Tensor& h,
                                                const flambeau::Tensor& wq, const flambeau::Tensor& wk,
                                                const flambeau::Tensor& wv, const flambeau::Tensor& cos,
                                                const flambeau::Tensor& sin, int64_t n_head, int64_t pos0,
                                                flambeau::DType dt);
void register_ops();

// One pre-norm block: x + attention(attn_norm(x)), then + mlp(mlp_norm(x)). Called as a
// module (block->call({x})) so that module hooks see it (FSDP gathers its weights there).
struct Block : flambeau::nn::Module {
  // cos, sin: the rotary tables [max positions, head_dim / 2] the model shares.
  Block(const Config& c, flambeau::Tensor cos, flambeau::Tensor sin);
  std::shared_ptr<flambeau::nn::RMSNorm> attn_norm, mlp_norm;
  std::shared_ptr<flambeau::nn::Linear> wq, wk, wv, wo, w_gate, w_up, w_down;
  // The attention mask of the forward running through the blocks (set by Gpt::hidden).
  const flambeau::nn::attention::BlockMask* mask = nullptr;

  // The q, k, v heads [B, H, T, head_dim] of h [B, T, d_model] at positions
  // [pos0, pos0 + T), q and k rotated by RoPE (one op, "gpt::qkv_rope").
  std::array<flambeau::Tensor, 3> qkv(const flambeau::Tensor& h, int64_t pos0) const;
  // The same with the rotary tables' rows given (cos, sin: [T, head_dim / 2]).
  std::array<flambeau::Tensor, 3> qkv_rotated(const flambeau::Tensor& h, const flambeau::Tensor& cos,
                                              const flambeau::Tensor& sin) const;
  // The attention output projected back: wo applied to a [B, H, T, head_dim] as [B, T, d].
  flambeau::Tensor project(const flambeau::Tensor& a) const;
  flambeau::Tensor mlp(const flambeau::Tensor& h) const;
  // What follows attention: x + project(a), then + mlp(mlp_norm(that)); compiled after
  // compile().
  flambeau::Tensor finish(const flambeau::Tensor& x, const flambeau::Tensor& a) const;
  // From now on the forward runs as two compiled regions (Note [Compiled blocks]).
  void compile();

 protected:
  flambeau::Tensor forward_inputs(const flambeau::nn::TensorList& inputs) override;

 private:
  const int64_t n_head, head_dim;
  // The dtype of the GEMM operands (config.dtype; Note [bf16 GEMMs] in model.cpp).
  const flambeau::DType gemm_dtype;
  const flambeau::Tensor cos_, sin_;
  std::shared_ptr<flambeau::compiler::Compiled> heads_, finish_;  // set by compile()
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
  // The decode step with the token ([1, 1] int64) and its position ([1] int64) as tensors:
  // every op runs on buffers of fixed shape, the new keys and values are written at pos and
  // attention spans the whole cache under a mask of the positions [pos - window, pos], so
  // the step can be captured once and replayed at any position (GraphedDecode). Does not
  // move cache.length. Logits [V].
  flambeau::Tensor decode_step_static(const flambeau::Tensor& token, const flambeau::Tensor& pos, KVCache& cache);
  // Compiles every block (training, evaluation and the decode step's MLP half).
  void compile();

  const Config config;
  std::shared_ptr<flambeau::nn::Embedding> wte;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<flambeau::nn::RMSNorm> norm;

 private:
  flambeau::Tensor cos_, sin_;  // [max positions, head_dim / 2]
};

// Gpt::decode_step_static captured once (flambeau::graphs::Graph) and replayed per token:
// sample --graph. The capture runs one step at position 0, which the first step rewrites.
class GraphedDecode {
 public:
  GraphedDecode(Gpt& model, int64_t capacity);
  // Logits [V] of the next token after feeding `token` at position length(); the tensor is
  // the graph's output, overwritten by the next step.
  const flambeau::Tensor& step(int64_t token);
  int64_t length() const { return length_; }
  const flambeau::graphs::Graph& graph() const { return graph_; }

 private:
  flambeau::Tensor token_, pos_, logits_;  // the static input and output
  KVCache cache_;
  flambeau::graphs::Graph graph_;
  int64_t length_ = 0;
};

// FLOPs of one training step (forward + backward) on batch x seq_len tokens: 6 per weight
// per token plus the attention's scores and values (causal half counted in full).
double train_step_flops(const Config& c, int64_t batch, int64_t seq_len);

}  // namespace gpt
