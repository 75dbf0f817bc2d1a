// See graph.h. Capture is an op-hook listener on the capturing thread: each reported call
// becomes a node whose replay is one closure over the captured arguments and outputs.
//   - an op of the registry runs its boxed kernel, and its results are stored (memcpy)
//     into the captured outputs; a view (its output shares an argument's storage) needs no
//     node: it sees the buffers it views;
//   - an in-place op runs its in-place kernel (the registry's copy_, fill_, zero_, or one of
//     kInPlace), else its out-of-place form stored into its first argument;
//   - a factory's tensor is a constant, restored at each replay (a later op may write it);
//     rand/randn draw from the default generator again.
// Node ids are capture order; edges follow reads and writes per storage.
#include "flambeau/graphs/graph.h"

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "flambeau/autograd/node.h"
#include "flambeau/core/error.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/shape.h"
#include "flambeau/io/text_file.h"
#include "flambeau/ops/ops.h"
#include "flambeau/ops/registry.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::graphs {

const char* node_type_name(NodeType t) {
  switch (t) {
    case NodeType::Kernel: return "kernel";
    case NodeType::Memcpy: return "memcpy";
    case NodeType::Memset: return "memset";
  }
  return "kernel";
}

namespace {

using op_hook::Value;
using Args = std::vector<Value>;

thread_local bool t_capturing = false;

// Writes a replayed result into the captured output (same shape: the capture fixed it).
void store(const Tensor& result, const Tensor& out, const std::string& op) {
  FLB_CHECK(result.sizes() == out.sizes(), Error, "[Graph.replay] ", op, " gave shape ", shape_str(result.sizes()),
            " on replay, ", shape_str(out.sizes()), " when captured");
  if (result.dtype() == out.dtype() && result.is_contiguous() && out.is_contiguous()) {
    if (result.numel() > 0) std::memcpy(out.data_ptr(), result.data_ptr(), size_t(out.numel()) * out.element_size());
    out.bump_version();
  } else {
    Tensor dst = out;
    dst.copy_(result);
  }
}

void store_all(const std::vector<Value>& results, const std::vector<Tensor>& outs, const std::string& op) {
  size_t i = 0;
  for (const Value& r : results) {
    if (const auto* t = std::get_if<Tensor>(&r)) store(*t, outs.at(i++), op);
    else if (const auto* l = std::get_if<std::vector<Tensor>>(&r))
      for (const Tensor& x : *l) store(x, outs.at(i++), op);
  }
  FLB_CHECK(i == outs.size(), Error, "[Graph.replay] ", op, " gave ", i, " tensors, ", outs.size(), " when captured");
}

const Tensor& tensor_arg(const Args& a, size_t i) { return std::get<Tensor>(a.at(i)); }
Scalar scalar_arg(const Args& a, size_t i) { return detail::Unbox<Scalar>::get(a.at(i)); }
double float_arg(const Args& a, size_t i) { return detail::Unbox<double>::get(a.at(i)); }

// In-place ops with a kernel of their own (the registry has their out-of-place forms):
// run on the captured arguments as reported (self first). An explicit generator was
// refused already: the random ones draw from the default generator.
using InPlace = std::function<void(const Args&)>;
const std::map<std::string, InPlace, std::less<>>& in_place_kernels() {
  static const std::map<std::string, InPlace, std::less<>> k{
      {"add_", [](const Args& a) { Tensor s = tensor_arg(a, 0); add_(s, tensor_arg(a, 1), scalar_arg(a, 2)); }},
      {"sub_", [](const Args& a) { Tensor s = tensor_arg(a, 0); sub_(s, tensor_arg(a, 1), scalar_arg(a, 2)); }},
      {"mul_", [](const Args& a) { Tensor s = tensor_arg(a, 0); mul_(s, tensor_arg(a, 1)); }},
      {"index_copy_",
       [](const Args& a) {
         Tensor s = tensor_arg(a, 0);
         index_copy_(s, std::get<int64_t>(a.at(1)), tensor_arg(a, 2), tensor_arg(a, 3));
       }},
      {"uniform_",
       [](const Args& a) { Tensor s = tensor_arg(a, 0); uniform_(s, float_arg(a, 1), float_arg(a, 2)); }},
      {"normal_", [](const Args& a) { Tensor s = tensor_arg(a, 0); normal_(s, float_arg(a, 1), float_arg(a, 2)); }},
      {"exponential_", [](const Args& a) { Tensor s = tensor_arg(a, 0); exponential_(s, float_arg(a, 1)); }},
      {"bernoulli_", [](const Args& a) { Tensor s = tensor_arg(a, 0); bernoulli_(s, float_arg(a, 1)); }},
  };
  return k;
}

// Factories outside the registry: their tensor is restored from a copy taken at capture.
const std::set<std::string, std::less<>> kConstantFactories{
    "zeros",     "ones",       "full",      "arange",     "linspace",  "eye",   "scalar_tensor",
    "tensor",    "zeros_like", "ones_like", "full_like"};
// Random factories: drawn again from the default generator (their generator argument last).
const std::map<std::string, std::function<void(Tensor&)>, std::less<>> kRandomFactories{
    {"rand", [](Tensor& t) { uniform_(t, 0, 1); }}, {"randn", [](Tensor& t) { normal_(t, 0, 1); }}};

struct Node {
  GraphNode info;
  std::function<void()> run;
};

}  // namespace

