// nn::Module, the base of layers in C++ (in the spirit of libtorch's torch::nn::Module):
// named parameters, buffers and submodules, dotted names ("layer.0.weight"), state_dict
// and a checked load_state_dict, train/eval, zero_grad, dtype conversion, and torch's
// forward / full backward hooks (module_hooks.h) run by operator(). Modules live in
// std::shared_ptr (std::make_shared<Linear>(4, 3)); submodules are shared, not copied.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "flambeau/core/tensor.h"
#include "flambeau/nn/module_hooks.h"

namespace flambeau::nn {

// Name -> value in insertion order, with lookup by name.
template <class V>
class OrderedDict {
 public:
  using Item = std::pair<std::string, V>;
  // Adds the entry, or replaces the value of an existing key (which keeps its place).
  V& insert(const std::string& key, V value) {
    auto [it, added] = index_.emplace(key, items_.size());
    if (added) return items_.emplace_back(key, std::move(value)).second;
    return items_[it->second].second = std::move(value);
  }
  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  // The value of key, or nullptr.
  const V* find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  V* find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  // The value of key; IndexError when absent.
  const V& at(const std::string& key) const {
    const V* v = find(key);
    FLB_CHECK(v, IndexError, "[OrderedDict] no key '", key, "'");
    return *v;
  }
  const Item& item(size_t i) const { return items_.at(i); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const Item& it : items_) k.push_back(it.first);
    return k;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<Item> items_;
  std::unordered_map<std::string, size_t> index_;
};

using StateDict = OrderedDict<Tensor>;

// What load_state_dict(strict = false) skipped.
struct LoadStateDictResult {
  std::vector<std::string> missing_keys, unexpected_keys;
};

class Module : public std::enable_shared_from_this<Module> {
 public:
  explicit Module(std::string type_name = "Module") : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The layer's class name ("Linear"), used in messages.
  const std::string& type_name() const { return type_name_; }

  // The module's computation on one tensor (NotImplementedError unless a layer defines it).
  // Layers with other inputs add their own forward overloads (and override forward_inputs).
  virtual Tensor forward(const Tensor& x);
  // forward with the hooks around it (torch's Module.__call__): global then own forward
  // pre-hooks, forward, global then own forward hooks; full backward hooks wrap the tensor
  // inputs and the output. Straight to forward when no hook exists anywhere. Call modules
  // this way (not through forward) so that hooks see them.
  Tensor operator()(const Tensor& x) { return has_hooks() ? call({x}) : forward(x); }
  // The same on any number of inputs (forward_inputs runs the computation).
  Tensor call(TensorList inputs);

  // ---- hooks (module_hooks.h; run by operator() and call) ---------------------------------
  // prepend: run before the hooks of the same kind already registered.
  RemovableHandle register_forward_pre_hook(ForwardPreHook hook, bool prepend = false);
  // always_call: also runs when forward (or an earlier hook) raised, with an undefined
  // output; the exception then propagates.
  RemovableHandle register_forward_hook(ForwardHook hook, bool prepend = false, bool always_call = false);
  RemovableHandle register_full_backward_pre_hook(BackwardPreHook hook, bool prepend = false);
  RemovableHandle register_full_backward_hook(BackwardHook hook, bool prepend = false);
  // Run by state_dict() / load_state_dict() on each module they reach (module_hooks.h).
  RemovableHandle register_state_dict_pre_hook(StateDictPreHook hook);
  RemovableHandle register_state_dict_post_hook(StateDictPostHook hook);
  RemovableHandle register_load_state_dict_pre_hook(LoadStateDictPreHook hook);
  RemovableHandle register_load_state_dict_post_hook(LoadStateDictPostHook hook);
  // Whether this module or the global table has any hook.
  bool has_hooks() const {
    return (hooks_ && hooks_->size() != 0) || detail::global_hooks.size() != 0;
  }

  // ---- registration ---------------------------------------------------------------------
  // A name is non-empty, has no '.', and is not already used by another kind of entry;
  // registering a name again replaces the entry of that kind.
  // The parameter is `tensor` itself (detached first if it has history), set to require grad
  // when asked. An undefined tensor registers an absent parameter (like bias=None).
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  // A buffer (state that is not trained); non-persistent ones stay out of state_dict.
  Tensor& register_buffer(const std::string& name, Tensor tensor, bool persistent = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_module(name, module);
    return module;
  }

