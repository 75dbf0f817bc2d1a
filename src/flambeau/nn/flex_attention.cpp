// flex_attention(): checks the inputs and the block mask against each other, runs the
// forward kernel in float32 (16-bit inputs are widened once) and records the backward node,
// whose inputs are q, k, v and the score_mod's captured tensors.
#include "flambeau/core/op_hook.h"
#include "flambeau/nn/flex_attention.h"

#include <cmath>

#include "flambeau/autograd/autocast.h"
#include "flambeau/autograd/function.h"
#include "flambeau/nn/flex_internal.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::attention {
namespace {

// The Problem over float32 contiguous q, k, v and a block mask.
// k [B, H, S, E] -> [B * H, windows of kTk keys, E, kLdT] (see detail::Problem::t_at).
Tensor transposed(const Tensor& k) {
  const int64_t BH = k.size(0) * k.size(1), S = k.size(2), E = k.size(3), w = (S + detail::kTk - 1) / detail::kTk;
  Tensor t = empty({BH, w, E, detail::kLdT});  // columns past S are never read
  const float* src = k.data<float>();
  float* dst = t.data<float>();
  detail::for_each_item(BH * w, [&](int64_t item) {
    const int64_t bh = item / w, s0 = item % w * detail::kTk;
    float* out = dst + item * E * detail::kLdT;
    for (int64_t s = s0; s < std::min(S, s0 + detail::kTk); ++s)
      for (int64_t e = 0; e < E; ++e) out[e * detail::kLdT + s - s0] = src[(bh * S + s) * E + e];
  });
  return t;
}

detail::Problem make_problem(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& kt, const Tensor& vt,
                             const BlockMask& bm, const ScoreModPtr& mod, float scale) {
  detail::Problem p;
  p.B = q.size(0), p.Hq = q.size(1), p.Hkv = k.size(1), p.L = q.size(2), p.S = k.size(2), p.E = q.size(3);
  p.Ev = v.size(3), p.G = p.Hq / p.Hkv, p.scale = scale;
  p.q = q.data<float>(), p.k = k.data<float>(), p.v = v.data<float>();
  p.kt = kt.defined() ? kt.data<float>() : nullptr, p.vt = vt.defined() ? vt.data<float>() : nullptr;
  p.qbs = bm.q_block, p.kbs = bm.kv_block, p.nq = bm.num_q_blocks(), p.nk = bm.num_kv_blocks();
  p.part = detail::BlockList(bm.kv_num_blocks, bm.kv_indices);
  p.full = detail::BlockList(bm.full_kv_num_blocks, bm.full_kv_indices);
  p.qpart = detail::BlockList(bm.q_num_blocks, bm.q_indices);
  p.qfull = detail::BlockList(bm.full_q_num_blocks, bm.full_q_indices);
  p.mask = bm.mask_mod.get(), p.mod = mod.get();
  return p;
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const BlockMask* bm, bool enable_gqa) {
  FLB_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, ValueError,
            "[flex_attention] query, key and value must be 4-D [B, H, L, E], got ", shape_str(q.sizes()), ", ",
            shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  FLB_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), TypeError,
            "[flex_attention] query, key and value must share a dtype, got ", dtype_name(q.dtype()), ", ",
            dtype_name(k.dtype()), ", ", dtype_name(v.dtype()));
  FLB_CHECK(q.dtype() == kFloat32 || q.dtype() == kBFloat16 || q.dtype() == kFloat16, TypeError,
            "[flex_attention] expected float32, bfloat16 or float16, got ", dtype_name(q.dtype()));
  FLB_CHECK(q.size(3) == k.size(3) && k.size(2) == v.size(2) && k.size(1) == v.size(1) && q.size(0) == k.size(0) &&
                q.size(0) == v.size(0),
            ValueError, "[flex_attention] shapes ", shape_str(q.sizes()), ", ", shape_str(k.sizes()), ", ",
            shape_str(v.sizes()), " do not fit q [B, Hq, L, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev]");
  FLB_CHECK(q.numel() > 0 && k.numel() > 0 && v.numel() > 0, ValueError, "[flex_attention] empty inputs ",
            shape_str(q.sizes()), ", ", shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  const int64_t hq = q.size(1), hkv = k.size(1);
  FLB_CHECK(hq == hkv || (enable_gqa && hq % hkv == 0), ValueError, "[flex_attention] ", hq, " query heads and ", hkv,
            " key/value heads: ",
            enable_gqa ? "the former must be a multiple of the latter" : "pass enable_gqa=True for grouped-query attention");
  if (!bm) return;
  const int64_t L = q.size(2), S = k.size(2);
  FLB_CHECK(L <= bm->q_len && S <= bm->kv_len, ValueError, "[flex_attention] the block mask was made for Q_LEN=",
            bm->q_len, " and KV_LEN=", bm->kv_len, " but got Q_LEN=", L, " and KV_LEN=", S,
            "; create a new block mask for these lengths");
  FLB_CHECK(L == bm->q_len && S == bm->kv_len, ValueError, "[flex_attention] the block mask was made for Q_LEN=",
            bm->q_len, " and KV_LEN=", bm->kv_len, " but got Q_LEN=", L, " and KV_LEN=", S,
            "; crop it with block_mask._adjust(", L, ", ", S, ")");
  FLB_CHECK((bm->batch() == 1 || bm->batch() == q.size(0)) && (bm->heads() == 1 || bm->heads() == hq), ValueError,
            "[flex_attention] a block mask of shape ", shape_str(bm->kv_num_blocks.sizes()),
            " does not broadcast to batch ", q.size(0), " and ", hq, " query heads");
}

}  // namespace

