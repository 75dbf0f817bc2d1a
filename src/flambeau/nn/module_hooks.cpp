// Module hooks: the hook tables and handles, the global register_module_* table, and
// Module::call, which runs forward pre-hooks, forward and forward hooks, and wraps the
// tensor inputs and output in identity nodes whose backward runs the full backward hooks
// (see Note [Full backward hooks]).
#include <unordered_set>

#include "flambeau/autograd/function.h"
#include "flambeau/nn/module.h"

namespace flambeau::nn {
namespace {

std::atomic<uint64_t> next_hook_id{1};

template <class Hook>
bool erase_id(std::vector<HookEntry<Hook>>& list, uint64_t id) {
  for (auto it = list.begin(); it != list.end(); ++it)
    if (it->id == id) {
      list.erase(it);
      return true;
    }
  return false;
}

std::shared_ptr<HookTable> global_table() {
  // The global table is a static object: the handles' weak_ptr never owns it.
  static const std::shared_ptr<HookTable> table(&detail::global_hooks, [](HookTable*) {});
  return table;
}

// Note [Full backward hooks]
// As torch's BackwardHook: the tensor inputs that require grad pass through one identity
// node and the output through another. In backward the output node runs first: it hands
// grad_output to the backward pre-hooks (which may replace it) and keeps it; the input
// node then runs the backward hooks with grad_input (one entry per input, undefined for
// inputs that need no grad) and that grad_output. When no input requires grad, the output
// node runs the backward hooks itself with an all-undefined grad_input. Gradients that
// did not flow arrive as zeros (the identity nodes materialise them).
constexpr const char* kHookNodeName = "BackwardHookFunctionBackward";

struct BackwardHookState {
  Module* module = nullptr;
  std::shared_ptr<Module> keep_alive;  // the graph keeps a shared_ptr-owned module alive
  std::vector<BackwardPreHook> pre_hooks;
  std::vector<BackwardHook> hooks;
  size_t n_inputs = 0;
  bool inputs_wrapped = false;
  std::optional<TensorList> grad_outputs;  // from the output node, for the input node
};

std::string hook_name(const Module& m, const char* kind) { return m.type_name() + " " + kind; }

void check_count(const Module& m, const char* kind, const char* what, size_t got, size_t want) {
  FLB_CHECK(got == want, Error, "[", hook_name(m, kind), "] returned ", got, " ", what, ", expected ", want);
}

// Replaces each tensor at `positions` of `tensors` by an identity of it recorded with `fn`.
void wrap(TensorList& tensors, const std::vector<size_t>& positions, autograd::BackwardFn fn) {
  TensorList wrapped;
  for (size_t p : positions) wrapped.push_back(tensors[p].detach());
  std::vector<const Tensor*> ins;
  std::vector<Tensor*> outs;
  for (size_t k = 0; k < positions.size(); ++k) {
    ins.push_back(&tensors[positions[k]]);
    outs.push_back(&wrapped[k]);
  }
  autograd::record_many(kHookNodeName, outs, ins, {}, std::move(fn));
  for (size_t k = 0; k < positions.size(); ++k) tensors[positions[k]] = wrapped[k];
}

std::vector<size_t> grad_positions(const TensorList& tensors) {
  std::vector<size_t> out;
  if (!autograd::grad_mode_enabled()) return out;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (autograd::requires_grad(tensors[i])) out.push_back(i);
  return out;
}

void wrap_inputs(const std::shared_ptr<BackwardHookState>& state, TensorList& inputs) {
  state->n_inputs = inputs.size();
  const std::vector<size_t> positions = grad_positions(inputs);
  if (positions.empty()) return;
  state->inputs_wrapped = true;
  wrap(inputs, positions, [state, positions](const std::vector<Tensor>& grads, const std::vector<Tensor>&) {
    if (!state->grad_outputs) return grads;  // reached without passing through the output
    TensorList grad_input(state->n_inputs);
    for (size_t k = 0; k < positions.size(); ++k) grad_input[positions[k]] = grads[k];
    for (const BackwardHook& hook : state->hooks)
      if (std::optional<TensorList> r = hook(*state->module, grad_input, *state->grad_outputs)) {
        check_count(*state->module, "backward hook", "grad_input", r->size(), grad_input.size());
        grad_input = std::move(*r);
      }
    state->grad_outputs.reset();
    TensorList out;
    for (size_t p : positions) out.push_back(grad_input[p]);
    return out;
  });
}

void wrap_output(const std::shared_ptr<BackwardHookState>& state, Tensor& output) {
  TensorList outs{output};
  const std::vector<size_t> positions = grad_positions(outs);
  if (positions.empty()) return;
  wrap(outs, positions, [state](const std::vector<Tensor>& grads, const std::vector<Tensor>&) {
    TensorList grad_output = grads;
    for (const BackwardPreHook& hook : state->pre_hooks)
      if (std::optional<TensorList> r = hook(*state->module, grad_output)) {
        check_count(*state->module, "backward pre-hook", "grad_output", r->size(), grad_output.size());
        grad_output = std::move(*r);
      }
    state->grad_outputs = grad_output;
    if (!state->inputs_wrapped) {
      const TensorList none(state->n_inputs);
      for (const BackwardHook& hook : state->hooks) {
        std::optional<TensorList> r = hook(*state->module, none, grad_output);
        bool all_undefined = true;
        for (const Tensor& t : r.value_or(TensorList{})) all_undefined = all_undefined && !t.defined();
        FLB_CHECK(all_undefined, Error, "[", hook_name(*state->module, "backward hook"),
                  "] no input of the module requires grad, so the hook must return nullopt or undefined gradients");
      }
      state->grad_outputs.reset();
    }
    return grad_output;
  });
  output = outs[0];
}

}  // namespace

template <class Hook>
uint64_t HookTable::add(std::vector<HookEntry<Hook>>& list, Hook fn, bool prepend, bool always_call, bool counted) {
  FLB_CHECK(fn, ValueError, "[register_hook] the hook is empty");
  const uint64_t id = next_hook_id.fetch_add(1);
  std::lock_guard<std::mutex> lock(mutex_);
  HookEntry<Hook> entry{id, std::move(fn), always_call};
  if (prepend) list.insert(list.begin(), std::move(entry));
  else list.push_back(std::move(entry));
  if (counted) count_.fetch_add(1, std::memory_order_relaxed);
  return id;
}

uint64_t HookTable::add_forward_pre(ForwardPreHook fn, bool prepend) {
  return add(hooks_.forward_pre, std::move(fn), prepend, false);
}
uint64_t HookTable::add_forward(ForwardHook fn, bool prepend, bool always_call) {
  return add(hooks_.forward, std::move(fn), prepend, always_call);
}
uint64_t HookTable::add_backward_pre(BackwardPreHook fn, bool prepend) {
  return add(hooks_.backward_pre, std::move(fn), prepend, false);
}
uint64_t HookTable::add_backward(BackwardHook fn, bool prepend) {
  return add(hooks_.backward, std::move(fn), prepend, false);
}

uint64_t HookTable::add_state_dict_pre(StateDictPreHook fn) {
  return add(hooks_.state_dict_pre, std::move(fn), false, false, false);
}
uint64_t HookTable::add_state_dict_post(StateDictPostHook fn) {
  return add(hooks_.state_dict_post, std::move(fn), false, false, false);
}
uint64_t HookTable::add_load_pre(LoadStateDictPreHook fn) { return add(hooks_.load_pre, std::move(fn), false, false, false); }
uint64_t HookTable::add_load_post(LoadStateDictPostHook fn) {
  return add(hooks_.load_post, std::move(fn), false, false, false);
}

bool HookTable::remove(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool counted = erase_id(hooks_.forward_pre, id) || erase_id(hooks_.forward, id) ||
                       erase_id(hooks_.backward_pre, id) || erase_id(hooks_.backward, id);
  if (counted) count_.fetch_sub(1, std::memory_order_relaxed);
  return counted || erase_id(hooks_.state_dict_pre, id) || erase_id(hooks_.state_dict_post, id) ||
         erase_id(hooks_.load_pre, id) || erase_id(hooks_.load_post, id);
}

HookTable::Snapshot HookTable::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hooks_;
}

