// See trace.h.
#include "flambeau/compile/trace.h"

#include <algorithm>
#include <set>
#include <thread>
#include <unordered_map>

#include "flambeau/core/error.h"
#include "flambeau/ops/registry.h"

namespace flambeau::compiler {

namespace {

// Ops whose output shape depends on the values of their inputs.
const std::set<std::string, std::less<>> kValueShaped{"nonzero", "unique", "unique_consecutive", "masked_select",
                                                      "argwhere", "bincount", "repeat_interleave"};

// Factories: their result depends on their arguments only, which the trace specialises, so
// the tensor a traced call made is a constant of the graph (unless written in place).
const std::set<std::string, std::less<>> kFactories{"empty", "zeros", "ones", "full", "arange", "linspace",
                                                    "eye", "scalar_tensor", "tensor"};

// Ops a graph that is not replayed may hold though the registry lacks them.
const std::set<std::string, std::less<>> kGeneratorOnly{"to", "index"};

// Why the graph cannot hold this call ("" when it can).
std::string unrecordable(const op_hook::OpCall& c, bool replayable) {
  if (c.name == "item") return "it reads a tensor's value (item())";
  if (c.name == "backward") return "backward runs inside the function";
  if (kValueShaped.count(c.name)) return "its output's shape depends on the input's values";
  if (!replayable && kGeneratorOnly.count(c.name)) return "";
  const RegisteredOp* op = find_op(c.name);
  if (!op) return "it is not in the op registry (no boxed kernel to replay it)";
  for (const SchemaArg& r : op->schema.returns)
    if (r.kind != ArgKind::Tensor) return "it returns a value the graph cannot know in advance";
  for (const op_hook::Value& v : c.args)
    if (auto* o = std::get_if<op_hook::Opaque>(&v)) return "an argument is a " + o->kind;
  return "";
}

struct Recorder {
  Trace* trace;
  bool replayable = true;
  std::thread::id thread = std::this_thread::get_id();
  std::unordered_map<const TensorImpl*, int> value_of;  // the current value of each tensor
  std::vector<Tensor> keep;  // every tensor seen, alive until the end (so no address is reused)
  std::set<const void*> made;  // the storages of the inputs and of the nodes' outputs
  std::set<int> factory_values;  // constants a factory made during the trace

  void remember(const Tensor& t) {
    keep.push_back(t);
    made.insert(t.storage().get());
  }

  // The value of an op's tensor argument; a tensor the trace has not seen is a constant,
  // unless it shares memory with an input or a result: then some op the op hook does not
  // report made it from them, and the trace cannot replay it (-1).
  int value(const Tensor& t) {
    auto it = value_of.find(t.impl());
    if (it != value_of.end()) return it->second;
    if (made.count(t.storage().get())) return -1;
    keep.push_back(t);
    return value_of[t.impl()] = trace->graph.add_constant(t);
  }

  void on_call(const op_hook::OpCall& c) {
    if (std::this_thread::get_id() != thread || !trace->whole()) return;
    if (kFactories.count(c.name)) {
      for (const Tensor& t : c.outputs) {
        keep.push_back(t);
        const int v = value_of[t.impl()] = trace->graph.add_constant(t);
        factory_values.insert(v);
      }
      return;
    }
    auto stop = [&](std::string why) { trace->end(std::string(c.name), std::move(why)); };
    if (std::string why = unrecordable(c, replayable); !why.empty()) return stop(why);
    std::vector<Graph::Arg> args;
    for (const op_hook::Value& v : c.args) {
      Graph::Arg a;
      if (auto* t = std::get_if<Tensor>(&v); t && t->defined() && t->impl()->wrapped_number) {
        a.constant = t->item();  // a number the op took as a tensor (x * 2.0): the number
      } else if (auto* t = std::get_if<Tensor>(&v); t && t->defined()) {
        a.kind = Graph::Arg::Kind::Value;
        a.value = value(*t);
        if (a.value < 0) return stop("an argument is a view made by an op the trace does not see");
      } else if (auto* l = std::get_if<std::vector<Tensor>>(&v)) {
        a.kind = Graph::Arg::Kind::ValueList;
        for (const Tensor& x : *l) a.values.push_back(value(x));
        for (int x : a.values)
          if (x < 0) return stop("an argument is a view made by an op the trace does not see");
      } else if (auto* o = std::get_if<std::vector<std::optional<Tensor>>>(&v)) {
        if (replayable) return stop("an argument is a list of optional tensors");
        a.kind = Graph::Arg::Kind::ValueList;
        for (const auto& x : *o) {
          a.values.push_back(x ? value(*x) : -1);
          if (x && a.values.back() < 0) return stop("an argument is a view made by an op the trace does not see");
        }
      } else {
        a.constant = std::holds_alternative<Tensor>(v) ? op_hook::Value() : v;  // an undefined tensor: None
      }
      args.push_back(std::move(a));
    }
    std::vector<TensorMeta> metas;
    for (const Tensor& t : c.outputs) metas.push_back(TensorMeta::of(t));
    const int node = trace->graph.add_node(std::string(c.name), std::move(args), metas);
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      remember(c.outputs[i]);
      value_of[c.outputs[i].impl()] = trace->graph.nodes[node].outputs[i];  // in-place ops: the new value
    }
  }
};

thread_local Recorder* t_recorder = nullptr;  // the trace recording on this thread

}  // namespace

bool is_tracing() { return t_recorder != nullptr; }

void break_trace(const std::string& what, const std::string& why) {
  if (t_recorder) t_recorder->trace->end(what, why);
}

Trace trace(const TensorFn& fn, const std::vector<Tensor>& inputs, bool replayable) {
  Trace t;
  Recorder rec{&t};
  rec.replayable = replayable;
  for (const Tensor& x : inputs) {
    FLB_CHECK(x.defined(), ValueError, "[compile] an input is an undefined tensor");
    rec.remember(x);
    const int v = t.graph.add_input(x);
    rec.value_of.emplace(x.impl(), v);  // a tensor passed twice: its first input (compile guards the aliasing)
  }
  {
    // Listening while fn runs (also when it raises).
    struct Listening {
      Recorder* outer = t_recorder;
      int id;
      explicit Listening(Recorder& r) : id(op_hook::add_listener([&r](const op_hook::OpCall& c) { r.on_call(c); })) {
        t_recorder = &r;
      }
      ~Listening() {
        t_recorder = outer;
        op_hook::remove_listener(id);
      }
    } listening(rec);
    t.outputs = fn(inputs);
  }
  if (!t.whole()) return t;
  // A tensor the function made must stay as made: not written in place, not returned.
  for (const Graph::Node& n : t.graph.nodes) {
    if (is_pure(n.op)) continue;
    for (const Graph::Arg& a : n.args)
      if ((a.kind == Graph::Arg::Kind::Value && rec.factory_values.count(a.value)) ||
          std::any_of(a.values.begin(), a.values.end(), [&](int v) { return rec.factory_values.count(v) > 0; })) {
        t.end(n.op, "it writes a tensor the function made (it would carry over between calls)");
        return t;
      }
  }
  for (const Tensor& out : t.outputs) {
    auto it = out.defined() ? rec.value_of.find(out.impl()) : rec.value_of.end();
    if (it == rec.value_of.end()) {
      t.end("return", "an output was not made by a traced op, an input or a constant");
      return t;
    }
    if (rec.factory_values.count(it->second)) {
      t.end("return", "an output is a tensor a factory made (it would be the same tensor on every call)");
      return t;
    }
    t.graph.outputs.push_back(it->second);
  }
  return t;
}

}  // namespace flambeau::compiler
