// See compile.h.
#include "flambeau/compile/compile.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>

#include "flambeau/autograd/node.h"
#include "flambeau/compile/aot.h"
#include "flambeau/compile/cpp_backend.h"
#include "flambeau/core/error.h"
#include "flambeau/ops/registry.h"

namespace flambeau::compiler {

namespace {

// "aot_eager": the forward and backward graphs of compiled training (aot.h), each run op by op.
CompiledFn aot_eager(const Graph& g, const std::vector<Tensor>& example_inputs) {
  const Backend eager = [](const Graph& h, const std::vector<Tensor>&) { return run_eagerly(h); };
  return needs_grad(g, example_inputs) ? compile_for_training(g, example_inputs, eager) : run_eagerly(g);
}

struct Registry {
  std::mutex mutex;
  std::map<std::string, Backend> backends{
      {"eager", [](const Graph& g, const std::vector<Tensor>&) { return run_eagerly(g); }},
      {"aot_eager", aot_eager},
      {"cpp", cpp_backend}};
  std::map<std::string, std::vector<std::string>> tags{{"eager", {"debug"}}, {"aot_eager", {"debug"}}};
  std::string default_backend = "cpp";
  std::function<void(const std::string&)> warn = [](const std::string& m) {
    std::fprintf(stderr, "flambeau.compile: %s\n", m.c_str());
  };
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: compiled functions may run at exit
  return *r;
}

}  // namespace

void warn(const std::string& message) {
  std::function<void(const std::string&)> handler;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    handler = registry().warn;
  }
  handler(message);
}

void register_backend(const std::string& name, Backend backend, std::vector<std::string> tags) {
  FLB_CHECK(!name.empty() && backend, ValueError, "[register_backend] needs a name and a backend function");
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().backends[name] = std::move(backend);
  registry().tags[name] = std::move(tags);
}

void unregister_backend(const std::string& name) {
  if (name == "eager" || name == "aot_eager" || name == "cpp") return;
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().backends.erase(name);
  registry().tags.erase(name);
  if (registry().default_backend == name) registry().default_backend = "cpp";
}

std::vector<std::string> list_backends(const std::vector<std::string>& exclude_tags) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  std::vector<std::string> names;
  for (const auto& [name, b] : registry().backends) {
    bool excluded = false;
    for (const std::string& t : registry().tags[name])
      excluded = excluded || std::find(exclude_tags.begin(), exclude_tags.end(), t) != exclude_tags.end();
    if (!excluded) names.push_back(name);
  }
  return names;
}

const Backend& lookup_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto it = registry().backends.find(name);
  if (it == registry().backends.end()) {
    std::string known;
    for (const auto& [n, b] : registry().backends) known += (known.empty() ? "" : ", ") + n;
    throw ValueError("[compile] no backend named '" + name + "' (registered: " + known + ")");
  }
  return it->second;  // map nodes do not move
}

void set_default_backend(const std::string& name) {
  (void)lookup_backend(name);
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().default_backend = name;
}

std::string get_default_backend() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().default_backend;
}

void set_warning_handler(std::function<void(const std::string&)> handler) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().warn = handler ? std::move(handler) : [](const std::string& m) {
    std::fprintf(stderr, "flambeau.compile: %s\n", m.c_str());
  };
}

// ---- the "eager" backend ------------------------------------------------------------------

std::vector<Tensor> bind(const Graph& g, const std::vector<Tensor>& inputs) {
  FLB_CHECK(inputs.size() == g.inputs.size(), ValueError, "[compile] the graph takes ", g.inputs.size(),
            " inputs, got ", inputs.size());
  std::vector<Tensor> env(g.values.size());
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs[i]] = inputs[i];
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].kind == Graph::Kind::Constant) env[v] = g.constants[g.values[v].index];
  return env;
}

std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> env = bind(g, inputs);
  for (const Graph::Node& n : g.nodes) run_node(n, env);
  std::vector<Tensor> outs;
  for (int v : g.outputs) outs.push_back(env[v]);
  return outs;
}

CompiledFn run_eagerly(const Graph& g) {
  return [g](const std::vector<Tensor>& inputs) { return interpret(g, inputs); };
}

namespace {
thread_local const std::map<std::string, std::string>* t_backend_options = nullptr;
}

const std::map<std::string, std::string>& backend_options() {
  static const std::map<std::string, std::string> none;
  return t_backend_options ? *t_backend_options : none;
}

// ---- Compiled ------------------------------------------------------------------------------

// One trace: the guards it holds under, and what runs it (none: run the function eagerly).
namespace {
// For each input, the first input that is the same tensor (itself when none is).
std::vector<int> aliasing(const std::vector<Tensor>& in) {
  std::vector<int> first(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    first[i] = int(i);
    for (size_t j = 0; j < i; ++j)
      if (in[j].impl() == in[i].impl()) {
        first[i] = int(j);
        break;
      }
  }
  return first;
}
}  // namespace

// The metas with the sizes and strides of dims 0 and 1 erased (dynamic=True's kind of call).
std::vector<TensorMeta> without_dynamic_dims(std::vector<TensorMeta> metas) {
  for (TensorMeta& m : metas)
    for (size_t d = 0; d < std::min<size_t>(2, m.sizes.size()); ++d) m.sizes[d] = -1, m.strides[d] = -1;
  return metas;
}

