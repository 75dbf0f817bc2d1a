// Advanced indexing (PyTorch's aten::index / index_put_): integer and boolean tensors
// indexing some dims of a tensor, for reading and for assignment. Boolean masks become
// integer indices through nonzero; the integer indices broadcast together and are folded
// into one tensor of element offsets, so reading is a gather and writing a put.
#include "flambeau/core/op_hook.h"
#include "flambeau/ops/index_kernels.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
using namespace ops;
namespace {

struct IndexPlan {
  Tensor src;      // self restrided to the result shape, stride 0 on the broadcast index dims
  Tensor offsets;  // int64 element offsets, restrided to the result shape
};

// Bool masks replaced by the integer indices of their true elements.
std::vector<std::optional<Tensor>> expand_masks(const char* op, const Tensor& self, const IndexList& indices) {
  std::vector<std::optional<Tensor>> out;
  int64_t d = 0;
  for (const std::optional<Tensor>& t : indices) {
    if (t && t->dtype() == kBool) {
      FLB_CHECK(t->dim() > 0, NotImplementedError, "[", op, "] 0-dim boolean indices are not supported");
      bool ok = d + t->dim() <= self.dim();
      for (int64_t j = 0; ok && j < t->dim(); ++j) ok = t->size(j) == self.size(d + j);
      FLB_CHECK(ok, IndexError, "[", op, "] the shape of the mask ", shape_str(t->sizes()), " at index ", d,
                " does not match the shape of the indexed tensor ", shape_str(self.sizes()));
      const Tensor nz = nonzero(*t);
      for (int64_t j = 0; j < t->dim(); ++j) out.push_back(nz.select(1, j));
      d += t->dim();
      continue;
    }
    FLB_CHECK(!t || t->dtype() == kInt64 || t->dtype() == kInt32, TypeError, "[", op,
              "] tensors used as indices must be int64, int32 or bool, got ", dtype_name(t->dtype()));
    out.push_back(t);
    ++d;
  }
  FLB_CHECK(d <= self.dim(), IndexError, "[", op, "] too many indices for tensor of dimension ", self.dim(), " (got ",
            d, ")");
  return out;
}

IndexPlan plan_index(const char* op, const Tensor& self, const IndexList& indices) {
  const std::vector<std::optional<Tensor>> idx = expand_masks(op, self, indices);
  std::vector<int64_t> dims;
  Dims batch;
  for (int64_t d = 0; d < int64_t(idx.size()); ++d) {
    if (!idx[size_t(d)]) continue;
    batch = dims.empty() ? idx[size_t(d)]->sizes() : broadcast_shapes(batch, idx[size_t(d)]->sizes(), op);
    dims.push_back(d);
  }
  FLB_CHECK(!dims.empty(), ValueError, "[", op, "] expected at least one index tensor");
  // One offset per broadcast position: sum over the indexed dims of index * stride.
  Tensor offsets = zeros(batch, kInt64);
  for (int64_t d : dims) {
    const int64_t size = self.size(d), stride = self.stride(d);
    const Tensor i64 = index_to_int64(op, *idx[size_t(d)], true);
    check_index_range(op, i64, d, size, true);
    const Tensor spread = i64.expand(batch);
    const ElemLoop L = make_elem_loop(offsets, {spread});
    for_each_row(L, [&](char* const* p, const int64_t* st, int64_t n) {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t v = *reinterpret_cast<const int64_t*>(p[1] + j * st[1]);
        *reinterpret_cast<int64_t*>(p[0] + j * st[0]) += (v < 0 ? v + size : v) * stride;
      }
    });
  }
  // Result dims: the broadcast index dims replace the indexed dims where those are
  // adjacent, and come first otherwise (PyTorch's rule).
  const bool adjacent = dims.back() - dims.front() + 1 == int64_t(dims.size());
  const Dims batch_strides = contiguous_strides(batch);
  Dims shape, src_st, off_st;
  auto plain = [&](int64_t d) {
    shape.push_back(self.size(d));
    src_st.push_back(self.stride(d));
    off_st.push_back(0);
  };
  auto indexed = [&] {
    for (size_t b = 0; b < batch.size(); ++b) {
      shape.push_back(batch[b]);
      src_st.push_back(0);
      off_st.push_back(batch_strides[b]);
    }
  };
  if (!adjacent) indexed();
  for (int64_t d = 0; d < self.dim(); ++d) {
    const bool is_indexed = d < int64_t(idx.size()) && idx[size_t(d)];
    if (!is_indexed) plain(d);
    else if (adjacent && d == dims.front()) indexed();
  }
  return {restride(self, shape, src_st, self.storage_offset()), restride(offsets, shape, off_st, 0)};
}

}  // namespace

FLB_DIFF_OP(index, (const Tensor& self, const IndexList& indices), (self, indices), Tensor) {
  const IndexPlan plan = plan_index("index", self, indices);
  Tensor out = empty(plan.src.sizes(), self.dtype());
  if (out.numel() > 0) gather_with_offsets(out, plan.src, plan.offsets, int64_t(self.element_size()));
  return out;
}

FLB_OP(index_put_,
       (Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate),
       (self, indices, values, accumulate), Tensor&) {
  if (autograd::needs_grad(self, values))
    return autograd::assign_out_of_place("index_put_", self, [&] { return index_put(self, indices, values, accumulate); });
  FLB_CHECK(values.impl()->wrapped_number || values.dtype() == self.dtype(), TypeError,
            "[index_put] values of dtype ", dtype_name(values.dtype()), " do not match self of dtype ",
            dtype_name(self.dtype()));
  const IndexPlan plan = plan_index("index_put", self, indices);
  const Dims& shape = plan.src.sizes();
  FLB_CHECK(broadcast_shapes(values.sizes(), shape, "index_put") == shape, ValueError,
            "[index_put] values of shape ", shape_str(values.sizes()), " cannot be broadcast to the indexing result of shape ",
            shape_str(shape));
  if (numel_of(shape) == 0) return self;
  Tensor v = values.to(self.dtype());
  if (v.storage() == self.storage()) v = v.clone();
  put_with_offsets(plan.src, v.expand(shape), plan.offsets, int64_t(self.element_size()), accumulate);
  return self;
}

FLB_DIFF_OP(index_put,
            (const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate),
            (self, indices, values, accumulate), Tensor) {
  Tensor out;
  out = self.clone();
  index_put_(out, indices, values, accumulate);
  return out;
}

}  // namespace flambeau