void RemovableHandle::remove() {
  if (std::shared_ptr<HookTable> t = table_.lock()) t->remove(id_);
}

RemovableHandle register_module_forward_pre_hook(ForwardPreHook hook) {
  return {global_table(), detail::global_hooks.add_forward_pre(std::move(hook), false)};
}
RemovableHandle register_module_forward_hook(ForwardHook hook, bool always_call) {
  return {global_table(), detail::global_hooks.add_forward(std::move(hook), false, always_call)};
}
RemovableHandle register_module_full_backward_pre_hook(BackwardPreHook hook) {
  return {global_table(), detail::global_hooks.add_backward_pre(std::move(hook), false)};
}
RemovableHandle register_module_full_backward_hook(BackwardHook hook) {
  return {global_table(), detail::global_hooks.add_backward(std::move(hook), false)};
}

HookTable& Module::hooks() {
  if (!hooks_) hooks_ = std::make_shared<HookTable>();
  return *hooks_;
}

RemovableHandle Module::register_forward_pre_hook(ForwardPreHook hook, bool prepend) {
  return handle(hooks().add_forward_pre(std::move(hook), prepend));
}
RemovableHandle Module::register_forward_hook(ForwardHook hook, bool prepend, bool always_call) {
  return handle(hooks().add_forward(std::move(hook), prepend, always_call));
}
RemovableHandle Module::register_full_backward_pre_hook(BackwardPreHook hook, bool prepend) {
  return handle(hooks().add_backward_pre(std::move(hook), prepend));
}
RemovableHandle Module::register_full_backward_hook(BackwardHook hook, bool prepend) {
  return handle(hooks().add_backward(std::move(hook), prepend));
}
RemovableHandle Module::register_state_dict_pre_hook(StateDictPreHook hook) {
  return handle(hooks().add_state_dict_pre(std::move(hook)));
}
RemovableHandle Module::register_state_dict_post_hook(StateDictPostHook hook) {
  return handle(hooks().add_state_dict_post(std::move(hook)));
}
RemovableHandle Module::register_load_state_dict_pre_hook(LoadStateDictPreHook hook) {
  return handle(hooks().add_load_pre(std::move(hook)));
}
RemovableHandle Module::register_load_state_dict_post_hook(LoadStateDictPostHook hook) {
  return handle(hooks().add_load_post(std::move(hook)));
}

