// The "cpp" backend (Inductor's role; the default): the graph's float32 pointwise chains
// become generated C++ kernels, everything else runs through the op registry.
//
// Fusion: consecutive pointwise nodes (the unary table, gelu, add/sub with alpha 1, mul, div,
// maximum, minimum) on contiguous float32 tensors of one output shape form one kernel; their
// operands are tensors of that shape, tensors broadcast over the leading dimensions (a bias)
// or numbers. A kernel walks its elements in tiles of 1024 (parallel over tiles, serial
// below 32 tiles); each op of the chain runs on the tile, held in L1 buffers reused as values
// die (buffer reuse), through flambeau's SIMD kernels (passed in a table of function
// pointers), so its results are bitwise equal to eager's and do not depend on the thread
// count. Only values used after the chain are written to memory.
//
// Templates (templates.h): a GEMM followed by pointwise ops on its output, and a residual add
// read by rms_norm, may run as one template step instead (options gemm_backends,
// max_autotune / mode).
//
// Each kernel of a graph is a source of its own, built and cached by build.h; the kernels of
// a graph build in parallel in the compile workers (workers.h). A graph that needs gradients
// (grad mode on and an input or constant requiring grad) is compiled for training (aot.h):
// its forward and its backward graphs are each built this way.
#pragma once
#include <string>

#include "flambeau/compile/compile.h"

namespace flambeau::compiler {

CompiledFn cpp_backend(const Graph& g, const std::vector<Tensor>& example_inputs);
// The C++ sources the backend generates for g, one after the other (empty when nothing
// fuses), for inspection.
std::string generated_source(const Graph& g);

}  // namespace flambeau::compiler
