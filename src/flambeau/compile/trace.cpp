// See trace.h.
#include "flambeau/compile/trace.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <set>
#include <thread>
#include <unordered_map>

#include "flambeau/core/error.h"
#include "flambeau/ops/registry.h"

namespace flambeau::compiler {

namespace {

// Factories: their result depends on their arguments only (the *_like ones: on the shape and
// dtype of theirs, which the guards fix), so the tensor a traced call made is a constant of
// the graph (unless written in place).
const std::set<std::string, std::less<>> kFactories{"empty",      "zeros",     "ones",      "full",
                                                    "arange",     "linspace",  "eye",       "scalar_tensor",
                                                    "tensor",     "empty_like", "zeros_like", "ones_like",
                                                    "full_like"};

// Ops a graph that is not replayed may hold though the registry lacks them.
const std::set<std::string, std::less<>> kGeneratorOnly{"index"};

// Why the graph cannot hold this call ("" when it can).
std::string unrecordable(const op_hook::OpCall& c, bool replayable) {
  if (c.name == "item") return "it reads a tensor's value (item())";
  if (c.name == "backward") return "backward runs inside the function";
  if (output_shape_depends_on_values(c.name)) return "its output's shape depends on the input's values";
  if (!replayable && kGeneratorOnly.count(c.name)) return "";
  const RegisteredOp* op = find_op(c.name);
  if (!op) return "it is not in the op registry (no boxed kernel to replay it)";
  for (const SchemaArg& r : op->schema.returns)
    if (r.kind != ArgKind::Tensor) return "it returns a value the graph cannot know in advance";
  for (const op_hook::Value& v : c.args)
    if (auto* o = std::get_if<op_hook::Opaque>(&v)) return "an argument is a " + o->kind;
  return "";
}

// Where a tensor's elements are: its storage and geometry.
using Layout = std::tuple<const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>, DType>;
Layout layout(const Tensor& t) {
  return {t.storage().get(), t.storage_offset(), std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
          std::vector<int64_t>(t.strides().begin(), t.strides().end()), t.dtype()};
}

// "compile::view_at(x, size, stride, offset)": x's memory seen with another geometry, the
// offset counted from x's own. What a backward's ops read of an op's internal views (a
// saved weight.t() inside linear) becomes in the graph: a view of a traced tensor.
constexpr const char* kViewAt = "compile::view_at";
void register_view_at() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_op("compile::view_at(Tensor input, int[] size, int[] stride, int offset) -> Tensor",
                [](const std::vector<Value>& a) {
                  const Tensor& x = std::get<Tensor>(a[0]);
                  return std::vector<Value>{x.as_strided(std::get<Dims>(a[1]), std::get<Dims>(a[2]),
                                                         x.storage_offset() + std::get<int64_t>(a[3]))};
                });
  });
}

struct Recorder {
  explicit Recorder(Trace* t) : trace(t) {}
  Trace* trace;
  bool replayable = true;
  std::thread::id thread = std::this_thread::get_id();
  uint64_t first_serial = Storage::next_serial();  // storages allocated during the trace are newer
  std::unordered_map<const TensorImpl*, int> value_of;  // the current value of each tensor
  std::map<Layout, int> value_at;  // the current value at each layout (inputs and results)
  bool in_backward = false;        // begin_backward() was called
  std::vector<Tensor> keep;  // every tensor seen, alive until the end (so no address is reused)
  std::set<const void*> made;  // the storages of the inputs and of the nodes' outputs
  std::set<int> factory_values;  // constants a factory made during the trace (pristine copies)
  std::map<const void*, int> factory_storage;  // their storages
  std::set<int> written;  // factory values an in-place op wrote (through a view too)
  std::map<int, size_t> created_at;  // each factory value: the number of nodes before it
  std::map<int, Tensor> unused;  // factory values no traced op used yet: the tensor the function holds

  // Whether factory value v's tensor still holds what the factory made when a traced op
  // first reads it (or it is returned): else code the trace does not see wrote it.
  bool as_made(int v) {
    auto it = unused.find(v);
    if (it == unused.end()) return true;
    const Tensor held = it->second.contiguous(), made = trace->graph.constants[trace->graph.values[v].index].contiguous();
    unused.erase(it);
    return std::memcmp(held.data_ptr(), made.data_ptr(), size_t(held.numel()) * held.element_size()) == 0;
  }
  std::set<int> uninitialised;   // values made by empty(), empty_like(), ... (garbage until written)
  // A contiguous traced value in each storage, with its offset: what view_at nodes view.
  std::map<const void*, std::pair<int, int64_t>> contiguous_in;

