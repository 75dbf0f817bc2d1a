// Boolean-mask ops: masked_fill, masked_select, masked_scatter, nonzero.
#include "flambeau/core/op_hook.h"
#include "flambeau/ops/index_kernels.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
using namespace ops;
namespace {

void check_mask(const char* op, const Tensor& mask) {
  FLB_CHECK(mask.dtype() == kBool, TypeError, "[", op, "] expected a bool mask, got ", dtype_name(mask.dtype()));
}

// The mask of an in-place op must broadcast to self's shape.
void check_mask_fits(const char* op, const Tensor& self, const Tensor& mask) {
  check_mask(op, mask);
  FLB_CHECK(broadcast_shapes(self.sizes(), mask.sizes(), op) == self.sizes(), ValueError, "[", op, "] mask of shape ",
            shape_str(mask.sizes()), " cannot be broadcast to self of shape ", shape_str(self.sizes()));
}

}  // namespace

FLB_OP(masked_fill_, (Tensor& self, const Tensor& mask, const Tensor& value), (self, mask, value), Tensor&) {
  FLB_CHECK(value.dim() == 0, ValueError, "[masked_fill] value must be a number or a 0-dim tensor, got shape ",
            shape_str(value.sizes()));
  check_mask_fits("masked_fill", self, mask);
  if (autograd::needs_grad(self, value))
    return autograd::assign_out_of_place("masked_fill_", self, [&] { return masked_fill(self, mask, value); });
  const Tensor m = unalias(self, mask);
  const ElemLoop L = make_elem_loop(self, {m});
  visit_dtype(self.dtype(), [&]<class T>() {
    const T v = kernels::scalar_to<T>(value.item());
    for_each_row(L, [&](char* const* p, const int64_t* st, int64_t n) {
      for (int64_t j = 0; j < n; ++j)
        if (*reinterpret_cast<const bool*>(p[1] + j * st[1])) *reinterpret_cast<T*>(p[0] + j * st[0]) = v;
    });
  });
  return self;
}

FLB_DIFF_OP(masked_fill, (const Tensor& self, const Tensor& mask, const Tensor& value), (self, mask, value), Tensor) {
  check_mask("masked_fill", mask);
  Tensor out = empty(broadcast_shapes(self.sizes(), mask.sizes(), "masked_fill"), self.dtype());
  out.copy_(self);
  masked_fill_(out, mask, value);
  return out;
}

FLB_DIFF_OP(masked_select, (const Tensor& self, const Tensor& mask), (self, mask), Tensor) {
  check_mask("masked_select", mask);
  const Dims shape = broadcast_shapes(self.sizes(), mask.sizes(), "masked_select");
  const Tensor positions = nonzero_flat(mask.expand(shape));
  const Tensor src = self.expand(shape).contiguous();
  Tensor out = empty({positions.numel()}, self.dtype());
  if (out.numel() > 0)
    gather_with_offsets(out, restride(src, out.sizes(), {0}, src.storage_offset()), positions,
                        int64_t(src.element_size()));
  return out;
}

FLB_OP(masked_scatter_, (Tensor& self, const Tensor& mask, const Tensor& source), (self, mask, source), Tensor&) {
  check_mask_fits("masked_scatter", self, mask);
  if (autograd::needs_grad(self, source))
    return autograd::assign_out_of_place("masked_scatter_", self, [&] { return masked_scatter(self, mask, source); });
  FLB_CHECK(source.dtype() == self.dtype(), TypeError, "[masked_scatter] expected source dtype ",
            dtype_name(self.dtype()), ", got ", dtype_name(source.dtype()));
  const Tensor positions = nonzero_flat(mask.expand(self.sizes()));
  const int64_t n = positions.numel();
  FLB_CHECK(source.numel() >= n, ValueError, "[masked_scatter] source of shape ", shape_str(source.sizes()),
            " has fewer elements than the ", n, " true elements of the mask");
  if (n == 0) return self;
  Tensor values = source.reshape({-1}).narrow(0, 0, n);
  if (values.storage() == self.storage()) values = values.clone();
  Tensor dst = self.is_contiguous() ? self : self.contiguous();
  put_with_offsets(restride(dst, {n}, {0}, dst.storage_offset()), values, positions, int64_t(dst.element_size()),
                   false);
  if (!self.is_contiguous()) self.copy_(dst);
  return self;
}

FLB_DIFF_OP(masked_scatter,
            (const Tensor& self, const Tensor& mask, const Tensor& source),
            (self, mask, source), Tensor) {
  check_mask("masked_scatter", mask);
  Tensor out = empty(broadcast_shapes(self.sizes(), mask.sizes(), "masked_scatter"), self.dtype());
  out.copy_(self);
  masked_scatter_(out, mask, source);
  return out;
}

FLB_OP(nonzero, (const Tensor& t), (t), Tensor) {
  const Tensor positions = nonzero_flat(t);
  const int64_t n = positions.numel(), nd = t.dim();
  Tensor out = empty({n, nd}, kInt64);
  const int64_t* p = positions.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  const Dims sizes = t.sizes();
  parallel_for(0, n, kElemGrain / std::max<int64_t>(nd, 1), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t rem = p[k];
      for (int64_t d = nd - 1; d >= 0; --d) {
        o[k * nd + d] = rem % sizes[size_t(d)];
        rem /= sizes[size_t(d)];
      }
    }
  });
  return out;
}

}  // namespace flambeau