struct Graph::State {
  enum class Phase { Empty, Capturing, Captured } phase = Phase::Empty;
  std::thread::id thread;
  int listener = 0;
  uint64_t first_serial = 0;  // storages from this serial on were made during the capture
  std::string refusal;        // the first op that cannot be replayed, and why
  std::vector<Node> nodes;
  std::set<std::pair<int64_t, int64_t>> edges;
  std::set<const Storage*> produced;       // storages a node made
  std::set<const Storage*> uninitialised;  // made by empty(), not written by a node yet
  std::map<const Storage*, int64_t> last_writer;
  std::map<const Storage*, std::vector<int64_t>> readers;  // since the last write

  void refuse(std::string_view op, const std::string& why) {
    if (refusal.empty()) refusal = detail::str_cat(op, ": ", why);
  }
  void record(const op_hook::OpCall& c);
  // Adds the node's edges from the storages it reads and writes, then notes them.
  void link(int64_t id, const std::vector<const Storage*>& reads, const std::vector<const Storage*>& writes);
};

namespace {

bool shares_storage(const Tensor& out, const Args& args) {
  for (const Value& v : args) {
    if (const auto* t = std::get_if<Tensor>(&v); t && t->defined() && t->storage() == out.storage()) return true;
    if (const auto* l = std::get_if<std::vector<Tensor>>(&v))
      for (const Tensor& x : *l)
        if (x.defined() && x.storage() == out.storage()) return true;
  }
  return false;
}

void for_each_tensor(const Args& args, const std::function<void(const Tensor&)>& f) {
  for (const Value& v : args) {
    if (const auto* t = std::get_if<Tensor>(&v); t && t->defined()) f(*t);
    if (const auto* l = std::get_if<std::vector<Tensor>>(&v))
      for (const Tensor& x : *l)
        if (x.defined()) f(x);
    if (const auto* o = std::get_if<std::vector<std::optional<Tensor>>>(&v))
      for (const auto& x : *o)
        if (x && x->defined()) f(*x);
  }
}

// Why the call cannot be replayed, whatever its kernel ("" when it can).
std::string never_replayable(const op_hook::OpCall& c) {
  if (c.name == "item") return "it reads a tensor's value on the host (item()), a sync a replay cannot repeat";
  if (c.name == "backward") return "backward cannot be captured (capture the forward, or the step's ops)";
  if (output_shape_depends_on_values(c.name)) return "its output's shape depends on the input's values";
  for (const Value& v : c.args)
    if (const auto* o = std::get_if<op_hook::Opaque>(&v)) {
      if (o->kind == "generator")
        return "it draws from an explicit Generator, whose state a replay cannot advance (capture RNG "
               "on the default generator, which is graph-safe)";
      if (o->kind.rfind("device", 0) != 0) return "an argument is a " + o->kind;  // a device fixes where, as capture does
    }
  return "";
}

NodeType type_of(std::string_view op) {
  if (op == "copy_") return NodeType::Memcpy;
  if (op == "fill_" || op == "zero_" || op == "zeros" || op == "ones" || op == "full" || op == "zeros_like" ||
      op == "ones_like" || op == "full_like")
    return NodeType::Memset;
  if (kConstantFactories.count(op)) return NodeType::Memcpy;
  return NodeType::Kernel;
}

}  // namespace

