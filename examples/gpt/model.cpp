// The GPT's layers and its decode step with a KV cache.
#include "model.h"

#include <cmath>
#include <mutex>

#include "flambeau/autograd/function.h"
#include "flambeau/autograd/node.h"
#include "flambeau/compile/compile.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/kernels/cpu/gemm16.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/nn/attention.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/init.h"
#include "flambeau/ops/ops.h"
#include "flambeau/ops/registry.h"

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
  register_ops();
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

// h2 @ w^T for stacked(h, weights) = [N, sum k]. A few rows of float32 (decoding) take one
// GEMM per weight into y's columns: concatenating the weights would copy more memory than
// the products read.
Tensor stacked_product(const Tensor& h, const std::vector<const Tensor*>& weights, DType dt) {
  const int64_t d = h.size(-1), N = d ? h.numel() / d : 0;
  bool direct = dt == kFloat32 && h.dtype() == kFloat32 && N <= 8;
  for (const Tensor* w : weights) direct = direct && w->dtype() == kFloat32 && w->is_contiguous();
  if (!direct) {
    const auto [h2, w] = stacked(h, weights, dt);
    return gemm(h2, w.t());
  }
  int64_t total = 0;
  for (const Tensor* w : weights) total += w->size(0);
  const Tensor h2 = h.detach().reshape({N, d}).contiguous();
  Tensor y = empty({N, total}, kFloat32);
  int64_t col = 0;
  for (const Tensor* w : weights) {
    kernels::gemm_f32(false, true, N, w->size(0), d, 1.f, h2.data<float>(), d, w->data<float>(), d, 0.f,
                      y.data<float>() + col, total);
    col += w->size(0);
  }
  return y;
}

// The backward of y = h2 @ w^T for stacked(h, weights): dh in h's shape, then each weight's
// rows of dw.
std::vector<Tensor> stacked_grads(const Tensor& dy_in, const Tensor& h, const std::vector<const Tensor*>& weights,
                                  DType dt) {
  const auto [h2, w] = stacked(h, weights, dt);
  const Tensor dy = dy_in.to(h2.dtype());
  const Tensor dw = gemm(dy.t(), h2);
  std::vector<Tensor> grads{gemm(dy, w).reshape(h.sizes())};
  const int64_t rows = w.size(0) / int64_t(weights.size());
  for (size_t i = 0; i < weights.size(); ++i) grads.push_back(dw.narrow(0, int64_t(i) * rows, rows));
  return grads;
}

}  // namespace

// Note [The GPT's ops]
// The model's fused steps are ops of their own ("gpt::..." in the op registry, register_ops
// below), each with its backward as a second op that reads only the forward's inputs and
// outputs. So the op hook sees every tensor a backward uses, and flambeau.compile traces
// the blocks' forward and backward (--compile). The backward ops re-make the stacked GEMM
// operands from the inputs (a copy of the weights, small next to the GEMMs).

// x @ weight^T with the GEMM in `dt` (bfloat16: gemm16; float32 is nn::Linear's own path).
FLB_OP_NAMED("gpt::linear16", linear16, (const Tensor& x, const Tensor& weight, DType dt), (x, weight, dt), Tensor) {
  const auto [x2, w] = stacked(x, {&weight}, dt);
  Dims shape = x.sizes();
  shape.back() = w.size(0);
  Tensor y = gemm(x2, w.t()).reshape(shape);
  autograd::record("Linear16Backward", {&y}, {&x, &weight}, {x, weight},
                   [dt](const std::vector<Tensor>& g, const std::vector<Tensor>& saved) {
                     return linear16_backward(g[0], saved[0], saved[1], dt);
                   });
  return y;
}

FLB_OP_NAMED("gpt::linear16_backward", linear16_backward,
             (const Tensor& grad, const Tensor& x, const Tensor& weight, DType dt), (grad, x, weight, dt),
             std::vector<Tensor>) {
  return stacked_grads(grad.reshape({-1, weight.size(0)}), x, {&weight}, dt);
}

