// batch_norm as one fused primitive (per-channel statistics over the batch and spatial
// dims, running statistics updated in place, one fused backward) on row-major or
// channels-last tensors as they lie, and group_norm, instance_norm and local_response_norm
// on top of it and the other ops. Every channel is reduced in a fixed order (double
// accumulators, Note [Batch norm order]), so results do not depend on the thread count or
// the layout.
#include <algorithm>
#include <cmath>
#include <vector>

#include "flambeau/autograd/function.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/core/shape.h"
#include "flambeau/kernels/cpu/simd_batch_norm.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

// x viewed as [n, c, inner]: row-major (value (n, c, i) at (n * c + c) * inner + i) or
// channels-last, as it lies ((n * inner + i) * c + c).
struct Planes {
  int64_t n = 0, c = 0, inner = 1;
  bool channels_last = false;
  Planes(const Tensor& x, MemoryFormat format)
      : n(x.size(0)), c(x.size(1)),
        inner(x.dim() > 2 ? numel_of(Dims(x.sizes().data() + 2, size_t(x.dim() - 2))) : 1),
        channels_last(format != MemoryFormat::Contiguous) {}
  int64_t count() const { return n * inner; }  // values per channel
};

template <class F>
void visit_compute(DType ct, F&& f) {
  if (ct == kFloat64) f.template operator()<double>();
  else f.template operator()<float>();
}

// Note [Batch norm order]: a channel's values in each image are cut into chunks of kChunk
// positions. A chunk is summed in 8 interleaved double partial sums (position i to lane
// i % 8; 8 independent chains instead of one, which bound the loop by the add's latency),
// added as ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)); the channel's sum adds the chunks' in
// (image, chunk) order. Row-major, threads split the channels; channels-last
// (kernels/cpu/simd_batch_norm.h), they split the (image, chunk) units, each a run of whole
// rows, and the units' sums are added in order afterwards. Either way every sum is the same
// operations in the same order, so results are the same bits with any thread count and in
// either layout.
constexpr int64_t kChunk = 1024;

double add_lanes(const double* l) { return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])); }

// The sum of f(i) over channel c's values (row-major).
template <class F>
double channel_sum(const Planes& p, int64_t c, const F& f) {
  double total = 0;
  for (int64_t n = 0; n < p.n; ++n) {
    const int64_t base = (n * p.c + c) * p.inner;
    for (int64_t k0 = 0; k0 < p.inner; k0 += kChunk) {
      const int64_t k1 = std::min(p.inner, k0 + kChunk);
      double lanes[8] = {};
      int64_t i = k0;
      for (; i + 8 <= k1; i += 8)
        for (int j = 0; j < 8; ++j) lanes[j] += f(base + i + j);
      for (; i < k1; ++i) lanes[(i - k0) % 8] += f(base + i);
      total += add_lanes(lanes);
    }
  }
  return total;
}

// f(c) for each channel, in parallel (row-major).
template <class F>
void for_channels(const Planes& p, const F& f) {
  parallel_for(0, p.c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) f(c);
  });
}

// Calls f(value index) over channel c's values (row-major).
template <class F>
void for_values(const Planes& p, int64_t c, const F& f) {
  for (int64_t n = 0; n < p.n; ++n) {
    const int64_t base = (n * p.c + c) * p.inner;
    for (int64_t i = base; i < base + p.inner; ++i) f(i);
  }
}

// Channels-last: totals_t[c] (t < terms, 1 or 2) from unit(value offset, rows, sums_0, sums_1),
// which sums one (image, chunk) unit's rows; units run in parallel and are added in order.
template <class Unit>
void unit_sums(const Planes& p, int terms, const Unit& unit, double* total0, double* total1) {
  const int64_t chunks = (p.inner + kChunk - 1) / kChunk, units = p.n * chunks, set = terms * p.c;
  std::vector<double> part(size_t(units * set));
  parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t k0 = u % chunks * kChunk;
      double* out = part.data() + u * set;
      unit((u / chunks * p.inner + k0) * p.c, std::min(kChunk, p.inner - k0), out, out + p.c);
    }
  });
  for (int t = 0; t < terms; ++t)
    for (int64_t c = 0; c < p.c; ++c) {
      double total = 0;
      for (int64_t u = 0; u < units; ++u) total += part[size_t(u * set + t * p.c + c)];
      (t == 0 ? total0 : total1)[c] = total;
    }
}

