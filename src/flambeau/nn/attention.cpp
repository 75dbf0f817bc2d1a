// Flash-style scaled dot-product attention on the CPU. Forward: each tile of query rows
// walks the key tiles with an online softmax (running max m, running sum l), so only a
// Bq x Bk score tile exists at a time; the row logsumexp is kept for backward. Backward:
// per (batch, kv head), tiles of P = exp(S - lse) are rebuilt and dQ, dK, dV accumulated
// in a fixed order (query heads of a GQA group one after another).
#include "flambeau/core/op_hook.h"
#include "flambeau/nn/attention.h"

#include "flambeau/kernels/cpu/blas.h"

#include <cmath>
#include <limits>
#include <vector>

#include "flambeau/autograd/autocast.h"
#include "flambeau/autograd/function.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn {
namespace {

constexpr int64_t kBq = 64, kBk = 256;

// Everything the kernels need about one call, as [B, H, L, E] contiguous tensors.
struct Problem {
  int64_t B = 0, Hq = 0, Hkv = 0, L = 0, S = 0, E = 0, Ev = 0;
  double scale = 1;
  bool causal = false;
  Tensor mask;  // expanded to [B, Hq, L, S] (strided view) or undefined
  bool mask_is_bool = false;
};

// Adds the mask to a score tile (rows i0.., cols j0..); -inf where not allowed.
template <class T>
void apply_mask(const Problem& p, int64_t b, int64_t h, int64_t i0, int64_t rows, int64_t j0, int64_t cols, T* s) {
  const T ninf = -std::numeric_limits<T>::infinity();
  if (p.causal)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = std::max<int64_t>(0, i0 + r + 1 - j0); c < cols; ++c) s[r * kBk + c] = ninf;
  if (!p.mask.defined()) return;
  const Dims& st = p.mask.strides();
  const int64_t base = b * st[0] + h * st[1];
  if (p.mask_is_bool) {
    const bool* m = p.mask.data<bool>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        if (!m[base + (i0 + r) * st[2] + (j0 + c) * st[3]]) s[r * kBk + c] = ninf;
  } else {
    const T* m = p.mask.data<T>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) s[r * kBk + c] += m[base + (i0 + r) * st[2] + (j0 + c) * st[3]];
  }
}

// Key tiles a query tile [i0, i0 + rows) can see (causal: up to its last row).
int64_t key_end(const Problem& p, int64_t i0, int64_t rows) { return p.causal ? std::min(p.S, i0 + rows) : p.S; }

template <class T>
void forward(const Problem& p, const T* q, const T* k, const T* v, T* out, T* lse) {
  const int64_t q_tiles = (p.L + kBq - 1) / kBq, group = p.Hq / p.Hkv;
  parallel_for(0, p.B * p.Hq * q_tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> s(size_t(kBq * kBk)), acc(size_t(kBq * p.Ev)), m(kBq), l(kBq);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / q_tiles, b = bh / p.Hq, h = bh % p.Hq, i0 = (t % q_tiles) * kBq;
      const int64_t rows = std::min(kBq, p.L - i0), hk = b * p.Hkv + h / group;
      const T* qt = q + (bh * p.L + i0) * p.E;
      const T* kh = k + hk * p.S * p.E;
      const T* vh = v + hk * p.S * p.Ev;
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
      std::fill(l.begin(), l.end(), T(0));
      for (int64_t j0 = 0, jend = key_end(p, i0, rows); j0 < jend; j0 += kBk) {
        const int64_t cols = std::min(kBk, jend - j0);
        kernels::gemm_1t(false, true, rows, cols, p.E, T(p.scale), qt, p.E, kh + j0 * p.E, p.E, T(0), s.data(), kBk);
        apply_mask(p, b, h, i0, rows, j0, cols, s.data());
        for (int64_t r = 0; r < rows; ++r) {
          T* sr = s.data() + r * kBk;
          const T mx = std::max(m[size_t(r)], kernels::max_of(sr, cols));
          if (mx == -std::numeric_limits<T>::infinity()) {  // nothing visible yet in this row
            std::fill(sr, sr + cols, T(0));
            continue;
          }
          const T corr = std::exp(m[size_t(r)] - mx);
          const T sum = kernels::exp_shift_sum(sr, cols, mx);
          l[size_t(r)] = l[size_t(r)] * corr + sum;
          m[size_t(r)] = mx;
          if (corr != T(1))
            for (int64_t e = 0; e < p.Ev; ++e) acc[size_t(r * p.Ev + e)] *= corr;
        }
        kernels::gemm_1t(false, false, rows, p.Ev, cols, T(1), s.data(), kBk, vh + j0 * p.Ev, p.Ev, T(1), acc.data(), p.Ev);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const T lr = l[size_t(r)], inv = lr > 0 ? T(1) / lr : T(0);
        T* o = out + (bh * p.L + i0 + r) * p.Ev;
        for (int64_t e = 0; e < p.Ev; ++e) o[e] = acc[size_t(r * p.Ev + e)] * inv;
        // The row's max and log-sum kept apart (lse = m + ls): backward forms S - lse as
        // (S - m) - ls, which keeps the precision of large scores.
        T* st = lse + 2 * (bh * p.L + i0 + r);
        st[0] = lr > 0 ? m[size_t(r)] : -std::numeric_limits<T>::infinity();
        st[1] = lr > 0 ? T(std::log(lr)) : -std::numeric_limits<T>::infinity();
      }
    }
  });
}

