// How the cpp backend (cpp_backend.h) reads a graph node as an op of a fused float32 kernel:
// shared with the templates (templates.h), whose GEMM epilogues are such ops.
#pragma once
#include <optional>
#include <vector>

#include "flambeau/compile/graph.h"

namespace flambeau::compiler {

// Whether a tensor of meta m is laid out row-major without gaps.
bool contiguous(const TensorMeta& m);

// How a tensor operand lines up with the kernel's shape [..., C]: the same shape (Full),
// one value per row ([..., 1]: Row), or the trailing dimensions of it, broadcast over the
// leading ones (Trailing, a bias; a one-element tensor is one too).
enum class Fit : uint8_t { Full, Row, Trailing };

// How m fits a kernel of `shape` (contiguous float32 only), or nothing.
std::optional<Fit> fit(const TensorMeta& m, const Dims& shape);

// An operand of a fused op: a tensor value (how it fits the kernel's shape) or a number.
struct Operand {
  int value = -1;  // -1: a number
  double number = 0;
  Fit fit = Fit::Full;
};

// A node the kernel holds: a unary (code: kernels::UnaryOp) or binary (kernels::SimdBinaryOp)
// SIMD op, or a sum / mean / amax / amin over the last dimension (keepdim); row: its result
// is one value per row.
struct KernelOp {
  enum Kind : uint8_t { Unary, Binary, Sum, Mean, Max, Min } kind;
  int node, code = 0;
  bool row = false;
  std::vector<Operand> operands;
};

// Node n of g as an op of a kernel over `shape`, or nothing.
std::optional<KernelOp> kernel_op(const Graph& g, int n, const Dims& shape);

}  // namespace flambeau::compiler
