// The autograd graph: a Node is the backward of one op. It maps the gradients of the op's
// outputs to the gradients of its inputs, which flow along `next` edges to the nodes that
// made those inputs (or to AccumulateGrad for leaves). Tensors remember their node in
// AutogradMeta. Saved tensors keep the storage version they were saved at, so that an
// in-place change before backward is caught.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::autograd {

// Whether ops record the graph (thread-local, on by default).
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

// RAII: records nothing while alive (torch.no_grad).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode(false); }
  ~NoGradGuard() { set_grad_mode(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// RAII: records the graph while alive (torch.enable_grad).
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode(true); }
  ~EnableGradGuard() { set_grad_mode(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

class Node;

// Where a gradient goes: input slot `input_nr` of node `fn`.
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
};

using TensorHook = std::function<Tensor(const Tensor&)>;  // may return undefined: keep grad
// A hook's replacement gradient r for g; raises ValueError when its shape differs.
Tensor checked_hook_result(const Tensor& r, const Tensor& g);

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  // Gradients w.r.t. the op's outputs (undefined where none flows) -> gradients w.r.t.
  // its inputs, one per edge of `next` (undefined where not needed).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after a backward that does not retain the graph (and marks the
  // node released, so that running it again is an error).
  virtual void release_saved() {}

  std::vector<Edge> next;
  uint64_t seq;  // creation order: a node always runs after the nodes created later
  // Hooks on the gradient of output `i` (tensor hooks of non-leaves), run before apply.
  std::vector<std::vector<TensorHook>> pre_hooks;
  bool released = false;
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;  // null for leaves
  uint32_t output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // a leaf's AccumulateGrad, while the graph holds it
  std::vector<TensorHook> hooks;          // leaf tensor hooks (non-leaf hooks live on grad_fn)
  std::vector<std::function<void(Tensor&)>> post_accumulate_hooks;
  bool retains_grad = false;
  // For views: the storage version when grad_fn was set. A later in-place write into the
  // same memory makes grad_fn stale; it is then rebuilt from the base's history.
  uint32_t view_version = 0;
};

// The AutogradMeta of t, created on demand.
AutogradMeta& meta_of(const Tensor& t);

// RAII: sets grad mode to `enabled` while alive (the engine's create_graph).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(grad_mode_enabled()) { set_grad_mode(enabled); }
  ~GradModeGuard() { set_grad_mode(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

// A tensor kept for backward: its data (no history, so no reference cycle) and version.
// Note [Saved tensors and double backward]: a saved input that requires grad also keeps
// where its gradient goes (a leaf: the leaf itself; else its grad_fn and slot when saved,
// nodes older than the owner, so no cycle), and a saved output (output_nr >= 0) remembers
// which one it was. unpack() with grad mode on (a backward with create_graph) gives the
// input with that history and the output as output `output_nr` of its owner, so formulas
// written with ops record the graph of the gradient; with grad mode off it gives the plain
// data, as before.
class SavedTensor {
 public:
  SavedTensor() = default;
  explicit SavedTensor(const Tensor& t, int32_t output_nr = -1);
  // The tensor; raises if it was modified in place since it was saved, or released.
  Tensor unpack(const Node& owner) const;
  void reset() {
    data_ = Tensor();
    leaf_ = Tensor();
    grad_fn_.reset();
  }

 private:
  Tensor data_;
  Tensor leaf_;                      // a saved leaf that requires grad
  std::shared_ptr<Node> grad_fn_;    // a saved non-leaf's history
  uint32_t grad_fn_slot_ = 0;
  uint32_t version_ = 0;
  int32_t output_nr_ = -1;
};

// The node of a leaf: adds incoming gradients into leaf.grad() (running its hooks).
class AccumulateGrad : public Node {
 public:
  explicit AccumulateGrad(Tensor leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& leaf() const { return leaf_; }

 private:
  Tensor leaf_;
};

// True when grad mode is on and any of the tensors requires grad.
inline bool requires_grad(const Tensor& t) {
  const TensorImpl* i = t.impl();
  return i && i->autograd && i->autograd->requires_grad;
}
template <class... T>
bool needs_grad(const T&... ts) {
  return grad_mode_enabled() && (requires_grad(ts) || ...);
}

// The edge a gradient for `t` should follow: its grad_fn's slot, its accumulator for a
// leaf requiring grad, or none.
Edge gradient_edge(const Tensor& t);

// Gives the view `view` the history of an as_strided view of its base's current history
// (none if the base does not require grad).
void refresh_view_history(const Tensor& view);

// Makes `node` (whose edges point at `inputs`) the grad_fn of `outputs` (slot i each).
void set_history(const std::vector<Tensor*>& outputs, const std::shared_ptr<Node>& node,
                 const std::vector<const Tensor*>& inputs);

// Raises for an in-place op on a leaf that requires grad (while grad mode is on).
void check_inplace_allowed(const char* op, const Tensor& t);

}  // namespace flambeau::autograd
