// Reverse-mode autograd, the public API (torch.autograd): backward, grad, the grad-mode
// guards (node.h) and gradcheck. Ops record their backward nodes themselves when grad
// mode is on and an input requires grad.
#pragma once
#include <functional>
#include <vector>

#include "flambeau/autograd/node.h"

namespace flambeau::autograd {

// Accumulates d(sum of roots * grads)/d(leaf) into every leaf's grad(). An undefined
// grad stands for ones (allowed for one-element roots only). create_graph: the backward
// formulas run in grad mode, so the gradients have a graph of their own (double backward);
// that graph reaches this one's nodes, so pass retain_graph too (torch's default then).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {}, bool retain_graph = false,
              bool create_graph = false);

// d(outputs)/d(inputs) weighted by grad_outputs, returned instead of accumulated.
// allow_unused: an input the outputs do not depend on gives an undefined tensor
// (otherwise ValueError). create_graph: as for backward.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false, bool create_graph = false);

// grad() without the op hook's report of the call itself, so that the ops the pass runs are
// reported one by one (the compiler's AOT pass traces a backward this way).
std::vector<Tensor> grad_as_ops(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor>& grad_outputs, bool retain_graph, bool allow_unused,
                                bool create_graph = false);

// Queues `callback` to run when the backward pass (backward or grad) running on this thread
// has processed its whole graph, before that call returns (torch's
// Variable._execution_engine.queue_callback). Callbacks run in the order queued; one may
// queue more, which run too; an exception in one propagates out of the pass and drops the
// rest. A backward started inside a hook has its own queue. Error outside a pass.
void queue_callback(std::function<void()> callback);
// Whether a backward pass is running on this thread.
bool in_backward_pass();

// Tensor.register_hook: `hook` sees t's gradient when it is computed and may return a
// replacement (undefined keeps it). t must require grad.
void register_hook(const Tensor& t, TensorHook hook);
// Tensor.register_post_accumulate_grad_hook: runs with the leaf after its .grad was
// accumulated. Leaves that require grad only.
void register_post_accumulate_grad_hook(const Tensor& leaf, std::function<void(Tensor&)> hook);

// Compares the analytical gradients of f at `inputs` (float64, requires_grad) with
// central finite differences; returns false (and fills `report`) on a mismatch.
bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
               double eps = 1e-6, double atol = 1e-5, double rtol = 1e-3, std::string* report = nullptr);

}  // namespace flambeau::autograd
