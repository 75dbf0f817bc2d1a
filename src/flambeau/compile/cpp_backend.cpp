// See cpp_backend.h.
#include "flambeau/compile/cpp_backend.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "flambeau/autograd/node.h"
#include "flambeau/compile/aot.h"
#include "flambeau/compile/build.h"
#include "flambeau/compile/workers.h"
#include "flambeau/compile/codegen.h"
#include "flambeau/compile/fusion.h"
#include "flambeau/compile/templates.h"
#include "flambeau/core/error.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/ops/ops.h"

namespace flambeau::compiler {

namespace {

constexpr int64_t kTile = 1024;       // elements per tile (4 KiB of float32)
constexpr int64_t kSerialTiles = 32;  // fewer tiles than this run on one thread

// The kernel's arguments: in: its tensor inputs; period: each input's element count (less
// than n: broadcast over leading dimensions); out: the values written to memory; n: elements;
// cols: the last dimension (a row).
#define FLB_ARGS_FIELDS(runtime) \
  const runtime* rt;             \
  const float* const* in;        \
  const int64_t* period;         \
  float* const* out;             \
  int64_t n, cols;

struct KernelArgs {
  FLB_ARGS_FIELDS(Runtime)
};

const std::string kKernelDecl =
    std::string(kRuntimeDecl) + "struct flb_args { " FLB_TEXT(FLB_ARGS_FIELDS(flb_runtime)) " };\n";

std::optional<kernels::SimdBinaryOp> binary_of(const std::string& op) {
  using B = kernels::SimdBinaryOp;
  static const std::map<std::string, B> ops{{"add", B::add}, {"sub", B::sub}, {"mul", B::mul},
                                            {"div", B::div}, {"maximum", B::maximum}, {"minimum", B::minimum}};
  auto it = ops.find(op);
  return it == ops.end() ? std::nullopt : std::optional(it->second);
}

bool is_reduction(const std::string& op) { return op == "sum" || op == "mean" || op == "amax" || op == "amin"; }

}  // namespace

bool contiguous(const TensorMeta& m) {
  int64_t expected = 1;
  for (int64_t d = int64_t(m.sizes.size()) - 1; d >= 0; --d) {
    if (m.sizes[d] != 1 && m.strides[d] != expected) return false;
    expected *= m.sizes[d];
  }
  return true;
}

std::optional<Fit> fit(const TensorMeta& m, const Dims& shape) {
  if (m.dtype != kFloat32 || !contiguous(m)) return std::nullopt;
  if (m.sizes == shape) return Fit::Full;
  if (!shape.empty() && shape.back() > 1 && m.sizes.size() == shape.size() && m.sizes.back() == 1 &&
      std::equal(m.sizes.begin(), m.sizes.end() - 1, shape.begin()))
    return Fit::Row;
  size_t lead = 0;
  while (lead < m.sizes.size() && m.sizes[lead] == 1) ++lead;
  const size_t rank = m.sizes.size() - lead;
  if (rank <= shape.size() && std::equal(m.sizes.begin() + lead, m.sizes.end(), shape.end() - rank))
    return Fit::Trailing;
  return std::nullopt;
}

// The node as an op of a kernel over `shape`, or nothing.
std::optional<KernelOp> kernel_op(const Graph& g, int n, const Dims& shape) {
  const Graph::Node& node = g.nodes[n];
  if (node.outputs.size() != 1 || numel_of(shape) == 0) return std::nullopt;
  const auto out = fit(g.values[node.outputs[0]].meta, shape);
  if (!out || *out == Fit::Trailing) return std::nullopt;
  KernelOp op{KernelOp::Unary, n, 0, *out == Fit::Row, {}};
  size_t tensor_args = 1;
  if (is_reduction(node.op)) {  // (input, dims, keepdim[, dtype]): the last dim, kept
    static const std::map<std::string, KernelOp::Kind> kinds{
        {"sum", KernelOp::Sum}, {"mean", KernelOp::Mean}, {"amax", KernelOp::Max}, {"amin", KernelOp::Min}};
    op.kind = kinds.at(node.op);
    const size_t arity = op.kind == KernelOp::Max || op.kind == KernelOp::Min ? 3 : 4;
    const auto* dims = node.args.size() == arity ? std::get_if<Dims>(&node.args[1].constant) : nullptr;
    const auto* keep = node.args.size() == arity ? std::get_if<bool>(&node.args[2].constant) : nullptr;
    const int64_t last = int64_t(shape.size()) - 1;
    if (!op.row || !dims || dims->size() != 1 || ((*dims)[0] != -1 && (*dims)[0] != last) || !keep || !*keep ||
        (arity == 4 && !std::holds_alternative<std::monostate>(node.args[3].constant)))
      return std::nullopt;
  } else if (auto u = unary_of(node.op)) {
    op.code = int(*u);
  } else if (node.op == "gelu" && node.args.size() == 2) {
    const auto* a = std::get_if<std::string>(&node.args[1].constant);
    if (!a) return std::nullopt;
    op.code = int(*a == "tanh" ? kernels::UnaryOp::gelu_tanh : kernels::UnaryOp::gelu_erf);
  } else if (auto b = binary_of(node.op)) {
    op.kind = KernelOp::Binary;
    op.code = int(*b);
    tensor_args = 2;
    if (node.op == "div" ? !plain_division(node)  // add/sub: alpha 1 only
                         : node.args.size() > 3 || (node.args.size() == 3 && number_of(node.args[2].constant) != 1.0))
      return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (node.args.size() < tensor_args) return std::nullopt;
  for (size_t i = 0; i < tensor_args; ++i) {
    const Graph::Arg& a = node.args[i];
    Operand o;
    if (a.kind == Graph::Arg::Kind::Value) {
      const TensorMeta& m = g.values[a.value].meta;
      const auto f = fit(m, shape);
      if (!f) return std::nullopt;
      // A reduction reads a whole row; a per-row result reads per-row values (or one number).
      if (op.kind >= KernelOp::Sum && *f != Fit::Full) return std::nullopt;
      if (op.row && op.kind < KernelOp::Sum && *f != Fit::Row && numel_of(m.sizes) != 1) return std::nullopt;
      if (*f == Fit::Trailing && numel_of(m.sizes) != 1 && numel_of(m.sizes) % shape.back() != 0) return std::nullopt;
      o.value = a.value;
      o.fit = numel_of(m.sizes) == 1 && *f != Fit::Full ? Fit::Trailing : *f;
    } else if (auto x = number_of(a.constant)) {
      o.number = *x;
    } else {
      return std::nullopt;
    }
    op.operands.push_back(o);
  }
  if (op.kind != KernelOp::Binary && op.operands[0].value < 0) return std::nullopt;
  return op;
}

namespace {

// The shape a kernel starting at node n would have: a reduction's input's, else the output's.
std::optional<Dims> start_shape(const Graph& g, int n) {
  const Graph::Node& node = g.nodes[n];
  if (node.outputs.size() != 1) return std::nullopt;
  if (is_reduction(node.op) && !node.args.empty() && node.args[0].kind == Graph::Arg::Kind::Value)
    return g.values[node.args[0].value].meta.sizes;
  return g.values[node.outputs[0]].meta.sizes;
}

// A fused kernel: its ops in order, the tensors it reads and the values it writes. In row
// mode (a reduction or a per-row value inside) it walks rows of C = shape.back() elements,
// otherwise tiles of kTile.
struct Kernel {
  std::vector<KernelOp> ops;
  std::vector<int> inputs, outputs;
  Dims shape;
  bool rows = false;
};

// A template step: the index of its match (templates.h).
struct TemplateStep {
  int match;
};

// The plan: steps in order, each a node run through the registry, a kernel or a template.
struct Plan {
  std::vector<std::variant<int, Kernel, TemplateStep>> steps;
  int kernels = 0;
};

// The plan of g, with the matches of `templates` as template steps (at their last node).
Plan plan(const Graph& g, const std::vector<templates::Match>& templates = {}) {
  std::vector<int> taken(g.nodes.size(), -1), ends(g.nodes.size(), -1);  // node -> its match
  for (size_t i = 0; i < templates.size(); ++i) {
    for (int n : templates[i].nodes) taken[n] = int(i);
    ends[*std::max_element(templates[i].nodes.begin(), templates[i].nodes.end())] = int(i);
  }
  // Where each value is read, by node index (graph outputs read at the end).
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (const Graph::Arg& a : g.nodes[n].args) {
      if (a.kind == Graph::Arg::Kind::Value) readers[a.value].push_back(int(n));
      for (int v : a.values) readers[v].push_back(int(n));
    }
  for (int v : g.outputs) readers[v].push_back(int(g.nodes.size()));
  Plan p;
  std::optional<Kernel> open;
  auto close = [&] {
    if (!open) return;
    if (open->ops.size() == 1) {
      p.steps.emplace_back(open->ops[0].node);  // one op: nothing to fuse
    } else {
      const int first = open->ops.front().node, last = open->ops.back().node;
      std::vector<bool> made(g.values.size(), false);
      for (const KernelOp& op : open->ops) made[g.nodes[op.node].outputs[0]] = true;
      for (const KernelOp& op : open->ops) {
        open->rows = open->rows || op.row;
        for (const Operand& o : op.operands)
          if (o.value >= 0 && !made[o.value] &&
              std::find(open->inputs.begin(), open->inputs.end(), o.value) == open->inputs.end())
            open->inputs.push_back(o.value);
        const int v = g.nodes[op.node].outputs[0];
        for (int r : readers[v])
          if (r > last || r < first || (r < int(g.nodes.size()) && taken[r] >= 0)) {
            open->outputs.push_back(v);
            break;
          }
      }
      for (int v : open->inputs) open->rows = open->rows || fit(g.values[v].meta, open->shape) == Fit::Row;
      p.steps.emplace_back(std::move(*open));
      ++p.kernels;
    }
    open.reset();
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (taken[n] >= 0) {  // a template's node: the template runs at its last
      if (ends[n] >= 0) close(), p.steps.emplace_back(TemplateStep{ends[n]});
      continue;
    }
    if (open) {
      if (auto op = kernel_op(g, int(n), open->shape)) {
        open->ops.push_back(std::move(*op));
        continue;
      }
      close();
    }
    const auto shape = start_shape(g, int(n));
    auto op = shape ? kernel_op(g, int(n), *shape) : std::nullopt;
    if (!op) {
      p.steps.emplace_back(int(n));
      continue;
    }
    open = Kernel{{}, {}, {}, *shape, false};
    open->ops.push_back(std::move(*op));
  }
  close();
  return p;
}

// The element expression of an op written inline, or "" for one that calls its kernel:
// add, sub, mul, div, neg, abs, sqrt, rsqrt, reciprocal and relu, each one or two IEEE
// operations per element that give the SIMD kernel's bits (no FMA contraction:
// -ffp-contract=off).
std::string inline_expression(const KernelOp& op, const std::vector<std::string>& e) {
  if (op.kind == KernelOp::Binary && op.code <= int(kernels::SimdBinaryOp::div))
    return "(" + e[0] + " " + std::string(1, "+-*/"[op.code]) + " " + e[1] + ")";
  return op.kind == KernelOp::Unary ? ieee_unary(kernels::UnaryOp(op.code), e[0]) : "";
}

// A buffer's name: t3, c0, r2.
std::string slot(char kind, int i) {
  std::string s(1, kind);
  s += std::to_string(i);
  return s;
}

// The source of kernel k: flb_kernel_<k>(const flb_args*). A span is a tile (kTile
// elements, the last one shorter) or, in row mode, a row of C elements; `s` is its first
// element, `m` its length, `row` its index.
int source_of_kernel(int index, int kernels, int sources) { return int(int64_t(index) * sources / kernels); }

std::string kernel_source(const Graph& g, const Kernel& k, int index) {
  const std::string span = k.rows ? "a.cols" : std::to_string(kTile);
  std::map<int, std::string> where;  // value -> the expression of its span (or its row value)
  std::map<int, int> input_of, output_of;
  for (size_t i = 0; i < k.inputs.size(); ++i) input_of[k.inputs[i]] = int(i);
  for (size_t i = 0; i < k.outputs.size(); ++i) output_of[k.outputs[i]] = int(i);
  // The last op reading each value: its buffer is free after it.
  std::map<int, size_t> last_use;
  for (size_t i = 0; i < k.ops.size(); ++i)
    for (const Operand& o : k.ops[i].operands)
      if (o.value >= 0) last_use[o.value] = i;
  std::vector<bool> busy;
  auto take = [&] {
    for (size_t b = 0; b < busy.size(); ++b)
      if (!busy[b]) return busy[b] = true, int(b);
    busy.push_back(true);
    return int(busy.size()) - 1;
  };
  std::map<int, int> buffer_of;
  std::ostringstream body, setup, pointers;
  std::map<double, int> number_buffers;
  int row_values = 0;
  for (const auto& [v, i] : input_of) {
    const int64_t n = numel_of(g.values[v].meta.sizes);
    const std::string in = "a.in[" + std::to_string(i) + "]";
    const auto f = fit(g.values[v].meta, k.shape);
    if (f == Fit::Full) {
      where[v] = "i" + std::to_string(i);  // a __restrict pointer set at the span's start
      pointers << "    const float* __restrict i" << i << " = " << in << " + s;\n";
    } else if (f == Fit::Row && n != 1) {
      where[v] = "(" + in + " + row)";
    } else if (n == 1) {  // one number for every element: filled once
      const int b = take();
      where[v] = slot('t', b);
      setup << "  for (int64_t e = 0; e < " << span << "; ++e) t" << b << "[e] = " << in << "[0];\n";
    } else if (k.rows) {  // a multiple of a row: read in place
      where[v] = "i" + std::to_string(i);
      pointers << "    const float* __restrict i" << i << " = " << in << " + s % a.period[" << i << "];\n";
    } else {  // copied into a buffer per tile
      const int b = take();
      buffer_of[v] = b;
      where[v] = slot('t', b);
      body << "    { const float* x = " << in << "; const int64_t p = a.period[" << i
           << "]; int64_t j = s % p; for (int64_t e = 0; e < m; ++e) { t" << b
           << "[e] = x[j]; if (++j == p) j = 0; } }\n";
    }
  }
  auto is_row_value = [&](int v) { return fit(g.values[v].meta, k.shape) == Fit::Row; };
  // An inline result read only by the next op, inline too, is not stored: it is that op's
  // subexpression.
  auto is_inline = [](const KernelOp& op) { return !inline_expression(op, {"x", "y"}).empty(); };
  std::map<int, int> uses;
  for (const KernelOp& op : k.ops)
    for (const Operand& o : op.operands)
      if (o.value >= 0) ++uses[o.value];
  std::map<int, std::string> lazy;  // deferred inline results: their element expression
  // A sum or mean of x * x read by nothing else sums the squares as it loads x (sum_sq_f32:
  // the same bits), without storing them.
  std::map<size_t, int> squares_of;  // reduction op -> x
  std::set<size_t> folded_squares;   // the x * x ops it absorbs
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const KernelOp& op = k.ops[i];
    if ((op.kind != KernelOp::Sum && op.kind != KernelOp::Mean) || op.operands[0].value < 0) continue;
    const int p = op.operands[0].value;
    for (size_t j = 0; j < i; ++j) {
      const KernelOp& m = k.ops[j];
      const int x = m.operands[0].value;
      if (g.nodes[m.node].outputs[0] == p && m.kind == KernelOp::Binary &&
          m.code == int(kernels::SimdBinaryOp::mul) && !m.row && x >= 0 && m.operands[1].value == x &&
          m.operands[0].fit == Fit::Full && uses[p] == 1 && !output_of.count(p)) {
        squares_of[i] = x;
        folded_squares.insert(j);
      }
    }
  }
  for (size_t i = 0; i < k.ops.size(); ++i) {
    if (folded_squares.count(i)) continue;  // summed by its reduction
    const KernelOp& op = k.ops[i];
    const bool inline_op = is_inline(op);
    std::vector<std::string> args, elems;  // operand pointers; inline: each element's expression
    std::vector<int> temps;  // buffers holding a per-row value spread over the row
    for (const Operand& o : op.operands) {
      if (o.value < 0) {
        elems.push_back(float_literal(o.number));
        auto [it, fresh] = number_buffers.emplace(o.number, int(number_buffers.size()));
        if (fresh && !inline_op)
          setup << "  for (int64_t e = 0; e < " << span << "; ++e) c" << it->second << "[e] = "
                << float_literal(o.number) << ";\n";
        if (!inline_op) args.push_back(slot('c', it->second));
        else if (fresh) number_buffers.erase(it);
      } else if (lazy.count(o.value)) {
        elems.push_back(lazy.at(o.value));
      } else if (!op.row && is_row_value(o.value)) {
        elems.push_back(where.at(o.value) + "[0]");
        if (!inline_op) {
          const int b = take();
          temps.push_back(b);
          body << "    for (int64_t e = 0; e < m; ++e) t" << b << "[e] = " << where.at(o.value) << "[0];\n";
          args.push_back(slot('t', b));
        }
      } else {
        const int v = squares_of.count(i) ? squares_of[i] : o.value;  // x for a folded x * x
        args.push_back(where.at(v));
        elems.push_back(where.at(v) + "[e]");
      }
    }
    for (const Operand& o : op.operands)
      if (o.value >= 0 && buffer_of.count(o.value) && last_use[o.value] == i) busy[buffer_of[o.value]] = false;
    const int v = g.nodes[op.node].outputs[0];
    auto next_reads = [&] {
      if (i + 1 == k.ops.size() || !is_inline(k.ops[i + 1]) || k.ops[i + 1].row != op.row) return false;
      for (const Operand& o : k.ops[i + 1].operands)
        if (o.value == v) return true;
      return false;
    };
    if (inline_op && !output_of.count(v) && uses[v] == 1 && next_reads()) {
      lazy[v] = inline_expression(op, elems);
      continue;
    }
    std::string dst;
    if (output_of.count(v)) {
      dst = "o" + std::to_string(output_of[v]);  // outputs are new tensors: no input aliases them
      pointers << "    float* __restrict " << dst << " = a.out[" << output_of[v] << "] + " << (op.row ? "row" : "s")
               << ";\n";
    } else if (op.row) {
      dst = slot('r', row_values++);
      body << "    float " << dst << "[1];\n";
    } else {
      const int b = take();
      buffer_of[v] = b;
      dst = slot('t', b);
    }
    where[v] = dst;
    const std::string len = op.row ? "1" : "m";
    body << "    // " << g.nodes[op.node].op << " -> %" << v << "\n    ";
    if (inline_op)
      body << "for (int64_t e = 0; e < " << len << "; ++e) " << dst << "[e] = " << inline_expression(op, elems)
           << ";\n";
    else switch (op.kind) {
      case KernelOp::Unary:
        body << "a.rt->unary_f32(" << op.code << ", " << args[0] << ", " << dst << ", " << len << ");\n";
        break;
      case KernelOp::Binary:
        body << "a.rt->binary_f32(" << op.code << ", " << args[0] << ", " << args[1] << ", " << dst << ", " << len
             << ");\n";
        break;
      case KernelOp::Sum:
      case KernelOp::Mean: {  // mean, as eager: the float sum divided by the count, in float
        const bool sq = squares_of.count(i) > 0;
        body << dst << "[0] = float(a.rt->" << (sq ? "sum_sq_f32(" + where.at(squares_of[i]) : "sum_f32(" + args[0])
             << ", m))" << (op.kind == KernelOp::Mean ? " / float(m)" : "") << ";\n";
        break;
      }
      case KernelOp::Max: body << dst << "[0] = a.rt->max_f32(" << args[0] << ", m);\n"; break;
      case KernelOp::Min: body << dst << "[0] = a.rt->min_f32(" << args[0] << ", m);\n"; break;
    }
    for (int b : temps) busy[b] = false;
  }
  std::ostringstream s;
  s << "static void body_" << index << "(void* ctx, int64_t lo, int64_t hi) {\n"
    << "  const flb_args& a = *static_cast<const flb_args*>(ctx);\n";
  const size_t buffers = busy.size() + number_buffers.size();
  if (k.rows)  // rows may be long: the buffers on the heap
    s << "  float* mem = new float[" << buffers << " * a.cols];\n";
  for (size_t b = 0; b < busy.size(); ++b)
    s << (k.rows ? "  float* t" + std::to_string(b) + " = mem + " + std::to_string(b) + " * a.cols;\n"
                 : "  alignas(64) float t" + std::to_string(b) + "[" + std::to_string(kTile) + "];\n");
  for (size_t c = 0; c < number_buffers.size(); ++c)
    s << (k.rows ? "  float* c" + std::to_string(c) + " = mem + " + std::to_string(busy.size() + c) + " * a.cols;\n"
                 : "  alignas(64) float c" + std::to_string(c) + "[" + std::to_string(kTile) + "];\n");
  s << setup.str();
  if (k.rows)
    s << "  for (int64_t row = lo; row < hi; ++row) {\n"
      << "    const int64_t s = row * a.cols, m = a.cols;\n";
  else
    s << "  for (int64_t tile = lo; tile < hi; ++tile) {\n"
      << "    const int64_t s = tile * " << kTile << ", m = a.n - s < " << kTile << " ? a.n - s : " << kTile << ";\n";
  s << pointers.str() << body.str() << "  }\n";
  if (k.rows) s << "  delete[] mem;\n";
  s << "}\nextern \"C\" void flb_kernel_" << index << "(const flb_args* a) {\n";
  if (k.rows)
    s << "  const int64_t rows = a->n / a->cols, grain = " << kSerialTiles * kTile << " / a->cols + 1;\n"
      << "  a->rt->parallel_for(0, rows, grain, body_" << index << ", const_cast<flb_args*>(a));\n}\n";
  else
    s << "  const int64_t tiles = (a->n + " << kTile - 1 << ") / " << kTile << ";\n"
      << "  a->rt->parallel_for(0, tiles, " << kSerialTiles << ", body_" << index
      << ", const_cast<flb_args*>(a));\n}\n";
  return s.str();
}

// The kernels in as many sources as there are compile workers (at most), so that they build
// in parallel without a compiler start per kernel: kernel i (flb_kernel_<i>) is in source
// i * sources / kernels.
std::vector<std::string> sources_of(const Graph& g, const Plan& p) {
  const int n = std::min(p.kernels, std::max(1, workers::max_workers()));
  std::vector<std::string> sources(n, std::string("// Generated by flambeau.compile (the cpp backend).\n") + kKernelDecl);
  int index = 0;
  for (const auto& step : p.steps)
    if (auto* k = std::get_if<Kernel>(&step)) {
      sources[source_of_kernel(index, p.kernels, n)] += "\n" + kernel_source(g, *k, index);
      ++index;
    }
  return sources;
}


// ---- Armv9-A (cross target) ---------------------------------------------------------------

// Unary ops without a <cmath> form on the cross target.
bool cross_has_unary(kernels::UnaryOp op) {
  using U = kernels::UnaryOp;
  return op != U::digamma && op != U::erfinv && op != U::i0;
}

// Each unary op as a plain C++ expression of v (the cross target's own libm).
std::string unary_expression(kernels::UnaryOp op) {
  using U = kernels::UnaryOp;
  static const std::map<U, std::string> special{
      {U::neg, "-v"}, {U::abs, "std::fabs(v)"}, {U::sign, "float((v > 0) - (v < 0))"},
      {U::rsqrt, "1.0f / std::sqrt(v)"}, {U::reciprocal, "1.0f / v"}, {U::sigmoid, "1.0f / (1.0f + std::exp(-v))"},
      {U::relu, "v < 0 ? 0.0f : v"}, {U::silu, "std::isinf(v) && v < 0 ? 0.0f : v / (1.0f + std::exp(-v))"},
      {U::round, "std::nearbyint(v)"}, {U::lgamma, "std::lgamma(v)"},
      {U::gelu_erf, "std::isinf(v) && v < 0 ? 0.0f : 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f))"},
      {U::gelu_tanh, "0.5f * v * (1.0f + std::tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)))"}};
  if (auto it = special.find(op); it != special.end()) return it->second;
  if (!cross_has_unary(op)) return "NAN";  // refused by cross_backend before it builds
#define FLB_NAME(name, ...) \
  if (op == U::name) return std::string("std::") + #name + "(v)";
  FLB_UNARY_OPS(FLB_NAME)
#undef FLB_NAME
  return "NAN";
}

// The runtime table and a main() around kernel 0: reads the inputs from argv[1], writes the
// outputs to argv[2] (int64 header n, cols, inputs, outputs, then each input's length and
// each output's length, then the float32 data).
std::string cross_harness() {
  std::ostringstream s;
  s << "#include <cmath>\n#include <cstdio>\n#include <vector>\n"
    << "static float flb_unary(int op, float v) {\n  switch (op) {\n";
  for (int op = 0; op <= int(kernels::UnaryOp::gelu_tanh); ++op)
    s << "    case " << op << ": return " << unary_expression(kernels::UnaryOp(op)) << ";\n";
  s << R"(  }
  return NAN;
}
static void rt_unary(int op, const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = flb_unary(op, x[i]); }
static void rt_binary(int op, const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float p = a[i], q = b[i];
    switch (op) {
      case 0: y[i] = p + q; break;
      case 1: y[i] = p - q; break;
      case 2: y[i] = p * q; break;
      case 3: y[i] = p / q; break;
      case 4: y[i] = std::isnan(p) || std::isnan(q) ? NAN : (p > q ? p : q); break;
      default: y[i] = std::isnan(p) || std::isnan(q) ? NAN : (p < q ? p : q); break;
    }
  }
}
static void rt_parallel(int64_t b, int64_t e, int64_t, void (*fn)(void*, int64_t, int64_t), void* ctx) { fn(ctx, b, e); }
static double rt_sum(const float* x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; ++i) s += x[i]; return s; }
static double rt_sum_sq(const float* x, int64_t n) { double s = 0; for (int64_t i = 0; i < n; ++i) s += x[i] * x[i]; return s; }
static float rt_extreme(const float* x, int64_t n, bool max) {
  float m = max ? -INFINITY : INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return NAN;
    m = max ? (x[i] > m ? x[i] : m) : (x[i] < m ? x[i] : m);
  }
  return m;
}
static float rt_max(const float* x, int64_t n) { return rt_extreme(x, n, true); }
static float rt_min(const float* x, int64_t n) { return rt_extreme(x, n, false); }
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  FILE* f = std::fopen(argv[1], "rb");
  int64_t h[4];
  if (!f || std::fread(h, sizeof h, 1, f) != 1) return 3;
  std::vector<int64_t> len(h[2] + h[3]);
  if (std::fread(len.data(), sizeof(int64_t), len.size(), f) != len.size()) return 3;
  std::vector<std::vector<float>> in(h[2]), out(h[3]);
  std::vector<const float*> in_p;
  std::vector<float*> out_p;
  for (int64_t i = 0; i < h[2]; ++i) {
    in[i].resize(len[i]);
    if (std::fread(in[i].data(), sizeof(float), len[i], f) != size_t(len[i])) return 3;
    in_p.push_back(in[i].data());
  }
  std::fclose(f);
  for (int64_t i = 0; i < h[3]; ++i) out[i].resize(len[h[2] + i]), out_p.push_back(out[i].data());
  const flb_runtime rt{rt_unary, rt_binary, rt_parallel, rt_sum, rt_sum_sq, rt_max, rt_min};
  const flb_args a{&rt, in_p.data(), len.data(), out_p.data(), h[0], h[1]};
  flb_kernel_0(&a);
  FILE* o = std::fopen(argv[2], "wb");
  if (!o) return 4;
  for (const auto& v : out) std::fwrite(v.data(), sizeof(float), v.size(), o);
  return std::fclose(o) == 0 ? 0 : 4;
}
)";
  return s.str();
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty() && ::access((d + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

// The graph built for Armv9-A with SVE of `bits` and run under qemu-user: it must fuse into
// one kernel (the harness has no op registry).
CompiledFn cross_backend(const Graph& g, const Plan& p, int bits) {
  FLB_CHECK(p.steps.size() == 1 && p.kernels == 1, NotImplementedError,
            "[compile] target armv9-a+sve2: the graph must fuse into one kernel (float32 pointwise ops and last-dim "
            "reductions), got ", g.nodes.size(), " ops in ", p.steps.size(), " steps");
  const Kernel& k = std::get<Kernel>(p.steps[0]);
  for (const KernelOp& op : k.ops)
    FLB_CHECK(op.kind != KernelOp::Unary || cross_has_unary(kernels::UnaryOp(op.code)), NotImplementedError,
              "[compile] target armv9-a+sve2: ", g.nodes[op.node].op, " has no kernel on this target");
  for (int v : g.outputs)
    FLB_CHECK(std::find(k.outputs.begin(), k.outputs.end(), v) != k.outputs.end(), NotImplementedError,
              "[compile] target armv9-a+sve2: every output must be computed by the kernel");
  for (const char* tool : {"aarch64-linux-gnu-g++", "qemu-aarch64"})
    FLB_CHECK(on_path(tool), Error, "[compile] target armv9-a+sve2 needs ", tool,
              " (apt-get install g++-aarch64-linux-gnu qemu-user)");
  const std::string source = std::string("// Generated by flambeau.compile (cpp backend, armv9-a+sve2).\n") +
                             kKernelDecl + "\n" + kernel_source(g, k, 0) + cross_harness();
  const Toolchain tc{"aarch64-linux-gnu-g++",
                     {"-O3", "-march=armv9-a+sve2", "-msve-vector-bits=" + std::to_string(bits), "-static",
                      "-std=c++17", "-ffp-contract=off"},
                     ".aarch64"};
  const std::string exe = build(source, tc);
  return [g, k, exe, bits](const std::vector<Tensor>& inputs) {
    std::vector<Tensor> env = bind(g, inputs);
    std::vector<int64_t> header{numel_of(k.shape), k.shape.empty() ? 1 : k.shape.back(), int64_t(k.inputs.size()),
                                int64_t(k.outputs.size())};
    std::vector<Tensor> ins;
    for (int v : k.inputs) ins.push_back(env[v].contiguous()), header.push_back(ins.back().numel());
    for (int v : k.outputs) header.push_back(numel_of(g.values[v].meta.sizes));
    namespace fs = std::filesystem;
    const fs::path dir = fs::temp_directory_path();
    const std::string tag = "flambeau-armv9-" + std::to_string(getpid()) + "-" + std::to_string(std::rand());
    const fs::path in_file = dir / (tag + ".in"), out_file = dir / (tag + ".out"), log = dir / (tag + ".log");
    {
      std::ofstream f(in_file, std::ios::binary);
      f.write(reinterpret_cast<const char*>(header.data()), std::streamsize(header.size() * sizeof(int64_t)));
      for (const Tensor& t : ins) f.write(static_cast<const char*>(t.data_ptr()), std::streamsize(t.numel() * 4));
      FLB_CHECK(f.good(), Error, "[compile] cannot write ", in_file.string());
    }
    const int status = run_program(
        {"qemu-aarch64", "-cpu", "max,sve-default-vector-length=" + std::to_string(bits / 8), exe, in_file, out_file},
        log.string());
    std::error_code ec;
    std::ifstream f(out_file, std::ios::binary);
    for (int v : k.outputs) {
      env[v] = empty(g.values[v].meta.sizes, kFloat32);
      f.read(static_cast<char*>(env[v].data_ptr()), std::streamsize(env[v].numel() * 4));
    }
    const bool ok = status == 0 && f.good();
    f.close();
    fs::remove(in_file, ec), fs::remove(out_file, ec), fs::remove(log, ec);
    FLB_CHECK(ok, Error, "[compile] the armv9-a+sve2 kernel ", exe, " failed under qemu-aarch64 (status ", status, ")");
    std::vector<Tensor> result;
    for (int v : g.outputs) result.push_back(env[v]);
    return result;
  };
}

// The graph's kernels built for this machine (no autograd).
CompiledFn native_backend(const Graph& g, const std::vector<Tensor>& example_inputs);

}  // namespace

std::string generated_source(const Graph& g) {
  std::string s;
  for (const std::string& source : sources_of(g, plan(g))) s += (s.empty() ? "" : "\n") + source;
  return s;
}

CompiledFn cpp_backend(const Graph& g, const std::vector<Tensor>& example_inputs) {
  std::string target = "native";
  int sve_bits = 128;
  templates::Options unused;
  for (const auto& [key, value] : backend_options()) {
    if (key == "target") target = value;
    else if (key == "sve_bits") sve_bits = std::atoi(value.c_str());
    else if (!templates::parse_option(key, value, unused))
      throw ValueError("[compile] the cpp backend has no option '" + key +
                       "' (options: target, sve_bits, gemm_backends, max_autotune_gemm_backends, max_autotune, mode)");
  }
  FLB_CHECK(target == "native" || target == "armv9-a+sve2", ValueError, "[compile] unknown target '", target,
            "' (native or armv9-a+sve2)");
  FLB_CHECK(sve_bits == 128 || sve_bits == 256, ValueError, "[compile] sve_bits must be 128 or 256, got ", sve_bits);
  if (target != "native") {
    FLB_CHECK(!needs_grad(g, example_inputs), NotImplementedError,
              "[compile] target armv9-a+sve2 runs no backward: call it under no_grad");
    return cross_backend(g, plan(g), sve_bits);
  }
  if (needs_grad(g, example_inputs)) return compile_for_training(g, example_inputs, native_backend);
  return native_backend(g, example_inputs);
}

namespace {

CompiledFn native_backend(const Graph& g, const std::vector<Tensor>& example_inputs) {
  templates::Options options;
  for (const auto& [key, value] : backend_options()) templates::parse_option(key, value, options);
  auto matches = std::make_shared<const std::vector<templates::Match>>(
      templates::choose(g, templates::match(g), example_inputs, options));
  auto p = std::make_shared<Plan>(plan(g, *matches));
  if (p->kernels == 0 && matches->empty()) return run_eagerly(g);
  const std::vector<Library> libs = p->kernels ? load_libraries(sources_of(g, *p)) : std::vector<Library>{};
  auto fns = std::make_shared<std::vector<void (*)(const KernelArgs*)>>();
  for (int i = 0; i < p->kernels; ++i)
    fns->push_back(reinterpret_cast<void (*)(const KernelArgs*)>(
        libs[source_of_kernel(i, p->kernels, int(libs.size()))].symbol("flb_kernel_" + std::to_string(i))));
  return [g, p, fns, matches](const std::vector<Tensor>& inputs) {
    std::vector<Tensor> env = bind(g, inputs);
    int k = 0;
    for (const auto& step : p->steps) {
      if (const int* n = std::get_if<int>(&step)) {
        run_node(g.nodes[*n], env);
        continue;
      }
      if (const auto* t = std::get_if<TemplateStep>(&step)) {
        templates::run(g, (*matches)[t->match], env);
        continue;
      }
      const Kernel& kern = std::get<Kernel>(step);
      std::vector<Tensor> ins;
      std::vector<const float*> in_ptrs;
      std::vector<int64_t> periods;
      for (int v : kern.inputs) {
        ins.push_back(env[v].is_contiguous() ? env[v] : env[v].contiguous());
        in_ptrs.push_back(ins.back().data<float>());
        periods.push_back(ins.back().numel());
      }
      std::vector<float*> out_ptrs;
      for (int v : kern.outputs) {
        env[v] = empty(g.values[v].meta.sizes, kFloat32);  // the shape, or one value per row
        out_ptrs.push_back(env[v].data<float>());
      }
      const KernelArgs args{&runtime(), in_ptrs.data(), periods.data(), out_ptrs.data(), numel_of(kern.shape),
                            kern.shape.empty() ? 1 : kern.shape.back()};
      (*fns)[k++](&args);
    }
    std::vector<Tensor> outs;
    for (int v : g.outputs) outs.push_back(env[v]);
    return outs;
  };
}

}  // namespace

}  // namespace flambeau::compiler
