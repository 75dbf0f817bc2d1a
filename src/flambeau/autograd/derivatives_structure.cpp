// Backward formulas of views, reductions, softmax, scans, matrix products, cat and the
// indexing ops.
#include <cmath>

#include "flambeau/autograd/derivatives.h"
#include "flambeau/core/parallel.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"
#include "flambeau/ops/reduce.h"

namespace flambeau::autograd {
namespace {

using Grads = std::vector<Tensor>;

// g (reduced over dims) broadcast back to the input's shape.
Tensor unreduce(const Tensor& g, const Tensor& in_shape_of, const Dims& keep_shape) {
  return g.reshape(keep_shape).expand(in_shape_of.sizes());
}

// Calls f(in, out, n) on every row along `dim` of the tensors `ins` (one shape, read as
// float64; in[k] is row k of ins[k]) and returns the float64 results shaped like ins[0].
// Each row is handled by one thread, so results do not depend on the thread count.
template <class F>
Tensor map_rows(const std::vector<Tensor>& ins, int64_t dim, const F& f) {
  if (ins[0].dim() == 0) {
    std::vector<Tensor> one;
    for (const Tensor& t : ins) one.push_back(t.reshape({1}));
    return map_rows(one, 0, f).reshape({});
  }
  std::vector<Tensor> xs;
  for (const Tensor& t : ins) xs.push_back(t.transpose(dim, -1).to(kFloat64).contiguous());
  Tensor out = empty(xs[0].sizes(), kFloat64);
  const int64_t n = out.size(-1), rows = n ? out.numel() / n : 0;
  parallel_for(0, rows, std::max<int64_t>(1, ops::kElemGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    std::vector<const double*> in(xs.size());
    for (int64_t r = b; r < e; ++r) {
      for (size_t k = 0; k < xs.size(); ++k) in[k] = xs[k].data<double>() + r * n;
      f(in.data(), out.data<double>() + r * n, n);
    }
  });
  return out.transpose(dim, -1);
}

// For each element of x, the product of the other elements of its group when reducing x
// to `keep_shape` (the dims of size 1 there): an exclusive prefix times suffix product.
Tensor others_product(const Tensor& x, const Dims& keep_shape) {
  if (x.dim() == 0) return ones({}, kFloat64);
  Dims perm, reduced_sizes, kept_sizes;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (keep_shape[size_t(d)] != 1) perm.push_back(d), kept_sizes.push_back(x.size(d));
  for (int64_t d = 0; d < x.dim(); ++d)
    if (keep_shape[size_t(d)] == 1) perm.push_back(d), reduced_sizes.push_back(x.size(d));
  Dims inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int64_t(i);
  Dims rows_shape = kept_sizes;
  rows_shape.push_back(numel_of(reduced_sizes));
  const Tensor rows = x.permute(perm).reshape(rows_shape);
  const Tensor r = map_rows({rows}, -1, [](const double* const* in, double* o, int64_t n) {
    double acc = 1;
    for (int64_t i = n; i-- > 0;) o[i] = acc, acc *= in[0][i];
    acc = 1;
    for (int64_t i = 0; i < n; ++i) o[i] *= acc, acc *= in[0][i];
  });
  Dims permuted = kept_sizes;
  for (int64_t v : reduced_sizes) permuted.push_back(v);
  return r.reshape(permuted).permute(inverse);
}

}  // namespace

void record_view(const char* name, const Tensor& in, Tensor& out, std::function<Tensor(const Tensor&)> back) {
  if (!needs_grad(in)) return;
  record(name, {&out}, {&in}, {}, [back](const Grads& g, const Grads&) { return Grads{back(g[0])}; });
}

void record_slice(const char* name, const Tensor& in, Tensor& out, std::function<Tensor(const Tensor&)> part) {
  if (!needs_grad(in)) return;
  const Dims shape = in.sizes();
  record(name, {&out}, {&in}, {}, [part, shape](const Grads& g, const Grads&) {
    Tensor gi = zeros(shape, g[0].dtype());
    part(gi).copy_(g[0]);
    return Grads{gi};
  });
}

void record_sum(const char* name, const Tensor& in, const Dims& dims, double scale, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("sum", in, dims, true), shape = in.sizes();
  record(name, {&out}, {&in}, {}, [keep, shape, scale](const Grads& g, const Grads&) {
    Tensor r = g[0].reshape(keep).expand(shape);
    return Grads{scale == 1 ? r : mul(r, scale)};
  });
}

void record_prod(const Tensor& in, const Dims& dims, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("prod", in, dims, true);
  // d prod / d x_i = the product of the other factors (exact with zeros, unlike prod / x_i).
  record(dims.empty() ? "ProdBackward0" : "ProdBackward1", {&out}, {&in}, {in}, [keep](const Grads& g, const Grads& s) {
    return Grads{mul(unreduce(g[0], s[0], keep), others_product(s[0], keep))};
  });
}

void record_extreme(const char* name, const Tensor& in, const Dims& dims, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("amax", in, dims, true);
  // The gradient is shared evenly among the elements equal to the extreme.
  record(name, {&out}, {&in}, {in, out}, [keep, dims](const Grads& g, const Grads& s) {
    const Tensor hit = eq(s[0], unreduce(s[1], s[0], keep)).to(g[0].dtype());
    const Tensor count = sum(hit, dims, true);
    return Grads{div(mul(unreduce(g[0], s[0], keep), hit), count)};
  });
}

namespace {
// The input in float32 when it is 16-bit (the precision its forward computed in).
Tensor widened(const Tensor& x) { return is_reduced_float(x.dtype()) ? x.to(kFloat32) : x; }
}  // namespace

void record_var(const Tensor& in, const Dims& dims, double denom, bool is_std, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("var", in, dims, true);
  // d var / dx = 2 (x - mean) / denom; d std / dx = (x - mean) / (denom std).
  record(is_std ? "StdBackward0" : "VarBackward0", {&out}, {&in}, {in, is_std ? out : Tensor()}, [=](const Grads& g, const Grads& s) {
    const Tensor x = widened(s[0]);
    const Tensor centered = sub(x, mean(x, dims, true));
    const Tensor gk = is_std ? div(g[0], s[1]) : g[0];
    return Grads{mul(mul(unreduce(gk, x, keep), centered), (is_std ? 1.0 : 2.0) / denom)};
  });
}

void record_norm(const Tensor& in, double p, const Dims& dims, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("norm", in, dims, true);
  record("LinalgVectorNormBackward0", {&out}, {&in}, {in, out}, [=](const Grads& g, const Grads& s) {
    const Tensor x = widened(s[0]), n = unreduce(widened(s[1]), x, keep), gk = unreduce(g[0], x, keep);
    const Tensor zero = zeros({}, x.dtype());
    if (p == 0) return Grads{zeros_like(x)};
    if (p == 1) return Grads{mul(gk, sign(x))};
    if (std::isinf(p)) {  // shared evenly among the elements at the extreme, as in PyTorch
      const Tensor hit = eq(abs(x), n).to(x.dtype());
      return Grads{div(mul(mul(gk, sign(x)), hit), sum(hit, dims, true))};
    }
    // x |x|^(p-2) / norm^(p-1), taken as 0 where the norm is 0.
    const Tensor d = p == 2 ? div(x, n) : div(mul(sign(x), pow(abs(x), p - 1)), pow(n, p - 1));
    return Grads{where(eq(n, 0), zero, mul(gk, d))};
  });
}

void record_logsumexp(const Tensor& in, const Dims& dims, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("logsumexp", in, dims, true);
  record("LogsumexpBackward0", {&out}, {&in}, {in, out}, [=](const Grads& g, const Grads& s) {
    const Tensor x = widened(s[0]);
    return Grads{mul(unreduce(g[0], x, keep), exp(sub(x, unreduce(widened(s[1]), x, keep))))};
  });
}

void record_pick(const char* name, const Tensor& in, int64_t dim, const Tensor& indices, bool keepdim, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims shape = in.sizes();
  record(name, {&out}, {&in}, {indices}, [shape, dim, keepdim](const Grads& g, const Grads& s) {
    if (shape.empty()) return Grads{g[0].reshape(shape)};
    const Tensor idx = keepdim ? s[0] : s[0].unsqueeze(dim);
    const Tensor gg = keepdim ? g[0] : g[0].unsqueeze(dim);
    return Grads{scatter_add(zeros(shape, g[0].dtype()), dim, idx, gg)};
  });
}

void record_softmax(const Tensor& in, int64_t dim, bool log, Tensor& out) {
  if (!needs_grad(in)) return;
  record(log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", {&out}, {&in}, {out}, [dim, log](const Grads& g, const Grads& s) {
    const Tensor& y = s[0];
    if (log) return Grads{sub(g[0], mul(exp(y), sum(g[0], {dim}, true)))};
    return Grads{mul(y, sub(g[0], sum(mul(g[0], y), {dim}, true)))};
  });
}