template <class T>
void backward(const Problem& p, const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout, T* dq,
              T* dk, T* dv) {
  const int64_t group = p.Hq / p.Hkv;
  parallel_for(0, p.B * p.Hkv, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> s(size_t(kBq * kBk)), dp(size_t(kBq * kBk)), drow(kBq);
    for (int64_t bk = t0; bk < t1; ++bk) {
      const int64_t b = bk / p.Hkv, hkv = bk % p.Hkv;
      const T* kh = k + bk * p.S * p.E;
      const T* vh = v + bk * p.S * p.Ev;
      T* dkh = dk + bk * p.S * p.E;
      T* dvh = dv + bk * p.S * p.Ev;
      for (int64_t g = 0; g < group; ++g) {
        const int64_t h = hkv * group + g, bh = b * p.Hq + h;
        for (int64_t i0 = 0; i0 < p.L; i0 += kBq) {
          const int64_t rows = std::min(kBq, p.L - i0);
          const T* qt = q + (bh * p.L + i0) * p.E;
          const T* ot = out + (bh * p.L + i0) * p.Ev;
          const T* dot = dout + (bh * p.L + i0) * p.Ev;
          const T* lt = lse + 2 * (bh * p.L + i0);  // (m, ls) per row
          T* dqt = dq + (bh * p.L + i0) * p.E;
          for (int64_t r = 0; r < rows; ++r) {  // D_i = dO_i . O_i
            T d = 0;
            for (int64_t e = 0; e < p.Ev; ++e) d += dot[r * p.Ev + e] * ot[r * p.Ev + e];
            drow[size_t(r)] = d;
          }
          for (int64_t j0 = 0, jend = key_end(p, i0, rows); j0 < jend; j0 += kBk) {
            const int64_t cols = std::min(kBk, jend - j0);
            kernels::gemm_1t(false, true, rows, cols, p.E, T(p.scale), qt, p.E, kh + j0 * p.E, p.E, T(0), s.data(), kBk);
            apply_mask(p, b, h, i0, rows, j0, cols, s.data());
            for (int64_t r = 0; r < rows; ++r) {  // P = exp((S - m) - ls); rows that see nothing get 0
              T* sr = s.data() + r * kBk;
              if (std::isinf(lt[2 * r + 1])) {
                std::fill(sr, sr + cols, T(0));
                continue;
              }
              for (int64_t c = 0; c < cols; ++c) sr[c] -= lt[2 * r];
              kernels::exp_shift_sum(sr, cols, lt[2 * r + 1]);
            }
            // dV += P^T dO ; dP = dO V^T ; dS = P (dP - D) ; dQ += dS K scale ; dK += dS^T Q scale
            kernels::gemm_1t(true, false, cols, p.Ev, rows, T(1), s.data(), kBk, dot, p.Ev, T(1), dvh + j0 * p.Ev, p.Ev);
            kernels::gemm_1t(false, true, rows, cols, p.Ev, T(1), dot, p.Ev, vh + j0 * p.Ev, p.Ev, T(0), dp.data(), kBk);
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t c = 0; c < cols; ++c) {
                const size_t at = size_t(r * kBk + c);
                dp[at] = s[at] * (dp[at] - drow[size_t(r)]);
              }
            kernels::gemm_1t(false, false, rows, p.E, cols, T(p.scale), dp.data(), kBk, kh + j0 * p.E, p.E, T(1), dqt, p.E);
            kernels::gemm_1t(true, false, cols, p.E, rows, T(p.scale), dp.data(), kBk, qt, p.E, T(1), dkh + j0 * p.E, p.E);
          }
        }
      }
    }
  });
}

