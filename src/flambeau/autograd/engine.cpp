// The backward engine: finds the nodes reachable from the roots, counts how many edges
// lead into each, and runs them in dependency order (ties broken by creation order, later
// first), summing the gradients that arrive at each input slot; with create_graph grad mode
// stays on, so the gradients record a graph of their own. Single-threaded, so the
// order of every sum is fixed: gradients are reproducible bit for bit. Callbacks queued
// during a pass (queue_callback) run once its whole graph has been processed.
#include <map>
#include <optional>
#include <queue>
#include <unordered_map>

#include "flambeau/autograd/autograd.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/ops/ops.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::autograd {
namespace {

// A gradient arriving at a slot: the first is kept, later ones are added.
void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? add(slot, g) : g;
}

// The end-of-backward callbacks of the pass running on this thread (null outside one).
// A nested pass (backward inside a hook) installs its own queue and restores the outer one.
thread_local std::vector<std::function<void()>>* current_callbacks = nullptr;

class CallbackQueueScope {
 public:
  CallbackQueueScope() : outer_(current_callbacks) { current_callbacks = &queue_; }
  ~CallbackQueueScope() { current_callbacks = outer_; }
  CallbackQueueScope(const CallbackQueueScope&) = delete;
  CallbackQueueScope& operator=(const CallbackQueueScope&) = delete;
  // Runs the callbacks in the order queued, including those queued by a callback.
  void run_all() {
    for (size_t i = 0; i < queue_.size(); ++i) {
      std::function<void()> cb = std::move(queue_[i]);
      cb();
    }
    queue_.clear();
  }

 private:
  std::vector<std::function<void()>> queue_;
  std::vector<std::function<void()>>* outer_;
};

struct Capture {
  Node* node;
  uint32_t slot;
};

// Runs the graph behind `root_edges`. With `captures`, returns the gradients arriving at
// those slots instead of accumulating into leaves (AccumulateGrad nodes are not run).
std::vector<Tensor> run(const std::vector<Edge>& root_edges, const std::vector<Tensor>& root_grads, bool retain_graph,
                        const std::vector<Capture>* captures, bool create_graph) {
  GradModeGuard grad_mode(create_graph);  // gradients are recorded only for create_graph
  CallbackQueueScope callbacks;
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  for (const Edge& e : root_edges)
    if (e.fn && deps.emplace(e.fn.get(), 0).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next) {
      if (!e.fn) continue;
      auto [it, fresh] = deps.emplace(e.fn.get(), 0);
      ++it->second;
      if (fresh) stack.push_back(e.fn.get());
    }
  }
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto slot = [&](Node* n, uint32_t i) -> Tensor& {
    std::vector<Tensor>& b = buffers[n];
    if (b.size() <= i) b.resize(i + 1);
    return b[i];
  };
  for (size_t i = 0; i < root_edges.size(); ++i)
    if (root_edges[i].fn) accumulate(slot(root_edges[i].fn.get(), root_edges[i].input_nr), root_grads[i]);

  auto later_first = [](Node* a, Node* b) { return a->seq < b->seq; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  for (auto& [n, d] : deps)
    if (d == 0) ready.push(n);
  std::vector<Tensor> captured(captures ? captures->size() : 0);
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[n]);
    buffers.erase(n);
    grads.resize(std::max(grads.size(), n->pre_hooks.size()));
    for (size_t i = 0; i < n->pre_hooks.size(); ++i)
      for (const TensorHook& hook : n->pre_hooks[i])
        if (grads[i].defined()) {
          Tensor r = hook(grads[i]);
          if (r.defined()) grads[i] = checked_hook_result(r, grads[i]);
        }
    if (captures)
      for (size_t c = 0; c < captures->size(); ++c)
        if ((*captures)[c].node == n && (*captures)[c].slot < grads.size())
          accumulate(captured[c], grads[(*captures)[c].slot]);
    std::vector<Tensor> outs;
    const bool skip = captures && dynamic_cast<AccumulateGrad*>(n);
    if (!skip) {
      FLB_CHECK(!n->released, Error, "[backward] trying to backward through the graph of ", n->name(),
                " a second time (its saved tensors were freed); pass retain_graph=true to the first backward");
      std::optional<profiler::Scope> scope;  // the node's name is built only when profiling
      if (profiler::enabled()) [[unlikely]]
        scope.emplace(n->name(), profiler::EventKind::Backward, int64_t(n->seq));
      outs = n->apply(std::move(grads));
      if (!retain_graph) n->release_saved();
    }
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      if (!e.fn) continue;
      if (i < outs.size()) accumulate(slot(e.fn.get(), e.input_nr), outs[i]);
      if (--deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
  }
  callbacks.run_all();
  return captured;
}