// Channels-last: f(value offset, rows) over runs of rows, in parallel.
template <class F>
void for_rows(const Planes& p, const F& f) {
  parallel_for(0, p.count(), std::max<int64_t>(1, 32768 / std::max<int64_t>(1, p.c)),
               [&](int64_t r0, int64_t r1) { f(r0 * p.c, r1 - r0); });
}

// mean and biased variance of each channel (two passes over it).
template <class T>
void channel_stats(const T* x, const Planes& p, std::vector<double>& mean, std::vector<double>& var) {
  const double count = double(p.count());
  if (p.channels_last) {
    unit_sums(p, 1, [&](int64_t at, int64_t rows, double* s, double*) {
      kernels::batch_norm_cl_sums(x + at, rows, p.c, nullptr, s);
    }, mean.data(), nullptr);
    for (double& m : mean) m /= count;
    unit_sums(p, 1, [&](int64_t at, int64_t rows, double* s, double*) {
      kernels::batch_norm_cl_sums(x + at, rows, p.c, mean.data(), s);
    }, var.data(), nullptr);
    for (double& v : var) v /= count;
    return;
  }
  for_channels(p, [&](int64_t c) {
    const double m = channel_sum(p, c, [&](int64_t i) { return double(x[i]); }) / count;
    const double q = channel_sum(p, c, [&](int64_t i) { return (double(x[i]) - m) * (double(x[i]) - m); });
    mean[size_t(c)] = m;
    var[size_t(c)] = q / count;
  });
}

Tensor vector_tensor(const std::vector<double>& v, DType dt) { return from_vector(v).to(dt); }

std::vector<double> doubles(const Tensor& t) {
  const Tensor d = t.to(kFloat64).contiguous();
  return std::vector<double>(d.data<double>(), d.data<double>() + d.numel());
}

// The gradients of batch_norm written with ops, as Note [Norm double backward]: in training
// the statistics are recomputed from x, in evaluation the saved ones are constants.
std::vector<Tensor> batch_norm_backward_graph(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& mean_t,
                                              const Tensor& rstd_t, bool training, double eps, const bool need[3]) {
  const DType ct = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  Dims dims = {0}, cshape(size_t(x.dim()), 1);
  for (int64_t i = 2; i < x.dim(); ++i) dims.push_back(i);
  cshape[1] = x.size(1);
  const Tensor xc = x.to(ct), g = gy.to(ct);
  Tensor centred, rstd;
  if (training) {
    centred = sub(xc, mean(xc, dims, true));
    rstd = rsqrt(add(mean(mul(centred, centred), dims, true), eps));
  } else {
    centred = sub(xc, mean_t.to(ct).reshape(cshape));
    rstd = rstd_t.to(ct).reshape(cshape);
  }
  const Tensor xhat = mul(centred, rstd);
  std::vector<Tensor> out(3);
  if (need[0]) {
    const Tensor gxhat = w.defined() ? mul(g, w.to(ct).reshape(cshape)) : g;
    Tensor inner = gxhat;
    if (training)
      inner = sub(sub(gxhat, mean(gxhat, dims, true)), mul(xhat, mean(mul(gxhat, xhat), dims, true)));
    out[0] = mul(inner, rstd);
  }
  if (need[1]) out[1] = sum(mul(g, xhat), dims);
  if (need[2]) out[2] = sum(g, dims);
  return out;
}

}  // namespace