void record_cumsum(const Tensor& in, int64_t dim, Tensor& out) {
  if (!needs_grad(in)) return;
  // The reversed cumulative sum of g: total - (inclusive prefix) + g.
  record("CumsumBackward0", {&out}, {&in}, {}, [dim](const Grads& g, const Grads&) {
    if (g[0].dim() == 0) return Grads{g[0]};
    return Grads{add(sub(sum(g[0], {dim}, true), cumsum(g[0], dim)), g[0])};
  });
}

void record_cumprod(const Tensor& in, int64_t dim, Tensor& out) {
  if (!needs_grad(in)) return;
  // d out_j / d x_i = prod_{m < i} x_m * prod_{i < m <= j} x_m (for j >= i), so
  // grad_i = P_i * T_i with P_i the exclusive prefix product and T_i = g_i + x_{i+1} T_{i+1}:
  // no division, exact when x has zeros.
  record("CumprodBackward0", {&out}, {&in}, {in}, [dim](const Grads& g, const Grads& s) {
    return Grads{map_rows({s[0], g[0]}, dim, [](const double* const* in, double* o, int64_t n) {
      const double *x = in[0], *gr = in[1];
      double t = 0;
      for (int64_t i = n; i-- > 0;) o[i] = t = gr[i] + (i + 1 < n ? x[i + 1] * t : 0);
      double p = 1;
      for (int64_t i = 0; i < n; ++i) o[i] *= p, p *= x[i];
    })};
  });
}

