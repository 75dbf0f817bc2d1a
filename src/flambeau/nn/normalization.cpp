// layer_norm and rms_norm as fused primitives: rows (the trailing normalized_shape dims)
// are made contiguous in the compute type, normalised one row per kernel call in
// parallel, and the row statistics (mean, 1/std) saved for one fused backward.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "flambeau/core/op_hook.h"
#include "flambeau/autograd/function.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd_norm.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

struct NormShape {
  int64_t rows = 0, cols = 1;
};

NormShape check_norm_args(const char* op, const Tensor& x, const Dims& normalized_shape,
                          const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  FLB_CHECK(x.is_floating_point(), TypeError, "[", op, "] expected a floating point input, got ", dtype_name(x.dtype()));
  const int64_t k = int64_t(normalized_shape.size());
  FLB_CHECK(k >= 1, ValueError, "[", op, "] normalized_shape must have at least one dim");
  bool fits = x.dim() >= k;
  for (int64_t i = 0; fits && i < k; ++i) fits = x.size(x.dim() - k + i) == normalized_shape[size_t(i)];
  if (!fits) {
    std::string want = "(*";
    for (int64_t d : normalized_shape) want += ", " + std::to_string(d);
    FLB_CHECK(false, ValueError, "[", op, "] normalized_shape ", shape_str(normalized_shape),
              " expects an input of shape ", want, "), got ", shape_str(x.sizes()));
  }
  for (const auto* p : {&weight, &bias}) {
    if (!*p) continue;
    const char* what = p == &weight ? "weight" : "bias";
    FLB_CHECK((*p)->is_floating_point(), TypeError, "[", op, "] ", what, " must be floating point, got ",
              dtype_name((*p)->dtype()));
    FLB_CHECK((*p)->sizes() == normalized_shape, ValueError, "[", op, "] ", what, " of shape ",
              shape_str((*p)->sizes()), " does not match normalized_shape ", shape_str(normalized_shape));
  }
  NormShape s;
  s.rows = numel_of(Dims(x.sizes().data(), size_t(x.dim() - k)));
  s.cols = numel_of(normalized_shape);
  return s;
}

// Note [Deterministic weight gradients]: the backward cuts the rows into blocks whose size
// depends only on the row length; each block adds its rows' dy * xhat (and dy) into its
// own partial row, and the partials are summed in block order. So dweight and dbias have
// the same bits with any thread count.
int64_t rows_per_block(int64_t cols) { return std::clamp<int64_t>(16384 / std::max<int64_t>(cols, 1), 4, 256); }

template <class T>
void forward_rows(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, NormShape s, bool rms, double eps) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(s.cols, 1));
  parallel_for(0, s.rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      kernels::norm_row_forward(x + r * s.cols, w, b, y + r * s.cols, s.cols, rms, eps, mean + r, rstd + r);
  });
}

// dx (when given), and dw / db (when given) summed per Note [Deterministic weight gradients].
template <class T>
void backward_rows(const T* x, const T* dy, const T* w, const T* mean, const T* rstd, NormShape s, bool rms, T* dx,
                   T* dw, T* db) {
  const int64_t per = rows_per_block(s.cols), blocks = (s.rows + per - 1) / per;
  std::vector<T> part_w(dw ? size_t(blocks * s.cols) : 0), part_b(db ? size_t(blocks * s.cols) : 0);
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk)
      for (int64_t r = blk * per; r < std::min(s.rows, (blk + 1) * per); ++r)
        kernels::norm_row_backward(x + r * s.cols, dy + r * s.cols, w, mean[r], rstd[r], s.cols, rms,
                                   dx ? dx + r * s.cols : nullptr, dw ? part_w.data() + blk * s.cols : nullptr,
                                   db ? part_b.data() + blk * s.cols : nullptr);
  });
  for (auto [out, part] : {std::pair{dw, &part_w}, std::pair{db, &part_b}}) {
    if (!out) continue;
    parallel_for(0, s.cols, 1024, [&, out = out, part = part](int64_t c0, int64_t c1) {
      std::vector<double> acc(size_t(c1 - c0), 0.0);
      for (int64_t blk = 0; blk < blocks; ++blk)
        for (int64_t c = c0; c < c1; ++c) acc[size_t(c - c0)] += double((*part)[size_t(blk * s.cols + c)]);
      for (int64_t c = c0; c < c1; ++c) out[c] = T(acc[size_t(c - c0)]);
    });
  }
}

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* mut_ptr_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Calls f.template operator()<T>() with T float or double for the compute dtype.
template <class F>
void visit_compute(DType ct, F&& f) {
  if (ct == kFloat64) f.template operator()<double>();
  else f.template operator()<float>();
}