// The fused backward: (dx, dweight, dbias) of y = (x - mean) * rstd * weight + bias, where
// in training mean and rstd are x's own statistics (so dx has their terms too).
std::vector<Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& x, const std::optional<Tensor>& weight,
                                        const Tensor& mean, const Tensor& rstd, bool training) {
  const DType ct = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  const MemoryFormat format = ops::kept_memory_format(x);
  const Planes p(x, format);
  const Tensor xc = x.to(ct).contiguous(format), dy = grad_out.to(ct).contiguous(format);
  const std::vector<double> m = doubles(mean), r = doubles(rstd);
  const std::vector<double> w = weight ? doubles(*weight) : std::vector<double>(size_t(p.c), 1.0);
  std::vector<double> dw(size_t(p.c)), db(size_t(p.c)), scale(size_t(p.c)), a(size_t(p.c)), b(size_t(p.c));
  Tensor dx = empty(x.sizes(), ct, format);
  // The per-channel coefficients of dx from the two sums of channel c.
  auto coefficients = [&](size_t k) {
    dw[k] *= r[k];
    scale[k] = w[k] * r[k];
    a[k] = training ? db[k] / double(p.count()) : 0;
    b[k] = training ? dw[k] / double(p.count()) : 0;
  };
  visit_compute(ct, [&]<class T>() {
    const T* xp = xc.data<T>();
    const T* gp = dy.data<T>();
    T* out = dx.data<T>();
    if (p.channels_last) {
      unit_sums(p, 2, [&](int64_t at, int64_t rows, double* s_dy, double* s_dyx) {
        kernels::batch_norm_cl_grad_sums(xp + at, gp + at, rows, p.c, m.data(), s_dy, s_dyx);
      }, db.data(), dw.data());
      for (size_t k = 0; k < size_t(p.c); ++k) coefficients(k);
      const kernels::BatchNormGradCoefficients q{m.data(), r.data(), a.data(), b.data(), scale.data()};
      for_rows(p, [&](int64_t at, int64_t rows) { kernels::batch_norm_cl_dx(xp + at, gp + at, rows, p.c, q, out + at); });
      return;
    }
    for_channels(p, [&](int64_t c) {
      const size_t k = size_t(c);
      db[k] = channel_sum(p, c, [&](int64_t i) { return double(gp[i]); });
      dw[k] = channel_sum(p, c, [&](int64_t i) { return double(gp[i]) * (double(xp[i]) - m[k]); });
      coefficients(k);
      for_values(p, c, [&](int64_t i) {
        const double xhat = (double(xp[i]) - m[k]) * r[k];
        out[i] = T((double(gp[i]) - a[k] - xhat * b[k]) * scale[k]);
      });
    });
  });
  return {dx, vector_tensor(dw, x.dtype()), vector_tensor(db, x.dtype())};
}

