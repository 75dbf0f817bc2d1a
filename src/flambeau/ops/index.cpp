// Indexing along one dim with integer tensors: gather, scatter (+ add / reduce),
// index_select / add / copy / fill, take, one_hot, embedding and its backward. Every index
// is checked before anything is written. The index_* ops are the scatter/gather kernels
// with the 1-D index broadcast (stride 0) across the other dims.
#include <cmath>
#include <cstring>
#include <limits>

#include "flambeau/core/op_hook.h"
#include "flambeau/ops/index_kernels.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
using namespace ops;
namespace {

Dims without(const Dims& d, int64_t dim) {
  Dims r;
  for (int64_t i = 0; i < int64_t(d.size()); ++i)
    if (i != dim) r.push_back(d[size_t(i)]);
  return r;
}

// A 0-dim tensor as 1-D (scatter/gather treat scalars as one-element vectors).
Tensor at_least_1d(const Tensor& t) { return t.dim() == 0 ? t.reshape({1}) : t; }

// The source of a scatter into self, copied when it shares self's memory even as the same
// view (unalias keeps that case): the kernels write self at indexed positions that later
// reads of src would see (x.scatter_(0, i, x), x.index_add_(0, i, x)).
Tensor unalias_source(const Tensor& self, const Tensor& src) {
  return src.storage() == self.storage() ? src.clone() : src;
}

// Checks the shapes of gather/scatter: index has self's number of dims and no larger
// size than self (except along dim) and than src (every dim).
void check_scatter_gather_shapes(const char* op, const Tensor& self, int64_t dim, const Tensor& index,
                                 const Tensor* src) {
  FLB_CHECK(index.dim() == self.dim(), ValueError, "[", op, "] index ", shape_str(index.sizes()),
            " must have the same number of dimensions as self ", shape_str(self.sizes()));
  for (int64_t d = 0; d < self.dim(); ++d) {
    FLB_CHECK(d == dim || index.size(d) <= self.size(d), ValueError, "[", op, "] index ", shape_str(index.sizes()),
              " is larger than self ", shape_str(self.sizes()), " in dimension ", d);
    FLB_CHECK(!src || index.size(d) <= src->size(d), ValueError, "[", op, "] index ", shape_str(index.sizes()),
              " is larger than src ", shape_str(src->sizes()), " in dimension ", d);
  }
  if (src) {
    FLB_CHECK(src->dim() == self.dim(), ValueError, "[", op, "] src ", shape_str(src->sizes()),
              " must have the same number of dimensions as self ", shape_str(self.sizes()));
    FLB_CHECK(src->dtype() == self.dtype(), TypeError, "[", op, "] expected src dtype ", dtype_name(self.dtype()),
              ", got ", dtype_name(src->dtype()));
  }
}

// Note [Scatter order]: the scatter kernels walk the positions of `index` as lines along
// `dim`: lines are shared among threads, and each line is visited in increasing order
// along dim. Two lines never write the same element of self, so every element receives
// its updates in index order: results (sums included) do not depend on the thread count,
// and with repeated indices the last one along dim wins.
//
// Calls f(self_element, src_element) for each position of `index` (src_element is null
// when src is); `index` is contiguous int64 with every value in range.
template <class T, class F>
void scatter_lines(Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, const F& f) {
  if (index.numel() == 0) return;
  const Dims outer = without(index.sizes(), dim);
  const Tensor self0 = restride(self, outer, without(self.strides(), dim), self.storage_offset());
  const Tensor index0 = restride(index, outer, without(index.strides(), dim), index.storage_offset());
  const Tensor src0 = src ? restride(*src, outer, without(src->strides(), dim), src->storage_offset()) : index0;
  const ElemLoop L = make_elem_loop(self0, {index0, src0});
  const int64_t len = index.size(dim), isz = int64_t(sizeof(T));
  const int64_t ds = self.stride(dim) * isz, di = index.stride(dim) * 8, dsrc = src ? src->stride(dim) * isz : 0;
  for_each_row(
      L,
      [&](char* const* p, const int64_t* st, int64_t n) {
        auto visit = [&](int64_t i, int64_t j) {
          const int64_t k = *reinterpret_cast<const int64_t*>(p[1] + j * st[1] + i * di);
          f(reinterpret_cast<T*>(p[0] + j * st[0] + k * ds),
            src ? reinterpret_cast<const T*>(p[2] + j * st[2] + i * dsrc) : nullptr);
        };
        if (std::abs(st[1]) < std::abs(di)) {  // the row runs across lines: sweep it per step
          for (int64_t i = 0; i < len; ++i)
            for (int64_t j = 0; j < n; ++j) visit(i, j);
        } else {
          for (int64_t j = 0; j < n; ++j)
            for (int64_t i = 0; i < len; ++i) visit(i, j);
        }
      },
      std::max<int64_t>(1, kElemGrain / len));
}

enum class Reduce { Assign, Sum, Prod, Mean, Amax, Amin };

Reduce parse_reduce(const char* op, const std::string& r) {
  if (r == "sum") return Reduce::Sum;
  if (r == "prod") return Reduce::Prod;
  if (r == "mean") return Reduce::Mean;
  if (r == "amax") return Reduce::Amax;
  if (r == "amin") return Reduce::Amin;
  throw ValueError(detail::str_cat("[", op, "] reduce argument must be one of sum, prod, mean, amax, amin, got '", r, "'"));
}

// self[..., index[...], ...] (op)= src or value, along dim. `index` has been checked.
void scatter_kernel(Tensor& self, int64_t dim, const Tensor& index, const Tensor* src, Scalar value, Reduce red,
                    Scalar alpha = 1) {
  visit_dtype(self.dtype(), [&]<class T>() {
    using CT = compute_t<T>;
    const T v = kernels::scalar_to<T>(value);
    const CT a = kernels::scalar_to<CT>(alpha);
    auto run = [&](auto&& combine) {
      scatter_lines<T>(self, dim, index, src, [&](T* d, const T* s) { *d = combine(CT(*d), CT(s ? *s : v)); });
    };
    switch (red) {
      case Reduce::Assign: run([](CT, CT x) { return T(x); }); break;
      case Reduce::Sum:
      case Reduce::Mean:
        if constexpr (std::is_same_v<T, bool>) run([](bool d, bool x) { return d || x; });
        else if (a == CT(1)) run([](CT d, CT x) { return T(d + x); });
        else run([a](CT d, CT x) { return T(d + a * x); });
        break;
      case Reduce::Prod:
        if constexpr (std::is_same_v<T, bool>) run([](bool d, bool x) { return d && x; });
        else run([](CT d, CT x) { return T(d * x); });
        break;
      case Reduce::Amax: run([](CT d, CT x) { return T(x != x || x > d ? x : d); }); break;
      case Reduce::Amin: run([](CT d, CT x) { return T(x != x || x < d ? x : d); }); break;
    }
  });
}

struct Checked {
  int64_t dim;
  Tensor index;  // contiguous int64, values in range
};

// Validates gather/scatter arguments (self may be 0-dim: then everything is viewed 1-D).
Checked check_scatter(const char* op, const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src) {
  const int64_t d = wrap_dim(dim, std::max<int64_t>(self.dim(), 1), op);
  Tensor idx = index_to_int64(op, index, false);
  if (idx.storage() == self.storage()) idx = idx.clone();
  const Tensor self1 = at_least_1d(self), idx1 = at_least_1d(idx);
  if (src) {
    const Tensor src1 = at_least_1d(*src);
    check_scatter_gather_shapes(op, self1, d, idx1, &src1);
  } else {
    check_scatter_gather_shapes(op, self1, d, idx1, nullptr);
  }
  check_index_range(op, idx1, d, self1.size(d), false);
  return {d, idx1};
}

Tensor& scatter_impl(const char* op, Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Reduce red) {
  const bool scalar_src = src.impl()->wrapped_number;
  const Tensor s = scalar_src ? src : unalias_source(self, at_least_1d(src));
  const Checked c = check_scatter(op, self, dim, index, scalar_src ? nullptr : &s);
  Tensor self1 = at_least_1d(self);
  scatter_kernel(self1, c.dim, c.index, scalar_src ? nullptr : &s, scalar_src ? src.item() : Scalar(0), red);
  return self;
}

// The 1-D `index` of an index_* op (length src.size(dim)) broadcast to `shape`.
Tensor spread_index(const Tensor& index64, const Dims& shape, int64_t dim) {
  Dims st(shape.size(), 0);
  st[size_t(dim)] = 1;
  return restride(index64, shape, st, index64.storage_offset());
}

// Validates an index_* op: index is 0-D or 1-D, in range for self along dim, and src
// (when given) has self's shape except size index.numel() along dim.
Checked check_index_op(const char* op, const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                       bool wrap) {
  const int64_t d = wrap_dim(dim, std::max<int64_t>(self.dim(), 1), op);
  FLB_CHECK(index.dim() <= 1, ValueError, "[", op, "] index must be 0-D or 1-D, got shape ", shape_str(index.sizes()));
  Tensor idx = index_to_int64(op, index, true).reshape({-1});
  if (src) {
    FLB_CHECK(src->dtype() == self.dtype(), TypeError, "[", op, "] expected source dtype ", dtype_name(self.dtype()),
              ", got ", dtype_name(src->dtype()));
    const Tensor s1 = at_least_1d(*src), self1 = at_least_1d(self);
    bool ok = s1.dim() == self1.dim() && s1.size(d) == idx.numel();
    for (int64_t k = 0; ok && k < self1.dim(); ++k) ok = k == d || s1.size(k) == self1.size(k);
    FLB_CHECK(ok, ValueError, "[", op, "] source ", shape_str(src->sizes()), " does not match self ",
              shape_str(self.sizes()), " with ", idx.numel(), " indices along dimension ", d);
  }
  const bool neg = check_index_range(op, idx, d, at_least_1d(self).size(d), wrap);
  idx = wrap_negative(idx, at_least_1d(self).size(d), neg);
  if (idx.storage() == self.storage()) idx = idx.clone();
  return {d, idx};
}

Tensor& index_scatter(const char* op, Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                      Reduce red, Scalar alpha) {
  const Tensor src = unalias_source(self, at_least_1d(source));
  const Checked c = check_index_op(op, self, dim, index, &src, false);
  Tensor self1 = at_least_1d(self);
  scatter_kernel(self1, c.dim, spread_index(c.index, src.sizes(), c.dim), &src, 0, red, alpha);
  return self;
}

// The out-of-place form of an in-place op: `op` runs on a copy of self with grad mode off;
// the caller records the result's history.
template <class F>
Tensor on_copy(const Tensor& self, const F& op) {
  autograd::NoGradGuard no_grad;
  Tensor out = self.clone();
  op(out);
  return out;
}

}  // namespace

