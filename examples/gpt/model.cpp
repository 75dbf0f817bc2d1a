// The GPT's layers and its decode step with a KV cache.
#include "model.h"

#include <cmath>

#include "flambeau/autograd/function.h"
#include "flambeau/autograd/node.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/init.h"
#include "flambeau/ops/ops.h"

namespace gpt {
using namespace flambeau;
namespace attn = flambeau::nn::attention;
namespace F = flambeau::nn::functional;

Block::Block(const Config& c) : Module("Block") {
  const int64_t d = c.d_model, h = c.mlp_hidden();
  attn_norm = register_module("attn_norm", std::make_shared<nn::RMSNorm>(Dims{d}));
  wq = register_module("wq", std::make_shared<nn::Linear>(d, d, false));
  wk = register_module("wk", std::make_shared<nn::Linear>(d, d, false));
  wv = register_module("wv", std::make_shared<nn::Linear>(d, d, false));
  wo = register_module("wo", std::make_shared<nn::Linear>(d, d, false));
  mlp_norm = register_module("mlp_norm", std::make_shared<nn::RMSNorm>(Dims{d}));
  w_gate = register_module("w_gate", std::make_shared<nn::Linear>(d, h, false));
  w_up = register_module("w_up", std::make_shared<nn::Linear>(d, h, false));
  w_down = register_module("w_down", std::make_shared<nn::Linear>(h, d, false));
}

Gpt::Gpt(const Config& c) : Module("Gpt"), config(c) {
  c.validate();
  wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.d_model));
  auto list = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks.push_back(std::make_shared<Block>(c));
    list->push_back(blocks.back());
  }
  norm = register_module("norm", std::make_shared<nn::RMSNorm>(Dims{c.d_model}));
  // Rotary angles pos * theta^(-2i / head_dim), computed in double.
  const int64_t half = c.head_dim() / 2, positions = c.seq_len;
  cos_ = empty({positions, half}, kFloat32);
  sin_ = empty({positions, half}, kFloat32);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = double(p) * std::pow(c.rope_theta, -2.0 * double(i) / double(c.head_dim()));
      cos_.data<float>()[p * half + i] = float(std::cos(a));
      sin_.data<float>()[p * half + i] = float(std::sin(a));
    }
  init_weights(c.seed);
}

void Gpt::init_weights(uint64_t seed) {
  Generator gen(seed);
  const double out_std = 0.02 / std::sqrt(2.0 * double(config.n_layer));
  for (auto& [name, p] : named_parameters()) {
    Tensor t = p;
    autograd::NoGradGuard no_grad;
    if (p.dim() == 1) t.fill_(1.0);  // RMSNorm weights
    else if (name.find("wo.") != std::string::npos || name.find("w_down.") != std::string::npos)
      nn::init::normal_(t, 0.0, out_std, gen);
    else nn::init::normal_(t, 0.0, 0.02, gen);
  }
}

namespace {

// (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) over the two halves of the last dim of x
// [B, H, T, D] (any strides), rows t of cos/sin [T, D/2], into a new contiguous tensor.
// sign -1 applies the inverse rotation, which is also the transpose: the backward.
Tensor rotate_halves(const Tensor& x, const Tensor& cos, const Tensor& sin, float sign) {
  const int64_t H = x.size(1), T = x.size(2), half = x.size(3) / 2;
  Tensor out = empty(x.sizes(), kFloat32);
  const float *src = x.data<float>(), *c = cos.data<float>(), *s = sin.data<float>();
  float* dst = out.data<float>();
  const Dims st = x.strides();
  parallel_for(0, x.size(0) * H * T, 64, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const int64_t t = r % T, h = r / T % H, b = r / T / H;
      const float* in = src + b * st[0] + h * st[1] + t * st[2];
      const float *cr = c + t * half, *sr = s + t * half;
      float* o = dst + r * 2 * half;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = in[i * st[3]], x2 = in[(half + i) * st[3]];
        o[i] = x1 * cr[i] - sign * (x2 * sr[i]);
        o[half + i] = x2 * cr[i] + sign * (x1 * sr[i]);
      }
    }
  });
  return out;
}

