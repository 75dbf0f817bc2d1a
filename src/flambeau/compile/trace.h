// Tracing: runs a function once on real inputs and records, through the op hook, the
// user-level ops it calls on this thread as a Graph (control flow is specialised to this
// run, as in MLX's compile and jax.jit). The run itself is the eager one: its results are
// returned too.
//
// A tensor made by a factory (empty, zeros, full, arange, tensor, ...) is a constant of
// the graph: its arguments are specialised like any Python value.
//
// The trace ends (broken, with the op named) at a call whose result the graph cannot know
// in advance or cannot replay: a read of a value (item(), ops returning a bool or a number),
// an op whose output shape depends on values (nonzero, unique, masked_select, ...), an op
// outside the op registry (no boxed kernel) or one with an argument that is not a value
// (a callable, a generator), and backward (compiled training is the AOT pass's job).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "flambeau/compile/graph.h"

namespace flambeau::compiler {

using TensorFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct Trace {
  Graph graph;
  std::vector<Tensor> outputs;  // what the function returned (the eager run)
  std::optional<size_t> backward_at;  // the first node of the backward (begin_backward())
  std::string break_op;         // the op that ended the trace; empty when it is whole
  std::string break_reason;
  bool whole() const { return break_op.empty(); }
  // Ends the trace at `op` (the first reason given stays).
  void end(std::string op, std::string why) {
    if (whole()) break_op = std::move(op), break_reason = std::move(why);
  }
};

// replayable = false: for generators that read the graph's ops by name and never run them
// (compiled mask_mods and score_mods): `to` and `index` are recorded too, though outside the
// op registry (index's list of optional tensors as a ValueList, -1 for None).
Trace trace(const TensorFn& fn, const std::vector<Tensor>& inputs, bool replayable = true);

// Whether a trace is recording on this thread (torch.compiler.is_compiling).
bool is_tracing();
// Ends the trace recording on this thread, if any, as broken at `what` (code that must not
// be captured: torch.compiler.disable).
void break_trace(const std::string& what, const std::string& why);
// Marks the rest of the trace recording on this thread as a backward pass (the AOT pass,
// aot.h): a tensor at exactly a traced value's memory and geometry is that value (saved
// tensors and gradients are detached aliases); Trace::backward_at marks where.
void begin_backward();

}  // namespace flambeau::compiler
