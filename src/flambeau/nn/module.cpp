// nn::Module: registration, traversal by dotted names, state_dict / load_state_dict,
// train/eval, zero_grad, in-place dtype conversion and apply.
#include "flambeau/nn/module.h"

#include "flambeau/autograd/node.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn {
namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

std::string quoted_list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
  return out;
}

}  // namespace

Tensor Module::forward(const Tensor&) {
  FLB_CHECK(false, NotImplementedError, "[", type_name_, ".forward] this module has no forward(Tensor)");
  return {};
}

void Module::check_name(const std::string& name, const char* kind) const {
  FLB_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError, "[", type_name_, ".register_", kind,
            "] invalid name '", name, "': names are non-empty and have no '.'");
  const bool clash = (std::string(kind) != "parameter" && parameters_.contains(name)) ||
                     (std::string(kind) != "buffer" && buffers_.contains(name)) ||
                     (std::string(kind) != "module" && children_.contains(name));
  FLB_CHECK(!clash, ValueError, "[", type_name_, ".register_", kind, "] '", name,
            "' is already the name of another kind of entry");
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_name(name, "parameter");
  if (tensor.defined()) {
    if (!tensor.is_leaf()) tensor = tensor.detach();
    if (tensor.requires_grad() != requires_grad) tensor.requires_grad_(requires_grad);
  }
  return parameters_.insert(name, std::move(tensor));
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor, bool persistent) {
  check_name(name, "buffer");
  if (persistent) non_persistent_.erase(name);
  else non_persistent_.insert(name);
  return buffers_.insert(name, std::move(tensor));
}

void Module::add_module(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name, "module");
  FLB_CHECK(module, ValueError, "[", type_name_, ".register_module] module '", name, "' is null");
  children_.insert(name, std::move(module));
}

void Module::visit(bool dedupe, const std::function<void(const std::string&, Module&)>& f) const {
  std::unordered_set<const Module*> seen;
  std::function<void(const std::string&, const Module&)> walk = [&](const std::string& prefix, const Module& m) {
    if (dedupe && !seen.insert(&m).second) return;
    f(prefix, const_cast<Module&>(m));
    for (const auto& [name, child] : m.children_) walk(join(prefix, name), *child);
  };
  walk("", *this);
}

StateDict Module::named_parameters(bool recurse) const {
  StateDict out;
  std::unordered_set<const TensorImpl*> seen;
  visit(true, [&](const std::string& prefix, Module& m) {
    if (!recurse && &m != this) return;
    for (const auto& [name, p] : m.parameters_)
      if (p.defined() && seen.insert(p.impl()).second) out.insert(join(prefix, name), p);
  });
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (const auto& [name, p] : named_parameters(recurse)) out.push_back(p);
  return out;
}

StateDict Module::named_buffers(bool recurse) const {
  StateDict out;
  visit(true, [&](const std::string& prefix, Module& m) {
    if (!recurse && &m != this) return;
    for (const auto& [name, b] : m.buffers_)
      if (b.defined()) out.insert(join(prefix, name), b);
  });
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (const auto& [name, b] : named_buffers(recurse)) out.push_back(b);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, m] : children_) out.push_back(m);
  return out;
}

OrderedDict<std::shared_ptr<Module>> Module::named_modules() {
  std::shared_ptr<Module> self = weak_from_this().lock();
  FLB_CHECK(self, Error, "[", type_name_,
            ".named_modules] the module must be owned by a std::shared_ptr (create it with std::make_shared)");
  OrderedDict<std::shared_ptr<Module>> out;
  visit(true, [&](const std::string& prefix, Module& m) { out.insert(prefix, m.shared_from_this()); });
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [name, m] : named_modules()) out.push_back(m);
  return out;
}

namespace {
HookTable::Snapshot snapshot_of(const std::shared_ptr<HookTable>& table) {
  return table ? table->snapshot() : HookTable::Snapshot{};
}
bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
}  // namespace

void Module::save_state(StateDict& out, const std::string& prefix) {
  const HookTable::Snapshot hooks = snapshot_of(hooks_);
  for (const auto& e : hooks.state_dict_pre) e.fn(*this, prefix);
  for (const auto& [name, p] : parameters_)
    if (p.defined()) out.insert(prefix + name, p.detach());
  for (const auto& [name, b] : buffers_)
    if (b.defined() && !non_persistent_.count(name)) out.insert(prefix + name, b.detach());
  for (const auto& [name, child] : children_) child->save_state(out, prefix + name + ".");
  for (const auto& e : hooks.state_dict_post) e.fn(*this, out, prefix);
}

StateDict Module::state_dict() const {
  StateDict out;
  const_cast<Module*>(this)->save_state(out, "");
  return out;
}