FLB_OP(flex_attention,
       (const Tensor& q, const Tensor& k, const Tensor& v, ScoreModPtr score_mod,
        const std::optional<BlockMask>& block_mask, std::optional<double> scale, bool enable_gqa, bool return_lse),
       (q, k, v, score_mod, block_mask, scale, enable_gqa, return_lse), std::pair<Tensor, Tensor>) {
  FLB_AUTOCAST(lower, flex_attention, q, k, v, score_mod, block_mask, scale, enable_gqa, return_lse);
  check_inputs(q, k, v, block_mask ? &*block_mask : nullptr, enable_gqa);
  const int64_t B = q.size(0), Hq = q.size(1), L = q.size(2), S = k.size(2), Ev = v.size(3);
  if (score_mod) score_mod->check(B, Hq, L, S);
  if (block_mask && block_mask->mask_mod) block_mask->mask_mod->check(B, Hq, L, S);
  const BlockMask bm = block_mask ? *block_mask : create_block_mask(noop_mask(), 1, 1, L, S);
  const float sc = float(scale.value_or(1.0 / std::sqrt(double(q.size(3)))));
  const Tensor qf = q.detach().to(kFloat32).contiguous(), kf = k.detach().to(kFloat32).contiguous(),
               vf = v.detach().to(kFloat32).contiguous();
  Tensor out = empty({B, Hq, L, Ev}, kFloat32), stats = empty({B, Hq, L, 2}, kFloat32);
  // Short queries (decode) read each key once: no transposed copy for them.
  const Tensor kt = L > detail::kDecodeMaxLen ? transposed(kf) : Tensor();
  detail::forward(make_problem(qf, kf, vf, kt, Tensor(), bm, score_mod, sc), out.data<float>(),
                  stats.data<float>());

  Tensor result = out.to(q.dtype());
  Tensor lse_out = return_lse ? add(stats.select(-1, 0), stats.select(-1, 1)).detach() : Tensor();
  std::vector<Tensor> captured = score_mod ? score_mod->captured() : std::vector<Tensor>{};
  std::vector<const Tensor*> inputs{&q, &k, &v};
  for (const Tensor& c : captured) inputs.push_back(&c);
  std::vector<Tensor*> outputs{&result};
  if (return_lse) outputs.push_back(&lse_out);  // differentiable too
  autograd::record_many(
      "FlexAttentionBackward0", outputs, inputs, {qf, kf, vf, out.detach(), stats},
      [bm, score_mod, sc, n_cap = captured.size(), needs = [&] {
         std::vector<bool> r;
         for (const Tensor& c : captured) r.push_back(c.requires_grad());
         return r;
       }()](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        const Tensor dout = g[0].to(kFloat32).contiguous();
        const Tensor dlse = g.size() > 1 && g[1].defined() ? g[1].to(kFloat32).contiguous() : Tensor();
        Tensor dq = zeros(s[0].sizes()), dk = zeros(s[1].sizes()), dv = zeros(s[2].sizes());
        std::vector<Tensor> cap_grads(n_cap);
        std::vector<double*> ptrs(n_cap, nullptr);
        const auto caps = score_mod ? score_mod->captured() : std::vector<Tensor>{};
        for (size_t i = 0; i < n_cap; ++i)
          if (needs[i]) {
            cap_grads[i] = zeros(caps[i].sizes(), kFloat64);
            ptrs[i] = cap_grads[i].data<double>();
          }
        detail::backward(make_problem(s[0], s[1], s[2], transposed(s[1]), transposed(s[2]), bm, score_mod, sc), s[3].data<float>(), s[4].data<float>(),
                         dout.data<float>(), dlse.defined() ? dlse.data<float>() : nullptr, dq.data<float>(), dk.data<float>(), dv.data<float>(), ptrs);
        std::vector<Tensor> grads{dq, dk, dv};
        for (auto& c : cap_grads) grads.push_back(c);
        return grads;
      });
  return {result, lse_out};
}

}  // namespace flambeau::nn::attention