// SwiGLU's silu(g) * u, and its backward, in one pass over chunks of the (contiguous,
// float32) operands: the sigmoid comes from the SIMD kernel, the rest is plain arithmetic.
// silu(g)' = s (1 + g (1 - s)), s = sigmoid(g).
template <class F>
void over_sigmoid_chunks(const float* g, int64_t n, const F& f) {
  parallel_for(0, n, 1 << 14, [&](int64_t lo, int64_t hi) {
    float s[1024];
    for (int64_t i = lo; i < hi; i += 1024) {
      const int64_t m = std::min<int64_t>(1024, hi - i);
      kernels::unary_f32(kernels::UnaryOp::sigmoid, g + i, s, m);
      f(i, m, s);
    }
  });
}

Tensor swiglu(const Tensor& g, const Tensor& u) {
  FLB_CHECK(g.dtype() == kFloat32 && g.sizes() == u.sizes() && g.is_contiguous() && u.is_contiguous(), TypeError,
            "[gpt.swiglu] expects contiguous float32 operands of one shape");
  Tensor y = empty(g.sizes(), kFloat32);
  const float *gp = g.data<float>(), *up = u.data<float>();
  float* yp = y.data<float>();
  over_sigmoid_chunks(gp, g.numel(), [&](int64_t i, int64_t m, const float* s) {
    for (int64_t j = 0; j < m; ++j) yp[i + j] = gp[i + j] * s[j] * up[i + j];
  });
  autograd::record("SwiGLUBackward", {&y}, {&g, &u}, {g.detach(), u.detach()},
                   [](const std::vector<Tensor>& grads, const std::vector<Tensor>& saved) {
                     const Tensor dy = grads[0].contiguous();
                     const Tensor &g = saved[0], &u = saved[1];
                     Tensor dg = empty(g.sizes(), kFloat32), du = empty(g.sizes(), kFloat32);
                     const float *gp = g.data<float>(), *up = u.data<float>(), *dyp = dy.data<float>();
                     float *dgp = dg.data<float>(), *dup = du.data<float>();
                     over_sigmoid_chunks(gp, g.numel(), [&](int64_t i, int64_t m, const float* s) {
                       for (int64_t j = 0; j < m; ++j) {
                         const float x = gp[i + j], d = dyp[i + j];
                         dgp[i + j] = d * up[i + j] * (s[j] * (1.f + x * (1.f - s[j])));
                         dup[i + j] = d * (x * s[j]);
                       }
                     });
                     return std::vector<Tensor>{dg, du};
                   });
  return y;
}

}  // namespace

// One fused op (forward and backward) instead of six elementwise ops and a cat.
Tensor Gpt::rope(const Tensor& x, int64_t pos0) const {
  FLB_CHECK(x.dtype() == kFloat32 && x.dim() == 4, TypeError, "[gpt.rope] expects float32 [B, H, T, D]");
  const int64_t T = x.size(2);
  const Tensor c = cos_.narrow(0, pos0, T), s = sin_.narrow(0, pos0, T);
  Tensor out = rotate_halves(x, c, s, 1.0f);
  autograd::record("RotaryEmbeddingBackward", {&out}, {&x}, {},
                   [c, s](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
                     return std::vector<Tensor>{rotate_halves(g[0], c, s, -1.0f)};
                   });
  return out;
}

Tensor Gpt::mlp(const Block& b, const Tensor& h) const {
  return b.w_down->forward(swiglu(b.w_gate->forward(h), b.w_up->forward(h)));
}

