// View ops: new sizes/strides/offset over the same storage, never a copy (except
// reshape and flatten of layouts no view can express, which copy as in PyTorch).
#include <algorithm>
#include <numeric>

#include "flambeau/core/op_hook.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

// A view of t: same storage, new geometry, remembering the tensor that owns the memory.
Tensor with_geometry(const Tensor& t, Dims sizes, Dims strides, int64_t offset) {
  Tensor out = make_tensor(t.storage(), t.dtype(), std::move(sizes), std::move(strides), offset);
  out.impl()->view_base = t.impl()->view_base ? t.impl()->view_base : t.impl_ptr();
  return out;
}

// A view whose gradient is the incoming one reshaped back to the input's shape.
Tensor reshaped_view(const char* name, const Tensor& in, Tensor out) {
  const Dims shape = in.sizes();
  autograd::record_view(name, in, out, [shape](const Tensor& g) { return g.reshape(shape); });
  return out;
}

// Resolves one -1 in `shape` against numel; checks the element count.
Dims infer_shape(const char* op, const Dims& shape, int64_t numel) {
  Dims out = shape;
  int64_t known = 1, infer = -1;  // known: the product of the nonzero given sizes
  bool has_zero = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      FLB_CHECK(infer < 0, ValueError, "[", op, "] only one dimension can be inferred");
      infer = int64_t(i);
    } else {
      FLB_CHECK(out[i] >= 0, ValueError, "[", op, "] invalid shape dimension ", out[i]);
      if (out[i] != 0) known = mul_size(known, out[i], op);
      has_zero |= out[i] == 0;
    }
  }
  if (infer >= 0) {
    FLB_CHECK(numel % known == 0 && (numel != 0 || !has_zero), ValueError, "[", op, "] shape ", shape_str(shape),
              " is invalid for input of size ", numel);
    out[infer] = numel / known;
  }
  FLB_CHECK(checked_numel(out, op) == numel, ValueError, "[", op, "] shape ", shape_str(shape),
            " is invalid for input of size ", numel);
  return out;
}