FLB_DIFF_OP(gather, (const Tensor& self, int64_t dim, const Tensor& index), (self, dim, index), Tensor) {
  const Checked c = check_scatter("gather", self, dim, index, nullptr);
  const Tensor self1 = at_least_1d(self);
  Tensor out = empty(c.index.sizes(), self.dtype());
  if (out.numel() > 0) {
    Dims st = self1.strides();
    st[size_t(c.dim)] = 0;
    gather_with_offsets(out, restride(self1, out.sizes(), st, self1.storage_offset()), c.index,
                        self1.stride(c.dim) * int64_t(self1.element_size()));
  }
  out = out.reshape(index.sizes());
  return out;
}

// The in-place forms on tensors that need grad compute the result out of place and give it
// to self (autograd::assign_with_grad); otherwise they write self directly.
FLB_OP(scatter_,
       (Tensor& self, int64_t dim, const Tensor& index, const Tensor& src),
       (self, dim, index, src), Tensor&) {
  if (autograd::needs_grad(self, src))
    return autograd::assign_out_of_place("scatter_", self, [&] { return scatter(self, dim, index, src); });
  return scatter_impl("scatter", self, dim, index, src, Reduce::Assign);
}
FLB_DIFF_OP(scatter,
            (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src),
            (self, dim, index, src), Tensor) {
  Tensor out = on_copy(self, [&](Tensor& o) { scatter_impl("scatter", o, dim, index, src, Reduce::Assign); });
  return out;
}
FLB_OP(scatter_add_,
       (Tensor& self, int64_t dim, const Tensor& index, const Tensor& src),
       (self, dim, index, src), Tensor&) {
  FLB_CHECK(!src.impl()->wrapped_number, TypeError, "[scatter_add] src must be a tensor");
  if (autograd::needs_grad(self, src))
    return autograd::assign_out_of_place("scatter_add_", self, [&] { return scatter_add(self, dim, index, src); });
  return scatter_impl("scatter_add", self, dim, index, src, Reduce::Sum);
}
FLB_DIFF_OP(scatter_add,
            (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src),
            (self, dim, index, src), Tensor) {
  FLB_CHECK(!src.impl()->wrapped_number, TypeError, "[scatter_add] src must be a tensor");
  Tensor out = on_copy(self, [&](Tensor& o) { scatter_impl("scatter_add", o, dim, index, src, Reduce::Sum); });
  return out;
}

