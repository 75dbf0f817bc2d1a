// The cpp backend's templates (see templates.h): matching GEMM + epilogue and RMSNorm +
// residual patterns in a graph, the GEMM driver over blocks of C with the epilogue applied
// per block, the RMSNorm row pass, and the choice between template and BLAS (max-autotune
// timing with an on-disk cache of the winners).
#include "flambeau/compile/templates.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

#include "flambeau/compile/build.h"
#include "flambeau/compile/codegen.h"
#include "flambeau/compile/compile.h"
#include "flambeau/core/cpu_info.h"
#include "flambeau/core/error.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/kernels/cpu/simd_norm.h"
#include "flambeau/ops/ops.h"

namespace flambeau::compiler::templates {

namespace {

std::atomic<int> timings{0};
std::atomic<int64_t> runs{0};

bool is_value(const Graph::Arg& a) { return a.kind == Graph::Arg::Kind::Value; }
bool is_none(const Graph::Arg& a) {
  return a.kind == Graph::Arg::Kind::Constant && std::holds_alternative<std::monostate>(a.constant);
}

// How BLAS reads a rows x cols matrix of strides (s0, s1) in place: row-major with leading
// dimension ld, or transposed (a column-major one), or not at all.
struct Layout {
  bool trans = false;
  int64_t ld = 1;
};
std::optional<Layout> layout_of(int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  if (cols == 1 || s1 == 1) {
    const int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : s0;
    if (ld >= std::max<int64_t>(cols, 1)) return Layout{false, ld};
  }
  if (rows == 1 || s0 == 1) {
    const int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : s1;
    if (ld >= std::max<int64_t>(rows, 1)) return Layout{true, ld};
  }
  return std::nullopt;
}

// A (the input, folded to [M, K]) as BLAS reads it: 2-D in place, N-D when contiguous.
std::optional<Layout> a_layout(const Dims& sizes, const Dims& strides) {
  if (sizes.size() == 2) return layout_of(sizes[0], sizes[1], strides[0], strides[1]);
  if (sizes.empty()) return std::nullopt;
  int64_t expected = 1;
  for (int64_t d = int64_t(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != expected) return std::nullopt;
    expected *= sizes[d];
  }
  return Layout{false, std::max<int64_t>(sizes.back(), 1)};
}

// op(B) = [K, N] as BLAS reads it: b itself, or a linear's weight [N, K] read transposed.
std::optional<Layout> b_layout(const Dims& sizes, const Dims& strides, bool weight) {
  if (sizes.size() != 2) return std::nullopt;
  auto l = layout_of(sizes[0], sizes[1], strides[0], strides[1]);
  if (l && weight) l->trans = !l->trans;
  return l;
}

// Note [Template tiles]: a block of C is one BLAS call and then the epilogue while the block
// is in L2 (rows x cols floats: 512 KiB with AVX-512, whose cores here have 1-2 MiB of L2;
// 256 KiB with AVX2). Rows are a multiple of both OpenBLAS micro-tile heights (16 and 24 on
// AVX-512; 8 and 6 on AVX2), and a block of several hundred rows keeps B's repacking (once
// per block row) to a few per cent of the work.
struct Tiles {
  int64_t rows, cols;
};
Tiles tiles() {
  static const Tiles t = cpu_info().has_avx512_core() ? Tiles{192, 512} : Tiles{96, 512};
  return t;
}

// The epilogue: kernel ops applied in place to a run of the output (a block's row), each
// through eager's SIMD kernel. An operand is the running value, a number, or a tensor read
// at the same element (its period: its element count, a multiple of N).
struct OpList {
  struct Arg {
    enum Kind : uint8_t { Current, Number, Tensor } kind = Current;
    float number = 0;
    const float* data = nullptr;
    int64_t period = 0;
  };
  struct Op {
    bool unary = true;
    int code = 0;
    Arg args[2];
  };
  std::vector<Op> ops;
  int numbers = 0;

