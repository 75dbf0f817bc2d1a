// Backward formulas of the indexing writes (scatter, scatter_add, scatter_reduce,
// index_add/copy/fill, index_put), of masked_scatter / masked_select and of take. Sums of
// gradients go through the ordered scatter_add / index_add kernels: deterministic.
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau::autograd {
namespace {

using Grads = std::vector<Tensor>;

// Scatter/gather treat a 0-dim tensor as a one-element vector; so do the formulas.
Tensor one_d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }
Dims one_d_shape(const Tensor& t) { return t.dim() == 0 ? Dims{1} : t.sizes(); }

// The leading corner of t with the given shape (the part of src that a scatter reads).
Tensor corner(const Tensor& t, const Dims& shape) {
  Tensor r = t;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) r = r.narrow(d, 0, shape[size_t(d)]);
  return r;
}

// g in the leading corner of a zero tensor of `shape` (src may be larger than index).
Tensor pad_to(const Tensor& g, const Dims& shape) {
  if (g.sizes() == shape) return g;
  Tensor r = zeros(shape, g.dtype());
  corner(r, g.sizes()).copy_(g);
  return r;
}

Tensor zero_like_scalar(const Tensor& g) { return Tensor(Scalar(0.0)).to(g.dtype()); }

}  // namespace

void record_scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, bool add,
                    Tensor& out) {
  if (!needs_grad(self, src)) return;
  const bool want_src = requires_grad(src);
  const Dims src_shape = one_d_shape(src);
  record(add ? "ScatterAddBackward0" : src.impl()->wrapped_number ? "ScatterBackward1" : "ScatterBackward0",
         {&out}, {&self, &src}, {index}, [=](const Grads& g, const Grads& s) {
    const Tensor gr = one_d(g[0]), idx = one_d(s[0]);
    // scatter overwrites the targets: their old values get no gradient.
    const Tensor gself = add ? g[0] : scatter(gr, dim, idx, Tensor(Scalar(0.0)));
    const Tensor gsrc = want_src ? pad_to(gather(gr, dim, idx), src_shape) : Tensor();
    return Grads{gself, gsrc};
  });
}

void record_scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                           const std::string& reduce, bool include_self, Tensor& out) {
  if (!needs_grad(self, src)) return;
  const bool keep = reduce == "prod" || reduce == "amax" || reduce == "amin";
  const Dims src_shape = one_d_shape(src);
  std::vector<Tensor> saved{index, keep ? self : Tensor(), keep ? src : Tensor(), keep ? out : Tensor()};
  record("ScatterReduceBackward0", {&out}, {&self, &src}, std::move(saved), [=](const Grads& g, const Grads& s) {
    const Tensor gr = one_d(g[0]), idx = one_d(s[0]);
    Tensor gself, gsrc;
    if (reduce == "sum") {
      gself = gr;
      gsrc = gather(gr, dim, idx);
    } else if (reduce == "mean") {
      Tensor n = scatter_add(include_self ? ones_like(gr) : zeros_like(gr), dim, idx, ones(idx.sizes(), gr.dtype()));
      n = masked_fill(n, eq(n, 0), Tensor(Scalar(1.0)));
      gself = div(gr, n);
      gsrc = gather(gself, dim, idx);
    } else {
      const Tensor x = one_d(s[1]), y = one_d(s[3]);
      const Tensor sc = corner(one_d(s[2]), idx.sizes());  // the src values that take part
      if (reduce == "prod") {
        // Products of the other factors, recomputed where a factor is zero (as PyTorch).
        const Tensor one = Tensor(Scalar(1.0));
        const Tensor xm = masked_fill(x, eq(x, 0), one);
        gself = div(mul(gr, scatter_reduce(xm, dim, idx, sc, "prod", include_self)), xm);
        const Tensor src_zero = eq(sc, 0);
        const Tensor zeros_here = gather(scatter_add(zeros_like(x), dim, idx, src_zero.to(x.dtype())), dim, idx);
        const Tensor single = logical_and(src_zero, eq(zeros_here, 1));
        const Tensor others = scatter_reduce(x, dim, idx, masked_fill(sc, single, one), "prod", include_self);
        gsrc = where(single, gather(mul(gr, others), dim, idx),
                     div(gather(mul(gr, y), dim, idx), masked_fill(sc, src_zero, one)));
      } else {
        // amax / amin: the gradient is shared evenly among the values equal to the result.
        // Without include_self, self's old values at scattered places do not compete.
        Tensor self_hit = eq(x, y);
        if (!include_self)
          self_hit = logical_and(self_hit, eq(scatter(zeros_like(x), dim, idx, Tensor(Scalar(1.0))), 0));
        const Tensor sh = self_hit.to(gr.dtype()), srch = eq(sc, gather(y, dim, idx)).to(gr.dtype());
        const Tensor share = div(gr, scatter_add(sh, dim, idx, srch));
        gself = mul(sh, share);
        gsrc = mul(srch, gather(share, dim, idx));
      }
    }
    if (!include_self) gself = scatter(gself, dim, idx, Tensor(Scalar(0.0)));
    return Grads{gself, pad_to(gsrc, src_shape)};
  });
}

