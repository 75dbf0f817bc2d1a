// The elementwise engine: building an ElemLoop and walking its rows in parallel.
#include "flambeau/ops/elementwise.h"

#include <numeric>

#include "flambeau/core/parallel.h"
#include "flambeau/ops/ops.h"

namespace flambeau::ops {

ElemLoop make_elem_loop(const Tensor& out, std::initializer_list<std::reference_wrapper<const Tensor>> inputs) {
  ElemLoop L;
  L.n_ops = 1 + int(inputs.size());
  const int64_t nd = out.dim();
  L.numel = out.numel();
  // Fast path: every operand contiguous with the output's shape -> one flat row.
  bool flat = out.is_contiguous();
  for (const Tensor& t : inputs) flat = flat && t.sizes() == out.sizes() && t.is_contiguous();
  if (flat) {
    L.shape.push_back(std::max<int64_t>(L.numel, 1));
    int k = 0;
    L.base[k] = static_cast<char*>(out.data_ptr());
    L.dtype[k] = out.dtype();
    L.strides[k++].push_back(int64_t(itemsize(out.dtype())));
    for (const Tensor& t : inputs) {
      L.base[k] = static_cast<char*>(t.data_ptr());
      L.dtype[k] = t.dtype();
      L.strides[k++].push_back(int64_t(itemsize(t.dtype())));
    }
    return L;
  }
  // Per operand: strides (bytes) in out's dim order, broadcast dims get stride 0.
  Dims st[kMaxOperands];
  auto add_operand = [&](int k, const Tensor& t) {
    L.base[k] = static_cast<char*>(t.data_ptr());
    L.dtype[k] = t.dtype();
    st[k] = Dims(size_t(nd), 0);
    const Dims &sz = t.sizes(), &ts = t.strides();
    const int64_t off = nd - t.dim(), isz = int64_t(itemsize(t.dtype()));
    for (int64_t d = 0; d < t.dim(); ++d)
      if (sz[d] != 1) st[k][off + d] = ts[d] * isz;
  };
  add_operand(0, out);
  int k = 1;
  for (const Tensor& t : inputs) add_operand(k++, t);

  // Order dims innermost-first by the output's strides (insertion sort, stable: ties keep
  // the layout; already in order for contiguous outputs).
  const Dims& out_sizes = out.sizes();
  Dims order;
  for (int64_t d = nd - 1; d >= 0; --d)
    if (out_sizes[d] != 1) order.push_back(d);
  auto inner_than = [&](int64_t a, int64_t b) {
    for (int op = 0; op < L.n_ops; ++op)
      if (st[op][a] != st[op][b]) return std::abs(st[op][a]) < std::abs(st[op][b]);
    return false;
  };
  for (size_t i = 1; i < order.size(); ++i)
    for (size_t j = i; j > 0 && inner_than(order[j], order[j - 1]); --j) std::swap(order[j], order[j - 1]);
  // Merge neighbours that every operand walks as one.
  for (int64_t d : order) {
    const int64_t size = out_sizes[d];
    bool merge = !L.shape.empty();
    for (int op = 0; op < L.n_ops && merge; ++op)
      merge = st[op][d] == L.strides[op].back() * L.shape.back();
    if (merge) {
      L.shape.back() *= size;
    } else {
      L.shape.push_back(size);
      for (int op = 0; op < L.n_ops; ++op) L.strides[op].push_back(st[op][d]);
    }
  }
  if (L.shape.empty()) {  // 0-dim or all sizes 1: one row of one element
    L.shape.push_back(1);
    for (int op = 0; op < L.n_ops; ++op) L.strides[op].push_back(0);
  }
  return L;
}

Tensor empty_result(const Dims& shape, DType dtype, std::initializer_list<std::reference_wrapper<const Tensor>> inputs) {
  for (const Tensor& t : inputs)
    if (t.sizes() == shape) return empty(shape, dtype, kept_memory_format(t));
  return empty(shape, dtype);
}

Tensor unalias(const Tensor& out, const Tensor& in) {
  const bool same_view = in.storage_offset() == out.storage_offset() && in.sizes() == out.sizes() &&
                         in.strides() == out.strides() && in.dtype() == out.dtype();
  return in.storage() == out.storage() && !same_view ? in.clone() : in;
}

void check_inplace(const char* op, const Tensor& out, DType result, const Dims& shape) {
  FLB_CHECK(out.sizes() == shape, ValueError, "[", op, "] output with shape ", shape_str(out.sizes()),
            " doesn't match the broadcast shape ", shape_str(shape));
  // torch.can_cast: no float -> integer and no number -> bool.
  FLB_CHECK(!(is_floating(result) && !is_floating(out.dtype())) &&
                !(result != DType::Bool && out.dtype() == DType::Bool),
            TypeError, "[", op, "] result type ", dtype_name(result),
            " can't be cast to the desired output type ", dtype_name(out.dtype()));
}

}  // namespace flambeau::ops
