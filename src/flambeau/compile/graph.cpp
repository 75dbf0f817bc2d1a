// See graph.h.
#include "flambeau/compile/graph.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "flambeau/autograd/node.h"
#include "flambeau/core/shape.h"
#include "flambeau/ops/registry.h"

namespace flambeau::compiler {

TensorMeta TensorMeta::of(const Tensor& t) {
  return {t.dtype(), t.sizes(), t.strides(), t.requires_grad()};
}

int Graph::add_input(const Tensor& t) {
  values.push_back({Kind::Input, -1, int(inputs.size()), TensorMeta::of(t)});
  inputs.push_back(int(values.size()) - 1);
  return inputs.back();
}

int Graph::add_constant(const Tensor& t) {
  values.push_back({Kind::Constant, -1, int(constants.size()), TensorMeta::of(t)});
  constants.push_back(t);
  return int(values.size()) - 1;
}

int Graph::add_node(std::string op, std::vector<Arg> args, const std::vector<TensorMeta>& outs) {
  Node n{std::move(op), std::move(args), {}};
  const int id = int(nodes.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    values.push_back({Kind::Node, id, int(i), outs[i]});
    n.outputs.push_back(int(values.size()) - 1);
  }
  nodes.push_back(std::move(n));
  return id;
}

namespace {

std::string constant_str(const op_hook::Value& v) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(const Tensor& t) const { return "tensor" + shape_str(t.sizes()); }
    std::string operator()(const std::vector<Tensor>& l) const { return "[" + std::to_string(l.size()) + " tensors]"; }
    std::string operator()(const std::vector<std::optional<Tensor>>& l) const {
      return "[" + std::to_string(l.size()) + " optional tensors]";
    }
    std::string operator()(bool b) const { return b ? "True" : "False"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      std::ostringstream s;
      s.precision(17);
      s << d;
      return s.str();
    }
    std::string operator()(const Scalar& s) const { return s.str(); }
    std::string operator()(DType d) const { return dtype_name(d); }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const Dims& d) const {
      std::string out = "[";
      for (size_t i = 0; i < d.size(); ++i) out += (i ? ", " : "") + std::to_string(d[i]);
      return out + "]";
    }
    std::string operator()(const op_hook::Opaque& o) const { return "<" + o.kind + ">"; }
  };
  return std::visit(Visitor{}, v);
}

std::string arg_str(const Graph::Arg& a) {
  switch (a.kind) {
    case Graph::Arg::Kind::Value: return "%" + std::to_string(a.value);
    case Graph::Arg::Kind::ValueList: {
      std::string out = "[";
      for (size_t i = 0; i < a.values.size(); ++i) out += (i ? ", %" : "%") + std::to_string(a.values[i]);
      return out + "]";
    }
    case Graph::Arg::Kind::Constant: break;
  }
  return constant_str(a.constant);
}

std::string meta_str(const TensorMeta& m) { return std::string(dtype_name(m.dtype)) + shape_str(m.sizes); }

// The value ids an argument reads.
void reads(const Graph::Arg& a, std::vector<int>& out) {
  if (a.kind == Graph::Arg::Kind::Value) out.push_back(a.value);
  if (a.kind == Graph::Arg::Kind::ValueList) out.insert(out.end(), a.values.begin(), a.values.end());
}

}  // namespace

std::string Graph::str() const {
  std::ostringstream s;
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    if (v.kind == Kind::Input) s << "%" << i << " = input " << v.index << ": " << meta_str(v.meta) << "\n";
    if (v.kind == Kind::Constant) s << "%" << i << " = constant " << v.index << ": " << meta_str(v.meta) << "\n";
  }
  for (const Node& n : nodes) {
    for (size_t i = 0; i < n.outputs.size(); ++i) s << (i ? ", %" : "%") << n.outputs[i];
    s << (n.outputs.empty() ? "" : " = ") << n.op << "(";
    for (size_t i = 0; i < n.args.size(); ++i) s << (i ? ", " : "") << arg_str(n.args[i]);
    s << ")";
    for (size_t i = 0; i < n.outputs.size(); ++i) s << (i ? ", " : "  # ") << meta_str(values[n.outputs[i]].meta);
    s << "\n";
  }
  s << "return (";
  for (size_t i = 0; i < outputs.size(); ++i) s << (i ? ", %" : "%") << outputs[i];
  s << ")\n";
  return s.str();
}

