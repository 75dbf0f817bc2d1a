// Backward formulas of views, reductions, softmax, scans, matrix products, cat and the
// indexing ops.
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"
#include "flambeau/ops/reduce.h"

namespace flambeau::autograd {
namespace {

using Grads = std::vector<Tensor>;

// g (reduced over dims) broadcast back to the input's shape.
Tensor unreduce(const Tensor& g, const Tensor& in_shape_of, const Dims& keep_shape) {
  return g.reshape(keep_shape).expand(in_shape_of.sizes());
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

void record_sum(const Tensor& in, const Dims& dims, double scale, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("sum", in, dims, true), shape = in.sizes();
  record("SumBackward", {&out}, {&in}, {}, [keep, shape, scale](const Grads& g, const Grads&) {
    Tensor r = g[0].reshape(keep).expand(shape);
    return Grads{scale == 1 ? r : mul(r, scale)};
  });
}

void record_prod(const Tensor& in, const Dims& dims, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("prod", in, dims, true);
  // d prod / d x_i = prod / x_i (inputs with zeros give NaN/inf here, unlike PyTorch).
  record("ProdBackward", {&out}, {&in}, {in, out}, [keep](const Grads& g, const Grads& s) {
    return Grads{div(mul(unreduce(g[0], s[0], keep), unreduce(s[1], s[0], keep)), s[0])};
  });
}

void record_extreme(const Tensor& in, const Dims& dims, Tensor& out) {
  if (!needs_grad(in)) return;
  const Dims keep = ops::reduced_shape("amax", in, dims, true);
  // The gradient is shared evenly among the elements equal to the extreme.
  record("AmaxBackward", {&out}, {&in}, {in, out}, [keep, dims](const Grads& g, const Grads& s) {
    const Tensor hit = eq(s[0], unreduce(s[1], s[0], keep)).to(g[0].dtype());
    const Tensor count = sum(hit, dims, true);
    return Grads{div(mul(unreduce(g[0], s[0], keep), hit), count)};
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
  record(log ? "LogSoftmaxBackward" : "SoftmaxBackward", {&out}, {&in}, {out}, [dim, log](const Grads& g, const Grads& s) {
    const Tensor& y = s[0];
    if (log) return Grads{sub(g[0], mul(exp(y), sum(g[0], {dim}, true)))};
    return Grads{mul(y, sub(g[0], sum(mul(g[0], y), {dim}, true)))};
  });
}

void record_cumsum(const Tensor& in, int64_t dim, Tensor& out) {
  if (!needs_grad(in)) return;
  // The reversed cumulative sum of g: total - (inclusive prefix) + g.
  record("CumsumBackward", {&out}, {&in}, {}, [dim](const Grads& g, const Grads&) {
    if (g[0].dim() == 0) return Grads{g[0]};
    return Grads{add(sub(sum(g[0], {dim}, true), cumsum(g[0], dim)), g[0])};
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
  record("AddmmBackward", {&out}, {&self, &a, &b}, {a, b}, [be, al](const Grads& g, const Grads& s) {
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
      "CatBackward",
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
  record("IndexSelectBackward", {&out}, {&self}, {index}, [shape, dim](const Grads& g, const Grads& s) {
    return Grads{index_add(zeros(shape, g[0].dtype()), dim, s[0], g[0])};
  });
}

void record_gather(const Tensor& self, int64_t dim, const Tensor& index, Tensor& out) {
  if (!needs_grad(self)) return;
  const Dims shape = self.sizes();
  record("GatherBackward", {&out}, {&self}, {index}, [shape, dim](const Grads& g, const Grads& s) {
    return Grads{scatter_add(zeros(shape, g[0].dtype()), dim, s[0], g[0])};
  });
}

void record_embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx, Tensor& out) {
  if (!needs_grad(weight)) return;
  const int64_t n = weight.size(0);
  record("EmbeddingBackward", {&out}, {&weight}, {indices}, [n, padding_idx](const Grads& g, const Grads& s) {
    return Grads{embedding_dense_backward(g[0], s[0], n, padding_idx)};
  });
}

void record_index(const Tensor& self, const std::vector<std::optional<Tensor>>& indices, Tensor& out) {
  if (!needs_grad(self)) return;
  const Dims shape = self.sizes();
  // Index tensors are kept as they are (they are never differentiated).
  auto idx = std::make_shared<std::vector<std::optional<Tensor>>>();
  for (const auto& t : indices) idx->push_back(t ? std::optional<Tensor>(t->detach()) : std::nullopt);
  record("IndexBackward", {&out}, {&self}, {}, [shape, idx](const Grads& g, const Grads&) {
    Tensor gi = zeros(shape, g[0].dtype());
    index_put_(gi, *idx, g[0], true);
    return Grads{gi};
  });
}

void record_masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value, Tensor& out) {
  if (!needs_grad(self, value)) return;
  record("MaskedFillBackward", {&out}, {&self, nullptr, &value}, {mask}, [](const Grads& g, const Grads& s) {
    const Tensor zero = zeros({}, g[0].dtype());
    return Grads{where(s[0], zero, g[0]), Tensor(), sum(where(s[0], g[0], zero))};
  });
}

}  // namespace flambeau::autograd
