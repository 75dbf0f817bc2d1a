// The compiler's graph IR: a traced program as the ops it called, in order. A value is a
// tensor: an input of the program, a constant (a tensor the program read that it did not
// make: a parameter, a buffer, a captured tensor; held by reference, so in-place updates
// such as an optimizer's are seen), or an output of a node. A node is one op call (an op of
// the registry, ops/registry.h) whose arguments are values, lists of values or constants
// (numbers, shapes, dtypes, strings). print: graph.str(); Graphviz: graph.to_dot().
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "flambeau/core/op_hook.h"
#include "flambeau/core/tensor.h"

namespace flambeau::compiler {

// What a trace knew of a tensor.
struct TensorMeta {
  DType dtype = kFloat32;
  Dims sizes, strides;
  bool requires_grad = false;
  static TensorMeta of(const Tensor& t);
  bool operator==(const TensorMeta&) const = default;
};

struct Graph {
  enum class Kind : uint8_t { Input, Constant, Node };
  struct Value {
    Kind kind;
    int node = -1;   // the producer (Kind::Node)
    int index = 0;   // the input's position, the constant's slot, or the node output's index
    TensorMeta meta;
  };
  // One argument of a node: a value, a list of values, or anything else as a constant.
  struct Arg {
    enum class Kind : uint8_t { Value, ValueList, Constant } kind = Kind::Constant;
    int value = -1;
    std::vector<int> values;
    op_hook::Value constant;
  };
  struct Node {
    std::string op;
    std::vector<Arg> args;
    std::vector<int> outputs;  // value ids
  };

  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<int> inputs, outputs;  // value ids
  std::vector<Tensor> constants;     // by Value::index of the Constant values

  int add_input(const Tensor& t);
  int add_constant(const Tensor& t);
  // Appends a node; returns its index (its outputs get values of the given metas).
  int add_node(std::string op, std::vector<Arg> args, const std::vector<TensorMeta>& outputs);

  // One line per input, constant and node ("%3 = add(%1, %2, alpha=1)"), then the outputs.
  std::string str() const;
  std::string to_dot() const;
};

// Node n's arguments with the values' tensors from env, as the op registry takes them.
std::vector<op_hook::Value> node_arguments(const Graph::Node& n, const std::vector<Tensor>& env);
// Runs node n through the op registry on env (each value's tensor), setting its outputs.
void run_node(const Graph::Node& n, std::vector<Tensor>& env);
// A constant argument as a number (a Scalar, float or int), or nothing.
std::optional<double> number_of(const op_hook::Value& v);
// Whether div node n divides plainly: no rounding mode (None; C++ reports it as "").
bool plain_division(const Graph::Node& n);

// The value ids node n reads, in argument order.
std::vector<int> values_read(const Graph::Node& n);

// Nodes [begin, end) of g as a graph of their own, values renumbered: its inputs are
// `inputs` (values of g), its outputs `outputs`; the constants the nodes read come along.
// Every value the nodes read must be one of the inputs, a constant or made by one of them.
Graph subgraph(const Graph& g, size_t begin, size_t end, const std::vector<int>& inputs,
               const std::vector<int>& outputs);

// Whether an op's result depends only on its arguments and it writes nothing (no trailing
// '_', no random numbers): what dead-code elimination may drop and CSE may merge.
bool is_pure(const std::string& op);

// Drops the nodes none of whose outputs reach the graph's outputs (pure ones only);
// renumbers nothing (values keep their ids). Returns how many were dropped.
int eliminate_dead_code(Graph& g);
// Merges a pure node into an earlier one with the same op and arguments: uses of its
// outputs become uses of the earlier one's. Not across a node that writes (in-place ops).
// Returns how many were merged (then dropped by eliminate_dead_code).
int eliminate_common_subexpressions(Graph& g);
// Runs once the pure nodes computed from numbers and from captured tensors only the graph
// holds (made by the traced function itself, e.g. from a Python list; not parameters or
// buffers, which may change), their outputs becoming constants the graph owns. Not in a
// graph that writes (in-place ops), never for a graph output (each call returns fresh
// tensors). Returns how many nodes were folded.
int fold_constants(Graph& g);
// x * 1, x / 1, x - 0 and neg(neg(x)) read as x (not x + 0: -0.0 + 0 is +0.0) where the
// result has x's dtype and shape and is not a graph output, in a graph that does not
// write. Returns how many nodes were bypassed (eliminate_dead_code drops them).
int simplify_algebra(Graph& g);

// The passes compile runs, in order: fold_constants, simplify_algebra,
// eliminate_common_subexpressions, eliminate_dead_code.
void optimize(Graph& g);

}  // namespace flambeau::compiler