std::string Graph::to_dot() const {
  std::ostringstream s;
  s << "digraph G {\n  node [shape=box, fontname=monospace];\n";
  for (size_t i = 0; i < values.size(); ++i) {
    const Value& v = values[i];
    if (v.kind != Kind::Node)
      s << "  v" << i << " [shape=ellipse, label=\"" << (v.kind == Kind::Input ? "input " : "constant ") << v.index
        << "\\n" << meta_str(v.meta) << "\"];\n";
  }
  // The node producing each value (an input or constant stands for itself).
  auto source = [&](int value) {
    const Value& v = values[value];
    return v.kind == Kind::Node ? "n" + std::to_string(v.node) : "v" + std::to_string(value);
  };
  for (size_t n = 0; n < nodes.size(); ++n) {
    s << "  n" << n << " [label=\"" << nodes[n].op << "\"];\n";
    std::vector<int> in;
    for (const Arg& a : nodes[n].args) reads(a, in);
    for (int v : in) s << "  " << source(v) << " -> n" << n << " [label=\"%" << v << "\"];\n";
  }
  for (size_t i = 0; i < outputs.size(); ++i)
    s << "  out" << i << " [shape=ellipse, label=\"output " << i << "\"];\n  " << source(outputs[i]) << " -> out" << i
      << ";\n";
  s << "}\n";
  return s.str();
}

std::vector<op_hook::Value> node_arguments(const Graph::Node& n, const std::vector<Tensor>& env) {
  std::vector<Value> args;
  for (const Graph::Arg& a : n.args) {
    if (a.kind == Graph::Arg::Kind::Value) args.emplace_back(env[a.value]);
    else if (a.kind == Graph::Arg::Kind::Constant) args.push_back(a.constant);
    else {
      std::vector<Tensor> list;
      for (int v : a.values) list.push_back(env[v]);
      args.emplace_back(std::move(list));
    }
  }
  return args;
}

void run_node(const Graph::Node& n, std::vector<Tensor>& env) {
  size_t out = 0;
  for (const Value& r : call_op(n.op, node_arguments(n, env))) {
    if (auto* t = std::get_if<Tensor>(&r)) {
      if (out < n.outputs.size()) env[n.outputs[out++]] = *t;
    } else if (auto* l = std::get_if<std::vector<Tensor>>(&r)) {
      for (const Tensor& t : *l)
        if (out < n.outputs.size()) env[n.outputs[out++]] = t;
    }
  }
  FLB_CHECK(out == n.outputs.size(), Error, "[compile] replaying ", n.op, " gave ", out, " tensors, the trace saw ",
            n.outputs.size());
}

std::optional<double> number_of(const op_hook::Value& v) {
  if (auto* s = std::get_if<Scalar>(&v)) return s->to<double>();
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  return std::nullopt;
}

bool plain_division(const Graph::Node& n) {
  if (n.args.size() < 3) return n.args.size() == 2;
  const auto* mode = std::get_if<std::string>(&n.args[2].constant);
  return n.args.size() == 3 && (std::holds_alternative<std::monostate>(n.args[2].constant) || (mode && mode->empty()));
}

std::vector<int> values_read(const Graph::Node& n) {
  std::vector<int> out;
  for (const Graph::Arg& a : n.args) reads(a, out);
  return out;
}