namespace {

Tensor linear(const Tensor& x, nn::Linear& layer, DType dt) {
  if (dt == kFloat32) return layer(x);
  return linear16(x, layer.weight, dt);
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

}  // namespace

// {y, gu}: the product and the GEMM's result [N, 2 hid] (gate, then up) its backward reads.
FLB_OP_NAMED("gpt::swiglu", swiglu_op, (const Tensor& h, const Tensor& w_gate, const Tensor& w_up, DType dt),
             (h, w_gate, w_up, dt), std::vector<Tensor>) {
  const Tensor gu = stacked_product(h, {&w_gate, &w_up}, dt);
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
  autograd::record("SwiGLUBackward", {&y}, {&h, &w_gate, &w_up}, {h, w_gate, w_up, gu},
                   [dt](const std::vector<Tensor>& grads, const std::vector<Tensor>& saved) {
                     return swiglu_backward(grads[0], saved[0], saved[1], saved[2], saved[3], dt);
                   });
  return {y, gu};
}

FLB_OP_NAMED("gpt::swiglu_backward", swiglu_backward,
             (const Tensor& grad, const Tensor& h, const Tensor& w_gate, const Tensor& w_up, const Tensor& gu_in,
              DType dt),
             (grad, h, w_gate, w_up, gu_in, dt), std::vector<Tensor>) {
  const Tensor dy = grad.contiguous(), gu = gu_in.contiguous();
  const int64_t N = gu.size(0), hid = w_gate.size(0);
  Tensor dgu = empty({N, 2 * hid}, kFloat32);
  const float *g = gu.data<float>(), *dyp = dy.data<float>();
  float* d = dgu.data<float>();
  over_gate_chunks(g, N, hid, [&](int64_t n, int64_t i, int64_t m, const float* s) {
    const float *gr = g + n * 2 * hid + i, *ur = gr + hid, *dr = dyp + n * hid + i;
    float *dg = d + n * 2 * hid + i, *du = dg + hid;
    for (int64_t j = 0; j < m; ++j) {
      dg[j] = dr[j] * ur[j] * (s[j] * (1.f + gr[j] * (1.f - s[j])));
      du[j] = dr[j] * (gr[j] * s[j]);
    }
  });
  return stacked_grads(dgu, h, {&w_gate, &w_up}, dt);
}

// q, k, v heads [B, H, T, D] (contiguous) of h [B, T, d] at positions pos0..: one GEMM
// against the stacked weights [3d, d], RoPE (cos, sin [positions, D / 2]) applied to q and k
// while the rows are laid out by head. The backward lays the head gradients back out
// (rotating q, k back) and runs one GEMM for dh and one for the stacked weight gradient.
FLB_OP_NAMED("gpt::qkv_rope", qkv_rope,
             (const Tensor& h, const Tensor& wq, const Tensor& wk, const Tensor& wv, const Tensor& cos,
              const Tensor& sin, int64_t n_head, int64_t pos0, DType dt),
             (h, wq, wk, wv, cos, sin, n_head, pos0, dt), std::vector<Tensor>) {
  const int64_t d = wq.size(1), H = n_head, D = d / std::max<int64_t>(1, H), half = D / 2;
  FLB_CHECK(h.dtype() == kFloat32 && h.dim() == 3 && h.size(2) == d && H * D == d && pos0 >= 0 &&
                pos0 + h.size(1) <= cos.size(0) && cos.size(1) == half,
            ValueError, "[gpt.qkv] expects float32 [B, T, ", d, "] in ", H, " heads within ", cos.size(0),
            " positions, got ", shape_str(h.sizes()), " at position ", pos0);
  const int64_t B = h.size(0), T = h.size(1);
  const Tensor y = stacked_product(h, {&wq, &wk, &wv}, dt);  // [B T, 3d]
  std::vector<Tensor> out{empty({B, H, T, D}, kFloat32), empty({B, H, T, D}, kFloat32), empty({B, H, T, D}, kFloat32)};
  const float* yp = y.data<float>();
  float *qp = out[0].data<float>(), *kp = out[1].data<float>(), *vp = out[2].data<float>();
  for_each_head(B, T, H, D, pos0, cos, sin, [&](int64_t r, int64_t o, const float* c, const float* s) {
    rotate(yp + r, qp + o, c, s, half, 1.f);
    rotate(yp + r + d, kp + o, c, s, half, 1.f);
    std::copy_n(yp + r + 2 * d, D, vp + o);
  });
  autograd::record("QkvRopeBackward", {&out[0], &out[1], &out[2]}, {&h, &wq, &wk, &wv}, {h, wq, wk, wv, cos, sin},
                   [n_head, pos0, dt](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
                     return qkv_rope_backward(g[0], g[1], g[2], s[0], s[1], s[2], s[3], s[4], s[5], n_head, pos0, dt);
                   });
  return out;
}

FLB_OP_NAMED("gpt::qkv_rope_backward", qkv_rope_backward,
             (const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v, const Tensor& h, const Tensor& wq,
              const Tensor& wk, const Tensor& wv, const Tensor& cos, const Tensor& sin, int64_t n_head, int64_t pos0,
              DType dt),
             (grad_q, grad_k, grad_v, h, wq, wk, wv, cos, sin, n_head, pos0, dt), std::vector<Tensor>) {
  const int64_t B = h.size(0), T = h.size(1), d = wq.size(1), H = n_head, D = d / H, half = D / 2;
  const Tensor dq = grad_q.contiguous(), dk = grad_k.contiguous(), dv = grad_v.contiguous();
  Tensor dy = empty({B * T, 3 * d}, kFloat32);
  const float *gq = dq.data<float>(), *gk = dk.data<float>(), *gv = dv.data<float>();
  float* dyp = dy.data<float>();
  for_each_head(B, T, H, D, pos0, cos, sin, [&](int64_t r, int64_t o, const float* c, const float* s) {
    rotate(gq + o, dyp + r, c, s, half, -1.f);
    rotate(gk + o, dyp + r + d, c, s, half, -1.f);
    std::copy_n(gv + o, D, dyp + r + 2 * d);
  });
  return stacked_grads(dy, h, {&wq, &wk, &wv}, dt);
}

void register_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_op("gpt::linear16(Tensor x, Tensor weight, ScalarType dtype) -> Tensor", box(&linear16));
    register_op("gpt::linear16_backward(Tensor grad, Tensor x, Tensor weight, ScalarType dtype) -> Tensor[]",
                box(&linear16_backward));
    register_op("gpt::swiglu(Tensor h, Tensor w_gate, Tensor w_up, ScalarType dtype) -> Tensor[]", box(&swiglu_op));
    register_op("gpt::swiglu_backward(Tensor grad, Tensor h, Tensor w_gate, Tensor w_up, Tensor gu, "
                "ScalarType dtype) -> Tensor[]",
                box(&swiglu_backward));
    register_op("gpt::qkv_rope(Tensor h, Tensor wq, Tensor wk, Tensor wv, Tensor cos, Tensor sin, int n_head, "
                "int pos0, ScalarType dtype) -> Tensor[]",
                box(&qkv_rope));
    register_op("gpt::qkv_rope_backward(Tensor grad_q, Tensor grad_k, Tensor grad_v, Tensor h, Tensor wq, "
                "Tensor wk, Tensor wv, Tensor cos, Tensor sin, int n_head, int pos0, ScalarType dtype) -> Tensor[]",
                box(&qkv_rope_backward));
  });
}