void record_logcumsumexp(const Tensor& in, int64_t dim, Tensor& out) {
  if (!needs_grad(in)) return;
  // grad_i = sum_{j >= i} g_j exp(x_i - y_j) = exp(x_i - y_i) U_i with
  // U_i = g_i + exp(y_i - y_{i+1}) U_{i+1}: every exponent is <= 0 (y is non-decreasing).
  // y is recomputed in double: the saved output, rounded to float32, would cost x_i - y_i
  // its precision when the logits are large (x - lse rule of Note [Fused cross_entropy]).
  record("LogcumsumexpBackward0", {&out}, {&in}, {in}, [dim](const Grads& g, const Grads& s) {
    return Grads{map_rows({s[0], g[0]}, dim, [](const double* const* in, double* o, int64_t n) {
      const double *x = in[0], *gr = in[1];
      std::vector<double> ys(static_cast<size_t>(n));
      ops::logcumsumexp_row(x, ys.data(), n);
      const double* y = ys.data();
      double u = 0;
      for (int64_t i = n; i-- > 0;) {
        const double step = i + 1 < n ? (y[i] == y[i + 1] ? 1.0 : std::exp(y[i] - y[i + 1])) : 0.0;
        u = gr[i] + step * u;
        o[i] = x[i] == -INFINITY ? 0.0 : std::exp(x[i] - y[i]) * u;
      }
    })};
  });
}

void record_dot(const Tensor& a, const Tensor& b, Tensor& out) {
  if (!needs_grad(a, b)) return;
  const bool ga = requires_grad(a), gb = requires_grad(b);
  record("DotBackward0", {&out}, {&a, &b}, {gb ? a : Tensor(), ga ? b : Tensor()}, [ga, gb](const Grads& g, const Grads& s) {
    return Grads{ga ? mul(g[0], s[1]) : Tensor(), gb ? mul(g[0], s[0]) : Tensor()};
  });
}

void record_mm(const char* name, const Tensor& a, const Tensor& b, Tensor& out) {
  if (!needs_grad(a, b)) return;
  const bool ga = requires_grad(a), gb = requires_grad(b);
  record(name, {&out}, {&a, &b}, {gb ? a : Tensor(), ga ? b : Tensor()}, [ga, gb](const Grads& g, const Grads& s) {
    const bool batched = g[0].dim() == 3;
    auto mm_ = [batched](const Tensor& x, const Tensor& y) { return batched ? bmm(x, y) : mm(x, y); };
    auto t_ = [](const Tensor& x) { return x.transpose(-1, -2); };
    return Grads{ga ? mm_(g[0], t_(s[1])) : Tensor(), gb ? mm_(t_(s[0]), g[0]) : Tensor()};
  });
}

