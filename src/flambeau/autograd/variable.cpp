// Autograd state of tensors: grad mode, AutogradMeta, saved tensors, AccumulateGrad, and
// the Tensor methods requires_grad / grad / grad_fn / detach / backward / retain_grad.
#include <atomic>

#include "flambeau/autograd/autograd.h"
#include "flambeau/ops/ops.h"

namespace flambeau::autograd {
namespace {
thread_local bool t_grad_mode = true;
std::atomic<uint64_t> g_next_seq{0};
}  // namespace

bool grad_mode_enabled() { return t_grad_mode; }
void set_grad_mode(bool enabled) { t_grad_mode = enabled; }

Node::Node() : seq(g_next_seq.fetch_add(1, std::memory_order_relaxed)) {}

AutogradMeta& meta_of(const Tensor& t) {
  auto& m = t.impl()->autograd;
  if (!m) m = std::make_shared<AutogradMeta>();
  return *m;
}

SavedTensor::SavedTensor(const Tensor& t, int32_t output_nr)
    : data_(t.defined() ? t.detach() : Tensor()), version_(t.defined() ? t.version() : 0), output_nr_(output_nr) {
  if (output_nr >= 0 || !requires_grad(t)) return;
  if (t.is_leaf()) {
    leaf_ = t;
  } else {
    const Edge e = gradient_edge(t);
    grad_fn_ = e.fn;
    grad_fn_slot_ = e.input_nr;
  }
}

Tensor SavedTensor::unpack(const Node& owner) const {
  FLB_CHECK(!owner.released, Error, "[backward] trying to backward through the graph of ", owner.name(),
            " a second time (its saved tensors were freed); pass retain_graph=true to the first backward");
  if (data_.defined())
    FLB_CHECK(data_.numel() == 0 || data_.storage()->nbytes > 0, Error, "[backward] the memory of a tensor saved by ",
              owner.name(), " was released (an FSDP module resharded its parameters and backward reached them "
              "before the module's backward could gather them again)");
  if (data_.defined())
    FLB_CHECK(data_.version() == version_, Error, "[backward] a tensor saved by ", owner.name(),
              " for the gradient was modified by an in-place operation (version ", data_.version(), ", expected ",
              version_, "); clone it before modifying it");
  if (!grad_mode_enabled() || !data_.defined()) return data_;
  if (leaf_.defined()) return leaf_;  // Note [Saved tensors and double backward]
  std::shared_ptr<Node> fn = grad_fn_;
  uint32_t slot = grad_fn_slot_;
  if (output_nr_ >= 0 && data_.is_floating_point()) {
    fn = std::const_pointer_cast<Node>(owner.shared_from_this());
    slot = uint32_t(output_nr_);
  }
  if (!fn) return data_;
  Tensor out = data_.detach();
  AutogradMeta& m = meta_of(out);
  m.requires_grad = true;
  m.grad_fn = std::move(fn);
  m.output_nr = slot;
  return out;
}

// Whether `g`, the first gradient of `leaf`, can become leaf.grad without a copy: nothing
// else holds it or its storage, and it is a plain contiguous tensor of the leaf's shape and
// dtype without history (as torch's AccumulateGrad, which "steals" such gradients). Saves
// a parameter-sized copy, e.g. the [V, D] weight gradient of linear_cross_entropy.
// A gradient is laid out as its leaf when the leaf is dense (a channels-last weight), else
// row-major, as torch's layout contract for gradients.
static bool row_major_grad(const Tensor& leaf) { return leaf.is_contiguous() || !is_non_overlapping_and_dense(leaf); }
static bool can_adopt(const Tensor& g, const Tensor& leaf) {
  const TensorImpl* i = g.impl();
  return g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && !i->view_base && !i->autograd &&
         g.dtype() == leaf.dtype() && g.sizes() == leaf.sizes() &&
         (row_major_grad(leaf) ? g.is_contiguous() : g.strides() == leaf.strides()) &&
         g.storage_offset() == 0 && g.device() == leaf.device();
}
// A copy of g in the leaf's dtype and layout.
static Tensor copy_for(const Tensor& g, const Tensor& leaf) {
  if (row_major_grad(leaf)) return g.to(leaf.dtype()).clone();
  Tensor out = empty_like(leaf, std::nullopt, MemoryFormat::Preserve);
  out.copy_(g);
  return out;
}

Tensor checked_hook_result(const Tensor& r, const Tensor& g) {
  FLB_CHECK(r.sizes() == g.sizes(), ValueError, "[register_hook] the hook changed the gradient's shape from ",
            shape_str(g.sizes()), " to ", shape_str(r.sizes()));
  return r;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grads) {
  Tensor g = grads.empty() ? Tensor() : std::move(grads[0]);
  if (!g.defined()) return {};
  AutogradMeta& m = meta_of(leaf_);
  for (const TensorHook& hook : m.hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = checked_hook_result(r, g);
  }
  if (grad_mode_enabled() && g.requires_grad()) {  // create_graph: .grad keeps its history, as torch's
    const Tensor gd = g.to(leaf_.dtype());
    m.grad = m.grad.defined() ? add(m.grad, gd) : gd;
    for (auto& hook : m.post_accumulate_hooks) hook(leaf_);
    return {};
  }
  NoGradGuard no_grad;
  if (!m.grad.defined()) m.grad = can_adopt(g, leaf_) ? std::move(g) : copy_for(g, leaf_);  // owned
  else m.grad.add_(g);
  for (auto& hook : m.post_accumulate_hooks) hook(leaf_);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.impl()->autograd) return {};
  AutogradMeta& m = *t.impl()->autograd;
  if (m.grad_fn && t.impl()->view_base && m.view_version != t.version()) refresh_view_history(t);
  if (m.grad_fn) return {m.grad_fn, m.output_nr};
  if (!m.requires_grad) return {};
  std::shared_ptr<Node> acc = m.grad_accumulator.lock();
  if (!acc) {
    // The accumulator holds the leaf; the leaf only points back weakly (no cycle).
    acc = std::make_shared<AccumulateGrad>(t);
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

void set_history(const std::vector<Tensor*>& outputs, const std::shared_ptr<Node>& node,
                 const std::vector<const Tensor*>& inputs) {
  node->next.clear();
  for (const Tensor* in : inputs) node->next.push_back(in ? gradient_edge(*in) : Edge{});
  node->pre_hooks.resize(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    AutogradMeta& m = meta_of(*outputs[i]);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = uint32_t(i);
    if (outputs[i]->impl()->view_base) m.view_version = outputs[i]->version();
  }
}

void check_inplace_allowed(const char* op, const Tensor& t) {
  FLB_CHECK(!(grad_mode_enabled() && requires_grad(t) && t.is_leaf()), Error, "[", op,
            "] a leaf tensor that requires grad is used in an in-place operation");
}

}  // namespace flambeau::autograd

namespace flambeau {
using namespace autograd;

bool Tensor::requires_grad() const { return autograd::requires_grad(*this); }

Tensor& Tensor::requires_grad_(bool enabled) {
  FLB_CHECK(is_leaf() || enabled, ValueError,
            "[requires_grad_] you can only change requires_grad of leaf tensors (use detach())");
  FLB_CHECK(!enabled || is_floating_point(), TypeError,
            "[requires_grad_] only floating point tensors can require gradients, got ", dtype_name(dtype()));
  meta_of(*this).requires_grad = enabled;
  return *this;
}

Tensor Tensor::grad() const { return impl_->autograd ? impl_->autograd->grad : Tensor(); }
void Tensor::set_grad(const Tensor& g) { meta_of(*this).grad = g; }
std::shared_ptr<Node> Tensor::grad_fn() const { return impl_->autograd ? impl_->autograd->grad_fn : nullptr; }
bool Tensor::is_leaf() const { return !grad_fn(); }

Tensor Tensor::detach() const {
  Tensor out = make_tensor(storage(), dtype(), sizes(), strides(), storage_offset());
  out.impl()->wrapped_number = impl_->wrapped_number;
  return out;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph, create_graph);
}

namespace autograd {

void register_hook(const Tensor& t, TensorHook hook) {
  FLB_CHECK(t.requires_grad(), Error, "[register_hook] cannot register a hook on a tensor that doesn't require gradient");
  AutogradMeta& m = meta_of(t);
  if (m.grad_fn) m.grad_fn->pre_hooks[m.output_nr].push_back(std::move(hook));
  else m.hooks.push_back(std::move(hook));
}

void register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(Tensor&)> hook) {
  FLB_CHECK(leaf.is_leaf() && leaf.requires_grad(), Error,
            "[register_post_accumulate_grad_hook] only leaf tensors that require grad accept this hook");
  meta_of(leaf).post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace autograd

void Tensor::retain_grad() const {
  FLB_CHECK(requires_grad(), Error, "[retain_grad] can't retain_grad on a tensor that doesn't require grad");
  AutogradMeta& m = meta_of(*this);
  if (!m.grad_fn || m.retains_grad) return;
  m.retains_grad = true;
  std::weak_ptr<AutogradMeta> weak = impl_->autograd;
  const DType dt = dtype();
  m.grad_fn->pre_hooks[m.output_nr].push_back([weak, dt](const Tensor& g) {
    if (auto meta = weak.lock()) {
      NoGradGuard no_grad;
      if (!meta->grad.defined()) meta->grad = g.to(dt).clone();
      else meta->grad.add_(g);
    }
    return Tensor();
  });
}

}  // namespace flambeau