std::array<Tensor, 3> Block::qkv(const Tensor& h, int64_t pos0) const {
  const std::vector<Tensor> r = qkv_rope(h, wq->weight, wk->weight, wv->weight, cos_, sin_, n_head, pos0, gemm_dtype);
  return {r[0], r[1], r[2]};
}

std::array<Tensor, 3> Block::qkv_rotated(const Tensor& h, const Tensor& cos, const Tensor& sin) const {
  const std::vector<Tensor> r = qkv_rope(h, wq->weight, wk->weight, wv->weight, cos, sin, n_head, 0, gemm_dtype);
  return {r[0], r[1], r[2]};
}

Tensor Block::project(const Tensor& a) const {
  const int64_t B = a.size(0), T = a.size(2);
  return linear(a.transpose(1, 2).reshape({B, T, n_head * head_dim}), *wo, gemm_dtype);
}

Tensor Block::mlp(const Tensor& h) const {
  return linear(swiglu_op(h, w_gate->weight, w_up->weight, gemm_dtype)[0], *w_down, gemm_dtype);
}

Tensor Block::finish(const Tensor& x, const Tensor& a) const {
  if (finish_) return (*finish_)({x, a})[0];
  const Tensor h = x + project(a);
  return h + mlp((*mlp_norm)(h));
}

