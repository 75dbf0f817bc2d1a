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

Tensor fused_norm(const char* op, const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
            const std::optional<Tensor>& bias, double eps, bool rms) {
  const NormShape s = check_norm_args(op, x, normalized_shape, weight, bias);
  const DType ct = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Tensor xc, wc, bc, out;
  Tensor mean = empty({s.rows}, ct), rstd = empty({s.rows}, ct);
  {
    autograd::NoGradGuard no_grad;
    xc = x.to(ct).contiguous();
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
  autograd::record(rms ? "FusedRmsNormBackward0" : "NativeLayerNormBackward0", {&out}, {&x, w_in, b_in}, {xc, wc, mean, rstd},
                   [s, rms, ct, need_x, need_w, need_b, x_shape = x.sizes(), w_shape = normalized_shape](
                       const std::vector<Tensor>& grads, const std::vector<Tensor>& saved) {
                     const Tensor dy = grads[0].to(ct).contiguous();
                     Tensor dx = need_x ? empty(x_shape, ct) : Tensor(), dw = need_w ? empty(w_shape, ct) : Tensor(),
                            db = need_b ? empty(w_shape, ct) : Tensor();
                     visit_compute(ct, [&]<class T>() {
                       backward_rows<T>(saved[0].data<T>(), dy.data<T>(), ptr_or_null<T>(saved[1]),
                                        saved[2].data<T>(), saved[3].data<T>(), s, rms, mut_ptr_or_null<T>(dx),
                                        mut_ptr_or_null<T>(dw), mut_ptr_or_null<T>(db));
                     });
                     return std::vector<Tensor>{dx, dw, db};
                   });
  return out;
}

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
  return fused_norm("layer_norm", x, normalized_shape, weight, bias, eps, false);
}

FLB_OP(rms_norm,
       (const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
        std::optional<double> eps),
       (x, normalized_shape, weight, eps), Tensor) {
  return fused_norm("rms_norm", x, normalized_shape, weight, {}, eps.value_or(machine_epsilon(x.dtype())), true);
}

namespace {
// The normalized dims (the last n) and the compute dtype of x, as the fused kernels use.
Dims last_dims(const Dims& normalized_shape) {
  Dims dims;
  for (size_t i = 0; i < normalized_shape.size(); ++i) dims.push_back(-1 - int64_t(i));
  return dims;
}
DType compute_dtype(const Tensor& x) { return x.dtype() == kFloat64 ? kFloat64 : kFloat32; }
}  // namespace

Tensor layer_norm_decomposed(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
                             const std::optional<Tensor>& bias, double eps) {
  (void)check_norm_args("layer_norm", x, normalized_shape, weight, bias);
  const DType ct = compute_dtype(x);
  const Dims dims = last_dims(normalized_shape);
  const Tensor xc = x.to(ct);
  const Tensor centred = xc - xc.mean(dims, true);
  Tensor y = centred * rsqrt((centred * centred).mean(dims, true) + eps);
  if (weight) y = y * weight->to(ct);
  if (bias) y = y + bias->to(ct);
  return y.to(x.dtype());
}

Tensor rms_norm_decomposed(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
                           std::optional<double> eps) {
  (void)check_norm_args("rms_norm", x, normalized_shape, weight, {});
  const DType ct = compute_dtype(x);
  const Tensor xc = x.to(ct);
  Tensor y = xc * rsqrt((xc * xc).mean(last_dims(normalized_shape), true) + eps.value_or(machine_epsilon(x.dtype())));
  if (weight) y = y * weight->to(ct);
  return y.to(x.dtype());
}

}  // namespace flambeau::nn::functional
