// Copies and fills: copy_ (any dtype pair, broadcasting src), to(dtype), contiguous,
// clone, fill_. A transposed 2-D copy goes tile by tile so both sides stay in cache.
#include <cstring>

#include "flambeau/core/op_hook.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"
#include "flambeau/core/parallel.h"

namespace flambeau {
namespace {

// Copies a [rows, cols] block where dst walks cols contiguously and src walks rows
// contiguously (element stride 1: a transpose), in 8 x 8 blocks through a small buffer: contiguous reads of
// 8 src rows, contiguous writes of 8 dst rows. Strips of 8 src rows are walked along their
// contiguous direction, so only 16 cache lines are live at a time (power-of-two strides
// map a whole column to one cache set; wider tiles thrash it).
template <class T>
void transpose_copy(const char* src, int64_t s_col, char* dst, int64_t d_row, int64_t rows, int64_t cols) {
  constexpr int64_t B = 8;
  const int64_t strips = (cols + B - 1) / B;
  parallel_for(0, strips, 1, [&](int64_t b, int64_t e) {
    T tmp[B][B];
    for (int64_t strip = b; strip < e; ++strip) {
      const int64_t c0 = strip * B, nc = std::min(B, cols - c0);
      for (int64_t r0 = 0; r0 < rows; r0 += B) {
        const int64_t nr = std::min(B, rows - r0);
        for (int64_t i = 0; i < nc; ++i) {
          const T* s = reinterpret_cast<const T*>(src + (c0 + i) * s_col) + r0;
          for (int64_t j = 0; j < nr; ++j) tmp[j][i] = s[j];
        }
        for (int64_t j = 0; j < nr; ++j) {
          T* d = reinterpret_cast<T*>(dst + (r0 + j) * d_row) + c0;
          for (int64_t i = 0; i < nc; ++i) d[i] = tmp[j][i];
        }
      }
    }
  });
}

bool try_transpose_copy(const ops::ElemLoop& L) {
  if (L.shape.size() != 2 || L.dtype[0] != L.dtype[1]) return false;
  const int64_t isz = int64_t(itemsize(L.dtype[0]));
  if (L.strides[0][0] != isz || L.strides[1][1] != isz || L.strides[1][0] == 0) return false;
  if (L.numel < 4096) return false;
  auto run = [&]<class T>() {
    transpose_copy<T>(L.base[1], L.strides[1][0], L.base[0], L.strides[0][1], L.shape[1], L.shape[0]);
  };
  switch (isz) {
    case 1: run.operator()<uint8_t>(); break;
    case 2: run.operator()<uint16_t>(); break;
    case 4: run.operator()<uint32_t>(); break;
    default: run.operator()<uint64_t>(); break;
  }
  return true;
}


// dst = src (broadcast, converted), recording nothing.
void copy_values(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  dst.bump_version();
  if (dst.data_ptr() == src.data_ptr() && dst.dtype() == src.dtype() && dst.strides() == src.strides() &&
      dst.sizes() == src.sizes())
    return;
  const Tensor source = ops::unalias(dst, src);
  ops::ElemLoop L = ops::make_elem_loop(dst, {source});
  if (try_transpose_copy(L)) return;
  ops::for_each_row(L, [&](char* const* p, const int64_t* st, int64_t n) {
    kernels::convert(p[1], L.dtype[1], st[1], p[0], L.dtype[0], st[0], n);
  });
}

}  // namespace

Tensor& Tensor::copy_(const Tensor& src) {
  return op_hook::op("copy_", *this, src)([&]() -> Tensor& {
    FLB_CHECK(src.dim() <= dim() && broadcast_shapes(sizes(), src.sizes(), "copy_") == sizes(), ValueError,
              "[copy_] source of shape ", shape_str(src.sizes()), " cannot be broadcast to ", shape_str(sizes()));
    if (autograd::needs_grad(*this, src)) {
      // Every value is replaced: the gradient goes to src only (the node casts it to src's
      // dtype and sums it to src's shape).
      Tensor value;
      {
        autograd::NoGradGuard no_grad;
        value = src.to(dtype());
        if (value.sizes() != sizes()) value = value.expand(sizes());
        value = value.detach();
      }
      autograd::record_identity("CopyBackwards", src, value);
      return autograd::assign_with_grad("copy_", *this, value);
    }
    copy_values(*this, src);
    return *this;
  });
}

Tensor& Tensor::fill_(Scalar value) {
  return op_hook::op("fill_", *this, value)([&]() -> Tensor& {
    Tensor v = scalar_tensor(value, dtype());
    if (autograd::needs_grad(*this)) return autograd::assign_with_grad("fill_", *this, v.expand(sizes()));
    return copy_(v);
  });
}

Tensor& Tensor::zero_() {
  return op_hook::op("zero_", *this)([&]() -> Tensor& { return fill_(0); });
}

Tensor Tensor::contiguous() const {
  return op_hook::op("contiguous", *this)([&]() -> Tensor {
    return is_contiguous() ? *this : clone();
  });
}

Tensor in_layout_of(const Tensor& y, const Tensor& x) {
  const MemoryFormat format = y.dim() == x.dim() ? ops::kept_memory_format(x) : MemoryFormat::Contiguous;
  if (format == MemoryFormat::Contiguous || y.strides() == memory_format_strides(y.sizes(), format, "in_layout_of"))
    return y;
  return y.clone(format);  // (a copy of a few elements where only size-1 dims' strides differ)
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Contiguous) return contiguous();
  FLB_CHECK(format != MemoryFormat::Preserve, ValueError,
            "[contiguous] preserve memory format is unsupported by the contiguous operator");
  memory_format_strides(sizes(), format, "contiguous");  // checks the rank
  return op_hook::op("contiguous", *this, format)([&]() -> Tensor {
    return is_contiguous(format) ? *this : clone(format);
  });
}

Tensor Tensor::clone(MemoryFormat format) const {
  return autograd::diff_member("clone", *this, format)([&]() -> Tensor {
    Tensor out = empty_like(*this, std::nullopt, format);
    copy_values(out, *this);
    return out;
  }, [&](Tensor& out) { autograd::derivative::clone(out, *this); });
}

Tensor Tensor::to(DType dt) const {
  return autograd::diff_member("to", *this, dt)([&]() -> Tensor {
    if (dt == dtype()) return *this;
    // torch keeps the strides of empty tensors.
    Tensor out = empty_like(*this, dt, numel() == 0 ? MemoryFormat::Preserve : ops::kept_memory_format(*this));
    copy_values(out, *this);
    return out;
  }, [&](Tensor& out) { autograd::derivative::to(out, *this, dt); });
}

}  // namespace flambeau