  // Row i, columns [j0, j0 + n) of c (row length ldc), in place; nums: numbers * n floats.
  void apply(float* c, int64_t ldc, int64_t i, int64_t j0, int64_t n, float* nums) const {
    const Runtime& rt = runtime();
    float* cur = c + i * ldc + j0;
    const int64_t e = i * ldc + j0;
    int num = 0;
    for (const Op& op : ops) {
      if (op.unary) {
        rt.unary_f32(op.code, cur, cur, n);
        continue;
      }
      const float* p[2];
      for (int k = 0; k < 2; ++k) {
        const Arg& a = op.args[k];
        if (a.kind == Arg::Current) p[k] = cur;
        else if (a.kind == Arg::Tensor) p[k] = a.data + e % a.period;
        else p[k] = nums + int64_t(num++) * n;
      }
      rt.binary_f32(op.code, p[0], p[1], cur, n);
    }
  }
  // Fills the number buffers for runs of n.
  void fill_numbers(float* nums, int64_t n) const {
    int num = 0;
    for (const Op& op : ops)
      for (int k = 0; !op.unary && k < 2; ++k)
        if (op.args[k].kind == Arg::Number) std::fill_n(nums + int64_t(num++) * n, n, op.args[k].number);
  }
};

OpList op_list(const Graph& g, const Match& m, const std::vector<Tensor>& env) {
  OpList l;
  int cur = g.nodes[m.nodes[0]].outputs[0];
  for (const KernelOp& k : m.epilogue) {
    OpList::Op op;
    op.unary = k.kind == KernelOp::Unary;
    op.code = k.code;
    for (size_t i = 0; !op.unary && i < 2; ++i) {
      const Operand& o = k.operands[i];
      OpList::Arg& a = op.args[i];
      if (o.value == cur) {
        a.kind = OpList::Arg::Current;
      } else if (o.value < 0) {
        a.kind = OpList::Arg::Number, a.number = float(o.number);  // a Scalar rounds to float, as eager
      } else if (env[o.value].numel() == 1) {
        a.kind = OpList::Arg::Number, a.number = env[o.value].data<float>()[0];
      } else {
        a.kind = OpList::Arg::Tensor, a.data = env[o.value].data<float>(), a.period = env[o.value].numel();
      }
      l.numbers += a.kind == OpList::Arg::Number;
    }
    l.ops.push_back(op);
    cur = g.nodes[k.node].outputs[0];
  }
  return l;
}

// One GEMM + epilogue: C[M, N] = init + op(A) op(B), then the epilogue, block by block.
struct GemmArgs {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  const float *a = nullptr, *b = nullptr;
  int64_t lda = 1, ldb = 1;
  const float* init = nullptr;  // the bias (addmm's self), or null
  int64_t init_period = 0;      // its element count: 1, N or M * N
  float* c = nullptr;
};

// The template: C in blocks of Tiles (in parallel; each block's bits do not depend on the
// thread count), each one BLAS call then epilogue(c, ldc, row, j0, cols, scratch) per row.
template <class Epilogue>
void gemm_blocks(const GemmArgs& p, const Epilogue& epilogue, int numbers) {
  if (p.m == 0 || p.n == 0) return;
  const Tiles t = tiles();
  const int64_t brows = (p.m + t.rows - 1) / t.rows, bcols = (p.n + t.cols - 1) / t.cols;
  const bool big = p.m * p.n * std::max<int64_t>(p.k, 1) >= (int64_t(1) << 21);
  parallel_for(0, brows * bcols, big ? 1 : brows * bcols, [&](int64_t b0, int64_t b1) {
    std::vector<float> nums(size_t(numbers) * size_t(std::min(t.cols, p.n)));
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t i0 = blk / bcols * t.rows, j0 = blk % bcols * t.cols;
      const int64_t rows = std::min(t.rows, p.m - i0), cols = std::min(t.cols, p.n - j0);
      float* c = p.c + i0 * p.n + j0;
      for (int64_t i = 0; p.init && i < rows; ++i) {
        if (p.init_period == 1) std::fill_n(c + i * p.n, cols, p.init[0]);
        else std::copy_n(p.init + ((i0 + i) * p.n + j0) % p.init_period, cols, c + i * p.n);
      }
      if (p.k > 0)
        kernels::gemm_1t(p.ta, p.tb, rows, cols, p.k, 1.0f, p.a + (p.ta ? i0 : i0 * p.lda), p.lda,
                         p.b + (p.tb ? j0 * p.ldb : j0), p.ldb, p.init ? 1.0f : 0.0f, c, p.n);
      else if (!p.init)
        for (int64_t i = 0; i < rows; ++i) std::fill_n(c + i * p.n, cols, 0.0f);
      if (numbers > 0) epilogue.fill_numbers(nums.data(), cols);
      for (int64_t i = i0; i < i0 + rows; ++i) epilogue.apply(p.c, p.n, i, j0, cols, nums.data());
    }
  });
}

struct NoEpilogue {
  void fill_numbers(float*, int64_t) const {}
  void apply(float*, int64_t, int64_t, int64_t, int64_t, float*) const {}
};

// The match's nodes run one by one through the op registry (what BLAS does for it).
void run_nodes(const Graph& g, const Match& m, std::vector<Tensor>& env) {
  for (int n : m.nodes) run_node(g.nodes[n], env);
}

void run_gemm(const Graph& g, const Match& m, std::vector<Tensor>& env) {
  const Tensor& a = env[m.a];
  const Tensor& b = env[m.b];
  const auto la = a_layout(a.sizes(), a.strides());
  const auto lb = b_layout(b.sizes(), b.strides(), m.b_is_weight);
  const Tensor* init = m.bias >= 0 ? &env[m.bias] : nullptr;
  if (!la || !lb || (init && !init->is_contiguous())) return run_nodes(g, m, env);  // the guards make this rare
  GemmArgs p;
  p.ta = la->trans, p.tb = lb->trans, p.lda = la->ld, p.ldb = lb->ld;
  p.k = m.b_is_weight ? b.size(1) : b.size(0);
  p.n = m.b_is_weight ? b.size(0) : b.size(1);
  p.m = a.numel() / std::max<int64_t>(p.k, 1);
  if (p.k == 0) p.m = numel_of(g.values[m.out].meta.sizes) / std::max<int64_t>(p.n, 1);
  p.a = a.data<float>(), p.b = b.data<float>();
  if (init) p.init = init->data<float>(), p.init_period = init->numel();
  Tensor out = empty(g.values[m.out].meta.sizes, kFloat32);
  p.c = out.data<float>();
  const OpList epilogue = op_list(g, m, env);
  if (epilogue.ops.empty()) gemm_blocks(p, NoEpilogue{}, 0);
  else gemm_blocks(p, epilogue, epilogue.numbers);
  env[m.out] = out;
}

void run_rms_norm(const Graph& g, const Match& m, std::vector<Tensor>& env) {
  const Tensor &x = env[m.x], &r = env[m.r];
  const Tensor* w = m.weight >= 0 ? &env[m.weight] : nullptr;
  if (!x.is_contiguous() || !r.is_contiguous() || (w && !w->is_contiguous())) return run_nodes(g, m, env);
  const Dims& shape = g.values[m.sum].meta.sizes;
  Tensor sum = empty(shape, kFloat32), out = empty(shape, kFloat32);
  const int64_t cols = shape.back(), rows = numel_of(shape) / std::max<int64_t>(cols, 1);
  const float *px = x.data<float>(), *pr = r.data<float>(), *pw = w ? w->data<float>() : nullptr;
  float *ps = sum.data<float>(), *py = out.data<float>();
  const Runtime& rt = runtime();
  parallel_for(0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const int64_t o = i * cols;
      rt.binary_f32(int(kernels::SimdBinaryOp::add), px + o, pr + o, ps + o, cols);
      float mean, rstd;
      kernels::norm_row_forward(ps + o, pw, nullptr, py + o, cols, true, m.eps, &mean, &rstd);
    }
  });
  env[m.sum] = sum;
  env[m.out] = out;
}

