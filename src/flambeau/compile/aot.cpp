// See aot.h.
#include "flambeau/compile/aot.h"

#include <map>
#include <memory>
#include <optional>

#include "flambeau/autograd/autograd.h"
#include "flambeau/core/error.h"
#include "flambeau/nn/attention.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"

namespace flambeau::compiler {

bool needs_grad(const Graph& g, const std::vector<Tensor>& inputs) {
  if (!autograd::grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  for (const Tensor& t : g.constants)
    if (t.requires_grad()) return true;
  return false;
}

namespace {

// Ops whose backward runs kernels the op hook does not report (the fused norms' row
// statistics, attention's logsumexp): in the joint trace they run as the ops they are made
// of (their kernels' forward and backward ops), so that their backward is an op too.
using Decomposition = std::function<Tensor(const std::vector<op_hook::Value>& args)>;
std::optional<Tensor> optional_tensor(const op_hook::Value& v) {
  if (auto* t = std::get_if<Tensor>(&v); t && t->defined()) return *t;
  return std::nullopt;
}
std::optional<double> optional_number(const op_hook::Value& v) { return number_of(v); }
const std::map<std::string, Decomposition>& decompositions() {
  namespace F = nn::functional;
  static const std::map<std::string, Decomposition> table{
      {"rms_norm",
       [](const std::vector<op_hook::Value>& a) {
         return F::rms_norm_decomposed(std::get<Tensor>(a[0]), std::get<Dims>(a[1]), optional_tensor(a[2]),
                                       optional_number(a[3]));
       }},
      {"layer_norm",
       [](const std::vector<op_hook::Value>& a) {
         return F::layer_norm_decomposed(std::get<Tensor>(a[0]), std::get<Dims>(a[1]), optional_tensor(a[2]),
                                         optional_tensor(a[3]), *number_of(a[4]));
       }},
      {"scaled_dot_product_attention", [](const std::vector<op_hook::Value>& a) {
         return nn::scaled_dot_product_attention_decomposed(std::get<Tensor>(a[0]), std::get<Tensor>(a[1]),
                                                            std::get<Tensor>(a[2]), optional_tensor(a[3]),
                                                            *number_of(a[4]), std::get<bool>(a[5]),
                                                            optional_number(a[6]), std::get<bool>(a[7]));
       }}};
  return table;
}

// interpret(), with the decompositions.
std::vector<Tensor> interpret_decomposed(const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> env = bind(g, inputs);
  for (const Graph::Node& n : g.nodes) {
    auto d = decompositions().find(n.op);
    if (d == decompositions().end() || n.outputs.size() != 1) run_node(n, env);
    else env[n.outputs[0]] = d->second(node_arguments(n, env));
  }
  std::vector<Tensor> outs;
  for (int v : g.outputs) outs.push_back(env[v]);
  return outs;
}

// A leaf of the joint trace: t's data, requiring grad as t does.
Tensor leaf_like(const Tensor& t) {
  Tensor l = t.detach();
  if (t.requires_grad()) l.requires_grad_(true);
  return l;
}

}  // namespace

bool split_for_training(const Graph& g, const std::vector<Tensor>& example_inputs, TrainingGraphs* out,
                        std::string* why) {
  auto fail = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  // The graph replayed on leaves: its inputs, then its constants that require grad as inputs.
  TrainingGraphs r;
  Graph replayed = g;
  for (size_t v = 0; v < replayed.values.size(); ++v) {
    Graph::Value& value = replayed.values[v];
    if (value.kind != Graph::Kind::Constant || !g.constants[value.index].requires_grad()) continue;
    r.parameters.push_back(value.index);
    value.kind = Graph::Kind::Input;
    value.index = int(replayed.inputs.size());
    replayed.inputs.push_back(int(v));
  }
  std::vector<Tensor> joint_inputs;
  for (const Tensor& x : example_inputs) joint_inputs.push_back(leaf_like(x));
  for (int c : r.parameters) joint_inputs.push_back(leaf_like(g.constants[c]));
  const size_t leaves = joint_inputs.size(), n_out = g.outputs.size();
  std::vector<int> grad_slot(n_out, -1);  // the joint input holding output i's gradient
  for (size_t i = 0; i < n_out; ++i) {
    const TensorMeta& m = g.values[g.outputs[i]].meta;
    if (!is_floating(m.dtype)) continue;
    grad_slot[i] = int(joint_inputs.size());
    joint_inputs.push_back(ones(m.sizes, m.dtype));
  }

  r.grad_input.assign(n_out, false);
  r.has_grad.assign(leaves, false);
  const TensorFn joint = [&](const std::vector<Tensor>& in) {
    const std::vector<Tensor> leaf(in.begin(), in.begin() + leaves);
    std::vector<Tensor> outs = interpret_decomposed(replayed, leaf);
    begin_backward();
    std::vector<Tensor> roots, root_grads, wrt;
    std::vector<size_t> wrt_index;
    for (size_t i = 0; i < n_out; ++i)
      if (grad_slot[i] >= 0 && outs[i].requires_grad()) {
        r.grad_input[i] = true;
        roots.push_back(outs[i]), root_grads.push_back(in[grad_slot[i]]);
      }
    for (size_t i = 0; i < leaves; ++i)
      if (leaf[i].requires_grad()) wrt.push_back(leaf[i]), wrt_index.push_back(i);
    if (roots.empty()) return outs;
    const std::vector<Tensor> grads = autograd::grad_as_ops(roots, wrt, root_grads, false, true);
    for (size_t j = 0; j < grads.size(); ++j)
      if (grads[j].defined()) r.has_grad[wrt_index[j]] = true, outs.push_back(grads[j]);
    return outs;
  };
  const Trace t = trace(joint, joint_inputs);
  if (!t.whole()) return fail("the backward breaks at '" + t.break_op + "': " + t.break_reason);
  const Graph& j = t.graph;
  const size_t backward_at = t.backward_at.value_or(j.nodes.size());
  if (j.outputs.size() == n_out) return fail("no output requires grad");
  for (size_t n = 0; n < backward_at; ++n)
    if (!is_pure(j.nodes[n].op)) return fail("the forward writes in place ('" + j.nodes[n].op + "')");
  for (size_t i = 0; i < n_out; ++i) {
    if (j.values[j.outputs[i]].kind != Graph::Kind::Node) return fail("an output is an input or a captured tensor");
    for (size_t k = 0; k < leaves; ++k)
      if (t.outputs[i].storage() == joint_inputs[k].storage()) return fail("an output is a view of an input");
    for (size_t k = 0; k < i; ++k)
      if (t.outputs[i].storage() == t.outputs[k].storage()) return fail("two outputs share memory");
  }

  // Saved: the forward's values (leaves included) that the backward reads or returns.
  std::vector<bool> in_forward(j.values.size(), false), saved_already(j.values.size(), false);
  for (size_t i = 0; i < leaves; ++i) in_forward[j.inputs[i]] = true;
  for (size_t n = 0; n < backward_at; ++n)
    for (int v : j.nodes[n].outputs) in_forward[v] = true;
  std::vector<int> saved;
  auto save = [&](int v) {
    if (in_forward[v] && !saved_already[v]) saved_already[v] = true, saved.push_back(v);
  };
  for (size_t n = backward_at; n < j.nodes.size(); ++n)
    for (int v : values_read(j.nodes[n])) save(v);
  for (size_t i = n_out; i < j.outputs.size(); ++i) save(j.outputs[i]);

  std::vector<int> forward_outputs(j.outputs.begin(), j.outputs.begin() + n_out);
  forward_outputs.insert(forward_outputs.end(), saved.begin(), saved.end());
  std::vector<int> backward_inputs = saved;
  for (size_t i = 0; i < n_out; ++i)
    if (r.grad_input[i]) backward_inputs.push_back(j.inputs[grad_slot[i]]);
  r.forward = subgraph(j, 0, backward_at, std::vector<int>(j.inputs.begin(), j.inputs.begin() + leaves),
                       forward_outputs);
  r.backward = subgraph(j, backward_at, j.nodes.size(), backward_inputs,
                        std::vector<int>(j.outputs.begin() + n_out, j.outputs.end()));
  optimize(r.forward);
  optimize(r.backward);
  *out = std::move(r);
  return true;
}

namespace {

// The autograd node of a compiled forward's outputs: runs the compiled backward on the saved
// values and the outputs' gradients (zeros where none flowed).
class CompiledBackward : public autograd::Node {
 public:
  CompiledFn run;
  std::vector<autograd::SavedTensor> saved;
  std::vector<TensorMeta> grad_metas;  // of the differentiable outputs
  std::vector<bool> has_grad;          // per edge

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> in;
    for (const autograd::SavedTensor& s : saved) in.push_back(s.unpack(*this));
    for (size_t i = 0; i < grad_metas.size(); ++i) {
      const TensorMeta& m = grad_metas[i];
      const Tensor g = i < grads.size() ? grads[i] : Tensor();
      in.push_back(!g.defined() ? zeros(m.sizes, m.dtype) : g.dtype() == m.dtype ? g : g.to(m.dtype));
    }
    const std::vector<Tensor> computed = run(in);
    std::vector<Tensor> result(next.size());
    size_t k = 0;
    for (size_t e = 0; e < next.size(); ++e)
      if (has_grad[e]) result[e] = computed[k++];
    return result;
  }
  std::string name() const override { return "CompiledFunctionBackward"; }
  void release_saved() override { saved.clear(); }
};

}  // namespace

CompiledFn compile_for_training(const Graph& g, const std::vector<Tensor>& example_inputs, const Backend& inner,
                                std::string* why) {
  auto graphs = std::make_shared<TrainingGraphs>();
  std::string reason;
  if (!split_for_training(g, example_inputs, graphs.get(), &reason)) {
    warn("the backward is not compiled (" + reason + "): the graph runs with eager autograd");
    if (why) *why = reason;
    return run_eagerly(g);
  }
  std::vector<Tensor> parameters;
  for (int c : graphs->parameters) parameters.push_back(g.constants[c]);
  std::vector<TensorMeta> grad_metas;
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (graphs->grad_input[i]) grad_metas.push_back(g.values[g.outputs[i]].meta);
  const size_t n_out = g.outputs.size();

  CompiledFn forward, backward;
  {
    autograd::NoGradGuard no_grad;
    std::vector<Tensor> forward_example;
    for (const Tensor& x : example_inputs) forward_example.push_back(x.detach());
    for (const Tensor& p : parameters) forward_example.push_back(p.detach());
    const std::vector<Tensor> r = interpret(graphs->forward, forward_example);
    std::vector<Tensor> backward_example(r.begin() + long(n_out), r.end());
    for (const TensorMeta& m : grad_metas) backward_example.push_back(ones(m.sizes, m.dtype));
    forward = inner(graphs->forward, forward_example);
    backward = inner(graphs->backward, backward_example);
  }
  FLB_CHECK(forward && backward, Error, "[compile] the backend returned no function for the forward or backward");

  return [graphs, parameters, grad_metas, n_out, forward, backward](const std::vector<Tensor>& inputs) {
    std::vector<Tensor> leaves = inputs;
    leaves.insert(leaves.end(), parameters.begin(), parameters.end());
    std::vector<Tensor> r;
    {
      autograd::NoGradGuard no_grad;
      r = forward(leaves);
    }
    std::vector<Tensor> outs(r.begin(), r.begin() + long(n_out));
    auto node = std::make_shared<CompiledBackward>();
    node->run = backward;
    for (size_t i = n_out; i < r.size(); ++i) node->saved.emplace_back(r[i]);
    node->grad_metas = grad_metas;
    node->has_grad = graphs->has_grad;
    std::vector<Tensor*> differentiable;
    for (size_t i = 0; i < n_out; ++i)
      if (graphs->grad_input[i]) differentiable.push_back(&outs[i]);
    std::vector<const Tensor*> edges;
    for (const Tensor& x : leaves) edges.push_back(&x);
    autograd::set_history(differentiable, node, edges);
    return outs;
  };
}

}  // namespace flambeau::compiler