FLB_OP(batch_norm,
       (const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
        const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool training, double momentum,
        double eps),
       (x, running_mean, running_var, weight, bias, training, momentum, eps), Tensor) {
  FLB_CHECK(x.dim() >= 2, ValueError, "[batch_norm] expected an input of at least 2 dims [N, C, *], got shape ",
            shape_str(x.sizes()));
  FLB_CHECK(x.is_floating_point(), TypeError, "[batch_norm] expected a floating point input, got ",
            dtype_name(x.dtype()));
  const MemoryFormat format = ops::kept_memory_format(x);
  const Planes p(x, format);
  for (const auto* t : {&running_mean, &running_var, &weight, &bias}) {
    if (!*t) continue;
    const char* what = t == &running_mean ? "running_mean" : t == &running_var ? "running_var"
                       : t == &weight ? "weight" : "bias";
    FLB_CHECK((*t)->sizes() == Dims{p.c} && (*t)->is_floating_point(), ValueError, "[batch_norm] expected ", what,
              " to be a floating point tensor of shape (", p.c, ") for an input of shape ", shape_str(x.sizes()),
              ", got ", shape_str((*t)->sizes()), " ", dtype_name((*t)->dtype()));
  }
  FLB_CHECK(training || (running_mean && running_var), ValueError,
            "[batch_norm] running_mean and running_var must be given in evaluation mode (training=False)");
  FLB_CHECK(!training || p.count() > 1, ValueError,
            "[batch_norm] expected more than 1 value per channel when training, got input size ",
            shape_str(x.sizes()));
  FLB_CHECK(bool(running_mean) == bool(running_var), ValueError,
            "[batch_norm] running_mean and running_var must be given together");
  const DType ct = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  std::vector<double> mean(size_t(p.c)), var(size_t(p.c));
  Tensor out;
  const Tensor xc = [&] {  // x in the compute dtype and layout, for both passes below
    autograd::NoGradGuard no_grad;
    return x.to(ct).contiguous(format);
  }();
  {
    autograd::NoGradGuard no_grad;
    if (training) {
      visit_compute(ct, [&]<class T>() { channel_stats(xc.data<T>(), p, mean, var); });
      if (running_mean) {
        const double unbias = double(p.count()) / double(p.count() - 1);
        std::vector<double> rm = doubles(*running_mean), rv = doubles(*running_var);
        for (size_t c = 0; c < rm.size(); ++c) {
          rm[c] = (1 - momentum) * rm[c] + momentum * mean[c];
          rv[c] = (1 - momentum) * rv[c] + momentum * var[c] * unbias;
        }
        Tensor a = *running_mean, b = *running_var;
        a.copy_(from_vector(rm)), b.copy_(from_vector(rv));
      }
    } else {
      mean = doubles(*running_mean), var = doubles(*running_var);
    }
  }
  std::vector<double> rstd(size_t(p.c));
  for (size_t c = 0; c < rstd.size(); ++c) rstd[c] = 1 / std::sqrt(var[c] + eps);
  {
    autograd::NoGradGuard no_grad;
    const std::vector<double> w = weight ? doubles(*weight) : std::vector<double>(size_t(p.c), 1.0);
    const std::vector<double> b = bias ? doubles(*bias) : std::vector<double>(size_t(p.c), 0.0);
    std::vector<double> scale(size_t(p.c)), shift(size_t(p.c));
    for (size_t c = 0; c < scale.size(); ++c) scale[c] = rstd[c] * w[c], shift[c] = b[c] - mean[c] * scale[c];
    Tensor y = empty(x.sizes(), ct, format);
    visit_compute(ct, [&]<class T>() {
      const T* xp = xc.data<T>();
      T* yp = y.data<T>();
      if (p.channels_last)
        return for_rows(p, [&](int64_t at, int64_t rows) {
          kernels::batch_norm_cl_affine(xp + at, rows, p.c, scale.data(), shift.data(), yp + at);
        });
      for_channels(p, [&](int64_t c) {
        const size_t k = size_t(c);
        for_values(p, c, [&](int64_t i) { yp[i] = T(double(xp[i]) * scale[k] + shift[k]); });
      });
    });
    out = y.to(x.dtype());
  }
  const Tensor mean_t = from_vector(mean), rstd_t = from_vector(rstd);
  const bool need_x = autograd::requires_grad(x), need_w = weight && autograd::requires_grad(*weight),
             need_b = bias && autograd::requires_grad(*bias);
  autograd::record("NativeBatchNormBackward0", {&out}, {&x, weight ? &*weight : nullptr, bias ? &*bias : nullptr},
                   {x, weight.value_or(Tensor()), mean_t, rstd_t},
                   [training, eps, need_x, need_w, need_b](const std::vector<Tensor>& grads,
                                                          const std::vector<Tensor>& saved) {
                     if (autograd::needs_grad(grads[0], saved[0], saved[1])) {  // Note [Norm double backward]
                       const bool need[3] = {need_x, need_w, need_b};
                       return batch_norm_backward_graph(grads[0], saved[0], saved[1], saved[2], saved[3], training,
                                                        eps, need);
                     }
                     const std::optional<Tensor> w = saved[1].defined() ? std::optional(saved[1]) : std::nullopt;
                     std::vector<Tensor> g = batch_norm_backward(grads[0], saved[0], w, saved[2], saved[3], training);
                     if (!need_w) g[1] = Tensor();
                     if (!need_b) g[2] = Tensor();
                     return g;
                   });
  return in_layout_of(out, x);  // (a row-major result where x's layout is neither)
}

