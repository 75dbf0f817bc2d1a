// The GPT's layers and its decode step with a KV cache.
#include "model.h"

#include <cmath>

#include "flambeau/autograd/function.h"
#include "flambeau/autograd/node.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/gemm16.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/init.h"
#include "flambeau/ops/ops.h"

namespace gpt {
using namespace flambeau;
namespace attn = flambeau::nn::attention;
namespace F = flambeau::nn::functional;

namespace {

// The rotary angles pos * theta^(-2i / head_dim) (computed in double) as cos and sin tables
// [seq_len, head_dim / 2].
std::pair<Tensor, Tensor> rope_tables(const Config& c) {
  const int64_t half = c.head_dim() / 2, positions = c.seq_len;
  Tensor cos_t = empty({positions, half}, kFloat32), sin_t = empty({positions, half}, kFloat32);
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double a = double(p) * std::pow(c.rope_theta, -2.0 * double(i) / double(c.head_dim()));
      cos_t.data<float>()[p * half + i] = float(std::cos(a));
      sin_t.data<float>()[p * half + i] = float(std::sin(a));
    }
  return {cos_t, sin_t};
}

}  // namespace

Block::Block(const Config& c, Tensor cos, Tensor sin)
    : Module("Block"),
      n_head(c.n_head),
      head_dim(c.head_dim()),
      gemm_dtype(c.dtype == "bf16" ? kBFloat16 : kFloat32),
      cos_(std::move(cos)),
      sin_(std::move(sin)) {
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
  std::tie(cos_, sin_) = rope_tables(c);
  wte = register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.d_model));
  auto list = register_module("blocks", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.n_layer; ++i) {
    blocks.push_back(std::make_shared<Block>(c, cos_, sin_));
    list->push_back(blocks.back());
  }
  norm = register_module("norm", std::make_shared<nn::RMSNorm>(Dims{c.d_model}));
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

// One head row rotated by RoPE: (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) over the two halves
// of in[0, 2 half) into out; sign -1 applies the inverse rotation (also the transpose: the
// backward).
void rotate(const float* in, float* out, const float* c, const float* s, int64_t half, float sign) {
  for (int64_t i = 0; i < half; ++i) {
    const float x1 = in[i], x2 = in[half + i];
    out[i] = x1 * c[i] - sign * (x2 * s[i]);
    out[half + i] = x2 * c[i] + sign * (x1 * s[i]);
  }
}

// Visits each (token n, head hh) of q, k, v [B, H, T, D] laid out as rows [B T, 3d] (q | k |
// v): f(row offset of the head in the [B T, 3d] rows, offset in [B, H, T, D], RoPE's cos and
// sin at the token's position pos0 + t).
template <class F>
void for_each_head(int64_t B, int64_t T, int64_t H, int64_t D, int64_t pos0, const Tensor& cos, const Tensor& sin,
                   const F& f) {
  const int64_t half = D / 2, d = H * D;
  const float *cp = cos.data<float>(), *sp = sin.data<float>();
  parallel_for(0, B * T, 16, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      const int64_t b = n / T, t = n % T;
      for (int64_t h = 0; h < H; ++h)
        f(n * 3 * d + h * D, ((b * H + h) * T + t) * D, cp + (pos0 + t) * half, sp + (pos0 + t) * half);
    }
  });
}

// Note [bf16 GEMMs]: with dtype bf16 the GEMM operands of the blocks (activations, weights,
// gradients) are rounded to bfloat16 once and multiplied by kernels::gemm16 with float32
// accumulation; results, weights and optimizer state stay float32. The bf16 copies of the
// weights made in the forward are saved for the backward, so each is cast once per step.

// a @ b (2-D, float32 result); bfloat16 operands go through gemm16 (b is rounded to a's
// dtype), float32 ones through mm.
Tensor gemm(const Tensor& a, const Tensor& b_in) {
  if (a.dtype() == kFloat32 && b_in.dtype() == kFloat32) return mm(a, b_in);
  autograd::NoGradGuard no_grad;
  const Tensor b = b_in.to(kBFloat16);
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0 || k == 0) return zeros({m, n}, kFloat32);
  // Each operand as rows (stride 1 along dim 1) or transposed rows (stride 1 along dim 0).
  auto operand = [](const Tensor& x, bool* trans, int64_t* ld) {
    const Tensor c = x.stride(1) == 1 && x.stride(0) >= x.size(1) ? x
                     : x.stride(0) == 1 && x.stride(1) >= x.size(0) ? x
                                                                    : x.contiguous();
    *trans = !(c.stride(1) == 1 && c.stride(0) >= c.size(1));
    *ld = *trans ? c.stride(1) : c.stride(0);
    return c;
  };
  bool ta, tb;
  int64_t lda, ldb;
  const Tensor a2 = operand(a, &ta, &lda), b2 = operand(b, &tb, &ldb);
  Tensor out = empty({m, n}, kFloat32);
  kernels::gemm16<BFloat16, float>(ta, tb, m, n, k, 1.f, a2.data<BFloat16>(), lda, b2.data<BFloat16>(), ldb, 0.f,
                                   out.data<float>(), n);
  return out;
}