// ---- matching ---------------------------------------------------------------------------

struct GemmNode {
  int a = -1, b = -1, bias = -1;
  bool weight = false;
};

std::optional<GemmNode> gemm_node(const Graph& g, const Graph::Node& node) {
  const auto& args = node.args;
  auto val = [&](size_t i) { return i < args.size() && is_value(args[i]) ? args[i].value : -1; };
  GemmNode r;
  if (node.op == "linear" && (args.size() == 2 || args.size() == 3)) {
    if (args.size() == 3 && !is_value(args[2]) && !is_none(args[2])) return std::nullopt;
    r = {val(0), val(1), val(2), true};
  } else if ((node.op == "mm" || node.op == "matmul") && args.size() == 2) {
    r = {val(0), val(1), -1, false};
  } else if (node.op == "addmm" && args.size() == 5 && number_of(args[3].constant) == 1.0 &&
             number_of(args[4].constant) == 1.0) {
    r = {val(1), val(2), val(0), false};
  } else {
    return std::nullopt;
  }
  if (r.a < 0 || r.b < 0 || node.outputs.size() != 1) return std::nullopt;
  const TensorMeta &a = g.values[r.a].meta, &b = g.values[r.b].meta, &out = g.values[node.outputs[0]].meta;
  if (a.dtype != kFloat32 || b.dtype != kFloat32 || out.dtype != kFloat32 || numel_of(out.sizes) == 0) return std::nullopt;
  if (a.sizes.size() < (node.op == "linear" ? 1u : 2u) || (node.op == "mm" && a.sizes.size() != 2)) return std::nullopt;
  if (!a_layout(a.sizes, a.strides) || !b_layout(b.sizes, b.strides, r.weight)) return std::nullopt;
  if (r.bias >= 0) {  // the bias: [N] (or one number), or C's shape, contiguous
    const TensorMeta& bias = g.values[r.bias].meta;
    const int64_t n = numel_of(bias.sizes);
    const auto f = fit(bias, out.sizes);
    if (!f || *f == Fit::Row || (*f == Fit::Trailing && n != 1 && n != out.sizes.back())) return std::nullopt;
  }
  return r;
}

