// Compiled training (AOTAutograd's role). A graph whose inputs or captured tensors require
// grad is replayed on detached leaves and the backward autograd runs for it is traced in the
// same trace (autograd::grad_as_ops reports the backward's ops one by one): a joint graph. It
// is split where the backward begins into
//   forward:  the inputs and the captured tensors that require grad (parameters) ->
//             the outputs, then the saved values (what the backward reads of the forward);
//   backward: the saved values, then one gradient per floating output ->
//             the gradients of the inputs and parameters that get one.
// Ops whose backward runs kernels the op hook does not see run in the joint trace as the ops
// they are made of (decompositions): rms_norm, layer_norm and scaled_dot_product_attention as
// their fused kernels' two halves (a forward op returning what its backward op reads): the
// same bits. Both graphs are compiled by a backend (under no_grad), and
// the compiled forward's outputs get one autograd node that runs the compiled backward.
// Saving policy: the forward saves exactly the
// values the backward's ops read (inputs and parameters included, which cost nothing); what
// a derivative formula computes from them (sigmoid(x) for silu) is recomputed in the
// backward, where it fuses with the rest. Saved values are version-checked as eager's are.
//
// The backward is not differentiable again (no double backward through a compiled function).
#pragma once
#include <string>
#include <vector>

#include "flambeau/compile/compile.h"

namespace flambeau::compiler {

// Whether calling g now builds an autograd graph: grad mode is on and an input or a captured
// tensor requires grad.
bool needs_grad(const Graph& g, const std::vector<Tensor>& inputs);

// The forward and backward graphs of g (above), or false with the reason in *why: the
// backward breaks (trace.h), the forward writes in place, an output is an input, a view of
// one or returned twice, or no output requires grad.
struct TrainingGraphs {
  Graph forward, backward;
  std::vector<int> parameters;   // g's constant slots that are forward inputs after g's inputs
  std::vector<bool> has_grad;    // per forward input: whether the backward returns its gradient
  std::vector<bool> grad_input;  // per output of g: whether it is differentiable (the backward
                                 // takes a gradient for each such output, in order)
};
bool split_for_training(const Graph& g, const std::vector<Tensor>& example_inputs, TrainingGraphs* out,
                        std::string* why);

// g compiled by `inner` for training (split_for_training), or, when it cannot be split, g run
// op by op with eager autograd (run_eagerly; the reason in *why).
CompiledFn compile_for_training(const Graph& g, const std::vector<Tensor>& example_inputs, const Backend& inner,
                                std::string* why = nullptr);

}  // namespace flambeau::compiler