DType compute_dtype(const Tensor& x) { return x.dtype() == kFloat64 ? kFloat64 : kFloat32; }

// Note [Norm double backward]: with grad mode on in backward (create_graph) and a tensor of
// the formula requiring grad, the gradients are written with ops from x itself (its row
// statistics recomputed), so they record a graph; otherwise the fused kernels run.
// dw comes in x's shape: the node sums it to the weight's.
std::vector<Tensor> norm_backward_graph(const Tensor& gy, const Tensor& x, const Tensor& w, const Dims& normalized_shape,
                                        double eps, bool rms, const bool need[3]) {
  const int64_t k = int64_t(normalized_shape.size());
  Dims dims;
  for (int64_t i = 0; i < k; ++i) dims.push_back(x.dim() - k + i);
  const DType ct = compute_dtype(x);
  const Tensor xc = x.to(ct), g = gy.to(ct);
  const Tensor centred = rms ? xc : sub(xc, mean(xc, dims, true));
  const Tensor rstd = rsqrt(add(mean(mul(centred, centred), dims, true), eps));
  const Tensor xhat = mul(centred, rstd);
  std::vector<Tensor> out(3);
  if (need[0]) {
    const Tensor gxhat = w.defined() ? mul(g, w.to(ct)) : g;
    Tensor inner = sub(gxhat, mul(xhat, mean(mul(gxhat, xhat), dims, true)));
    if (!rms) inner = sub(inner, mean(gxhat, dims, true));
    out[0] = mul(inner, rstd);
  }
  if (need[1]) out[1] = mul(g, xhat);
  if (need[2]) out[2] = g;
  return out;
}

}  // namespace

// The fused kernels as two ops (torch's native_layer_norm and its backward): the forward
// returns the row statistics its backward reads, so a traced program (compiled training)
// sees every tensor the backward uses.
FLB_OP(fused_norm,
       (const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
        const std::optional<Tensor>& bias, double eps, bool rms),
       (x, normalized_shape, weight, bias, eps, rms), std::vector<Tensor>) {
  const char* op = rms ? "rms_norm" : "layer_norm";
  const NormShape s = check_norm_args(op, x, normalized_shape, weight, bias);
  const DType ct = compute_dtype(x);
  Tensor out;
  Tensor mean = empty({s.rows}, ct), rstd = empty({s.rows}, ct);
  {
    autograd::NoGradGuard no_grad;
    const Tensor xc = x.to(ct).contiguous();
    Tensor wc, bc;
    if (weight) wc = weight->to(ct).contiguous();
    if (bias) bc = bias->to(ct).contiguous();
    Tensor y = empty(x.sizes(), ct);
    visit_compute(ct, [&]<class T>() {
      forward_rows<T>(xc.data<T>(), ptr_or_null<T>(wc), ptr_or_null<T>(bc), y.data<T>(), mean.data<T>(),
                      rstd.data<T>(), s, rms, eps);
    });
    out = y.to(x.dtype());
  }
  const bool need_x = autograd::requires_grad(x), need_w = weight && autograd::requires_grad(*weight),
             need_b = bias && autograd::requires_grad(*bias);
  const Tensor* w_in = weight ? &*weight : nullptr;
  const Tensor* b_in = bias ? &*bias : nullptr;
  autograd::record(rms ? "FusedRmsNormBackward0" : "NativeLayerNormBackward0", {&out}, {&x, w_in, b_in},
                   {x, weight.value_or(Tensor()), mean, rstd},
                   [normalized_shape, rms, eps, need_x, need_w, need_b](const std::vector<Tensor>& grads,
                                                                        const std::vector<Tensor>& saved) {
                     if (autograd::needs_grad(grads[0], saved[0], saved[1])) {  // Note [Norm double backward]
                       const bool need[3] = {need_x, need_w, need_b};
                       return norm_backward_graph(grads[0], saved[0], saved[1], normalized_shape, eps, rms, need);
                     }
                     const std::optional<Tensor> w = saved[1].defined() ? std::optional(saved[1]) : std::nullopt;
                     std::vector<Tensor> got = fused_norm_backward(grads[0], saved[0], normalized_shape, w, saved[2],
                                                                   saved[3], rms, need_x, need_w, need_b);
                     std::vector<Tensor> out(3);  // dx, dw, db: the ones asked for, in order
                     size_t k = 0;
                     for (size_t i = 0; i < 3; ++i)
                       if ((i == 0 && need_x) || (i == 1 && need_w) || (i == 2 && need_b)) out[i] = got[k++];
                     return out;
                   });
  return {out, mean, rstd};
}