// Where each value is read, by node index (graph outputs: nodes.size()).
std::vector<std::vector<int>> readers_of(const Graph& g) {
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (int v : values_read(g.nodes[n])) readers[v].push_back(int(n));
  for (int v : g.outputs) readers[v].push_back(int(g.nodes.size()));
  return readers;
}

// Whether the nodes strictly between first and last, other than those of `taken`, only
// compute (so the match may run at last's place).
bool pure_between(const Graph& g, int first, int last, const std::vector<int>& taken) {
  for (int j = first + 1; j < last; ++j)
    if (std::find(taken.begin(), taken.end(), j) == taken.end() && !is_pure(g.nodes[j].op)) return false;
  return true;
}

// The pointwise ops after a GEMM on its output only (fusion.h's unary and binary ops over its
// shape; tensor operands of its shape or broadcast rows of N, or one number).
void extend_chain(const Graph& g, const std::vector<std::vector<int>>& readers, const std::vector<bool>& taken,
                  Match& m) {
  const Dims& shape = g.values[m.out].meta.sizes;
  const int64_t n = shape.back();
  for (;;) {
    const auto& rs = readers[m.out];
    if (rs.empty() || std::any_of(rs.begin(), rs.end(), [&](int r) { return r != rs[0]; })) return;
    const int r = rs[0];
    if (r >= int(g.nodes.size()) || taken[r]) return;
    auto op = kernel_op(g, r, shape);
    if (!op || op->row || (op->kind != KernelOp::Unary && op->kind != KernelOp::Binary)) return;
    for (const Operand& o : op->operands) {
      if (o.value < 0 || o.value == m.out) continue;
      const int64_t len = numel_of(g.values[o.value].meta.sizes);
      if (o.fit == Fit::Row || (o.fit == Fit::Trailing && len != 1 && len % n != 0)) return;
    }
    std::vector<int> nodes = m.nodes;
    nodes.push_back(r);
    if (!pure_between(g, m.nodes[0], r, nodes)) return;
    m.nodes = std::move(nodes);
    m.epilogue.push_back(std::move(*op));
    m.out = g.nodes[r].outputs[0];
  }
}

std::optional<Match> rms_norm_match(const Graph& g, const std::vector<std::vector<int>>& readers,
                                    const std::vector<bool>& taken, int n) {
  const Graph::Node& add = g.nodes[n];
  if (add.op != "add" || add.outputs.size() != 1) return std::nullopt;
  const int s = add.outputs[0];
  const Dims& shape = g.values[s].meta.sizes;
  if (shape.empty()) return std::nullopt;
  const auto op = kernel_op(g, n, shape);
  if (!op || op->kind != KernelOp::Binary || op->row || op->code != int(kernels::SimdBinaryOp::add)) return std::nullopt;
  for (const Operand& o : op->operands)
    if (o.value < 0 || o.fit != Fit::Full) return std::nullopt;
  int norm = -1;
  for (int r : readers[s])
    if (r < int(g.nodes.size()) && !taken[r] && g.nodes[r].op == "rms_norm" && (norm < 0 || r < norm)) norm = r;
  if (norm < 0) return std::nullopt;
  const Graph::Node& rn = g.nodes[norm];
  if (rn.args.size() != 4 || !is_value(rn.args[0]) || rn.args[0].value != s || rn.outputs.size() != 1) return std::nullopt;
  const auto* dims = std::get_if<Dims>(&rn.args[1].constant);
  if (!dims || *dims != Dims{shape.back()}) return std::nullopt;
  Match m;
  m.kind = Match::RmsNormResidual;
  m.nodes = {n, norm};
  m.x = op->operands[0].value, m.r = op->operands[1].value, m.sum = s, m.out = rn.outputs[0];
  if (is_value(rn.args[2])) {
    m.weight = rn.args[2].value;
    const TensorMeta& w = g.values[m.weight].meta;
    if (w.dtype != kFloat32 || !contiguous(w) || w.sizes != *dims) return std::nullopt;
  } else if (!is_none(rn.args[2])) {
    return std::nullopt;
  }
  if (is_none(rn.args[3])) m.eps = std::numeric_limits<float>::epsilon();  // eager's default for float32
  else if (auto e = number_of(rn.args[3].constant)) m.eps = *e;
  else return std::nullopt;
  const TensorMeta& y = g.values[m.out].meta;
  if (y.dtype != kFloat32 || y.sizes != shape || !contiguous(y)) return std::nullopt;
  for (int r : readers[s])
    if (r != norm && r < norm) return std::nullopt;  // the sum is read before the norm
  if (!pure_between(g, n, norm, m.nodes)) return std::nullopt;
  return m;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s + ",") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      w += char(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.push_back(w);
      w.clear();
    }
  }
  return out;
}