// h [..., d] as a contiguous [N, d], and weights [k, d] stacked into one [sum k, d], both
// without history and in `dt`: the operands of one GEMM for several linear layers that share h.
std::pair<Tensor, Tensor> stacked(const Tensor& h, const std::vector<const Tensor*>& weights, DType dt) {
  autograd::NoGradGuard no_grad;
  std::vector<Tensor> ws;
  for (const Tensor* w : weights) ws.push_back(w->detach());
  const Tensor w = ws.size() == 1 ? ws[0] : cat(ws, 0);
  return {h.detach().reshape({-1, h.size(-1)}).to(dt).contiguous(), w.to(dt).contiguous()};
}

// The backward of y = h2 @ w^T for stacked(): dh in h's shape, then each weight's rows of dw.
std::vector<Tensor> stacked_grads(const Tensor& dy_in, const Tensor& h2, const Tensor& w, const Dims& h_shape,
                                  int64_t parts) {
  const Tensor dy = dy_in.to(h2.dtype());
  const Tensor dw = gemm(dy.t(), h2);
  std::vector<Tensor> grads{gemm(dy, w).reshape(h_shape)};
  const int64_t rows = w.size(0) / parts;
  for (int64_t i = 0; i < parts; ++i) grads.push_back(dw.narrow(0, i * rows, rows));
  return grads;
}

// x @ weight^T with the GEMM in `dt` (float32: nn::Linear's own path).
Tensor linear16(const Tensor& x, nn::Linear& layer, DType dt) {
  const auto [x2, w] = stacked(x, {&layer.weight}, dt);
  Dims shape = x.sizes();
  shape.back() = w.size(0);
  Tensor y = gemm(x2, w.t()).reshape(shape);
  autograd::record("Linear16Backward", {&y}, {&x, &layer.weight}, {x2, w},
                   [x_shape = x.sizes()](const std::vector<Tensor>& g, const std::vector<Tensor>& saved) {
                     return stacked_grads(g[0].reshape({-1, saved[1].size(0)}), saved[0], saved[1], x_shape, 1);
                   });
  return y;
}

Tensor linear(const Tensor& x, nn::Linear& layer, DType dt) {
  if (dt == kFloat32) return layer(x);
  return op_hook::op("gpt::linear16", x, layer.weight, dt)([&] { return linear16(x, layer, dt); });
}

// SwiGLU's silu(h W_gate^T) * (h W_up^T): one GEMM against the stacked weights, then one
// pass per row (the sigmoid from the SIMD kernel); the backward is one pass and the two
// GEMMs of stacked_grads. silu(g)' = s (1 + g (1 - s)), s = sigmoid(g).
template <class F>
void over_gate_chunks(const float* gu, int64_t rows, int64_t hid, const F& f) {
  parallel_for(0, rows, 8, [&](int64_t lo, int64_t hi) {
    float s[1024];
    for (int64_t n = lo; n < hi; ++n)
      for (int64_t i = 0; i < hid; i += 1024) {
        const int64_t m = std::min<int64_t>(1024, hid - i);
        kernels::unary_f32(kernels::UnaryOp::sigmoid, gu + n * 2 * hid + i, s, m);
        f(n, i, m, s);
      }
  });
}