void record_addmm(const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha, Tensor& out) {
  if (!needs_grad(self, a, b)) return;
  const double be = beta.to_double(), al = alpha.to_double();
  record("AddmmBackward0", {&out}, {&self, &a, &b}, {a, b}, [be, al](const Grads& g, const Grads& s) {
    const Tensor ga = mm(g[0], s[1].t()), gb = mm(s[0].t(), g[0]);
    return Grads{be == 0 ? Tensor() : mul(g[0], be), al == 1 ? ga : mul(ga, al), al == 1 ? gb : mul(gb, al)};
  });
}

void record_cat(const std::vector<Tensor>& parts, int64_t dim, Tensor& out) {
  if (!grad_mode_enabled()) return;
  bool any = false;
  std::vector<const Tensor*> ins;
  std::vector<int64_t> sizes;
  for (const Tensor& p : parts) {
    any = any || requires_grad(p);
    ins.push_back(&p);
    const bool skipped = p.dim() == 1 && p.numel() == 0 && out.dim() != 1;  // cat ignores these
    sizes.push_back(skipped ? -1 : p.size(dim));
  }
  if (!any) return;
  auto node = std::make_shared<FunctionNode>(
      "CatBackward0",
      [sizes, dim](const Grads& g, const Grads&) {
        Grads out;
        int64_t at = 0;
        for (int64_t n : sizes) {
          if (n < 0) {  // a skipped 1-D empty part
            out.push_back(Tensor());
            continue;
          }
          out.push_back(g[0].narrow(dim, at, n));
          at += n;
        }
        return out;
      },
      Grads{}, ins, std::vector<Tensor*>{&out});
  set_history({&out}, node, ins);
}

void record_index_select(const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  if (!needs_grad(self)) return;
  const Dims shape = self.sizes();
  record("IndexSelectBackward0", {&out}, {&self}, {index}, [shape, dim](const Grads& g, const Grads& s) {
    return Grads{index_add(zeros(shape, g[0].dtype()), dim, s[0], g[0])};
  });
}

void record_gather(const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  if (!needs_grad(self)) return;
  const Dims shape = self.sizes();
  record("GatherBackward0", {&out}, {&self}, {index}, [shape, dim](const Grads& g, const Grads& s) {
    return Grads{scatter_add(zeros(shape, g[0].dtype()), dim, s[0], g[0])};
  });
}

void record_embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx, Tensor& out) {
  if (!needs_grad(weight)) return;
  const int64_t n = weight.size(0);
  record("EmbeddingBackward0", {&out}, {&weight}, {indices}, [n, padding_idx](const Grads& g, const Grads& s) {
    return Grads{embedding_dense_backward(g[0], s[0], n, padding_idx)};
  });
}

void record_index(const Tensor& self, const std::vector<std::optional<Tensor>>& indices, Tensor& out) {
  if (!needs_grad(self)) return;
  const Dims shape = self.sizes();
  // Index tensors are kept as they are (they are never differentiated).
  auto idx = std::make_shared<std::vector<std::optional<Tensor>>>();
  for (const auto& t : indices) idx->push_back(t ? std::optional<Tensor>(t->detach()) : std::nullopt);
  record("IndexBackward0", {&out}, {&self}, {}, [shape, idx](const Grads& g, const Grads&) {
    Tensor gi = zeros(shape, g[0].dtype());
    index_put_(gi, *idx, g[0], true);
    return Grads{gi};
  });
}

void record_masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value, Tensor& out) {
  if (!needs_grad(self, value)) return;
  record(value.impl()->wrapped_number ? "MaskedFillBackward0" : "MaskedFillBackward1", {&out}, {&self, nullptr, &value}, {mask}, [](const Grads& g, const Grads& s) {
    const Tensor zero = zeros({}, g[0].dtype());
    return Grads{where(s[0], zero, g[0]), Tensor(), sum(where(s[0], g[0], zero))};
  });
}

}  // namespace flambeau::autograd