void Module::check_state(StateDict& local, const std::string& prefix, LoadStateDictResult& result, LoadPlan& plan) {
  for (const auto& e : snapshot_of(hooks_).load_pre) e.fn(*this, local, prefix);
  std::unordered_set<std::string> own;
  auto check = [&](const std::string& name, const Tensor& t) {
    own.insert(name);
    const std::string key = prefix + name;
    const Tensor* src = local.find(key);
    if (!src) {
      result.missing_keys.push_back(key);
    } else if (!src->defined() || src->sizes() != t.sizes()) {
      plan.errors.push_back("size mismatch for '" + key + "': copying a tensor of shape " +
                            (src->defined() ? shape_str(src->sizes()) : std::string("(undefined)")) +
                            " into one of shape " + shape_str(t.sizes()));
    } else {
      plan.copies.emplace_back(t, *src);
    }
  };
  for (const auto& [name, p] : parameters_)
    if (p.defined()) check(name, p);
  for (const auto& [name, b] : buffers_)
    if (b.defined() && !non_persistent_.count(name)) check(name, b);
  for (const auto& [key, value] : local) {
    if (!starts_with(key, prefix)) continue;
    const std::string rest = key.substr(prefix.size());
    const size_t dot = rest.find('.');
    if (dot == std::string::npos ? !own.count(rest) : !children_.contains(rest.substr(0, dot)))
      result.unexpected_keys.push_back(key);
  }
  for (const auto& [name, child] : children_) {
    const std::string child_prefix = prefix + name + ".";
    StateDict sub;  // the child's hooks see (and may edit) its own entries only
    for (const auto& [key, value] : local)
      if (starts_with(key, child_prefix)) sub.insert(key, value);
    child->check_state(sub, child_prefix, result, plan);
  }
  plan.loaded.push_back(this);
}

void Module::raise_load_errors(bool strict, const LoadStateDictResult& result,
                               const std::vector<std::string>& errors) const {
  std::vector<std::string> problems;
  if (strict && !result.missing_keys.empty()) problems.push_back("missing keys: " + quoted_list(result.missing_keys));
  if (strict && !result.unexpected_keys.empty())
    problems.push_back("unexpected keys: " + quoted_list(result.unexpected_keys));
  problems.insert(problems.end(), errors.begin(), errors.end());
  std::string text = "[" + type_name_ + ".load_state_dict] error(s) in loading the state_dict: ";
  for (size_t i = 0; i < problems.size(); ++i) text += (i ? "; " : "") + problems[i];
  throw Error(text);
}

LoadStateDictResult Module::load_state_dict(const StateDict& state, bool strict) {
  StateDict local = state;  // the load pre-hooks may edit this copy
  LoadStateDictResult result;
  LoadPlan plan;
  check_state(local, "", result, plan);
  std::vector<std::pair<Module*, LoadStateDictPostHook>> post_hooks;  // children first
  for (Module* m : plan.loaded) {
    HookTable::Snapshot hooks = snapshot_of(m->hooks_);
    for (auto& e : hooks.load_post) post_hooks.emplace_back(m, std::move(e.fn));
  }
  const bool key_errors = !result.missing_keys.empty() || !result.unexpected_keys.empty();
  // Nothing is written when the load fails, unless a post-hook could still clear the keys.
  if (!plan.errors.empty() || (strict && key_errors && post_hooks.empty()))
    raise_load_errors(strict, result, plan.errors);
  {
    autograd::NoGradGuard no_grad;
    for (auto& [target, source] : plan.copies) target.copy_(source);
  }
  for (const auto& [m, hook] : post_hooks) hook(*m, result);
  if (strict && (!result.missing_keys.empty() || !result.unexpected_keys.empty()))
    raise_load_errors(strict, result, {});
  return result;
}

Module& Module::train(bool on) {
  visit(false, [&](const std::string&, Module& m) { m.training_ = on; });
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  autograd::NoGradGuard no_grad;
  for (Tensor p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) p.set_grad(Tensor());
    else g.zero_();
  }
}

Module& Module::to(DType dtype) {
  FLB_CHECK(is_floating(dtype), TypeError, "[", type_name_, ".to] expected a floating point dtype, got ",
            dtype_name(dtype));
  autograd::NoGradGuard no_grad;
  visit(true, [&](const std::string&, Module& m) {
    for (const auto* entries : {&m.parameters_, &m.buffers_})
      for (const auto& [name, t] : *entries) {
        if (!t.defined() || !t.is_floating_point() || t.dtype() == dtype) continue;
        t.set_data(t.to(dtype));
        if (Tensor g = t.grad(); g.defined()) Tensor(t).set_grad(g.to(dtype));
      }
  });
  return *this;
}

Module& Module::to(MemoryFormat format) {
  autograd::NoGradGuard no_grad;
  visit(true, [&](const std::string&, Module& m) {
    for (const auto* entries : {&m.parameters_, &m.buffers_})
      for (const auto& [name, t] : *entries)
        if (t.defined() && (t.dim() == 4 || t.dim() == 5) && !t.is_contiguous(format))
          t.set_data(t.contiguous(format));
  });
  return *this;
}

Module& Module::apply(const std::function<void(Module&)>& fn) {
  for (const auto& [name, child] : children_) child->apply(fn);
  fn(*this);
  return *this;
}

}  // namespace flambeau::nn
