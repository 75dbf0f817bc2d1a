// Hooks around a Module's forward and backward (torch.nn.Module's register_forward_pre_hook,
// register_forward_hook, register_full_backward_pre_hook, register_full_backward_hook and
// the register_module_* globals) and around state_dict / load_state_dict: the hook types,
// the tables that hold them in calling order, and the handle that removes one.
// Module::operator(), state_dict and load_state_dict run them (module.h).
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::nn {

class Module;
using TensorList = std::vector<Tensor>;
template <class V>
class OrderedDict;
using StateDict = OrderedDict<Tensor>;
struct LoadStateDictResult;

// hook(module, inputs) -> replacement inputs, or nullopt to keep them.
using ForwardPreHook = std::function<std::optional<TensorList>(Module&, const TensorList& inputs)>;
// hook(module, inputs, output) -> replacement output, or nullopt to keep it. `inputs` are
// those forward got (after the pre-hooks).
using ForwardHook = std::function<std::optional<Tensor>(Module&, const TensorList& inputs, const Tensor& output)>;
// hook(module, grad_output) -> replacement grad_output, or nullopt: runs when the gradient
// w.r.t. the module's output is known, before it flows into the module's graph.
using BackwardPreHook = std::function<std::optional<TensorList>(Module&, const TensorList& grad_output)>;
// hook(module, grad_input, grad_output) -> replacement grad_input, or nullopt: runs when the
// gradients w.r.t. the module's inputs are known. grad_input has one entry per input,
// undefined for inputs that do not require grad.
using BackwardHook =
    std::function<std::optional<TensorList>(Module&, const TensorList& grad_input, const TensorList& grad_output)>;

// state_dict hooks. pre: hook(module, prefix) before the module's entries are saved;
// post: hook(module, state, prefix) once the entries of the module and its descendants are
// in `state` (under `prefix`); it may edit them.
using StateDictPreHook = std::function<void(Module&, const std::string& prefix)>;
using StateDictPostHook = std::function<void(Module&, StateDict& state, const std::string& prefix)>;
// load_state_dict hooks. pre: hook(module, state, prefix) before the module's entries are
// checked; `state` holds the entries under `prefix` and may be edited (rename or convert
// old entries). post: hook(module, result) after the copy, children before their parent;
// it may edit the missing and unexpected keys, and strict mode checks what it leaves.
using LoadStateDictPreHook = std::function<void(Module&, StateDict& state, const std::string& prefix)>;
using LoadStateDictPostHook = std::function<void(Module&, LoadStateDictResult& result)>;

template <class Hook>
struct HookEntry {
  uint64_t id;
  Hook fn;
  bool always_call = false;  // forward hooks: run even when forward raised
};

// The hooks of one module (or the global ones), each kind in calling order. Guarded by a
// mutex so that global hooks may be added from any thread; calls take a snapshot.
class HookTable {
 public:
  struct Snapshot {
    std::vector<HookEntry<ForwardPreHook>> forward_pre;
    std::vector<HookEntry<ForwardHook>> forward;
    std::vector<HookEntry<BackwardPreHook>> backward_pre;
    std::vector<HookEntry<BackwardHook>> backward;
    std::vector<HookEntry<StateDictPreHook>> state_dict_pre;
    std::vector<HookEntry<StateDictPostHook>> state_dict_post;
    std::vector<HookEntry<LoadStateDictPreHook>> load_pre;
    std::vector<HookEntry<LoadStateDictPostHook>> load_post;
  };
  // Each returns the new hook's id (unique across all tables).
  uint64_t add_forward_pre(ForwardPreHook fn, bool prepend);
  uint64_t add_forward(ForwardHook fn, bool prepend, bool always_call);
  uint64_t add_backward_pre(BackwardPreHook fn, bool prepend);
  uint64_t add_backward(BackwardHook fn, bool prepend);
  uint64_t add_state_dict_pre(StateDictPreHook fn);
  uint64_t add_state_dict_post(StateDictPostHook fn);
  uint64_t add_load_pre(LoadStateDictPreHook fn);
  uint64_t add_load_post(LoadStateDictPostHook fn);
  // Removes the hook with this id, wherever it is; false when absent.
  bool remove(uint64_t id);
  // How many forward and backward hooks (what operator() has to run); the state hooks are
  // not counted.
  size_t size() const { return count_.load(std::memory_order_relaxed); }
  Snapshot snapshot() const;

 private:
  template <class Hook>
  uint64_t add(std::vector<HookEntry<Hook>>& list, Hook fn, bool prepend, bool always_call, bool counted = true);
  mutable std::mutex mutex_;
  Snapshot hooks_;
  std::atomic<size_t> count_{0};
};

// Returned by every register_*_hook: remove() takes the hook out (a no-op when it was
// removed already or its module is gone). Dropping the handle keeps the hook, as in torch.
class RemovableHandle {
 public:
  RemovableHandle() = default;
  RemovableHandle(std::weak_ptr<HookTable> table, uint64_t id) : table_(std::move(table)), id_(id) {}
  void remove();
  uint64_t id() const { return id_; }

 private:
  std::weak_ptr<HookTable> table_;
  uint64_t id_ = 0;
};

// RAII: removes the hook when the scope ends (Python's `with handle:`).
class ScopedHook {
 public:
  explicit ScopedHook(RemovableHandle handle) : handle_(std::move(handle)) {}
  ~ScopedHook() { handle_.remove(); }
  ScopedHook(const ScopedHook&) = delete;
  ScopedHook& operator=(const ScopedHook&) = delete;

 private:
  RemovableHandle handle_;
};

// Hooks that run for every module, before each module's own hooks (torch's
// torch.nn.modules.module.register_module_*). Meant for debugging and profiling.
RemovableHandle register_module_forward_pre_hook(ForwardPreHook hook);
RemovableHandle register_module_forward_hook(ForwardHook hook, bool always_call = false);
RemovableHandle register_module_full_backward_pre_hook(BackwardPreHook hook);
RemovableHandle register_module_full_backward_hook(BackwardHook hook);

namespace detail {
// The table of the register_module_* hooks; its size() is the fast path's one relaxed load.
inline HookTable global_hooks;
}  // namespace detail

}  // namespace flambeau::nn
