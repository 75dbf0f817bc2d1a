// In-place ops under autograd. The op runs out of place; its result is written into self
// and self takes the result's history. When self is a view, the tensor that owns the
// memory (its base) gets a CopySlices node instead: the base's gradient outside the
// view goes to the base's previous history, inside it to the result.
#include <string_view>

#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau::autograd {
namespace {

struct Geometry {
  Dims sizes, strides;
  int64_t offset;
  explicit Geometry(const Tensor& t) : sizes(t.sizes()), strides(t.strides()), offset(t.storage_offset()) {}
};

// A zero gradient laid out like the base's storage, seen as the base and as the view.
struct Canvas {
  Tensor base, view;
};
Canvas make_canvas(int64_t storage_elems, const Geometry& base, const Geometry& view, DType dtype) {
  NoGradGuard no_grad;
  const Tensor flat = zeros({storage_elems}, dtype);
  return {flat.as_strided(base.sizes, base.strides, base.offset),
          flat.as_strided(view.sizes, view.strides, view.offset)};
}

class CopySlices : public Node {
 public:
  CopySlices(const Tensor& base, const Tensor& view, DType result_dtype)
      : elems_(int64_t(base.storage()->nbytes / base.element_size())), base_(base), view_(view),
        result_dtype_(result_dtype) {}

  // next[0]: the base's previous history; next[1]: the written result's.
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    if (grads.empty() || !grads[0].defined()) return {};
    NoGradGuard no_grad;
    Canvas c = make_canvas(elems_, base_, view_, grads[0].dtype());
    c.base.copy_(grads[0]);
    Tensor to_result = c.view.to(result_dtype_).clone();
    c.view.zero_();  // the old values there were overwritten
    return {c.base, to_result};
  }
  std::string name() const override { return "CopySlices"; }

 private:
  int64_t elems_;
  Geometry base_, view_;
  DType result_dtype_;
};

// Gives base the CopySlices history of writing `result` into its view `self`, and self
// the history of a view of the new base.
void rebase_view(Tensor& self, Tensor base, const Tensor& result) {
  const Tensor old_base = base;
  set_history({&base}, std::make_shared<CopySlices>(base, self, result.dtype()), {&old_base, &result});
  refresh_view_history(self);
}

}  // namespace

void refresh_view_history(const Tensor& view) {
  const Tensor base = view.view_base();
  AutogradMeta& m = meta_of(view);
  m.grad_fn = nullptr;
  if (!requires_grad(base)) {
    m.requires_grad = false;
    return;
  }
  const int64_t elems = int64_t(base.storage()->nbytes / base.element_size());
  const Geometry bg(base), vg(view);
  Tensor out = view;  // shares the impl: record() sets view's history
  record("AsStridedBackward0", {&out}, {&base}, {}, [elems, bg, vg](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
    Canvas c = make_canvas(elems, bg, vg, g[0].dtype());
    c.view.copy_(g[0]);
    return std::vector<Tensor>{c.base};
  });
}

Tensor& inplace_with_grad(const char* name, Tensor& self, const std::function<Tensor(const Tensor&)>& op) {
  return assign_out_of_place(name, self, [&] { return op(self.clone()); });
}

Tensor& assign_out_of_place(const char* name, Tensor& self, const std::function<Tensor()>& out_of_place) {
  check_inplace_allowed(name, self);
  return assign_with_grad(name, self, out_of_place());
}

Tensor& assign_with_grad(const char* name, Tensor& self, const Tensor& value) {
  check_inplace_allowed(name, self);
  Tensor result = value;
  if (requires_grad(value) && value.is_leaf()) {  // self needs a node of its own to point at the leaf
    result = value.detach();
    record_identity("CopyBackwards", value, result);
  }
  const Tensor base = self.view_base();
  FLB_CHECK(!(base.defined() && requires_grad(base) && base.is_leaf()), Error, "[", name,
            "] a view of a leaf tensor that requires grad is used in an in-place operation");
  {
    NoGradGuard no_grad;
    self.copy_(result);
  }
  if (base.defined() && (requires_grad(base) || requires_grad(result))) {
    rebase_view(self, base, result);
    return self;
  }
  if (!requires_grad(result)) {  // overwritten by constants: self stays in the graph, with zero gradient
    // (PyTorch's FillBackward2 for fill_, CopyBackwards for copy_)
    const Tensor old = self;
    record_zero_grad(std::string_view(name) == "fill_" ? "FillBackward2" : "CopyBackwards", old, self);
    return self;
  }
  AutogradMeta& m = meta_of(self);
  const AutogradMeta& r = meta_of(result);
  m.requires_grad = r.requires_grad;
  m.grad_fn = r.grad_fn;
  m.output_nr = r.output_nr;
  return self;
}

}  // namespace flambeau::autograd