void record_index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha,
                      Tensor& out) {
  if (!needs_grad(self, source)) return;
  const bool want_src = requires_grad(source);
  const double a = alpha.to_double();
  const Dims src_shape = source.sizes();
  record("IndexAddBackward0", {&out}, {&self, &source}, {index}, [=](const Grads& g, const Grads& s) {
    Tensor gsrc;
    if (want_src) {
      gsrc = index_select(g[0], dim, s[0]).reshape(src_shape);
      if (a != 1) gsrc = mul(gsrc, a);
    }
    return Grads{g[0], gsrc};
  });
}

void record_index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Tensor& out) {
  if (!needs_grad(self, source)) return;
  const bool want_src = requires_grad(source);
  const Dims src_shape = source.sizes();
  record("IndexCopyBackward0", {&out}, {&self, &source}, {index}, [=](const Grads& g, const Grads& s) {
    return Grads{index_fill(g[0], dim, s[0], zero_like_scalar(g[0])),
                 want_src ? index_select(g[0], dim, s[0]).reshape(src_shape) : Tensor()};
  });
}

void record_index_fill(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value, Tensor& out) {
  if (!needs_grad(self, value)) return;
  const bool want_value = requires_grad(value);
  record(value.impl()->wrapped_number ? "IndexFillBackward0" : "IndexFillBackward1", {&out}, {&self, &value}, {index}, [=](const Grads& g, const Grads& s) {
    Tensor gvalue;  // every filled element (repeated indices count once)
    if (want_value) gvalue = sum(mul(g[0], index_fill(zeros_like(g[0]), dim, s[0], Tensor(Scalar(1.0)))));
    return Grads{index_fill(g[0], dim, s[0], zero_like_scalar(g[0])), gvalue};
  });
}

void record_index_put(const Tensor& self, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                      bool accumulate, Tensor& out) {
  if (!needs_grad(self, values)) return;
  const bool want_values = requires_grad(values);
  auto idx = std::make_shared<std::vector<std::optional<Tensor>>>();  // never differentiated
  for (const auto& t : indices) idx->push_back(t ? std::optional<Tensor>(t->detach()) : std::nullopt);
  record("IndexPutBackward0", {&out}, {&self, &values}, {}, [=](const Grads& g, const Grads&) {
    const Tensor gself = accumulate ? g[0] : index_put(g[0], *idx, zeros({}, g[0].dtype()), false);
    return Grads{gself, want_values ? index(g[0], *idx) : Tensor()};  // summed to values' shape
  });
}

void record_masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source, Tensor& out) {
  if (!needs_grad(self, source)) return;
  const bool want_src = requires_grad(source);
  const Dims src_shape = source.sizes();
  record("MaskedScatterBackward0", {&out}, {&self, nullptr, &source}, {mask}, [=](const Grads& g, const Grads& s) {
    Tensor gsrc;
    if (want_src) {  // source's leading elements went to the true places, in order
      const Tensor picked = masked_select(g[0], s[0]);
      gsrc = zeros({numel_of(src_shape)}, g[0].dtype());
      gsrc.narrow(0, 0, picked.numel()).copy_(picked);
      gsrc = gsrc.reshape(src_shape);
    }
    return Grads{masked_fill(g[0], s[0], zero_like_scalar(g[0])), Tensor(), gsrc};
  });
}

void record_masked_select(const Tensor& self, const Tensor& mask, Tensor& out) {
  if (!needs_grad(self)) return;
  const Dims shape = broadcast_shapes(self.sizes(), mask.sizes(), "masked_select");
  record("MaskedSelectBackward0", {&out}, {&self, nullptr}, {mask}, [shape](const Grads& g, const Grads& s) {
    return Grads{masked_scatter(zeros(shape, g[0].dtype()), s[0], g[0]), Tensor()};
  });
}

void record_take(const Tensor& self, const Tensor& index, Tensor& out) {
  if (!needs_grad(self)) return;
  const Dims shape = self.sizes();
  // index: int64 with negative entries already wrapped.
  record("TakeBackward0", {&out}, {&self}, {index}, [shape](const Grads& g, const Grads& s) {
    Tensor flat = zeros({numel_of(shape)}, g[0].dtype());
    index_add_(flat, 0, s[0].reshape({-1}), g[0].reshape({-1}));
    return Grads{flat.reshape(shape)};
  });
}

}  // namespace flambeau::autograd