  void remember(const Tensor& t, int v) {
    keep.push_back(t);
    made.insert(t.storage().get());
    value_of[t.impl()] = v;
    value_at[layout(t)] = v;
    if (t.is_contiguous()) contiguous_in[t.storage().get()] = {v, t.storage_offset()};
  }

  // In a backward pass, t (a view no traced op made) as a view_at node of a contiguous traced
  // value in its storage, or -1.
  int view_of_traced(const Tensor& t) {
    auto it = in_backward ? contiguous_in.find(t.storage().get()) : contiguous_in.end();
    if (it == contiguous_in.end()) return -1;
    register_view_at();
    std::vector<Graph::Arg> args(4);
    args[0].kind = Graph::Arg::Kind::Value;
    args[0].value = it->second.first;
    args[1].constant = t.sizes();
    args[2].constant = t.strides();
    args[3].constant = t.storage_offset() - it->second.second;
    const int node = trace->graph.add_node(kViewAt, std::move(args), {TensorMeta::of(t)});
    const int v = trace->graph.nodes[node].outputs[0];
    remember(t, v);
    return v;
  }

  // The value a traced tensor holds, or -1. In a backward pass a tensor with no value of its
  // own at a traced value's layout is that value (a saved tensor, a detached gradient).
  int lookup(const Tensor& t) {
    if (auto it = value_of.find(t.impl()); it != value_of.end()) return it->second;
    if (!in_backward) return -1;
    auto it = value_at.find(layout(t));
    return it == value_at.end() ? -1 : value_of[t.impl()] = it->second;
  }

  // The value of an op's tensor argument; a tensor the trace has not seen is a constant
  // (a parameter, a captured tensor), unless it shares memory with an input or a result, or
  // was allocated during the trace: then code the op hook does not report made it, and the
  // trace cannot replay it (-1, with the reason in *why).
  int value(const Tensor& t, std::string* why) {
    if (const int v = lookup(t); v >= 0) return v;
    if (const int v = view_of_traced(t); v >= 0) return v;
    if (made.count(t.storage().get())) {
      *why = "an argument is a view made by an op the trace does not see";
      return -1;
    }
    if (t.storage()->serial >= first_serial) {
      *why = "an argument was computed by code the trace does not see";
      return -1;
    }
    keep.push_back(t);
    return value_of[t.impl()] = trace->graph.add_constant(t);
  }