Graph subgraph(const Graph& g, size_t begin, size_t end, const std::vector<int>& inputs,
               const std::vector<int>& outputs) {
  Graph h;
  std::vector<int> id(g.values.size(), -1);  // g's value -> h's
  for (int v : inputs) {
    h.values.push_back({Graph::Kind::Input, -1, int(h.inputs.size()), g.values[v].meta});
    h.inputs.push_back(id[v] = int(h.values.size()) - 1);
  }
  auto map = [&](int v) {
    if (id[v] < 0 && g.values[v].kind == Graph::Kind::Constant) id[v] = h.add_constant(g.constants[g.values[v].index]);
    FLB_CHECK(id[v] >= 0, Error, "[compile] subgraph: value %", v, " is neither an input nor made by its nodes");
    return id[v];
  };
  for (size_t n = begin; n < end; ++n) {
    const Graph::Node& node = g.nodes[n];
    std::vector<Graph::Arg> args = node.args;
    for (Graph::Arg& a : args) {
      if (a.kind == Graph::Arg::Kind::Value) a.value = map(a.value);
      for (int& v : a.values) v = map(v);
    }
    std::vector<TensorMeta> metas;
    for (int v : node.outputs) metas.push_back(g.values[v].meta);
    const int k = h.add_node(node.op, std::move(args), metas);
    for (size_t i = 0; i < node.outputs.size(); ++i) id[node.outputs[i]] = h.nodes[k].outputs[i];
  }
  for (int v : outputs) h.outputs.push_back(map(v));
  return h;
}

void optimize(Graph& g) {
  fold_constants(g);
  simplify_algebra(g);
  eliminate_common_subexpressions(g);
  eliminate_dead_code(g);
}

bool is_pure(const std::string& op) {
  static const std::set<std::string> random{"rand", "randn", "randint", "randperm", "multinomial", "dropout",
                                            "rand_like", "randn_like", "randint_like", "bernoulli", "normal"};
  return !op.empty() && op.back() != '_' && !random.count(op);
}

namespace {

// Keeps the nodes marked, in order (their values learn their new node index); returns how
// many went.
int keep_nodes(Graph& g, const std::vector<bool>& keep) {
  std::vector<Graph::Node> kept;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (keep[n]) kept.push_back(std::move(g.nodes[n]));
  const int dropped = int(g.nodes.size() - kept.size());
  g.nodes = std::move(kept);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : g.nodes[n].outputs) g.values[v].node = int(n);
  return dropped;
}

}  // namespace

int eliminate_dead_code(Graph& g) {
  std::vector<bool> live(g.values.size(), false);
  for (int v : g.outputs) live[v] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (int n = int(g.nodes.size()) - 1; n >= 0; --n) {
    const Graph::Node& node = g.nodes[n];
    bool used = !is_pure(node.op);
    for (int v : node.outputs) used = used || live[v];
    if (!used) continue;
    keep[n] = true;
    std::vector<int> in;
    for (const Graph::Arg& a : node.args) reads(a, in);
    for (int v : in) live[v] = true;
  }
  return keep_nodes(g, keep);
}

int eliminate_common_subexpressions(Graph& g) {
  std::map<std::string, int> seen;  // a pure node's op and arguments -> its index
  std::vector<int> replace(g.values.size());
  for (size_t v = 0; v < replace.size(); ++v) replace[v] = int(v);
  auto renamed = [&](Graph::Arg& a) {
    if (a.kind == Graph::Arg::Kind::Value) a.value = replace[a.value];
    for (int& v : a.values) v = replace[v];
  };
  int merged = 0;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    Graph::Node& node = g.nodes[n];
    for (Graph::Arg& a : node.args) renamed(a);
    if (!is_pure(node.op)) {
      seen.clear();  // it may have written any value
      continue;
    }
    std::string key = node.op;
    bool keyable = true;
    for (const Graph::Arg& a : node.args) {
      if (a.kind == Graph::Arg::Kind::Constant && std::holds_alternative<Tensor>(a.constant)) keyable = false;
      key += "|" + std::to_string(int(a.kind)) + ":" + arg_str(a);
    }
    if (!keyable) continue;
    auto [it, fresh] = seen.emplace(key, int(n));
    if (fresh) continue;
    const Graph::Node& first = g.nodes[it->second];
    if (first.outputs.size() != node.outputs.size()) continue;
    for (size_t i = 0; i < node.outputs.size(); ++i) replace[node.outputs[i]] = first.outputs[i];
    ++merged;
  }
  for (int& v : g.outputs) v = replace[v];
  return merged;
}

