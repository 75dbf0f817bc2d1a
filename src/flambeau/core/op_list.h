// The op tables: one line per elementwise op. The public functions, the Tensor
// methods, the in-place variants and the kernel dispatch are generated from these lists.
#pragma once

// Unary ops: the schema from which the public function, the in-place form, the Tensor
// methods, the Python bindings, the kernel dispatch enum, the gradcheck case and the OpInfo
// comparison with PyTorch all come. Adding one takes this line, its kernel (a case in
// kernels/cpu/simd_unary.cpp) and its derivative (autograd/derivatives_elementwise.cpp);
// switches over the ops have no default, so a missing case fails to build.
// X(name, kind, lo, hi):
//   kind: what integer and bool inputs do:
//     ToFloat:   computed in float32 (torch.exp on int64 gives float32)
//     KeepInt:   computed in the input's integer type (its formula: int_unary in ops/unary.cpp)
//     FloatOnly: integer inputs are a TypeError
//   [lo, hi]: where tests sample the op: inside its domain, away from poles.
#define FLB_UNARY_OPS(X)         \
  X(neg, KeepInt, -3, 3)         \
  X(abs, KeepInt, -3, 3)         \
  X(sign, KeepInt, -3, 3)        \
  X(exp, ToFloat, -3, 3)         \
  X(exp2, ToFloat, -3, 3)        \
  X(expm1, ToFloat, -3, 3)       \
  X(log, ToFloat, 0.1, 5)        \
  X(log2, ToFloat, 0.1, 5)       \
  X(log10, ToFloat, 0.1, 5)      \
  X(log1p, ToFloat, 0.1, 5)      \
  X(sqrt, ToFloat, 0, 5)         \
  X(rsqrt, ToFloat, 0.1, 5)      \
  X(reciprocal, ToFloat, -3, 3)  \
  X(sin, ToFloat, -3, 3)         \
  X(cos, ToFloat, -3, 3)         \
  X(tan, ToFloat, -1.4, 1.4)     \
  X(asin, ToFloat, -0.95, 0.95)  \
  X(acos, ToFloat, -0.95, 0.95)  \
  X(atan, ToFloat, -3, 3)        \
  X(sinh, ToFloat, -3, 3)        \
  X(cosh, ToFloat, -3, 3)        \
  X(asinh, ToFloat, -3, 3)       \
  X(acosh, ToFloat, 1.1, 5)      \
  X(atanh, ToFloat, -0.95, 0.95) \
  X(tanh, ToFloat, -3, 3)        \
  X(sigmoid, ToFloat, -3, 3)     \
  X(relu, KeepInt, -3, 3)        \
  X(silu, FloatOnly, -3, 3)      \
  X(erf, ToFloat, -3, 3)         \
  X(erfinv, ToFloat, -0.95, 0.95) \
  X(lgamma, ToFloat, 0.1, 5)     \
  X(digamma, ToFloat, 0.5, 5)    \
  X(i0, ToFloat, -3, 3)          \
  X(floor, KeepInt, -3, 3)       \
  X(ceil, KeepInt, -3, 3)        \
  X(round, KeepInt, -5, 5)       \
  X(trunc, KeepInt, -3, 3)

// Binary arithmetic ops with a tensor or a Scalar on either side.
#define FLB_BINARY_OPS(X)                                                             \
  X(mul) X(maximum) X(minimum) X(remainder) X(pow) X(atan2) X(floor_divide) \
  X(fmod) X(hypot) X(copysign)

// The binary ops that also have an in-place form (name_) in PyTorch.
#define FLB_BINARY_INPLACE_OPS(X) X(remainder) X(pow) X(atan2) X(floor_divide) X(fmod) X(hypot) X(copysign)

// Comparisons: bool results.
#define FLB_COMPARE_OPS(X) X(eq) X(ne) X(lt) X(le) X(gt) X(ge)

// Logical ops on truth values: bool results.
#define FLB_LOGICAL_OPS(X) X(logical_and) X(logical_or) X(logical_xor)

#include <cstdint>

namespace flambeau {
// Every binary arithmetic op of the elementwise engine (ops/binary.cpp), which its derivative
// (autograd/derivatives_elementwise.cpp) is keyed by: the ops of FLB_BINARY_OPS, add and sub
// (with alpha), and div with its rounding modes. Switches over it have no default. The SIMD
// kernels take their own enum (kernels::SimdBinaryOp).
enum class BinaryOp : uint8_t { add, sub, mul, div, floor_divide, trunc_divide, remainder, pow, maximum, minimum, atan2, fmod,
                              hypot, copysign };
}  // namespace flambeau