// Root gradients: the given ones, or ones for one-element roots.
std::vector<Edge> root_edges_of(const char* op, const std::vector<Tensor>& roots, const std::vector<Tensor>& grads,
                                std::vector<Tensor>& root_grads, bool create_graph) {
  FLB_CHECK(grads.empty() || grads.size() == roots.size(), ValueError, "[", op, "] got ", grads.size(),
            " gradients for ", roots.size(), " tensors");
  std::vector<Edge> edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    Edge e = gradient_edge(r);
    FLB_CHECK(e.fn, Error, "[", op, "] element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      FLB_CHECK(r.numel() == 1, Error, "[", op, "] grad can be implicitly created only for scalar outputs, got shape ",
                shape_str(r.sizes()));
      g = ones_like(r);
    }
    FLB_CHECK(g.sizes() == r.sizes(), ValueError, "[", op, "] gradient of shape ", shape_str(g.sizes()),
              " does not match the tensor's shape ", shape_str(r.sizes()));
    edges.push_back(e);
    root_grads.push_back(create_graph ? g : g.detach());
  }
  return edges;
}

}  // namespace

bool in_backward_pass() { return current_callbacks != nullptr; }

void queue_callback(std::function<void()> callback) {
  FLB_CHECK(current_callbacks, Error,
            "[queue_callback] can only be called while a backward pass runs on this thread (from a hook or a "
            "Function's backward)");
  FLB_CHECK(callback, ValueError, "[queue_callback] the callback is empty");
  current_callbacks->push_back(std::move(callback));
}

FLB_OP(backward,
       (const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph, bool create_graph),
       (roots, grads, retain_graph, create_graph), void) {
  std::vector<Tensor> root_grads;
  const std::vector<Edge> edges = root_edges_of("backward", roots, grads, root_grads, create_graph);
  run(edges, root_grads, retain_graph, nullptr, create_graph);
}

FLB_OP(grad,
       (const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
        const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused, bool create_graph),
       (outputs, inputs, grad_outputs, retain_graph, allow_unused, create_graph), std::vector<Tensor>) {
  return grad_as_ops(outputs, inputs, grad_outputs, retain_graph, allow_unused, create_graph);
}

std::vector<Tensor> grad_as_ops(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused,
                                bool create_graph) {
  std::vector<Tensor> root_grads;
  const std::vector<Edge> edges = root_edges_of("grad", outputs, grad_outputs, root_grads, create_graph);
  std::vector<Capture> captures;
  std::vector<std::shared_ptr<Node>> keep;  // accumulators made for the capture stay alive
  for (size_t i = 0; i < inputs.size(); ++i) {
    FLB_CHECK(inputs[i].requires_grad(), Error, "[grad] input ", i, " does not require grad");
    Edge e = gradient_edge(inputs[i]);
    keep.push_back(e.fn);
    captures.push_back({e.fn.get(), e.input_nr});
  }
  std::vector<Tensor> out = run(edges, root_grads, retain_graph, &captures, create_graph);
  for (size_t i = 0; i < out.size(); ++i) {
    FLB_CHECK(out[i].defined() || allow_unused, ValueError, "[grad] input ", i,
              " was not used in the graph of the outputs (pass allow_unused=true)");
    if (out[i].defined() && out[i].dtype() != inputs[i].dtype()) out[i] = out[i].to(inputs[i].dtype());
  }
  return out;
}

}  // namespace flambeau::autograd