Tensor Module::forward_inputs(const TensorList& inputs) {
  FLB_CHECK(inputs.size() == 1, ValueError, "[", type_name_, "] forward takes 1 tensor, got ", inputs.size());
  return forward(inputs[0]);
}

Tensor Module::call(TensorList inputs) {
  if (!has_hooks()) return forward_inputs(inputs);
  const HookTable::Snapshot global = detail::global_hooks.snapshot();
  const HookTable::Snapshot own = hooks_ ? hooks_->snapshot() : HookTable::Snapshot{};
  std::unordered_set<uint64_t> called;  // always_call forward hooks that already ran
  Tensor result;
  try {
    for (const auto* list : {&global.forward_pre, &own.forward_pre})
      for (const auto& e : *list)
        if (std::optional<TensorList> r = e.fn(*this, inputs)) inputs = std::move(*r);
    std::shared_ptr<BackwardHookState> bw;
    if (!global.backward_pre.empty() || !own.backward_pre.empty() || !global.backward.empty() ||
        !own.backward.empty()) {
      bw = std::make_shared<BackwardHookState>();
      bw->module = this;
      bw->keep_alive = weak_from_this().lock();
      for (const auto* list : {&global.backward_pre, &own.backward_pre})
        for (const auto& e : *list) bw->pre_hooks.push_back(e.fn);
      for (const auto* list : {&global.backward, &own.backward})
        for (const auto& e : *list) bw->hooks.push_back(e.fn);
      wrap_inputs(bw, inputs);
    }
    result = forward_inputs(inputs);
    for (const auto* list : {&global.forward, &own.forward})
      for (const auto& e : *list) {
        if (e.always_call) called.insert(e.id);
        if (std::optional<Tensor> r = e.fn(*this, inputs, result)) result = std::move(*r);
      }
    if (bw) wrap_output(bw, result);
    return result;
  } catch (...) {
    // always_call hooks that have not run yet run now; their own errors are dropped so
    // that the original one propagates.
    for (const auto* list : {&global.forward, &own.forward})
      for (const auto& e : *list)
        if (e.always_call && !called.count(e.id)) try {
            if (std::optional<Tensor> r = e.fn(*this, inputs, result)) result = std::move(*r);
          } catch (...) {
          }
    throw;
  }
}

}  // namespace flambeau::nn