// q, k, v as contiguous [B, H, L, E] (leading dims folded into B; 3-D inputs get H = 1).
Tensor as_bhle(const Tensor& t) {
  if (t.dim() == 3) return t.unsqueeze(1).contiguous();
  return t.reshape({-1, t.size(-3), t.size(-2), t.size(-1)}).contiguous();
}

}  // namespace

namespace {

// The kernel's problem for q, k, v (as the ops take them) and the mask.
Problem problem_of(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attn_mask,
                   bool is_causal, double scale) {
  Problem p;
  p.B = q.dim() > 3 ? numel_of(Dims(q.sizes().begin(), q.sizes().size() - 3)) : q.size(0);
  p.Hq = q.dim() > 3 ? q.size(-3) : 1, p.Hkv = k.dim() > 3 ? k.size(-3) : 1;
  p.L = q.size(-2), p.S = k.size(-2), p.E = q.size(-1), p.Ev = v.size(-1), p.scale = scale, p.causal = is_causal;
  if (attn_mask) {
    const Tensor m = attn_mask->dtype() == kBool ? *attn_mask : attn_mask->to(q.dtype());
    p.mask_is_bool = m.dtype() == kBool;
    // Broadcast to q's leading dims, then fold them like q.
    Dims full(q.sizes().begin(), q.sizes().size() - 1);
    full.push_back(p.S);
    p.mask = m.expand(full).reshape({p.B, p.Hq, p.L, p.S});
  }
  return p;
}

}  // namespace

// The fused kernel as two ops (torch's _scaled_dot_product_flash_attention_for_cpu and its
// backward): the forward returns the logsumexp rows the backward reads, so a traced program
// (compiled training) sees every tensor the backward uses.
FLB_OP(scaled_dot_product_flash_attention,
       (const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attn_mask, bool is_causal,
        double scale),
       (q, k, v, attn_mask, is_causal, scale), std::vector<Tensor>) {
  const Problem p = problem_of(q, k, v, attn_mask, is_causal, scale);
  const Tensor qb = as_bhle(q), kb = as_bhle(k), vb = as_bhle(v);
  Tensor out = empty({p.B, p.Hq, p.L, p.Ev}, q.dtype()), lse = empty({p.B, p.Hq, p.L, 2}, q.dtype());
  visit_dtype(q.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      forward<T>(p, qb.data<T>(), kb.data<T>(), vb.data<T>(), out.data<T>(), lse.data<T>());
  });
  Dims out_shape(q.sizes().begin(), q.sizes().size() - 1);
  out_shape.push_back(p.Ev);
  Tensor result = out.reshape(out_shape);
  autograd::record("ScaledDotProductFlashAttentionForCpuBackward0", {&result}, {&q, &k, &v}, {q, k, v, result, lse},
                   [attn_mask, is_causal, scale](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
                     return scaled_dot_product_flash_attention_backward(g[0], s[0], s[1], s[2], s[3], s[4], attn_mask,
                                                                        is_causal, scale);
                   });
  return {result, lse};
}

FLB_OP(scaled_dot_product_flash_attention_backward,
       (const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
        const Tensor& lse, const std::optional<Tensor>& attn_mask, bool is_causal, double scale),
       (grad_out, q, k, v, out, lse, attn_mask, is_causal, scale), std::vector<Tensor>) {
  const Problem p = problem_of(q, k, v, attn_mask, is_causal, scale);
  const Tensor qb = as_bhle(q), kb = as_bhle(k), vb = as_bhle(v), ob = as_bhle(out), lb = lse.contiguous();
  const Tensor dout = grad_out.reshape({p.B, p.Hq, p.L, p.Ev}).contiguous();
  Tensor dq = zeros(qb.sizes(), q.dtype()), dk = zeros(kb.sizes(), k.dtype()), dv = zeros(vb.sizes(), v.dtype());
  visit_dtype(q.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      backward<T>(p, qb.data<T>(), kb.data<T>(), vb.data<T>(), ob.data<T>(), lb.data<T>(), dout.data<T>(),
                  dq.data<T>(), dk.data<T>(), dv.data<T>());
  });
  return {dq.reshape(q.sizes()), dk.reshape(k.sizes()), dv.reshape(v.sizes())};
}