void Graph::State::link(int64_t id, const std::vector<const Storage*>& reads,
                        const std::vector<const Storage*>& writes) {
  for (const Storage* s : reads)
    if (auto w = last_writer.find(s); w != last_writer.end() && w->second != id) edges.emplace(w->second, id);
  for (const Storage* s : writes) {
    if (auto w = last_writer.find(s); w != last_writer.end() && w->second != id) edges.emplace(w->second, id);
    for (int64_t r : readers[s])
      if (r != id) edges.emplace(r, id);
  }
  for (const Storage* s : reads) readers[s].push_back(id);
  for (const Storage* s : writes) {
    last_writer[s] = id;
    readers[s].clear();
  }
}

void Graph::State::record(const op_hook::OpCall& c) {
  if (!refusal.empty()) return;
  if (std::string why = never_replayable(c); !why.empty()) return refuse(c.name, why);
  const std::string name(c.name);
  const bool in_place = name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_';
  // A view needs no node: its output is the buffer of an argument.
  if (!in_place && !c.outputs.empty()) {
    bool all_views = true;
    for (const Tensor& o : c.outputs) all_views = all_views && o.defined() && shares_storage(o, c.args);
    if (all_views) return;
  }
  // What the call reads and writes; every buffer read was made before the capture or by a
  // node, and, if by empty(), written by a node since.
  std::vector<const Storage*> reads, writes;
  const bool write_only = name == "copy_" || name == "fill_" || name == "zero_";
  for (size_t i = 0; i < c.args.size(); ++i) {
    if (i == 0 && write_only) continue;
    for_each_tensor({c.args[i]}, [&](const Tensor& t) {
      if (!t.impl()->wrapped_number) reads.push_back(t.storage().get());
    });
  }
  for (const Storage* r : reads) {
    if (uninitialised.count(r))
      return refuse(c.name, "it reads a tensor made by empty() whose values code the graph does not see wrote");
    if (r->serial >= first_serial && !produced.count(r))
      return refuse(c.name, "it reads a tensor made during the capture by code the graph does not see");
  }
  for (const Tensor& o : c.outputs)
    if (o.defined()) writes.push_back(o.storage().get());
  if (name == "empty" || name == "empty_like") {  // nothing to redo until a node writes it
    for (const Storage* w : writes) produced.insert(w), uninitialised.insert(w);
    return;
  }
  for (const Storage* w : writes) {
    uninitialised.erase(w);
    if (w->serial >= first_serial) produced.insert(w);
  }

  Node node;
  node.info.id = int64_t(nodes.size());
  node.info.type = type_of(c.name);
  node.info.op_name = name;
  node.info.kernel_name = "flambeau::" + name;
  node.info.correlation_id = c.correlation;
  for_each_tensor(c.args, [&](const Tensor& t) {
    node.info.shapes.emplace_back(t.sizes().begin(), t.sizes().end());
  });
  const std::vector<Tensor> outs = c.outputs;
  const RegisteredOp* op = find_op(name);
  Args args;  // in schema order, defaults filled (for a registry kernel)
  auto schema_args = [&](const RegisteredOp& r) {
    const std::vector<const Value*> ordered = in_schema_order(name, c.args);
    if (!arguments_fit(r, ordered)) return false;
    for (const Value* v : ordered) args.push_back(*v);
    for (size_t i = args.size(); i < r.schema.arguments.size(); ++i) args.push_back(default_value(r.schema.arguments[i]));
    return true;
  };
  if (op) {
    for (const SchemaArg& r : op->schema.returns)
      if (r.kind != ArgKind::Tensor) return refuse(c.name, "it returns a value that is not a tensor");
    if (!schema_args(*op)) return refuse(c.name, "its arguments do not fit its schema (no kernel to replay it)");
    if (in_place)  // copy_, fill_, zero_: the kernel writes its first argument
      node.run = [op, args] { op->kernel(args); };
    else
      node.run = [op, args, outs, name] { store_all(op->kernel(args), outs, name); };
  } else if (auto k = in_place_kernels().find(name); k != in_place_kernels().end()) {
    const InPlace& kernel = k->second;
    node.run = [&kernel, a = c.args] { kernel(a); };
  } else if (const RegisteredOp* base = in_place ? find_op(name.substr(0, name.size() - 1)) : nullptr) {
    if (!schema_args(*base)) return refuse(c.name, "its arguments do not fit its out-of-place form's schema");
    const Tensor self = std::get<Tensor>(args.at(0));
    node.run = [base, args, self, name] { store(std::get<Tensor>(base->kernel(args).at(0)), self, name); };
  } else if (auto r = kRandomFactories.find(name); r != kRandomFactories.end()) {
    if (outs.size() != 1) return refuse(c.name, "an unexpected number of results");
    node.run = [&draw = r->second, out = outs[0]] {
      Tensor t = out;
      draw(t);
    };
  } else if (kConstantFactories.count(name)) {
    if (outs.size() != 1) return refuse(c.name, "an unexpected number of results");
    node.run = [pristine = outs[0].clone(), out = outs[0], name] { store(pristine, out, name); };
  } else {
    return refuse(c.name, "it is not in the op registry (no kernel to replay it)");
  }

  link(node.info.id, reads, writes);
  nodes.push_back(std::move(node));
}