FLB_OP(scatter_reduce_,
       (Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
        bool include_self),
       (self, dim, index, src, reduce, include_self), Tensor&) {
  if (autograd::needs_grad(self, src))  // on a clone: the backward keeps self's old values
    return autograd::inplace_with_grad("scatter_reduce_", self, [&](const Tensor& s) {
      return scatter_reduce(s, dim, index, src, reduce, include_self);
    });
  const Reduce red = parse_reduce("scatter_reduce", reduce);
  FLB_CHECK(!src.impl()->wrapped_number, TypeError, "[scatter_reduce] src must be a tensor");
  const Tensor s = unalias_source(self, at_least_1d(src));
  const Checked c = check_scatter("scatter_reduce", self, dim, index, &s);
  Tensor self1 = at_least_1d(self);
  if (c.index.numel() == 0) return self;
  if (!include_self) {  // targets start from the reduction's identity: only src counts
    Scalar identity = 0;
    if (red == Reduce::Prod) identity = 1;
    if (red == Reduce::Amax || red == Reduce::Amin) {
      visit_dtype(self.dtype(), [&]<class T>() {
        using CT = compute_t<T>;
        if constexpr (std::is_floating_point_v<CT>)
          identity = red == Reduce::Amax ? -INFINITY : INFINITY;
        else if constexpr (std::is_same_v<T, bool>)
          identity = red == Reduce::Amin;
        else
          identity = int64_t(red == Reduce::Amax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max());
      });
    }
    scatter_kernel(self1, c.dim, c.index, nullptr, identity, Reduce::Assign);
  }
  scatter_kernel(self1, c.dim, c.index, &s, 0, red);
  if (red == Reduce::Mean) {
    // Divide by the number of values reduced into each element (self included or not).
    Tensor count = include_self ? ones(self1.sizes(), kInt64) : zeros(self1.sizes(), kInt64);
    scatter_kernel(count, c.dim, c.index, nullptr, 1, Reduce::Sum);
    count.clamp_(Tensor(1));
    const Tensor q = is_floating(self.dtype()) ? div(self1, count) : div(self1, count, "floor");
    self1.copy_(q);
  }
  return self;
}
FLB_DIFF_OP(scatter_reduce,
            (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
             bool include_self),
            (self, dim, index, src, reduce, include_self), Tensor) {
  Tensor out = on_copy(self, [&](Tensor& o) { scatter_reduce_(o, dim, index, src, reduce, include_self); });
  return out;
}