Tensor swiglu_body(const Tensor& h, const Tensor& w_gate, const Tensor& w_up, DType dt) {
  const auto [h2, w] = stacked(h, {&w_gate, &w_up}, dt);
  const Tensor gu = gemm(h2, w.t());  // [N, 2 hid]: gate, then up
  const int64_t N = gu.size(0), hid = w_gate.size(0);
  Dims y_shape = h.sizes();
  y_shape.back() = hid;
  Tensor y = empty(y_shape, kFloat32);
  const float* g = gu.data<float>();
  float* yp = y.data<float>();
  over_gate_chunks(g, N, hid, [&](int64_t n, int64_t i, int64_t m, const float* s) {
    const float *gr = g + n * 2 * hid + i, *ur = gr + hid;
    for (int64_t j = 0; j < m; ++j) yp[n * hid + i + j] = gr[j] * s[j] * ur[j];
  });
  autograd::record("SwiGLUBackward", {&y}, {&h, &w_gate, &w_up}, {h2, w, gu},
                   [N, hid, h_shape = h.sizes()](const std::vector<Tensor>& grads, const std::vector<Tensor>& saved) {
                     const Tensor dy = grads[0].contiguous();
                     Tensor dgu = empty({N, 2 * hid}, kFloat32);
                     const float *g = saved[2].data<float>(), *dyp = dy.data<float>();
                     float* d = dgu.data<float>();
                     over_gate_chunks(g, N, hid, [&](int64_t n, int64_t i, int64_t m, const float* s) {
                       const float *gr = g + n * 2 * hid + i, *ur = gr + hid, *dr = dyp + n * hid + i;
                       float *dg = d + n * 2 * hid + i, *du = dg + hid;
                       for (int64_t j = 0; j < m; ++j) {
                         dg[j] = dr[j] * ur[j] * (s[j] * (1.f + gr[j] * (1.f - s[j])));
                         du[j] = dr[j] * (gr[j] * s[j]);
                       }
                     });
                     return stacked_grads(dgu, saved[0], saved[1], h_shape, 2);
                   });
  return y;
}

Tensor swiglu(const Tensor& h, const Tensor& w_gate, const Tensor& w_up, DType dt) {
  return op_hook::op("gpt::swiglu", h, w_gate, w_up, dt)([&] { return swiglu_body(h, w_gate, w_up, dt); });
}

}  // namespace

// q, k, v heads [B, H, T, D] (contiguous) of h [B, T, d] at positions pos0..: one GEMM
// against the stacked weights [3d, d], RoPE applied to q and k while the rows are laid out
// by head. The backward lays the head gradients back out (rotating q, k back) and runs one
// GEMM for dh and one for the stacked weight gradient.
std::array<Tensor, 3> Block::qkv(const Tensor& h, int64_t pos0) const {
  const auto result = op_hook::op("gpt::qkv_rope", h, wq->weight, wk->weight, wv->weight, pos0)([&] {
    const std::array<Tensor, 3> heads = qkv_body(h, pos0);
    return std::vector<Tensor>(heads.begin(), heads.end());
  });
  return {result[0], result[1], result[2]};
}

std::array<Tensor, 3> Block::qkv_body(const Tensor& h, int64_t pos0) const {
  const int64_t B = h.size(0), T = h.size(1), H = n_head, D = head_dim, d = H * D, half = D / 2;
  FLB_CHECK(h.dtype() == kFloat32 && h.dim() == 3 && h.size(2) == d && pos0 + T <= cos_.size(0), ValueError,
            "[gpt.qkv] expects float32 [B, T, ", d, "] within ", cos_.size(0), " positions, got ", shape_str(h.sizes()));
  const auto [h2, w] = stacked(h, {&wq->weight, &wk->weight, &wv->weight}, gemm_dtype);
  const Tensor y = gemm(h2, w.t());  // [B T, 3d]
  std::array<Tensor, 3> out{empty({B, H, T, D}, kFloat32), empty({B, H, T, D}, kFloat32),
                            empty({B, H, T, D}, kFloat32)};
  const float* yp = y.data<float>();
  float *qp = out[0].data<float>(), *kp = out[1].data<float>(), *vp = out[2].data<float>();
  for_each_head(B, T, H, D, pos0, cos_, sin_, [&](int64_t r, int64_t o, const float* c, const float* s) {
    rotate(yp + r, qp + o, c, s, half, 1.f);
    rotate(yp + r + d, kp + o, c, s, half, 1.f);
    std::copy_n(yp + r + 2 * d, D, vp + o);
  });
  autograd::record(
      "QkvRopeBackward", {&out[0], &out[1], &out[2]}, {&h, &wq->weight, &wk->weight, &wv->weight}, {h2, w},
      [B, T, d, H, D, half, pos0, cs = cos_, sn = sin_](const std::vector<Tensor>& g,
                                                        const std::vector<Tensor>& saved) {
        const Tensor dq = g[0].contiguous(), dk = g[1].contiguous(), dv = g[2].contiguous();
        Tensor dy = empty({B * T, 3 * d}, kFloat32);
        const float *gq = dq.data<float>(), *gk = dk.data<float>(), *gv = dv.data<float>();
        float* dyp = dy.data<float>();
        for_each_head(B, T, H, D, pos0, cs, sn, [&](int64_t r, int64_t o, const float* c, const float* s) {
          rotate(gq + o, dyp + r, c, s, half, -1.f);
          rotate(gk + o, dyp + r + d, c, s, half, -1.f);
          std::copy_n(gv + o, D, dyp + r + 2 * d);
        });
        return stacked_grads(dy, saved[0], saved[1], {B, T, d}, 3);
      });
  return out;
}