FLB_OP(scaled_dot_product_attention,
       (const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& attn_mask,
        double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa),
       (q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa), Tensor) {
  FLB_AUTOCAST(lower, scaled_dot_product_attention, q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  return scaled_dot_product_attention_decomposed(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa);
}

Tensor scaled_dot_product_attention_decomposed(const Tensor& q, const Tensor& k, const Tensor& v,
                                               const std::optional<Tensor>& attn_mask, double dropout_p,
                                               bool is_causal, std::optional<double> scale, bool enable_gqa) {
  FLB_CHECK(q.dim() >= 3 && k.dim() == q.dim() && v.dim() == q.dim(), ValueError,
            "[scaled_dot_product_attention] expected q, k, v with the same number (>= 3) of dims, got ",
            shape_str(q.sizes()), ", ", shape_str(k.sizes()), ", ", shape_str(v.sizes()));
  FLB_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(), TypeError,
            "[scaled_dot_product_attention] q, k, v must share a dtype");
  FLB_CHECK(q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2), ValueError,
            "[scaled_dot_product_attention] shapes ", shape_str(q.sizes()), ", ", shape_str(k.sizes()), ", ",
            shape_str(v.sizes()), " do not fit q [.., L, E], k [.., S, E], v [.., S, Ev]");
  FLB_CHECK(!(is_causal && attn_mask), ValueError,
            "[scaled_dot_product_attention] give either attn_mask or is_causal, not both");
  const int64_t hq = q.dim() > 3 ? q.size(-3) : 1, hkv = k.dim() > 3 ? k.size(-3) : 1;
  FLB_CHECK(hq == hkv || (enable_gqa && hkv > 0 && hq % hkv == 0), ValueError, "[scaled_dot_product_attention] ",
            hq, " query heads and ", hkv, " key/value heads: ", enable_gqa ? "the former must be a multiple of the latter"
                                                                         : "pass enable_gqa=true for grouped-query attention");
  for (int64_t d = 0; d + 3 < q.dim(); ++d)
    FLB_CHECK(q.size(d) == k.size(d) && q.size(d) == v.size(d), ValueError,
              "[scaled_dot_product_attention] batch dims of q, k, v must match");
  const double sc = scale.value_or(1.0 / std::sqrt(double(q.size(-1))));
  // An additive mask that requires grad gets its gradient (an L x S matrix anyway) from the composite.
  const bool mask_grad = attn_mask && attn_mask->dtype() != kBool && autograd::needs_grad(*attn_mask);
  const bool fusable = dropout_p == 0 && !mask_grad;
  if (fusable && (q.dtype() == kBFloat16 || q.dtype() == kFloat16)) {
    // 16-bit inputs run the float32 kernel on widened copies (statistics and accumulators are
    // float32 anyway): 2.8x faster than the composite on Zen 4 with AVX512-BF16. Autograd goes
    // through the casts.
    const AutocastGuard no_autocast(autocast::dtype(), /*enabled=*/false);  // else the call below recasts
    std::optional<Tensor> mask32;
    if (attn_mask) mask32 = attn_mask->dtype() == kBool ? *attn_mask : attn_mask->to(kFloat32);
    return scaled_dot_product_attention_decomposed(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32), mask32, 0.0,
                                                   is_causal, sc, enable_gqa)
        .to(q.dtype());
  }
  const bool fused = (q.dtype() == kFloat32 || q.dtype() == kFloat64) && fusable;
  if (!fused) {
    // The composite (differentiable) path: dropout, gradients to the mask, other dtypes.
    auto repeat_kv = [&](const Tensor& t) {  // GQA: each kv head serves hq / hkv query heads
      if (hq == hkv) return t;
      Dims ex = t.sizes(), flat = t.sizes();
      ex.insert(t.dim() - 2, hq / hkv);
      flat[size_t(t.dim() - 3)] = hq;
      return t.unsqueeze(-3).expand(ex).reshape(flat);
    };
    const Tensor kk = repeat_kv(k), vv = repeat_kv(v);
    Tensor s = mul(matmul(q, kk.transpose(-1, -2)), sc);
    if (is_causal)
      s = masked_fill(s, lt(arange(q.size(-2)).unsqueeze(1), arange(k.size(-2)).unsqueeze(0)), -INFINITY);
    if (attn_mask) s = attn_mask->dtype() == kBool ? masked_fill(s, logical_not(*attn_mask), -INFINITY) : add(s, *attn_mask);
    Tensor pr = softmax(s, -1);
    if (dropout_p > 0) pr = div(mul(pr, bernoulli(full_like(pr, 1 - dropout_p))), 1 - dropout_p);
    return matmul(pr, vv);
  }
  return scaled_dot_product_flash_attention(q, k, v, attn_mask, is_causal, sc)[0];
}
}  // namespace flambeau::nn