Tensor Gpt::hidden(const Tensor& inputs, const Tensor& doc_ids) {
  const int64_t B = inputs.size(0), T = inputs.size(1), H = config.n_head, D = config.head_dim();
  FLB_CHECK(T <= config.seq_len, ValueError, "[gpt] sequence of ", T, " tokens is longer than seq_len ", config.seq_len);
  std::vector<attn::MaskModPtr> mods{attn::causal_mask(), attn::document_mask(doc_ids)};
  if (config.window > 0) mods.push_back(attn::sliding_window_mask(config.window));
  const attn::BlockMask mask = attn::create_block_mask(attn::and_masks(mods), B, 1, T, T);
  Tensor x = wte->forward(inputs);
  for (const auto& b : blocks) {
    const Tensor h = b->attn_norm->forward(x);
    auto heads = [&](nn::Linear& w) { return w.forward(h).view({B, T, H, D}).transpose(1, 2); };
    const Tensor q = rope(heads(*b->wq), 0), k = rope(heads(*b->wk), 0), v = heads(*b->wv);
    const Tensor a = attn::flex_attention(q, k, v, attn::ScoreModPtr(), mask).first;
    x = x + b->wo->forward(a.transpose(1, 2).reshape({B, T, H * D}));
    x = x + mlp(*b, b->mlp_norm->forward(x));
  }
  return norm->forward(x);
}

Tensor Gpt::loss(const Tensor& inputs, const Tensor& targets, const Tensor& doc_ids, double z_loss) {
  const Tensor h = hidden(inputs, doc_ids);
  return F::linear_cross_entropy(h.reshape({-1, config.d_model}), wte->weight, targets.reshape({-1}), {}, {}, "mean",
                                 -100, 0.0, z_loss);
}

KVCache Gpt::new_cache(int64_t capacity) const {
  KVCache c;
  for (int64_t i = 0; i < config.n_layer; ++i) {
    c.k.push_back(zeros({1, config.n_head, capacity, config.head_dim()}, kFloat32));
    c.v.push_back(zeros({1, config.n_head, capacity, config.head_dim()}, kFloat32));
  }
  return c;
}

Tensor Gpt::decode_step(int64_t token, KVCache& cache) {
  autograd::NoGradGuard no_grad;
  const int64_t H = config.n_head, D = config.head_dim(), pos = cache.length;
  FLB_CHECK(pos < cache.k[0].size(2) && pos < config.seq_len, ValueError, "[gpt] the KV cache is full (", pos,
            " positions)");
  Tensor x = wte->forward(full({1, 1}, token, kInt64));
  // With a sliding window, position pos sees keys [pos - window, pos].
  const int64_t first = config.window > 0 ? std::max<int64_t>(0, pos - config.window) : 0;
  for (size_t l = 0; l < blocks.size(); ++l) {
    const Block& b = *blocks[l];
    const Tensor h = b.attn_norm->forward(x);
    auto heads = [&](nn::Linear& w) { return w.forward(h).view({1, 1, H, D}).transpose(1, 2); };
    cache.k[l].narrow(2, pos, 1).copy_(rope(heads(*b.wk), pos));
    cache.v[l].narrow(2, pos, 1).copy_(heads(*b.wv));
    const Tensor q = rope(heads(*b.wq), pos);
    const Tensor k = cache.k[l].narrow(2, first, pos + 1 - first), v = cache.v[l].narrow(2, first, pos + 1 - first);
    const Tensor a = attn::flex_attention(q, k, v, attn::ScoreModPtr()).first;
    x = x + b.wo->forward(a.transpose(1, 2).reshape({1, 1, H * D}));
    x = x + mlp(b, b.mlp_norm->forward(x));
  }
  cache.length = pos + 1;
  return F::linear(norm->forward(x).reshape({config.d_model}), wte->weight);
}

double train_step_flops(const Config& c, int64_t batch, int64_t seq_len) {
  const double d = double(c.d_model), h = double(c.mlp_hidden()), tokens = double(batch * seq_len);
  const double per_layer = 4 * d * d + 3 * d * h;                 // weights of a block
  const double weights = double(c.n_layer) * per_layer + double(c.vocab_size) * d;  // + tied head
  const double attention = double(c.n_layer) * 2 * 2 * double(seq_len) * d;        // QK^T and PV per token
  return 3 * (2 * weights + attention) * tokens;
}

}  // namespace gpt
