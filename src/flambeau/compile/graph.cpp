// See graph.h.
#include "flambeau/compile/graph.h"

#include <map>
#include <set>
#include <sstream>

#include "flambeau/core/shape.h"

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

bool is_pure(const std::string& op) {
  static const std::set<std::string> random{"rand", "randn", "randint", "randperm", "multinomial", "dropout",
                                            "rand_like", "randn_like", "randint_like", "bernoulli", "normal"};
  return !op.empty() && op.back() != '_' && !random.count(op);
}

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
  std::vector<Graph::Node> kept;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (keep[n]) kept.push_back(std::move(g.nodes[n]));
  const int dropped = int(g.nodes.size() - kept.size());
  g.nodes = std::move(kept);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : g.nodes[n].outputs) g.values[v].node = int(n);
  return dropped;
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

}  // namespace flambeau::compiler