FLB_DIFF_OP(index_select, (const Tensor& self, int64_t dim, const Tensor& index), (self, dim, index), Tensor) {
  const Checked c = check_index_op("index_select", self, dim, index, nullptr, false);
  FLB_CHECK(self.dim() > 0 || c.index.numel() == 1, ValueError,
            "[index_select] index to a 0-dim tensor can have only 1 value, got ", c.index.numel());
  const Tensor self1 = at_least_1d(self);
  Dims shape = self1.sizes();
  shape[size_t(c.dim)] = c.index.numel();
  Tensor out = empty(shape, self.dtype());
  if (out.numel() > 0) {
    Dims st = self1.strides();
    st[size_t(c.dim)] = 0;
    gather_with_offsets(out, restride(self1, shape, st, self1.storage_offset()), spread_index(c.index, shape, c.dim),
                        self1.stride(c.dim) * int64_t(self1.element_size()));
  }
  if (self.dim() == 0) out = out.reshape({});  // as PyTorch: a 0-dim self gives a 0-dim result
  return out;
}

FLB_OP(index_add_,
       (Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha),
       (self, dim, index, source, alpha), Tensor&) {
  if (autograd::needs_grad(self, source))
    return autograd::assign_out_of_place("index_add_", self, [&] { return index_add(self, dim, index, source, alpha); });
  return index_scatter("index_add", self, dim, index, source, Reduce::Sum, alpha);
}
FLB_DIFF_OP(index_add,
            (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha),
            (self, dim, index, source, alpha), Tensor) {
  Tensor out = on_copy(self, [&](Tensor& o) { index_scatter("index_add", o, dim, index, source, Reduce::Sum, alpha); });
  return out;
}
FLB_OP(index_copy_,
       (Tensor& self, int64_t dim, const Tensor& index, const Tensor& source),
       (self, dim, index, source), Tensor&) {
  if (autograd::needs_grad(self, source))
    return autograd::assign_out_of_place("index_copy_", self, [&] { return index_copy(self, dim, index, source); });
  return index_scatter("index_copy", self, dim, index, source, Reduce::Assign, 1);
}
FLB_DIFF_OP(index_copy,
            (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source),
            (self, dim, index, source), Tensor) {
  Tensor out = on_copy(self, [&](Tensor& o) { index_scatter("index_copy", o, dim, index, source, Reduce::Assign, 1); });
  return out;
}