bool truthy(const std::string& v) { return v == "1" || v == "true" || v == "True" || v == "TRUE"; }

// Median seconds of f over 5 runs (after one untimed).
double median_time(const std::function<void()>& f) {
  f();
  std::vector<double> t;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[2];
}

// Times both candidates of GEMM match m on env (every value computed): true if the template wins.
bool time_template(const Graph& g, const Match& m, const std::vector<Tensor>& env) {
  ++timings;
  std::vector<Tensor> scratch = env;
  const double blas = median_time([&] {
    run_node(g.nodes[m.nodes[0]], scratch);  // BLAS, then the epilogue as one fused pass would run it
    const Tensor& c = scratch[g.nodes[m.nodes[0]].outputs[0]];
    const OpList l = op_list(g, m, scratch);
    const int64_t n = c.size(-1), rows = c.numel() / std::max<int64_t>(n, 1);
    parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
      std::vector<float> nums(size_t(l.numbers) * size_t(n));
      l.fill_numbers(nums.data(), n);
      for (int64_t i = r0; i < r1; ++i) l.apply(c.data<float>(), n, i, 0, n, nums.data());
    });
  });
  const double templ = median_time([&] { run_gemm(g, m, scratch); });
  return templ < blas;
}

}  // namespace

bool parse_option(const std::string& key, const std::string& value, Options& o) {
  if (key == "gemm_backends" || key == "max_autotune_gemm_backends") {
    o.blas = o.templ = false;
    for (const std::string& w : words(value)) {
      if (w == "blas" || w == "aten") o.blas = true;
      else if (w == "template" || w == "templates" || w == "cpp") o.templ = true;
      else throw ValueError("[compile] unknown GEMM backend '" + w + "' in " + key + " (blas, template)");
    }
    FLB_CHECK(o.blas || o.templ, ValueError, "[compile] ", key, " lists no GEMM backend (blas, template)");
    return true;
  }
  if (key == "max_autotune") return o.autotune = truthy(value), true;
  if (key == "mode") {
    FLB_CHECK(value == "default" || value == "reduce-overhead" || value == "max-autotune" ||
                  value == "max-autotune-no-cudagraphs",
              ValueError, "[compile] unknown mode '", value, "'");
    o.autotune = value.rfind("max-autotune", 0) == 0;
    return true;
  }
  return false;
}

std::vector<Match> match(const Graph& g) {
  const auto readers = readers_of(g);
  std::vector<bool> taken(g.nodes.size(), false);
  std::vector<Match> out;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (taken[n]) continue;
    const auto gn = gemm_node(g, g.nodes[n]);
    if (!gn) continue;
    Match m;
    m.nodes = {int(n)};
    m.a = gn->a, m.b = gn->b, m.bias = gn->bias, m.b_is_weight = gn->weight;
    m.out = g.nodes[n].outputs[0];
    extend_chain(g, readers, taken, m);
    for (int k : m.nodes) taken[k] = true;
    out.push_back(std::move(m));
  }
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!taken[n])
      if (auto m = rms_norm_match(g, readers, taken, int(n))) {
        for (int k : m->nodes) taken[k] = true;
        out.push_back(std::move(*m));
      }
  return out;
}