  // ---- traversal (depth first, each module's own entries before its children's) -----------
  // Parameters shared by several modules appear once, under their first name.
  std::vector<Tensor> parameters(bool recurse = true) const;
  StateDict named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  StateDict named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  // This module's own entries as registered (absent ones undefined), without its children's.
  const OrderedDict<Tensor>& own_parameters() const { return parameters_; }
  const OrderedDict<Tensor>& own_buffers() const { return buffers_; }
  bool is_persistent_buffer(const std::string& name) const { return non_persistent_.count(name) == 0; }
  const OrderedDict<std::shared_ptr<Module>>& named_children() const { return children_; }
  // This module (name "") and every descendant once; needs this module to be owned by a
  // std::shared_ptr.
  std::vector<std::shared_ptr<Module>> modules();
  OrderedDict<std::shared_ptr<Module>> named_modules();

  // ---- state ---------------------------------------------------------------------------------
  // Parameters and persistent buffers by dotted name, detached (sharing their storage), each
  // module's own entries before its children's; runs the state_dict pre/post hooks.
  StateDict state_dict() const;
  // Copies the entries of `state` into the parameters and buffers in place (no grad). Each
  // module's load pre-hooks run before its entries are checked. Unknown names
  // ("unexpected") and absent ones ("missing") when strict, and shape mismatches always,
  // raise one Error listing them all, with nothing written (when no load post-hook could
  // still change the verdict: those run after the copy, and strict checks the keys they
  // leave).
  LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);

  // Training mode, set on this module and every descendant (dropout reads it).
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }
  // Drops (set_to_none) or zeroes every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  // Converts floating parameters, their gradients and buffers to `dtype` in place: the
  // Tensor handles stay the same objects (so optimizers holding them keep working), only
  // their data is replaced.
  Module& to(DType dtype);
  // Lays the 4-d and 5-d parameters and buffers out in `format` (channels-last for
  // convolutions: Note [Channels-last convolutions]), in place, as torch's
  // Module.to(memory_format=); ValueError when a 5-d one is asked for ChannelsLast.
  Module& to(MemoryFormat format);
  // fn on every descendant (children first), then on this module.
  Module& apply(const std::function<void(Module&)>& fn);

 protected:
  void add_module(const std::string& name, std::shared_ptr<Module> module);
  // What call() runs on its inputs: forward(inputs[0]) unless a layer with several inputs
  // overrides it.
  virtual Tensor forward_inputs(const TensorList& inputs);

 private:
  // f(dotted prefix, module) on this module and its descendants, pre-order; with `dedupe`
  // a module reached twice is visited once. (const: the const methods' f only reads.)
  void visit(bool dedupe, const std::function<void(const std::string&, Module&)>& f) const;
  void check_name(const std::string& name, const char* kind) const;
  // What load_state_dict checked: the errors that always fail it, the copies to make, the
  // modules reached (children before their parent).
  struct LoadPlan {
    std::vector<std::string> errors;
    std::vector<std::pair<Tensor, Tensor>> copies;  // (target, source)
    std::vector<Module*> loaded;
  };
  // state_dict and load_state_dict on this module and its descendants, `prefix` ending in '.'
  // (empty at the top), with the hooks.
  void save_state(StateDict& out, const std::string& prefix);
  void check_state(StateDict& local, const std::string& prefix, LoadStateDictResult& result, LoadPlan& plan);
  [[noreturn]] void raise_load_errors(bool strict, const LoadStateDictResult& result,
                                      const std::vector<std::string>& errors) const;

  HookTable& hooks();  // created on first use
  // The handle of hook `id` of this module's table (call after hooks() created it).
  RemovableHandle handle(uint64_t id) const { return {hooks_, id}; }

  std::string type_name_;
  std::shared_ptr<HookTable> hooks_;  // created by the first registration
  OrderedDict<Tensor> parameters_, buffers_;
  std::unordered_set<std::string> non_persistent_;
  OrderedDict<std::shared_ptr<Module>> children_;
  bool training_ = true;
};

}  // namespace flambeau::nn