  void on_call(const op_hook::OpCall& c) {
    if (std::this_thread::get_id() != thread || !trace->whole()) return;
    const bool empty_op = c.name.substr(0, 5) == "empty";
    if (kFactories.count(c.name)) {
      for (const Tensor& t : c.outputs) {
        keep.push_back(t);
        const int v = value_of[t.impl()] = trace->graph.add_constant(t.clone());  // as made, if written later
        factory_values.insert(v);
        factory_storage[t.storage().get()] = v;
        created_at[v] = trace->graph.nodes.size();
        unused[v] = t;
        if (empty_op) uninitialised.insert(v);
      }
      return;
    }
    auto stop = [&](std::string why) { trace->end(std::string(c.name), std::move(why)); };
    if (std::string why = unrecordable(c, replayable); !why.empty()) return stop(why);
    std::vector<Graph::Arg> args;
    std::string why;
    // An uninitialised tensor read by an op was written by code the trace does not see (an
    // in-place op's destination, its first argument, is not read).
    const bool writes = !is_pure(std::string(c.name));
    auto readable = [&](int v) {
      if (v < 0) return false;
      const bool destination = writes && args.empty();
      if (destination) unused.erase(v);  // a traced op writes it first
      if (uninitialised.count(v) && !destination) {
        why = "it reads a tensor made by empty() that no traced op wrote";
        return false;
      }
      if (!as_made(v)) {
        why = "it reads a factory's tensor that code the trace does not see wrote";
        return false;
      }
      return true;
    };
    if (writes)
      for (const op_hook::Value& v : c.args)
        if (auto* t = std::get_if<Tensor>(&v); t && t->defined())
          if (auto f = factory_storage.find(t->storage().get()); f != factory_storage.end()) written.insert(f->second);
    const std::vector<const op_hook::Value*> ordered = in_schema_order(c.name, c.args);
    if (const RegisteredOp* op = find_op(c.name); replayable && op && !arguments_fit(*op, ordered))
      return stop("its C++ call's arguments do not fit its schema (the registry could not replay it)");
    for (const op_hook::Value* arg : ordered) {
      const op_hook::Value& v = *arg;
      Graph::Arg a;
      if (auto* t = std::get_if<Tensor>(&v); t && t->defined() && t->impl()->wrapped_number) {
        a.constant = t->item();  // a number the op took as a tensor (x * 2.0): the number
      } else if (auto* t = std::get_if<Tensor>(&v); t && t->defined()) {
        a.kind = Graph::Arg::Kind::Value;
        a.value = value(*t, &why);
        if (!readable(a.value)) return stop(why);
      } else if (auto* l = std::get_if<std::vector<Tensor>>(&v)) {
        a.kind = Graph::Arg::Kind::ValueList;
        for (const Tensor& x : *l) {
          a.values.push_back(value(x, &why));
          if (!readable(a.values.back())) return stop(why);
        }
      } else if (auto* o = std::get_if<std::vector<std::optional<Tensor>>>(&v)) {
        if (replayable) return stop("an argument is a list of optional tensors");
        a.kind = Graph::Arg::Kind::ValueList;
        for (const auto& x : *o) {
          a.values.push_back(x ? value(*x, &why) : -1);
          if (x && !readable(a.values.back())) return stop(why);
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
      const int v = trace->graph.nodes[node].outputs[i];
      remember(c.outputs[i], v);  // in-place ops: the new value
      if (empty_op) uninitialised.insert(v);
    }
  }
};

// A factory's tensor the function writes or returns is made anew on every call: a clone of
// the constant (its pristine copy) where the factory was called (before node created_at[v])
// takes its uses. The trace's backward_at moves with the nodes.
void fresh_copies(Trace& t, const std::set<int>& factory_values, const std::map<int, size_t>& created_at) {
  if (factory_values.empty()) return;
  Graph& g = t.graph;
  std::vector<Graph::Node> old = std::move(g.nodes);
  g.nodes.clear();
  std::map<int, int> copy_of;
  auto renamed = [&](int v) { return copy_of.count(v) ? copy_of[v] : v; };
  auto clones_at = [&](size_t i) {
    for (int v : factory_values) {
      if (created_at.at(v) != i) continue;
      Graph::Arg a;
      a.kind = Graph::Arg::Kind::Value;
      a.value = v;
      copy_of[v] = g.nodes[g.add_node("clone", {a}, {g.values[v].meta})].outputs[0];
      if (t.backward_at && i < *t.backward_at) ++*t.backward_at;
    }
  };
  for (size_t i = 0; i < old.size(); ++i) {
    clones_at(i);
    Graph::Node& n = old[i];
    for (Graph::Arg& a : n.args) {
      if (a.kind == Graph::Arg::Kind::Value) a.value = renamed(a.value);
      for (int& v : a.values) v = renamed(v);
    }
    for (int v : n.outputs) g.values[v].node = int(g.nodes.size());
    g.nodes.push_back(std::move(n));
  }
  clones_at(old.size());
  for (int& v : g.outputs) v = renamed(v);
}

thread_local Recorder* t_recorder = nullptr;  // the trace recording on this thread

}  // namespace

bool is_tracing() { return t_recorder != nullptr; }

void break_trace(const std::string& what, const std::string& why) {
  if (t_recorder) t_recorder->trace->end(what, why);
}

void begin_backward() {
  FLB_CHECK(t_recorder, Error, "[compile] begin_backward() outside a trace");
  t_recorder->in_backward = true;
  t_recorder->trace->backward_at = t_recorder->trace->graph.nodes.size();
}

Trace trace(const TensorFn& fn, const std::vector<Tensor>& inputs, bool replayable) {
  Trace t;
  Recorder rec(&t);
  rec.replayable = replayable;
  for (const Tensor& x : inputs) {
    FLB_CHECK(x.defined(), ValueError, "[compile] an input is an undefined tensor");
    const int v = t.graph.add_input(x);
    if (!rec.value_of.count(x.impl())) rec.remember(x, v);  // passed twice: its first input (compile guards it)
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
  for (const Tensor& out : t.outputs) {
    const int v = out.defined() ? rec.lookup(out) : -1;
    if (v < 0) {
      t.end("return", "an output was not made by a traced op, an input or a constant");
      return t;
    }
    if (!rec.as_made(v)) {
      t.end("return", "an output is a factory's tensor that code the trace does not see wrote");
      return t;
    }
    if (rec.factory_values.count(v)) rec.written.insert(v);
    t.graph.outputs.push_back(v);
  }
  fresh_copies(t, rec.written, rec.created_at);
  return t;
}

}  // namespace flambeau::compiler