// Strides for viewing `t` as `shape` without copying, if any exist (PyTorch's computeStride).
bool view_strides(const Tensor& t, const Dims& shape, Dims& out) {
  out = Dims(shape.size());
  if (t.numel() == 0 || t.dim() == 0) {
    out = contiguous_strides(shape);
    return true;
  }
  const Dims &os = t.sizes(), &ost = t.strides();
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base = ost.empty() ? 1 : ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[d];
    if (d == 0 || (os[d - 1] != 1 && ost[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base = ost[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

}  // namespace

Tensor Tensor::view(const Dims& shape) const {
  return autograd::diff_member("view", *this, shape)([&]() -> Tensor {
    Dims s = infer_shape("view", shape, numel()), st;
    FLB_CHECK(view_strides(*this, s, st), ValueError, "[view] size ", shape_str(s),
              " is not compatible with input's size ", shape_str(sizes()), " and stride ",
              shape_str(strides()), "; use reshape() instead");
    return with_geometry(*this, s, st, storage_offset());
  }, [&](Tensor& out) { autograd::derivative::view(out, *this, shape); });
}

Tensor Tensor::reshape(const Dims& shape) const {
  return op_hook::op("reshape", *this, shape)([&]() -> Tensor {
    Dims s = infer_shape("reshape", shape, numel()), st;
    if (view_strides(*this, s, st)) return reshaped_view("ViewBackward0", *this, with_geometry(*this, s, st, storage_offset()));
    // A copy viewed with the new shape: PyTorch's _unsafe_view of a clone.
    const Tensor copy = contiguous();
    view_strides(copy, s, st);
    return reshaped_view("UnsafeViewBackward0", copy, with_geometry(copy, s, st, 0));
  });
}

Tensor Tensor::permute(const Dims& dims) const {
  return autograd::diff_member("permute", *this, dims)([&]() -> Tensor {
    FLB_CHECK(int64_t(dims.size()) == dim(), ValueError, "[permute] number of dims ", dims.size(),
              " doesn't match the tensor's ", dim(), " dims");
    Dims s(dims.size()), st(dims.size());
    std::vector<bool> seen(dims.size(), false);
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t d = wrap_dim(dims[i], dim(), "permute");
      FLB_CHECK(!seen[d], ValueError, "[permute] repeated dim ", dims[i], " in ", shape_str(dims));
      seen[d] = true;
      s[i] = sizes()[d];
      st[i] = strides()[d];
    }
    return with_geometry(*this, s, st, storage_offset());
  }, [&](Tensor& out) { autograd::derivative::permute(out, *this, dims); });
}

namespace {
// t with dims d0 and d1 swapped.
Tensor transposed(const Tensor& t, int64_t d0, int64_t d1) {
  Dims s = t.sizes(), st = t.strides();
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return with_geometry(t, s, st, t.storage_offset());
}
}  // namespace

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  return autograd::diff_member("transpose", *this, d0, d1)([&]() -> Tensor {
    const int64_t a = wrap_dim(d0, dim(), "transpose"), b = wrap_dim(d1, dim(), "transpose");
    return dim() == 0 ? *this : transposed(*this, a, b);
  }, [&](Tensor& out) { autograd::derivative::transpose(out, *this, d0, d1); });
}

Tensor Tensor::t() const {
  return autograd::diff_member("t", *this)([&]() -> Tensor {
    FLB_CHECK(dim() <= 2, ValueError, "[t] expects a tensor with <= 2 dimensions, but self is ", dim(), "D");
    return dim() < 2 ? *this : transposed(*this, 0, 1);
  }, [&](Tensor& out) { autograd::derivative::t(out, *this); });
}

Tensor Tensor::expand(const Dims& shape) const {
  return autograd::diff_member("expand", *this, shape)([&]() -> Tensor {
    FLB_CHECK(shape.size() >= size_t(dim()), ValueError, "[expand] the number of sizes provided (",
              shape.size(), ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
    const int64_t off = int64_t(shape.size()) - dim();
    Dims s(shape.size()), st(shape.size());
    for (int64_t i = int64_t(shape.size()) - 1; i >= 0; --i) {
      const int64_t d = i - off;
      if (d < 0) {
        FLB_CHECK(shape[i] >= 0, ValueError, "[expand] the expanded size ", shape[i],
                  " is not allowed in a leading, non-existing dimension ", i);
        s[i] = shape[i];
        st[i] = 0;
        continue;
      }
      const int64_t want = shape[i] == -1 ? sizes()[d] : shape[i];
      FLB_CHECK(want == sizes()[d] || (sizes()[d] == 1 && want >= 0), ValueError, "[expand] the expanded size of the tensor (",
                want, ") must match the existing size (", sizes()[d], ") at non-singleton dimension ", i,
                ".  Target sizes: ", shape_str(shape), ".  Tensor sizes: ", shape_str(sizes()));
      s[i] = want;
      st[i] = want == sizes()[d] ? strides()[d] : 0;
    }
    checked_numel(s, "expand");
    return with_geometry(*this, s, st, storage_offset());
  }, [&](Tensor& out) { autograd::derivative::expand(out, *this, shape); });
}

Tensor Tensor::broadcast_to(const Dims& shape) const {
  return op_hook::op("broadcast_to", *this, shape)([&]() -> Tensor {
    return expand(shape);
  });
}

Tensor Tensor::slice(int64_t dim_, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) const {
  return autograd::diff_member("slice", *this, dim_, start, end, step)([&]() -> Tensor {
    FLB_CHECK(dim() > 0, IndexError, "[slice] cannot slice a 0-dim tensor");
    const int64_t d = wrap_dim(dim_, dim(), "slice");
    FLB_CHECK(step > 0, ValueError, "[slice] step must be positive, got ", step);
    const auto [b, e] = slice_bounds(sizes()[d], start, end);
    Dims s = sizes(), st = strides();
    s[d] = (e - b + step - 1) / step;
    st[d] = strides()[d] * step;
    return with_geometry(*this, s, st, storage_offset() + b * strides()[d]);
  }, [&](Tensor& out) { autograd::derivative::slice(out, *this, dim_, start, end, step); });
}

Tensor Tensor::select(int64_t dim_, int64_t index) const {
  return autograd::diff_member("select", *this, dim_, index)([&]() -> Tensor {
    FLB_CHECK(dim() > 0, IndexError, "[select] select() cannot be applied to a 0-dim tensor");
    const int64_t d = wrap_dim(dim_, dim(), "select");
    const int64_t n = sizes()[d];
    FLB_CHECK(index >= -n && index < n, IndexError, "[select] index ", index,
              " is out of bounds for dimension ", d, " with size ", n);
    Dims s = sizes(), st = strides();
    s.erase(d);
    st.erase(d);
    return with_geometry(*this, s, st, storage_offset() + (index < 0 ? index + n : index) * strides()[d]);
  }, [&](Tensor& out) { autograd::derivative::select(out, *this, dim_, index); });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  return op_hook::op("narrow", *this, d, start, length)([&]() -> Tensor {
    FLB_CHECK(dim() > 0, IndexError, "[narrow] narrow() cannot be applied to a 0-dim tensor");
    d = wrap_dim(d, dim(), "narrow");
    const int64_t n = sizes()[d];
    if (start < 0) start += n;
    FLB_CHECK(start >= 0 && length >= 0 && start + length <= n, IndexError, "[narrow] start (", start,
              ") + length (", length, ") exceeds dimension size (", n, ")");
    return slice(d, start, start + length);
  });
}

Tensor Tensor::squeeze() const {
  return autograd::diff_member("squeeze", *this)([&]() -> Tensor {
    Dims s, st;
    for (int64_t d = 0; d < dim(); ++d)
      if (sizes()[d] != 1) {
        s.push_back(sizes()[d]);
        st.push_back(strides()[d]);
      }
    return with_geometry(*this, s, st, storage_offset());
  }, [&](Tensor& out) { autograd::derivative::squeeze(out, *this); });
}

Tensor Tensor::squeeze(int64_t dim_) const {
  return autograd::diff_member("squeeze", *this, dim_)([&]() -> Tensor {
    const int64_t d = wrap_dim(dim_, dim(), "squeeze");
    if (dim() == 0 || sizes()[d] != 1) return with_geometry(*this, sizes(), strides(), storage_offset());
    Dims s = sizes(), st = strides();
    s.erase(d);
    st.erase(d);
    return with_geometry(*this, s, st, storage_offset());
  }, [&](Tensor& out) { autograd::derivative::squeeze(out, *this, dim_); });
}

Tensor Tensor::unsqueeze(int64_t dim_) const {
  return autograd::diff_member("unsqueeze", *this, dim_)([&]() -> Tensor {
    const int64_t d = wrap_dim(dim_, dim() + 1, "unsqueeze");
    Dims s = sizes(), st = strides();
    const int64_t stride = d < dim() ? sizes()[d] * strides()[d] : 1;
    s.insert(d, 1);
    st.insert(d, stride);
    return with_geometry(*this, s, st, storage_offset());
  }, [&](Tensor& out) { autograd::derivative::unsqueeze(out, *this, dim_); });
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  return op_hook::op("flatten", *this, start, end)([&]() -> Tensor {
    if (dim() == 0) return reshape({1});
    start = wrap_dim(start, dim(), "flatten");
    end = wrap_dim(end, dim(), "flatten");
    FLB_CHECK(start <= end, ValueError, "[flatten] start_dim cannot come after end_dim");
    Dims s;
    for (int64_t d = 0; d < start; ++d) s.push_back(sizes()[d]);
    int64_t m = 1;
    for (int64_t d = start; d <= end; ++d) m *= sizes()[d];
    s.push_back(m);
    for (int64_t d = end + 1; d < dim(); ++d) s.push_back(sizes()[d]);
    return reshape(s);
  });
}

Tensor Tensor::unflatten(int64_t d, const Dims& part) const {
  return op_hook::op("unflatten", *this, d, part)([&]() -> Tensor {
    d = wrap_dim(d, dim(), "unflatten");
    FLB_CHECK(!part.empty(), ValueError, "[unflatten] sizes must be non-empty");
    Dims inferred = infer_shape("unflatten", part, sizes()[d]);
    Dims s;
    for (int64_t i = 0; i < d; ++i) s.push_back(sizes()[i]);
    for (int64_t v : inferred) s.push_back(v);
    for (int64_t i = d + 1; i < dim(); ++i) s.push_back(sizes()[i]);
    return view(s);
  });
}

Tensor Tensor::as_strided(const Dims& size, const Dims& stride, std::optional<int64_t> offset) const {
  return autograd::diff_member("as_strided", *this, size, stride, offset)([&]() -> Tensor {
    FLB_CHECK(size.size() == stride.size(), ValueError, "[as_strided] mismatch in length of strides and shape");
    const int64_t off = offset.value_or(storage_offset());
    FLB_CHECK(off >= 0, ValueError, "[as_strided] negative storage offset ", off);
    // The highest element the view reaches, off + sum (size - 1) * stride, checked for overflow.
    int64_t max_index = off;
    const bool empty = checked_numel(size, "as_strided") == 0;
    for (size_t i = 0; i < size.size(); ++i) {
      FLB_CHECK(stride[i] >= 0, ValueError, "[as_strided] negative stride in ", shape_str(stride));
      if (!empty) max_index = add_size(max_index, mul_size(size[i] - 1, stride[i], "as_strided"), "as_strided");
    }
    const int64_t elems = int64_t(storage()->nbytes / element_size());
    FLB_CHECK(empty || max_index < elems, ValueError, "[as_strided] size ", shape_str(size), " stride ",
              shape_str(stride), " offset ", off, " is out of bounds for storage of ", elems, " elements");
    return with_geometry(*this, size, stride, off);
  }, [&](Tensor& out) { autograd::derivative::as_strided(out, *this, size, stride, offset); });
}

}  // namespace flambeau