Tensor Block::project(const Tensor& a) const {
  const int64_t B = a.size(0), T = a.size(2);
  return linear(a.transpose(1, 2).reshape({B, T, n_head * head_dim}), *wo, gemm_dtype);
}

Tensor Block::mlp(const Tensor& h) const {
  return linear(swiglu(h, w_gate->weight, w_up->weight, gemm_dtype), *w_down, gemm_dtype);
}

Tensor Block::forward_inputs(const nn::TensorList& inputs) {
  FLB_CHECK(inputs.size() == 1 && mask, ValueError, "[gpt.Block] takes one input, inside Gpt::hidden");
  Tensor x = inputs[0];
  const auto [q, k, v] = qkv((*attn_norm)(x), 0);
  x = x + project(attn::flex_attention(q, k, v, attn::ScoreModPtr(), *mask).first);
  return x + mlp((*mlp_norm)(x));
}

Tensor Gpt::hidden(const Tensor& inputs, const Tensor& doc_ids) {
  const int64_t B = inputs.size(0), T = inputs.size(1);
  FLB_CHECK(T <= config.seq_len, ValueError, "[gpt] sequence of ", T, " tokens is longer than seq_len ", config.seq_len);
  std::vector<attn::MaskModPtr> mods{attn::causal_mask(), attn::document_mask(doc_ids)};
  if (config.window > 0) mods.push_back(attn::sliding_window_mask(config.window));
  // Blocks of 64: fortunes are short (about 170 bytes), so finer blocks skip more of the
  // other documents and of the causal upper triangle (11 ms less per step than 128).
  const attn::BlockMask mask = attn::create_block_mask(attn::and_masks(mods), B, 1, T, T, 64);
  Tensor x = (*wte)(inputs);
  for (const auto& b : blocks) {
    b->mask = &mask;
    try {
      x = b->call({x});
    } catch (...) {
      b->mask = nullptr;
      throw;
    }
    b->mask = nullptr;
  }
  return (*norm)(x);
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
  const int64_t pos = cache.length;
  FLB_CHECK(pos < cache.k[0].size(2) && pos < config.seq_len, ValueError, "[gpt] the KV cache is full (", pos,
            " positions)");
  Tensor x = (*wte)(full({1, 1}, token, kInt64));
  // With a sliding window, position pos sees keys [pos - window, pos].
  const int64_t first = config.window > 0 ? std::max<int64_t>(0, pos - config.window) : 0;
  for (size_t l = 0; l < blocks.size(); ++l) {
    const Block& b = *blocks[l];
    const auto [q, k_new, v_new] = b.qkv((*b.attn_norm)(x), pos);
    cache.k[l].narrow(2, pos, 1).copy_(k_new);
    cache.v[l].narrow(2, pos, 1).copy_(v_new);
    const Tensor k = cache.k[l].narrow(2, first, pos + 1 - first), v = cache.v[l].narrow(2, first, pos + 1 - first);
    x = x + b.project(attn::flex_attention(q, k, v, attn::ScoreModPtr()).first);
    x = x + b.mlp((*b.mlp_norm)(x));
  }
  cache.length = pos + 1;
  return F::linear((*norm)(x).reshape({config.d_model}), wte->weight);
}

double train_step_flops(const Config& c, int64_t batch, int64_t seq_len) {
  const double d = double(c.d_model), h = double(c.mlp_hidden()), tokens = double(batch * seq_len);
  const double per_layer = 4 * d * d + 3 * d * h;                 // weights of a block
  const double weights = double(c.n_layer) * per_layer + double(c.vocab_size) * d;  // + tied head
  const double attention = double(c.n_layer) * 2 * 2 * double(seq_len) * d;        // QK^T and PV per token
  return 3 * (2 * weights + attention) * tokens;
}

}  // namespace gpt
