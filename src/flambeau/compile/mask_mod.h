// Compiled mask_mods: a mask_mod written as a function of index tensors (b and h 0-dim,
// q_idx [n, 1], kv_idx [1, k], int64) traced once (trace.h) and generated as C++ whose tile
// loop evaluates it per element, built by build.h: a native MaskMod, as fast as the built-in
// ones. Integer and bool arithmetic only (add, sub, mul, comparisons, logical and bitwise
// ops, neg, abs, maximum, minimum, remainder, floor_divide, where): the same values as the
// tensor evaluation, with int64 wrapping as tensors wrap.
#pragma once
#include <string>

#include "flambeau/compile/trace.h"
#include "flambeau/nn/flex_attention.h"

namespace flambeau::compiler {

// The compiled mask, or null (with the reason in *why) when the function does something the
// generator does not know (a float, a captured tensor, an op outside the list, a break).
nn::attention::MaskModPtr compile_mask_mod(const TensorFn& fn, std::string* why = nullptr);

}  // namespace flambeau::compiler