namespace {

bool writes(const Graph& g) {
  for (const Graph::Node& n : g.nodes)
    if (!is_pure(n.op)) return true;
  return false;
}

bool is_output(const Graph& g, int v) { return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end(); }

// Every use of value `from` in the nodes' arguments and the outputs reads `to` instead.
void replace_uses(Graph& g, int from, int to) {
  for (Graph::Node& n : g.nodes)
    for (Graph::Arg& a : n.args) {
      if (a.kind == Graph::Arg::Kind::Value && a.value == from) a.value = to;
      for (int& v : a.values) v = v == from ? to : v;
    }
  for (int& v : g.outputs) v = v == from ? to : v;
}

std::optional<double> number_arg(const Graph::Node& n, size_t i) {
  if (i >= n.args.size() || n.args[i].kind != Graph::Arg::Kind::Constant) return std::nullopt;
  return number_of(n.args[i].constant);
}

}  // namespace

int fold_constants(Graph& g) {
  if (writes(g)) return 0;
  autograd::NoGradGuard no_grad;
  // known: the values computed here, and the captured tensors nothing else holds (made by
  // the traced function, e.g. from a Python list), which cannot change between calls.
  // Parameters and buffers can.
  std::vector<Tensor> env(g.values.size());
  std::vector<bool> known(g.values.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].kind == Graph::Kind::Constant) {
      const Tensor& t = g.constants[g.values[v].index];
      known[v] = t.impl_ptr().use_count() == 1 && t.storage().use_count() == 1 && !t.requires_grad();
      if (known[v]) env[v] = t;
    }
  std::vector<bool> keep(g.nodes.size(), true);
  std::vector<int> folded;  // their outputs
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Graph::Node& node = g.nodes[n];
    bool foldable = !node.outputs.empty();
    for (const Graph::Arg& a : node.args) {
      foldable = foldable && !(a.kind == Graph::Arg::Kind::Value && !known[a.value]) &&
                 !std::holds_alternative<op_hook::Opaque>(a.constant);
      for (int v : a.values) foldable = foldable && known[v];
    }
    for (int v : node.outputs) foldable = foldable && !is_output(g, v);
    if (!foldable) continue;
    run_node(node, env);
    for (int v : node.outputs) known[v] = true, folded.push_back(v);
    keep[n] = false;
  }
  // The folded values become the graph's own constants; their nodes go.
  for (int v : folded) {
    g.values[v].kind = Graph::Kind::Constant;
    g.values[v].node = -1;
    g.values[v].index = int(g.constants.size());
    g.constants.push_back(env[v]);
  }
  return keep_nodes(g, keep);
}

int simplify_algebra(Graph& g) {
  if (writes(g)) return 0;
  int count = 0;
  for (const Graph::Node& n : g.nodes) {
    if (n.outputs.size() != 1 || n.args.empty() || n.args[0].kind != Graph::Arg::Kind::Value) continue;
    const int out = n.outputs[0];
    int x = n.args[0].value;
    bool identity = false;
    if (n.op == "mul") identity = number_arg(n, 1) == 1.0 && n.args.size() == 2;
    if (n.op == "div") identity = number_arg(n, 1) == 1.0 && plain_division(n);
    if (n.op == "sub") identity = number_arg(n, 1) == 0.0 && (n.args.size() == 2 || number_arg(n, 2) == 1.0);
    if (n.op == "neg") {
      const Graph::Value& in = g.values[x];
      if (in.kind == Graph::Kind::Node && g.nodes[in.node].op == "neg" &&
          g.nodes[in.node].args[0].kind == Graph::Arg::Kind::Value) {
        x = g.nodes[in.node].args[0].value;
        identity = true;
      }
    }
    const TensorMeta &a = g.values[x].meta, &b = g.values[out].meta;
    if (!identity || a.dtype != b.dtype || a.sizes != b.sizes || is_output(g, out)) continue;
    replace_uses(g, out, x);
    ++count;
  }
  return count;
}

}  // namespace flambeau::compiler