FLB_OP(index_fill_,
       (Tensor& self, int64_t dim, const Tensor& index, const Tensor& value),
       (self, dim, index, value), Tensor&) {
  if (autograd::needs_grad(self, value))
    return autograd::assign_out_of_place("index_fill_", self, [&] { return index_fill(self, dim, index, value); });
  FLB_CHECK(value.dim() == 0, ValueError, "[index_fill] value must be a number or a 0-dim tensor, got shape ",
            shape_str(value.sizes()));
  const Checked c = check_index_op("index_fill", self, dim, index, nullptr, true);
  Tensor self1 = at_least_1d(self);
  Dims shape = self1.sizes();
  shape[size_t(c.dim)] = c.index.numel();
  scatter_kernel(self1, c.dim, spread_index(c.index, shape, c.dim), nullptr, value.item(), Reduce::Assign);
  return self;
}
FLB_DIFF_OP(index_fill,
            (const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value),
            (self, dim, index, value), Tensor) {
  Tensor out = on_copy(self, [&](Tensor& o) { index_fill_(o, dim, index, value); });
  return out;
}

FLB_DIFF_OP(take, (const Tensor& self, const Tensor& index), (self, index), Tensor) {
  const Tensor idx = index_to_int64("take", index, false);
  const int64_t n = self.numel();
  const Tensor wrapped = wrap_negative(idx, n, check_index_range("take", idx, 0, n, true));
  const Tensor flat = self.reshape({-1});
  Tensor out = empty(index.sizes(), self.dtype());
  if (out.numel() > 0)
    gather_with_offsets(out, restride(flat, out.sizes(), Dims(out.sizes().size(), 0), flat.storage_offset()), wrapped,
                        flat.stride(0) * int64_t(flat.element_size()));
  return out;
}

