// Joining and splitting: cat, stack, split, chunk.
#include "flambeau/core/op_hook.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {

FLB_DIFF_OP(cat, (const std::vector<Tensor>& tensors, int64_t dim), (tensors, dim), Tensor) {
  FLB_CHECK(!tensors.empty(), ValueError, "[cat] expected a non-empty list of tensors");
  // As in PyTorch, 1-D empty tensors are skipped whatever the other shapes are.
  std::vector<const Tensor*> parts;
  std::vector<size_t> index;  // position of each part in `tensors`, for error messages
  DType dt = tensors[0].dtype();
  for (size_t i = 0; i < tensors.size(); ++i) {
    dt = promote_types(dt, tensors[i].dtype());
    if (!(tensors[i].dim() == 1 && tensors[i].numel() == 0)) {
      parts.push_back(&tensors[i]);
      index.push_back(i);
    }
  }
  if (parts.empty()) return empty({0}, dt);
  const Tensor& ref = *parts[0];
  FLB_CHECK(ref.dim() > 0, ValueError, "[cat] zero-dimensional tensor cannot be concatenated");
  dim = wrap_dim(dim, ref.dim(), "cat");
  Dims shape = ref.sizes();
  shape[dim] = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = *parts[i];
    FLB_CHECK(t.dim() == ref.dim(), ValueError, "[cat] tensors must have same number of dimensions: got ",
              ref.dim(), " and ", t.dim());
    for (int64_t d = 0; d < t.dim(); ++d)
      FLB_CHECK(d == dim || t.size(d) == ref.size(d), ValueError, "[cat] sizes of tensors must match except in dimension ",
                dim, ": expected size ", ref.size(d), " but got size ", t.size(d), " for tensor number ", index[i],
                " (shapes ", shape_str(ref.sizes()), " and ", shape_str(t.sizes()), ")");
    shape[dim] = add_size(shape[dim], t.size(dim), "cat");
  }
  Tensor out = empty(shape, dt);
  int64_t at = 0;
  for (const Tensor* t : parts) {
    out.narrow(dim, at, t->size(dim)).copy_(*t);
    at += t->size(dim);
  }
  return out;
}

FLB_OP(stack, (const std::vector<Tensor>& tensors, int64_t dim), (tensors, dim), Tensor) {
  FLB_CHECK(!tensors.empty(), ValueError, "[stack] expected a non-empty list of tensors");
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (size_t i = 0; i < tensors.size(); ++i) {
    FLB_CHECK(tensors[i].sizes() == tensors[0].sizes(), ValueError, "[stack] expects each tensor to be equal size, but got ",
              shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
    parts.push_back(tensors[i].unsqueeze(dim));
  }
  return cat(parts, dim);
}

FLB_OP(split, (const Tensor& t, int64_t split_size, int64_t dim), (t, split_size, dim), std::vector<Tensor>) {
  FLB_CHECK(t.dim() > 0, ValueError, "[split] expected at least a 1-dimensional tensor");
  dim = wrap_dim(dim, t.dim(), "split");
  const int64_t n = t.size(dim);
  FLB_CHECK(split_size > 0 || (split_size == 0 && n == 0), ValueError,
            "[split] split_size can only be 0 if dimension size is 0, but got split_size ", split_size);
  std::vector<Tensor> out;
  if (n == 0) return {t};
  for (int64_t at = 0; at < n; at += split_size) out.push_back(t.narrow(dim, at, std::min(split_size, n - at)));
  return out;
}

FLB_OP(split,
       (const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim),
       (t, sizes, dim), std::vector<Tensor>) {
  FLB_CHECK(t.dim() > 0, ValueError, "[split] expected at least a 1-dimensional tensor");
  dim = wrap_dim(dim, t.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    FLB_CHECK(s >= 0, ValueError, "[split] split sizes must be non-negative, got ", s);
    total += s;
  }
  FLB_CHECK(total == t.size(dim), ValueError, "[split] split_with_sizes expects split_sizes to sum exactly to ",
            t.size(dim), " (input tensor's size at dimension ", dim, "), but got split_sizes summing to ", total);
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(t.narrow(dim, at, s));
    at += s;
  }
  return out;
}

FLB_OP(chunk, (const Tensor& t, int64_t chunks, int64_t dim), (t, chunks, dim), std::vector<Tensor>) {
  FLB_CHECK(chunks > 0, ValueError, "[chunk] chunk expects `chunks` to be greater than 0, got: ", chunks);
  FLB_CHECK(t.dim() > 0, ValueError, "[chunk] expected at least a 1-dimensional tensor");
  const int64_t n = t.size(wrap_dim(dim, t.dim(), "chunk"));
  // A 0-size dim gives `chunks` empty pieces, as in PyTorch.
  if (n == 0) return split(t, std::vector<int64_t>(size_t(chunks), 0), dim);
  return split(t, (n + chunks - 1) / chunks, dim);
}

}  // namespace flambeau