struct Compiled::Entry {
  std::vector<TensorMeta> inputs, constants;
  std::vector<int> aliases;
  bool grad_mode = true;
  std::optional<Graph> graph;
  CompiledFn run;

  // A call with these inputs' metas and aliasing under grad mode `grad`.
  bool holds(const std::vector<TensorMeta>& in, const std::vector<int>& alias, bool grad) const {
    if (in != inputs || alias != aliases || grad != grad_mode) return false;
    if (graph)
      for (size_t i = 0; i < constants.size(); ++i) {
        const TensorMeta now = TensorMeta::of(graph->constants[i]);
        if (now.dtype != constants[i].dtype || now.sizes != constants[i].sizes ||
            now.requires_grad != constants[i].requires_grad)
          return false;
      }
    return true;
  }
};

struct Compiled::State {
  TensorFn fn;
  CompileOptions options;
  std::mutex mutex;
  std::vector<Entry> entries;
  bool warned_limit = false, warned_break = false;
};

Compiled::Compiled(TensorFn fn, CompileOptions options) : state_(std::make_shared<State>()) {
  FLB_CHECK(fn, ValueError, "[compile] no function given");
  FLB_CHECK(options.cache_size_limit >= 0, ValueError, "[compile] cache_size_limit must be >= 0");
  if (!options.backend.empty()) (void)lookup_backend(options.backend);  // unknown names fail here
  state_->fn = std::move(fn);
  state_->options = std::move(options);
}

std::pair<std::vector<Tensor>, size_t> Compiled::call(const std::vector<Tensor>& inputs) {
  State& s = *state_;
  std::vector<TensorMeta> metas;
  for (const Tensor& x : inputs) {
    FLB_CHECK(x.defined(), ValueError, "[compile] an input is an undefined tensor");
    metas.push_back(TensorMeta::of(x));
  }
  const std::vector<int> alias = aliasing(inputs);
  const bool grad = autograd::grad_mode_enabled();
  CompiledFn run;
  size_t index = 0;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    for (; index < s.entries.size(); ++index)
      if (s.entries[index].holds(metas, alias, grad)) {
        run = s.entries[index].run;
        break;
      }
  }
  if (run) return {run(inputs), index};
  // dynamic: traces that differ only in dims 0 and 1 count once (one kind), up to
  // kDynamicTraces of a kind.
  bool over_limit = s.entries.size() >= size_t(s.options.cache_size_limit);
  if (s.options.dynamic) {
    std::lock_guard<std::mutex> lock(s.mutex);
    const std::vector<TensorMeta> kind = without_dynamic_dims(metas);
    std::vector<std::vector<TensorMeta>> kinds;
    size_t same_kind = 0;
    for (const Entry& e : s.entries) {
      std::vector<TensorMeta> k = without_dynamic_dims(e.inputs);
      same_kind += k == kind && e.grad_mode == grad;
      if (std::find(kinds.begin(), kinds.end(), k) == kinds.end()) kinds.push_back(std::move(k));
    }
    over_limit = same_kind ? same_kind >= kDynamicTraces : kinds.size() >= size_t(s.options.cache_size_limit);
  }
  if (over_limit) {
    if (!s.warned_limit) warn("cache_size_limit (" + std::to_string(s.options.cache_size_limit) +
                              ") reached: calls that no trace holds for run eagerly");
    s.warned_limit = true;
    return {s.fn(inputs), s.entries.size()};
  }
  Trace t = trace(s.fn, inputs);
  Entry e;
  e.inputs = std::move(metas);
  e.aliases = alias;
  e.grad_mode = grad;
  if (!t.whole()) {
    FLB_CHECK(!s.options.fullgraph, Error, "[compile] fullgraph=True, but the trace breaks at '", t.break_op, "': ",
              t.break_reason);
    if (!s.warned_break) warn("the trace breaks at '" + t.break_op + "' (" + t.break_reason + "): running eagerly");
    s.warned_break = true;
    e.run = s.fn;
  } else {
    optimize(t.graph);
    for (const Tensor& c : t.graph.constants) e.constants.push_back(TensorMeta::of(c));
    const std::string name = s.options.backend.empty() ? get_default_backend() : s.options.backend;
    {
      struct Options {  // backend_options() for the backend's call (also when it raises)
        const std::map<std::string, std::string>* outer = t_backend_options;
        explicit Options(const std::map<std::string, std::string>& o) { t_backend_options = &o; }
        ~Options() { t_backend_options = outer; }
      } options(s.options.options);
      e.run = lookup_backend(name)(t.graph, inputs);
    }
    FLB_CHECK(e.run, Error, "[compile] backend '", name, "' returned no function");
    e.graph = std::move(t.graph);
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  s.entries.push_back(std::move(e));
  return {t.outputs, s.entries.size() - 1};
}

size_t Compiled::traces() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->entries.size();
}

const Graph& Compiled::graph(size_t i) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  FLB_CHECK(i < state_->entries.size() && state_->entries[i].graph, ValueError, "[compile] no graph ", i);
  return *state_->entries[i].graph;
}

Compiled compile(TensorFn fn, CompileOptions options) { return Compiled(std::move(fn), std::move(options)); }

}  // namespace flambeau::compiler