FLB_OP(fused_norm_backward,
       (const Tensor& grad_out, const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
        const Tensor& mean, const Tensor& rstd, bool rms, bool need_input, bool need_weight, bool need_bias),
       (grad_out, x, normalized_shape, weight, mean, rstd, rms, need_input, need_weight, need_bias),
       std::vector<Tensor>) {
  const NormShape s = check_norm_args(rms ? "rms_norm" : "layer_norm", x, normalized_shape, weight, {});
  const DType ct = compute_dtype(x);
  const Tensor xc = x.to(ct).contiguous(), dy = grad_out.to(ct).contiguous();
  const Tensor wc = weight ? weight->to(ct).contiguous() : Tensor();
  const Tensor mc = mean.contiguous(), rc = rstd.contiguous();
  Tensor dx = need_input ? empty(x.sizes(), ct) : Tensor(), dw = need_weight ? empty(normalized_shape, ct) : Tensor(),
         db = need_bias ? empty(normalized_shape, ct) : Tensor();
  visit_compute(ct, [&]<class T>() {
    backward_rows<T>(xc.data<T>(), dy.data<T>(), ptr_or_null<T>(wc), mc.data<T>(), rc.data<T>(), s, rms,
                     mut_ptr_or_null<T>(dx), mut_ptr_or_null<T>(dw), mut_ptr_or_null<T>(db));
  });
  std::vector<Tensor> out;
  for (const Tensor& t : {dx, dw, db})
    if (t.defined()) out.push_back(t);
  return out;
}

namespace {

double machine_epsilon(DType dt) {
  switch (dt) {
    case kFloat64: return std::numeric_limits<double>::epsilon();
    case kFloat16: return 0x1p-10;
    case kBFloat16: return 0x1p-7;
    default: return std::numeric_limits<float>::epsilon();
  }
}

}  // namespace

FLB_OP(layer_norm,
       (const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
        const std::optional<Tensor>& bias, double eps),
       (x, normalized_shape, weight, bias, eps), Tensor) {
  return fused_norm(x, normalized_shape, weight, bias, eps, false)[0];
}

FLB_OP(rms_norm,
       (const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
        std::optional<double> eps),
       (x, normalized_shape, weight, eps), Tensor) {
  return fused_norm(x, normalized_shape, weight, {}, eps.value_or(machine_epsilon(x.dtype())), true)[0];
}

Tensor layer_norm_decomposed(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
                             const std::optional<Tensor>& bias, double eps) {
  return fused_norm(x, normalized_shape, weight, bias, eps, false)[0];
}

Tensor rms_norm_decomposed(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
                           std::optional<double> eps) {
  return fused_norm(x, normalized_shape, weight, {}, eps.value_or(machine_epsilon(x.dtype())), true)[0];
}

}  // namespace flambeau::nn::functional
