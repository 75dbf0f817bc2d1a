// Compiled score_mods: a score_mod written as a function of tensors (score float32 [n, k]; b
// and h 0-dim int64; q_idx [n, 1], kv_idx [1, k] int64, as compiled mask_mods) traced once
// (trace.h) and generated as C++ whose tile loop evaluates it per element, with its
// derivative, built by build.h: a native ScoreMod, as fast as the built-in ones.
//
// Supported: + - * / (tensors and numbers), neg, abs, exp, log, tanh, sigmoid, sqrt, rsqrt,
// reciprocal, relu, maximum, minimum, where, comparisons, casts between bool, int64, float32
// and float64 (to, or promotion as eager promotes), the integer and bool ops of mask_mods, and
// captured tensors read by index (bias[h], table[q_idx - kv_idx + off]) or holding one value;
// captured float tensors that require grad get their gradients. Float results are eager's
// bits: the same float32 operations in the same order, the transcendental ones through
// eager's kernels. See Note [Compiled score_mods] in score_mod.cpp.
#pragma once
#include <string>

#include "flambeau/compile/trace.h"
#include "flambeau/nn/flex_attention.h"

namespace flambeau::compiler {

// The compiled score_mod, or null (with the reason in *why) when the function does something
// the generator does not know (an op outside the list, a reduction, a break in the trace).
nn::attention::ScoreModPtr compile_score_mod(const TensorFn& fn, std::string* why = nullptr);

}  // namespace flambeau::compiler
