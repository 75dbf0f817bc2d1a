// flambeau::compile (torch.compile's role): a function of tensors, traced on its first call
// (trace.h), guarded, optimised (graph.h's passes: constant folding, algebraic
// simplification, CSE, dead-code elimination) and handed to a backend, which returns what
// runs it from then on.
//
// Guards: a trace holds for a call whose inputs have the trace's dtypes, shapes, strides and
// requires_grad, and the same pattern of inputs that are one tensor, under the same grad
// mode, while the constants it captured keep their dtypes, shapes and requires_grad. A call no trace holds for traces again, up to cache_size_limit traces (8, as
// torch); after that the function runs eagerly (one warning). A trace that breaks (trace.h)
// raises with fullgraph, naming the op; otherwise the function runs eagerly for calls of
// that kind (one warning). The traced call's results are the eager run's.
//
// Backends (the registry of torch._dynamo / torch.compiler): a backend receives the graph
// and the example inputs and returns the callable that runs the graph. Built in: "cpp" (the
// default; cpp_backend.h; compiled training, aot.h), "eager" (the graph's ops one by one
// through the op registry, differentiable as eager is) and "aot_eager" (compiled training's
// forward and backward graphs, each op by op).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flambeau/compile/graph.h"
#include "flambeau/compile/trace.h"

namespace flambeau::compiler {

using CompiledFn = TensorFn;
using Backend = std::function<CompiledFn(const Graph&, const std::vector<Tensor>& example_inputs)>;

// Adds (or replaces) a backend; ValueError for an empty name or no function. Tags as
// torch's: "debug" for backends that only check the capture (eager), "experimental".
void register_backend(const std::string& name, Backend backend, std::vector<std::string> tags = {});
// Removes a backend (no-op when absent; "cpp" and "eager" stay). If it was the default,
// "cpp" is.
void unregister_backend(const std::string& name);
// The registered names without any of exclude_tags, sorted.
std::vector<std::string> list_backends(const std::vector<std::string>& exclude_tags = {"debug", "experimental"});
// The backend compile uses when none is named ("cpp" until set); ValueError for a name
// that is not registered.
void set_default_backend(const std::string& name);
std::string get_default_backend();
// The backend called `name`; ValueError listing the registered ones when none is.
const Backend& lookup_backend(const std::string& name);

// "eager" (tag "debug"): runs the graph's ops one by one through the op registry.
CompiledFn run_eagerly(const Graph& g);
// Runs the graph on inputs (what "eager" returns does).
std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs);
// Its first part, for backends that run some nodes themselves (then run_node, graph.h):
// each value's tensor, with the inputs and constants bound.
std::vector<Tensor> bind(const Graph& g, const std::vector<Tensor>& inputs);

// Where warnings go (stderr by default; Python sends them to warnings.warn).
void set_warning_handler(std::function<void(const std::string&)> handler);
// Sends a warning there.
void warn(const std::string& message);

struct CompileOptions {
  std::string backend;       // empty: the default backend at the first call
  bool fullgraph = false;    // a trace that breaks raises instead of running eagerly
  int cache_size_limit = 8;  // traces per function
  std::map<std::string, std::string> options;  // for the backend (backend_options())
  // The batch and sequence dims (0 and 1) of the inputs are not specialised: a call that
  // differs from a trace only there traces again (its eager run is the call itself) without
  // counting toward cache_size_limit, and the cpp backend's kernels, whose code takes sizes
  // at run time, come from the cache with no compiler run. After kDynamicTraces traces of a
  // kind, new sizes run eagerly.
  bool dynamic = false;
};
constexpr size_t kDynamicTraces = 64;

// The options of the compile whose backend is running on this thread (what a backend reads
// its settings from; empty outside a backend call).
const std::map<std::string, std::string>& backend_options();

class Compiled {
 public:
  Compiled(TensorFn fn, CompileOptions options);
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) { return call(inputs).first; }
  // The outputs and the index of the trace that ran (one that runs eagerly included).
  std::pair<std::vector<Tensor>, size_t> call(const std::vector<Tensor>& inputs);
  // The traces so far (their graphs after the passes); eager entries have no graph.
  size_t traces() const;
  const Graph& graph(size_t i) const;

 private:
  struct Entry;
  struct State;
  std::shared_ptr<State> state_;
};

Compiled compile(TensorFn fn, CompileOptions options = {});

}  // namespace flambeau::compiler