// Note [Compiled blocks]
// flambeau::compile traces what it can replay: ops of the registry, on tensors. A block's
// attention takes a BlockMask made from the batch's document ids, so it stays eager, and the
// compiled regions are what comes before it (attn_norm and the q, k, v heads, at position 0:
// a number in the closure is not guarded, so the decode step's heads stay eager) and what
// comes after it (finish). Each region's backward is traced and compiled with it (the GPT's
// ops have op backwards, Note [The GPT's ops]); fullgraph, so a region that stops tracing
// raises instead of running eagerly unseen. The weights are constants of the graphs, read
// in place, so the optimizer's updates are seen.
void Block::compile() {
  compiler::CompileOptions o;
  o.backend = "cpp";
  o.fullgraph = true;
  heads_ = std::make_shared<compiler::Compiled>(
      compiler::compile([this](const std::vector<Tensor>& in) {
        const auto [q, k, v] = qkv((*attn_norm)(in[0]), 0);
        return std::vector<Tensor>{q, k, v};
      }, o));
  finish_ = std::make_shared<compiler::Compiled>(compiler::compile([this](const std::vector<Tensor>& in) {
    const Tensor h = in[0] + project(in[1]);
    return std::vector<Tensor>{h + mlp((*mlp_norm)(h))};
  }, o));
}

void Gpt::compile() {
  for (const auto& b : blocks) b->compile();
}

Tensor Block::forward_inputs(const nn::TensorList& inputs) {
  FLB_CHECK(inputs.size() == 1 && mask, ValueError, "[gpt.Block] takes one input, inside Gpt::hidden");
  const Tensor& x = inputs[0];
  std::vector<Tensor> heads;
  if (heads_) heads = (*heads_)({x});
  else {
    const auto [q, k, v] = qkv((*attn_norm)(x), 0);
    heads = {q, k, v};
  }
  return finish(x, attn::flex_attention(heads[0], heads[1], heads[2], attn::ScoreModPtr(), *mask).first);
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
    x = b.finish(x, attn::flex_attention(q, k, v, attn::ScoreModPtr()).first);
  }
  cache.length = pos + 1;
  return F::linear((*norm)(x).reshape({config.d_model}), wte->weight);
}

Tensor Gpt::decode_step_static(const Tensor& token, const Tensor& pos, KVCache& cache) {
  autograd::NoGradGuard no_grad;
  const int64_t capacity = cache.k[0].size(2);
  Tensor x = (*wte)(token);
  const Tensor cos = index_select(cos_, 0, pos), sin = index_select(sin_, 0, pos);
  const Tensor keys = arange(capacity, kInt64);
  Tensor visible = le(keys, pos);
  if (config.window > 0) visible = logical_and(visible, ge(keys, sub(pos, config.window)));
  const Tensor mask = visible.reshape({1, 1, 1, capacity});
  for (size_t l = 0; l < blocks.size(); ++l) {
    const Block& b = *blocks[l];
    const auto [q, k_new, v_new] = b.qkv_rotated((*b.attn_norm)(x), cos, sin);
    index_copy_(cache.k[l], 2, pos, k_new);
    index_copy_(cache.v[l], 2, pos, v_new);
    const Tensor a = nn::scaled_dot_product_attention(q, cache.k[l], cache.v[l], mask);
    const Tensor h = x + b.project(a);  // Block::finish's ops, never compiled: a graph replays them
    x = h + b.mlp((*b.mlp_norm)(h));
  }
  return F::linear((*norm)(x).reshape({config.d_model}), wte->weight);
}

GraphedDecode::GraphedDecode(Gpt& model, int64_t capacity)
    : token_(zeros({1, 1}, kInt64)), pos_(zeros({1}, kInt64)), cache_(model.new_cache(capacity)) {
  FLB_CHECK(capacity <= model.config.seq_len, ValueError, "[gpt] a KV cache of ", capacity,
            " positions is longer than seq_len ", model.config.seq_len);
  graph_.capture_begin();
  try {
    logits_ = model.decode_step_static(token_, pos_, cache_);
  } catch (...) {
    graph_.reset();
    throw;
  }
  graph_.capture_end();
}

const Tensor& GraphedDecode::step(int64_t token) {
  FLB_CHECK(length_ < cache_.k[0].size(2), ValueError, "[gpt] the KV cache is full (", length_, " positions)");
  token_.data<int64_t>()[0] = token;
  pos_.data<int64_t>()[0] = length_;
  graph_.replay();
  ++length_;
  return logits_;
}

double train_step_flops(const Config& c, int64_t batch, int64_t seq_len) {
  const double d = double(c.d_model), h = double(c.mlp_hidden()), tokens = double(batch * seq_len);
  const double per_layer = 4 * d * d + 3 * d * h;                 // weights of a block
  const double weights = double(c.n_layer) * per_layer + double(c.vocab_size) * d;  // + tied head
  const double attention = double(c.n_layer) * 2 * 2 * double(seq_len) * d;        // QK^T and PV per token
  return 3 * (2 * weights + attention) * tokens;
}

}  // namespace gpt
