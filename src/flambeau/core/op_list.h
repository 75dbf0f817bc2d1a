// The op tables: one line per elementwise op. The public functions, the Tensor
// methods, the in-place variants and the kernel dispatch are generated from these lists.
#pragma once

// Unary ops. X(name, kind): kind says what integer and bool inputs do:
//   ToFloat:   computed in float32 (torch.exp on int64 gives float32)
//   KeepInt:   computed in the input's integer type
//   FloatOnly: integer inputs are a TypeError
#define FLB_UNARY_OPS(X)                                                                   \
  X(neg, KeepInt) X(abs, KeepInt) X(sign, KeepInt) X(exp, ToFloat) X(exp2, ToFloat)        \
  X(expm1, ToFloat) X(log, ToFloat) X(log2, ToFloat) X(log10, ToFloat) X(log1p, ToFloat)   \
  X(sqrt, ToFloat) X(rsqrt, ToFloat) X(reciprocal, ToFloat) X(sin, ToFloat)                \
  X(cos, ToFloat) X(tan, ToFloat) X(tanh, ToFloat) X(sigmoid, ToFloat) X(relu, KeepInt)    \
  X(silu, FloatOnly) X(erf, ToFloat) X(floor, KeepInt) X(ceil, KeepInt) X(round, KeepInt)  \
  X(trunc, KeepInt)

// Binary arithmetic ops with a tensor or a Scalar on either side.
#define FLB_BINARY_OPS(X)                                                             \
  X(mul) X(maximum) X(minimum) X(remainder) X(pow) X(atan2) X(floor_divide)

// The binary ops that also have an in-place form (name_) in PyTorch.
#define FLB_BINARY_INPLACE_OPS(X) X(remainder) X(pow) X(atan2) X(floor_divide)

// Comparisons: bool results.
#define FLB_COMPARE_OPS(X) X(eq) X(ne) X(lt) X(le) X(gt) X(ge)

// Logical ops on truth values: bool results.
#define FLB_LOGICAL_OPS(X) X(logical_and) X(logical_or) X(logical_xor)