FLB_OP(one_hot, (const Tensor& t, int64_t num_classes), (t, num_classes), Tensor) {
  FLB_CHECK(t.dtype() == kInt64, TypeError, "[one_hot] is only applicable to index tensors of dtype int64, got ",
            dtype_name(t.dtype()));
  if (num_classes == -1) {
    FLB_CHECK(t.numel() > 0, ValueError, "[one_hot] cannot infer the number of classes from an empty tensor");
    num_classes = amax(t).item<int64_t>() + 1;
  }
  FLB_CHECK(num_classes >= 0, ValueError, "[one_hot] num_classes must be -1 or non-negative, got ", num_classes);
  Dims shape = t.sizes();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, kInt64);
  if (t.numel() == 0) return out;
  const int64_t lo = amin(t).item<int64_t>(), hi = amax(t).item<int64_t>();
  FLB_CHECK(lo >= 0, ValueError, "[one_hot] class values must be non-negative, got ", lo);
  FLB_CHECK(hi < num_classes, ValueError, "[one_hot] class values must be smaller than num_classes (", num_classes,
            "), got ", hi);
  return scatter_(out, -1, t.unsqueeze(-1), 1);
}

FLB_DIFF_OP(embedding,
            (const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx),
            (weight, indices, padding_idx), Tensor) {
  FLB_CHECK(weight.dim() == 2, ValueError, "[embedding] weight must be 2-D, got shape ", shape_str(weight.sizes()));
  if (padding_idx)
    FLB_CHECK(*padding_idx >= -weight.size(0) && *padding_idx < weight.size(0), ValueError,
              "[embedding] padding_idx ", *padding_idx, " must be within num_embeddings (", weight.size(0), ")");
  FLB_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, TypeError,
            "[embedding] expected indices of dtype int64 or int32, got ", dtype_name(indices.dtype()));
  const Tensor idx = indices.reshape({-1});
  const Checked c = check_index_op("embedding", weight, 0, idx, nullptr, false);
  Dims shape = indices.sizes();
  shape.push_back(weight.size(1));
  Tensor out = empty({c.index.numel(), weight.size(1)}, weight.dtype());
  if (out.numel() > 0)
    gather_with_offsets(out, restride(weight, out.sizes(), {0, weight.stride(1)}, weight.storage_offset()),
                        spread_index(c.index, out.sizes(), 0), weight.stride(0) * int64_t(weight.element_size()));
  out = out.view(shape);
  return out;
}

FLB_OP(embedding_dense_backward,
       (const Tensor& grad_output, const Tensor& indices, int64_t num_weights, std::optional<int64_t> padding_idx,
        bool scale_grad_by_freq),
       (grad_output, indices, num_weights, padding_idx, scale_grad_by_freq), Tensor) {
  const int64_t dim = grad_output.dim() > 0 ? grad_output.size(-1) : 0;
  FLB_CHECK(grad_output.dim() == indices.dim() + 1 && grad_output.numel() == indices.numel() * dim, ValueError,
            "[embedding_backward] grad_output ", shape_str(grad_output.sizes()), " does not match indices ",
            shape_str(indices.sizes()));
  FLB_CHECK(is_floating(grad_output.dtype()), TypeError, "[embedding_backward] grad_output must be floating point, got ",
            dtype_name(grad_output.dtype()));
  // Reduced floats accumulate in float32; each row's tokens are summed in order (Note [Scatter order]).
  const DType acc = is_reduced_float(grad_output.dtype()) ? kFloat32 : grad_output.dtype();
  Tensor grad_weight = zeros({num_weights, dim}, acc);
  const Tensor g = grad_output.reshape({-1, dim}).to(acc);
  index_scatter("embedding_backward", grad_weight, 0, indices.reshape({-1}), g, Reduce::Sum, 1);
  if (padding_idx) {
    const int64_t p = *padding_idx < 0 ? *padding_idx + num_weights : *padding_idx;
    FLB_CHECK(p >= 0 && p < num_weights, ValueError, "[embedding_backward] padding_idx ", *padding_idx,
              " must be within num_weights (", num_weights, ")");
    grad_weight.select(0, p).zero_();
  }
  if (scale_grad_by_freq) {
    // Every token of row r carries the same 1 / count(r): scale the row sum once.
    Tensor count = zeros({num_weights}, kInt64);
    index_add_(count, 0, indices.reshape({-1}).to(kInt64), ones({indices.numel()}, kInt64));
    grad_weight = div(grad_weight, count.clamp(Tensor(1)).unsqueeze(1).to(acc));
  }
  return grad_weight.to(grad_output.dtype());
}

}  // namespace flambeau
