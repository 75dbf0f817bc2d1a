// The templates of the cpp backend (CuTeDSL's role in Inductor): hand-written, parameterised
// kernels for patterns the pointwise fuser cannot take, chosen per match in the backend's plan.
//
// - GEMM + epilogue: a linear / mm / addmm / matmul node on float32 operands that BLAS reads
//   as they are (row-major or transposed; an N-D input of linear / matmul contiguous),
//   followed by a chain of pointwise ops on its output only (fusion.h's unary and binary ops:
//   bias add, relu / gelu / silu / tanh / ..., a scalar mul, a residual add or a product with
//   a same-shape tensor, e.g. SwiGLU's silu(x @ Wg^T) * (x @ Wu^T)). C is cut into blocks of
//   rows x cols (per ISA: Note [Template tiles]); each block is one single-threaded BLAS call
//   (kernels::gemm_1t, the project's GEMM: OpenBLAS's packing and micro-kernels, beta = 1 over
//   the bias written into the block first, as eager's addmm) and then the epilogue runs on the
//   block while it is in cache, each op through the SIMD kernel eager uses, in eager's order.
//   So every element equals eager's when BLAS gives the same bits for a block as for eager's
//   larger call (the sum over k in the same order: true of OpenBLAS's kernels for k up to
//   its K block; otherwise within k * eps * sum|a||b|, as any regrouping of the GEMM).
// - RMSNorm + residual: s = x + r read by rms_norm(s, [C], w, eps): one pass per row writing
//   s and rms_norm(s) (eager's SIMD add and row kernel: bitwise equal to eager).
//
// Why compiled into libflambeau rather than generated: the epilogue runs the same SIMD
// kernels as eager on a cached block (so generating code would only unroll the op list), and
// a compiled template needs no compiler at run time, so it cannot fail to build. The GEMM
// driver is a C++ template over the epilogue functor (gemm_blocks<Epilogue>), instantiated
// for the op-list epilogue and for none.
//
// Choice (options of the cpp backend): "gemm_backends" (or torch's
// "max_autotune_gemm_backends"): the candidates, e.g. "blas,template" or "['blas',
// 'template']" (aten = blas; template, templates, cpp = template). With "max_autotune" true
// (Python: compile(mode="max-autotune")) each GEMM match is timed once on the example
// inputs, both ways (median of 5), and the winner is kept on disk next to the kernel cache
// (build.h's cache_dir()/autotune), keyed by shapes, layouts, epilogue, ISA and threads, so a
// new process reuses it. Otherwise a match takes the template when it is listed alone, or by
// default where it was measured to win (template_by_default: nowhere yet on the machines
// measured). RMSNorm + residual is taken whenever "template" is allowed.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flambeau/compile/fusion.h"

namespace flambeau::compiler::templates {

struct Options {
  bool blas = true, templ = true;  // the allowed candidates
  bool autotune = false;
};
// The options the templates read from the cpp backend's (gemm_backends,
// max_autotune_gemm_backends, max_autotune, mode); ValueError for an unknown candidate.
// Returns false for a key that is not theirs.
bool parse_option(const std::string& key, const std::string& value, Options& options);

// One matched pattern: the nodes it takes (run as one step at the last one's place).
struct Match {
  enum Kind : uint8_t { Gemm, RmsNormResidual } kind = Gemm;
  std::vector<int> nodes;  // the GEMM node (or the add) first, then the others, in order
  int a = -1, b = -1, bias = -1;  // Gemm: operand values (b: [K, N], or [N, K] for linear)
  bool b_is_weight = false;       // linear: b is [N, K]
  std::vector<KernelOp> epilogue;
  int out = -1;                   // the value the step writes (Gemm: the chain's last)
  // RmsNormResidual: x + r = sum (also written), rms_norm(sum, weight, eps) = out.
  int x = -1, r = -1, sum = -1, weight = -1;
  double eps = 0;
};

// The matches in g, in node order, no node in two (GEMM matches first).
std::vector<Match> match(const Graph& g);
// The matches that take the template under `options` (timing them on the example inputs
// when autotuning).
std::vector<Match> choose(const Graph& g, std::vector<Match> matches, const std::vector<Tensor>& example_inputs,
                          const Options& options);
// Runs the match on env (each value's tensor), setting the values it writes.
void run(const Graph& g, const Match& m, std::vector<Tensor>& env);

// Whether the template is taken without autotuning for this GEMM (M x N x K, the epilogue's
// length) when both candidates are allowed.
bool template_by_default(int64_t m, int64_t n, int64_t k, size_t epilogue_ops);

// How many GEMM matches this process has timed for max-autotune (tests check a cached
// choice times nothing).
int autotune_timings();
// How many template steps this process has run (tests check which candidate ran).
int64_t template_runs();
// A short description of the match (for messages and the autotune key).
std::string describe(const Graph& g, const Match& m);

}  // namespace flambeau::compiler::templates