Graph::Graph() : s_(std::make_unique<State>()) {}
Graph::~Graph() {
  if (s_->phase == State::Phase::Capturing) {
    op_hook::remove_listener(s_->listener);
    t_capturing = false;
  }
}

void Graph::capture_begin() {
  FLB_CHECK(s_->phase == State::Phase::Empty, Error,
            "[Graph.capture_begin] this graph holds a capture already; call reset() first");
  FLB_CHECK(!t_capturing, Error, "[Graph.capture_begin] this thread is capturing another graph already");
  s_->thread = std::this_thread::get_id();
  s_->first_serial = Storage::next_serial();
  s_->phase = State::Phase::Capturing;
  t_capturing = true;
  State* s = s_.get();
  s_->listener = op_hook::add_listener([s](const op_hook::OpCall& c) {
    if (std::this_thread::get_id() == s->thread) s->record(c);
  });
}

void Graph::capture_end() {
  FLB_CHECK(s_->phase == State::Phase::Capturing, Error, "[Graph.capture_end] capture_begin() was not called");
  FLB_CHECK(std::this_thread::get_id() == s_->thread, Error,
            "[Graph.capture_end] called on another thread than capture_begin()");
  op_hook::remove_listener(s_->listener);
  t_capturing = false;
  s_->phase = State::Phase::Captured;
  if (!s_->refusal.empty()) {
    const std::string why = s_->refusal;
    reset();
    throw Error(detail::str_cat("[Graph.capture_end] the capture was refused at ", why));
  }
  // The bookkeeping for edges is not needed any more (the nodes keep their buffers).
  s_->produced.clear();
  s_->uninitialised.clear();
  s_->last_writer.clear();
  s_->readers.clear();
}

void Graph::replay() const {
  FLB_CHECK(s_->phase == State::Phase::Captured, Error,
            s_->phase == State::Phase::Capturing ? "[Graph.replay] the capture has not ended (call capture_end())"
                                                 : "[Graph.replay] nothing was captured");
  autograd::NoGradGuard no_grad;
  const op_hook::Internal unreported;
  for (const Node& n : s_->nodes) {
    profiler::Scope scope(n.info.kernel_name, profiler::EventKind::Kernel);
    if (profiler::Event* e = scope.event()) e->correlation = n.info.correlation_id;
    n.run();
  }
}

void Graph::reset() {
  if (s_->phase == State::Phase::Capturing) {
    op_hook::remove_listener(s_->listener);
    t_capturing = false;
  }
  s_ = std::make_unique<State>();
}

bool Graph::captured() const { return s_->phase == State::Phase::Captured; }

GraphData Graph::get_graph_data() const {
  FLB_CHECK(s_->phase == State::Phase::Captured, Error, "[Graph.get_graph_data] nothing was captured");
  GraphData d;
  for (const Node& n : s_->nodes) {
    d.nodes.push_back(n.info);
    d.execution_order.push_back(n.info.id);
  }
  d.edges.assign(s_->edges.begin(), s_->edges.end());
  return d;
}

std::string Graph::to_dot() const {
  const GraphData d = get_graph_data();
  std::ostringstream os;
  os << "digraph flambeau_graph {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const GraphNode& n : d.nodes) {
    os << "  n" << n.id << " [label=\"" << n.id << ": " << n.kernel_name << "\\n" << node_type_name(n.type);
    for (const auto& s : n.shapes) {
      os << " [";
      for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
      os << "]";
    }
    os << "\\ncorrelation " << n.correlation_id << "\"];\n";
  }
  for (const auto& [from, to] : d.edges) os << "  n" << from << " -> n" << to << ";\n";
  os << "}\n";
  return os.str();
}

void Graph::debug_dump(const std::string& path) const { io::write_text_file(path, to_dot(), "Graph.debug_dump"); }

bool is_capturing() { return t_capturing; }

}  // namespace flambeau::graphs