// Statistics per (sample, group of channels): a layer_norm over each group's values, then
// the per-channel affine.
FLB_OP(group_norm,
       (const Tensor& x, int64_t num_groups, const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
        double eps),
       (x, num_groups, weight, bias, eps), Tensor) {
  FLB_CHECK(x.dim() >= 2, ValueError, "[group_norm] expected an input of at least 2 dims [N, C, *], got shape ",
            shape_str(x.sizes()));
  const int64_t c = x.size(1);
  FLB_CHECK(num_groups > 0 && c % num_groups == 0, ValueError, "[group_norm] expected number of channels in input (",
            c, ") to be divisible by num_groups (", num_groups, "), input shape ", shape_str(x.sizes()));
  for (const auto* t : {&weight, &bias})
    FLB_CHECK(!*t || (*t)->sizes() == Dims{c}, ValueError, "[group_norm] expected ",
              t == &weight ? "weight" : "bias", " of shape (", c, ") for an input of shape ", shape_str(x.sizes()),
              ", got ", shape_str((*t)->sizes()));
  const int64_t n = x.size(0), per_group = num_groups > 0 && n > 0 ? x.numel() / (n * num_groups) : 0;
  Tensor y = layer_norm(x.reshape({n, num_groups, per_group}), {per_group}, {}, {}, eps).reshape(x.sizes());
  Dims affine(static_cast<size_t>(x.dim()), 1);
  affine[1] = c;
  if (weight) y = mul(y, weight->reshape(affine));
  if (bias) y = add(y, bias->reshape(affine));
  return y;
}

// torch's rule: batch_norm over x viewed as [1, N * C, *], the running statistics repeated
// per sample and their updates averaged back over the batch.
FLB_OP(instance_norm,
       (const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
        const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, bool use_input_stats,
        double momentum, double eps),
       (x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps), Tensor) {
  FLB_CHECK(x.dim() >= 3, ValueError, "[instance_norm] expected an input of at least 3 dims [N, C, *], got shape ",
            shape_str(x.sizes()));
  const int64_t n = x.size(0), c = x.size(1);
  FLB_CHECK(use_input_stats || (running_mean && running_var), ValueError,
            "[instance_norm] expected running_mean and running_var to be defined when use_input_stats is false");
  Dims flat = x.sizes();
  flat[0] = 1, flat[1] = n * c;
  auto repeated = [&](const std::optional<Tensor>& t) -> std::optional<Tensor> {
    if (!t) return std::nullopt;
    FLB_CHECK(t->sizes() == Dims{c}, ValueError, "[instance_norm] expected per-channel tensors of shape (", c,
              ") for an input of shape ", shape_str(x.sizes()), ", got ", shape_str(t->sizes()));
    return repeat(*t, {n});
  };
  std::optional<Tensor> rm = repeated(running_mean), rv = repeated(running_var);
  const Tensor y = batch_norm(x.reshape(flat), rm, rv, repeated(weight), repeated(bias), use_input_stats, momentum,
                              eps);
  if (use_input_stats && running_mean) {
    autograd::NoGradGuard no_grad;
    Tensor a = *running_mean, b = *running_var;
    a.copy_(mean(rm->reshape({n, c}), {0}));
    b.copy_(mean(rv->reshape({n, c}), {0}));
  }
  return y.reshape(x.sizes());
}

// x / (k + alpha / size * sum of x^2 over `size` neighbouring channels)^beta, the window
// centred (size / 2 before, (size - 1) / 2 after), padded with zeros.
FLB_OP(local_response_norm, (const Tensor& x, int64_t size, double alpha, double beta, double k),
       (x, size, alpha, beta, k), Tensor) {
  FLB_CHECK(x.dim() >= 3, ValueError, "[local_response_norm] expected 3D or higher dimensionality input, got shape ",
            shape_str(x.sizes()));
  FLB_CHECK(size > 0, ValueError, "[local_response_norm] size must be positive, got ", size);
  const int64_t c = x.size(1);
  const Tensor sq = movedim(mul(x, x), {1}, {-1});  // channels last, for pad
  Dims padding = {size / 2, (size - 1) / 2};
  const Tensor padded = pad(sq, padding, "constant", 0.0);
  Tensor acc = padded.narrow(-1, 0, c);
  for (int64_t i = 1; i < size; ++i) acc = add(acc, padded.narrow(-1, i, c));
  // torch's order: the window's average, times alpha, plus k, to the beta.
  const Tensor average = flambeau::div(movedim(acc, {-1}, {1}), Tensor(double(size)));
  return flambeau::div(x, pow(add(mul(average, Tensor(alpha)), Tensor(k)), Tensor(beta)));
}

}  // namespace flambeau::nn::functional
