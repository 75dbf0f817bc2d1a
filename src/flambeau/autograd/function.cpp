// FunctionNode and record(): the generic backward node of differentiable ops.
#include "flambeau/autograd/function.h"

#include <set>
#include <string_view>

#include "flambeau/ops/ops.h"

namespace flambeau::autograd {

FunctionNode::FunctionNode(const char* name, BackwardFn fn, std::vector<Tensor> saved,
                           const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs)
    : name_(name), fn_(std::move(fn)) {
  for (const Tensor& t : saved) {
    int32_t output_nr = -1;  // Note [Saved tensors and double backward]
    for (size_t i = 0; i < outputs.size() && t.defined(); ++i)
      if (outputs[i]->impl() == t.impl()) output_nr = int32_t(i);
    saved_.emplace_back(t, output_nr);
  }
  for (const Tensor* in : inputs) {
    input_shapes_.push_back(in && in->defined() ? in->sizes() : Dims{});
    input_dtypes_.push_back(in && in->defined() ? in->dtype() : kFloat32);
  }
  for (const Tensor* out : outputs) {
    output_shapes_.push_back(out->sizes());
    output_dtypes_.push_back(out->dtype());
  }
}

namespace {

// Note [Gradients without a graph]: under create_graph a backward whose formula runs a
// kernel rather than ops returns a gradient with no history although what it came from has
// one: differentiating through it would silently treat it as a constant. Such a gradient
// gets this node instead, which raises if a later backward reaches it (torch's
// DelayedError, as for @once_differentiable). The kernel backwards: the nodes named below,
// and those marked once_differentiable (C ops' backward kernels).
const std::set<std::string_view> kKernelBackwards{
    "CrossEntropyLossBackward0", "LinearCrossEntropyBackward0", "ProdBackward0", "ProdBackward1",
    "EmbeddingBackward0", "ScaledDotProductFlashAttentionForCpuBackward0", "FlexAttentionBackward0",
    "RnnLayerBackward0", "UpsampleNearest1DBackward0", "UpsampleNearest2DBackward0", "UpsampleNearest3DBackward0",
    "UpsampleNearestExact1DBackward0", "UpsampleNearestExact2DBackward0", "UpsampleNearestExact3DBackward0",
    "UpsampleLinear1DBackward0", "UpsampleBilinear2DBackward0", "UpsampleBicubic2DBackward0",
    "UpsampleTrilinear3DBackward0"};

class DelayedError : public Node {
 public:
  explicit DelayedError(std::string op) : op_(std::move(op)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&&) override {
    throw Error(detail::str_cat("[backward] the gradient that ", op_,
                                " computed is not differentiable (its backward runs a kernel, not ops): "
                                "create_graph=True cannot differentiate through it"));
  }
  std::string name() const override { return "DelayedError"; }

 private:
  std::string op_;
};

}  // namespace

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grads) {
  grads.resize(output_shapes_.size());
  for (size_t i = 0; i < grads.size(); ++i)
    if (!grads[i].defined()) grads[i] = zeros(output_shapes_[i], output_dtypes_[i]);
  std::vector<Tensor> saved;
  for (const SavedTensor& s : saved_) saved.push_back(s.unpack(*this));
  std::vector<Tensor> out = fn_(grads, saved);
  out.resize(next.size());
  bool history = false;  // create_graph, and something the gradients come from has a graph
  if (grad_mode_enabled() && (once_differentiable || kKernelBackwards.count(name_)))
    for (const std::vector<Tensor>* v : {&grads, &saved})
      for (const Tensor& t : *v) history = history || (t.defined() && requires_grad(t));
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].defined() || !next[i].fn) {
      out[i] = Tensor();
      continue;
    }
    if (out[i].sizes() != input_shapes_[i]) out[i] = sum_to(out[i], input_shapes_[i]);
    if (out[i].dtype() != input_dtypes_[i]) out[i] = out[i].to(input_dtypes_[i]);
    if (history && !requires_grad(out[i]) && is_floating(out[i].dtype())) {  // Note [Gradients without a graph]
      Tensor g = out[i].detach();
      set_history({&g}, std::make_shared<DelayedError>(name_), {});
      out[i] = g;
    }
  }
  return out;
}

void FunctionNode::release_saved() {
  for (SavedTensor& s : saved_) s.reset();
  released = true;
}

void record(const char* name, std::initializer_list<Tensor*> outputs, std::initializer_list<const Tensor*> inputs,
            std::vector<Tensor> saved, BackwardFn fn) {
  record_many(name, std::vector<Tensor*>(outputs), std::vector<const Tensor*>(inputs), std::move(saved), std::move(fn));
}

void record_many(const char* name, const std::vector<Tensor*>& outs, const std::vector<const Tensor*>& ins,
                 std::vector<Tensor> saved, BackwardFn fn) {
  if (!grad_mode_enabled()) return;
  bool any = false, differentiable = false;  // integer and bool outputs have no gradient
  for (const Tensor* in : ins) any = any || (in && requires_grad(*in));
  for (const Tensor* out : outs) differentiable = differentiable || is_floating(out->dtype());
  if (!any || !differentiable) return;
  auto node = std::make_shared<FunctionNode>(name, std::move(fn), std::move(saved), ins, outs);
  set_history(outs, node, ins);
}

Tensor sum_to(const Tensor& g, const Dims& shape) {
  const int64_t lead = g.dim() - int64_t(shape.size());
  FLB_CHECK(lead >= 0, ValueError, "[sum_to] gradient of shape ", shape_str(g.sizes()), " cannot be reduced to ",
            shape_str(shape));
  Dims dims;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[size_t(d - lead)] == 1 && g.size(d) != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? g : sum(g, dims, true);
  return r.reshape(shape);
}

}  // namespace flambeau::autograd