// Measured on AMD EPYC (Zen 4, AVX-512, 2 threads, a quiet machine; bench_compile.py): BLAS
// on the whole GEMM, then the fused epilogue pass, beat the blocked template on the MLP and
// Llama-block GEMMs (48 vs 56 ms, 20 vs 28 ms: each block's call repacks its operands), so
// BLAS is the default; max-autotune times both per shape.
bool template_by_default(int64_t m, int64_t n, int64_t k, size_t epilogue_ops) {
  (void)m, (void)n, (void)k, (void)epilogue_ops;
  return false;
}

std::string describe(const Graph& g, const Match& m) {
  std::ostringstream s;
  if (m.kind == Match::RmsNormResidual) {
    s << "rms_norm+residual " << shape_str(g.values[m.sum].meta.sizes);
    return s.str();
  }
  const TensorMeta &a = g.values[m.a].meta, &b = g.values[m.b].meta;
  s << "gemm " << g.nodes[m.nodes[0]].op << " a" << shape_str(a.sizes) << shape_str(a.strides) << " b"
    << shape_str(b.sizes) << shape_str(b.strides);
  if (m.bias >= 0) s << " bias" << shape_str(g.values[m.bias].meta.sizes);
  s << " epilogue[";
  int cur = g.nodes[m.nodes[0]].outputs[0];
  for (const KernelOp& op : m.epilogue) {
    s << " " << g.nodes[op.node].op << (op.kind == KernelOp::Unary ? "/u" : "/b") << op.code;
    for (const Operand& o : op.operands)
      s << (o.value == cur ? " c" : o.value < 0 ? " #" + std::to_string(o.number)
                                                : " t" + shape_str(g.values[o.value].meta.sizes));
    cur = g.nodes[op.node].outputs[0];
  }
  s << " ]";
  return s.str();
}

std::vector<Match> choose(const Graph& g, std::vector<Match> matches, const std::vector<Tensor>& example_inputs,
                          const Options& o) {
  if (!o.templ) return {};
  std::vector<Tensor> env;  // every value on the example inputs (computed when first timed)
  std::vector<Match> chosen;
  for (Match& m : matches) {
    bool take = true;
    if (m.kind == Match::Gemm && o.blas) {
      const Dims& shape = g.values[m.out].meta.sizes;
      const TensorMeta& b = g.values[m.b].meta;
      const int64_t n = shape.back(), rows = numel_of(shape) / std::max<int64_t>(n, 1);
      const int64_t k = m.b_is_weight ? b.sizes[1] : b.sizes[0];
      take = template_by_default(rows, n, k, m.epilogue.size());
      if (o.autotune) {
        const std::string key = describe(g, m) + " | " + cpu_isa_string(cpu_info()) +
                                " | threads " + std::to_string(get_num_threads());
        std::ostringstream name;
        name << std::hex << std::hash<std::string>{}(key);
        namespace fs = std::filesystem;
        const fs::path dir = fs::path(cache_dir()) / "autotune", file = dir / (name.str() + ".choice");
        std::string winner, stored;
        {
          std::ifstream f(file);
          if (std::getline(f, winner) && std::getline(f, stored) && stored != key) winner.clear();
        }
        if (winner != "template" && winner != "blas") {
          if (env.empty()) {
            env = bind(g, example_inputs);
            for (const Graph::Node& node : g.nodes) run_node(node, env);
          }
          winner = time_template(g, m, env) ? "template" : "blas";
          std::error_code ec;
          fs::create_directories(dir, ec);
          const fs::path tmp = dir / (name.str() + ".tmp" + std::to_string(std::hash<std::string>{}(std::to_string(
                                                            std::chrono::steady_clock::now().time_since_epoch().count()))));
          std::ofstream(tmp) << winner << "\n" << key << "\n";
          fs::rename(tmp, file, ec);
          if (ec) fs::remove(tmp, ec);
        }
        take = winner == "template";
      }
    }
    if (take) chosen.push_back(std::move(m));
  }
  return chosen;
}

void run(const Graph& g, const Match& m, std::vector<Tensor>& env) {
  runs.fetch_add(1, std::memory_order_relaxed);
  if (m.kind == Match::RmsNormResidual) run_rms_norm(g, m, env);
  else run_gemm(g, m, env);
}

int autotune_timings() { return timings.load(); }
int64_t template_runs() { return runs.load(); }

}  // namespace flambeau::compiler::templates
