// See cpp_backend.h.
#include "flambeau/compile/cpp_backend.h"

#include <map>
#include <optional>
#include <sstream>

#include "flambeau/autograd/node.h"
#include "flambeau/compile/build.h"
#include "flambeau/core/error.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/ops/ops.h"

namespace flambeau::compiler {

namespace {

constexpr int64_t kTile = 1024;       // elements per tile (4 KiB of float32)
constexpr int64_t kSerialTiles = 32;  // fewer tiles than this run on one thread

// The table of flambeau functions a generated kernel calls (its layout is repeated in the
// generated source: kRuntimeDecl).
struct Runtime {
  void (*unary_f32)(int op, const float* x, float* y, int64_t n);
  void (*binary_f32)(int op, const float* a, const float* b, float* y, int64_t n);
  void (*parallel_for)(int64_t begin, int64_t end, int64_t grain, void (*fn)(void*, int64_t, int64_t), void* ctx);
};

const Runtime& runtime() {
  static const Runtime r{
      [](int op, const float* x, float* y, int64_t n) { kernels::unary_f32(kernels::UnaryOp(op), x, y, n); },
      [](int op, const float* a, const float* b, float* y, int64_t n) {
        kernels::binary_f32(kernels::SimdBinaryOp(op), a, b, y, n);
      },
      [](int64_t begin, int64_t end, int64_t grain, void (*fn)(void*, int64_t, int64_t), void* ctx) {
        parallel_for(begin, end, grain, [&](int64_t lo, int64_t hi) { fn(ctx, lo, hi); });
      }};
  return r;
}

const char* kRuntimeDecl = R"(#include <cstdint>
struct flb_runtime {
  void (*unary_f32)(int op, const float* x, float* y, int64_t n);
  void (*binary_f32)(int op, const float* a, const float* b, float* y, int64_t n);
  void (*parallel_for)(int64_t begin, int64_t end, int64_t grain, void (*fn)(void*, int64_t, int64_t), void* ctx);
};
struct flb_args {
  const flb_runtime* rt;
  const float* const* in;  // the kernel's tensor inputs
  const int64_t* period;   // each input's element count (less than n: broadcast over leading dims)
  float* const* out;       // the values written to memory
  int64_t n;
};
)";

std::optional<kernels::UnaryOp> unary_of(const std::string& op) {
#define FLB_NAME(name, ...) \
  if (op == #name) return kernels::UnaryOp::name;
  FLB_UNARY_OPS(FLB_NAME)
#undef FLB_NAME
  return std::nullopt;
}

std::optional<kernels::SimdBinaryOp> binary_of(const std::string& op) {
  using B = kernels::SimdBinaryOp;
  static const std::map<std::string, B> ops{{"add", B::add}, {"sub", B::sub}, {"mul", B::mul},
                                            {"div", B::div}, {"maximum", B::maximum}, {"minimum", B::minimum}};
  auto it = ops.find(op);
  return it == ops.end() ? std::nullopt : std::optional(it->second);
}

std::optional<double> number(const op_hook::Value& v) {
  if (auto* s = std::get_if<Scalar>(&v)) return s->to<double>();
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  return std::nullopt;
}

bool contiguous(const TensorMeta& m) {
  int64_t expected = 1;
  for (int64_t d = int64_t(m.sizes.size()) - 1; d >= 0; --d) {
    if (m.sizes[d] != 1 && m.strides[d] != expected) return false;
    expected *= m.sizes[d];
  }
  return true;
}

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

// An operand of a fused op: a tensor value of the kernel's shape, one broadcast over the
// leading dimensions (its sizes are the trailing ones), or a number.
struct Operand {
  int value = -1;  // -1: a number
  double number = 0;
};

// A node the kernel can hold: its op code (unary or binary) and operands.
struct PointwiseOp {
  int node;
  bool unary;
  int code;
  std::vector<Operand> operands;
};

// The node as a pointwise op over `shape`, or nothing.
std::optional<PointwiseOp> pointwise(const Graph& g, int n) {
  const Graph::Node& node = g.nodes[n];
  if (node.outputs.size() != 1) return std::nullopt;
  const TensorMeta& out = g.values[node.outputs[0]].meta;
  if (out.dtype != kFloat32 || !contiguous(out) || numel(out.sizes) == 0) return std::nullopt;
  PointwiseOp p{n, true, 0, {}};
  size_t tensor_args = 1;
  if (auto u = unary_of(node.op)) {
    p.code = int(*u);
  } else if (node.op == "gelu" && node.args.size() == 2) {
    const auto* a = std::get_if<std::string>(&node.args[1].constant);
    if (!a) return std::nullopt;
    p.code = int(*a == "tanh" ? kernels::UnaryOp::gelu_tanh : kernels::UnaryOp::gelu_erf);
  } else if (auto b = binary_of(node.op)) {
    p.unary = false;
    p.code = int(*b);
    tensor_args = 2;
    if (node.args.size() > 2) {  // add/sub: alpha 1 only; div: no rounding mode
      const auto alpha = number(node.args[2].constant);
      const bool plain = node.op == "div" ? std::holds_alternative<std::monostate>(node.args[2].constant)
                                          : alpha && *alpha == 1.0;
      if (!plain || node.args.size() > 3) return std::nullopt;
    }
  } else {
    return std::nullopt;
  }
  if (node.args.size() < tensor_args) return std::nullopt;
  for (size_t i = 0; i < tensor_args; ++i) {
    const Graph::Arg& a = node.args[i];
    Operand o;
    if (a.kind == Graph::Arg::Kind::Value) {
      const TensorMeta& m = g.values[a.value].meta;
      if (m.dtype != kFloat32 || !contiguous(m)) return std::nullopt;
      // the same shape, or the trailing dims of it (leading 1s dropped)
      size_t lead = 0;
      while (lead < m.sizes.size() && m.sizes[lead] == 1) ++lead;
      const size_t rank = m.sizes.size() - lead;
      if (rank > out.sizes.size() ||
          !std::equal(m.sizes.begin() + lead, m.sizes.end(), out.sizes.begin() + (out.sizes.size() - rank)))
        return std::nullopt;
      if (i == 0 && numel(m.sizes) != numel(out.sizes)) return std::nullopt;  // the first sets the shape
      o.value = a.value;
    } else if (auto x = number(a.constant)) {
      if (i == 0) return std::nullopt;
      o.number = *x;
    } else {
      return std::nullopt;
    }
    p.operands.push_back(o);
  }
  return p;
}

// A fused kernel: its ops in order, the tensors it reads and the values it writes.
struct Kernel {
  std::vector<PointwiseOp> ops;
  std::vector<int> inputs, outputs;
  Dims shape;
};

// The plan: steps in order, each a node run through the registry or a kernel.
struct Plan {
  std::vector<std::variant<int, Kernel>> steps;
  int kernels = 0;
};

Plan plan(const Graph& g) {
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
      for (const PointwiseOp& op : open->ops) made[g.nodes[op.node].outputs[0]] = true;
      for (const PointwiseOp& op : open->ops) {
        for (const Operand& o : op.operands)
          if (o.value >= 0 && !made[o.value] &&
              std::find(open->inputs.begin(), open->inputs.end(), o.value) == open->inputs.end())
            open->inputs.push_back(o.value);
        const int v = g.nodes[op.node].outputs[0];
        for (int r : readers[v])
          if (r > last || r < first) {
            open->outputs.push_back(v);
            break;
          }
      }
      p.steps.emplace_back(std::move(*open));
      ++p.kernels;
    }
    open.reset();
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    std::optional<PointwiseOp> op = pointwise(g, int(n));
    const Dims* shape = op ? &g.values[g.nodes[n].outputs[0]].meta.sizes : nullptr;
    if (open && (!op || *shape != open->shape)) close();
    if (!op) {
      p.steps.emplace_back(int(n));
      continue;
    }
    if (!open) open = Kernel{{}, {}, {}, *shape};
    open->ops.push_back(std::move(*op));
  }
  close();
  return p;
}

std::string float_literal(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", double(float(v)));
  return std::string(b) + "f";
}

// A buffer's name: t3, c0.
std::string slot(char kind, int i) {
  std::string s(1, kind);
  s += std::to_string(i);
  return s;
}

// The source of kernel k: flb_kernel_<k>(const flb_args*).
std::string kernel_source(const Graph& g, const Kernel& k, int index) {
  std::ostringstream s;
  std::map<int, std::string> where;  // value -> the expression of its tile
  std::map<int, int> input_of, output_of;
  for (size_t i = 0; i < k.inputs.size(); ++i) input_of[k.inputs[i]] = int(i);
  for (size_t i = 0; i < k.outputs.size(); ++i) output_of[k.outputs[i]] = int(i);
  // The last op reading each value made in the kernel: its buffer is free after it.
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
  std::ostringstream body, numbers;
  std::map<double, int> number_buffers;
  // Broadcast inputs are copied into a buffer per tile; full ones are read in place.
  for (const auto& [v, i] : input_of) {
    if (numel(g.values[v].meta.sizes) == numel(k.shape)) {
      where[v] = "(a.in[" + std::to_string(i) + "] + s)";
    } else {
      const int b = take();
      buffer_of[v] = b;
      where[v] = slot('t', b);
      body << "    { const float* x = a.in[" << i << "]; const int64_t p = a.period[" << i
           << "]; int64_t j = s % p; for (int64_t e = 0; e < m; ++e) { t" << b
           << "[e] = x[j]; if (++j == p) j = 0; } }\n";
    }
  }
  for (size_t i = 0; i < k.ops.size(); ++i) {
    const PointwiseOp& op = k.ops[i];
    std::vector<std::string> args;
    for (const Operand& o : op.operands) {
      if (o.value >= 0) {
        args.push_back(where.at(o.value));
        continue;
      }
      auto [it, fresh] = number_buffers.emplace(o.number, int(number_buffers.size()));
      if (fresh)
        numbers << "  alignas(64) float c" << it->second << "[" << kTile << "]; for (int64_t e = 0; e < " << kTile
                << "; ++e) c" << it->second << "[e] = " << float_literal(o.number) << ";\n";
      args.push_back(slot('c', it->second));
    }
    // Buffers whose values die here are free for this op's result.
    for (const Operand& o : op.operands)
      if (o.value >= 0 && buffer_of.count(o.value) && last_use[o.value] == i) busy[buffer_of[o.value]] = false;
    const int v = g.nodes[op.node].outputs[0];
    std::string dst;
    if (output_of.count(v)) {
      dst = "(a.out[" + std::to_string(output_of[v]) + "] + s)";
    } else {
      const int b = take();
      buffer_of[v] = b;
      dst = slot('t', b);
    }
    where[v] = dst;
    body << "    // " << g.nodes[op.node].op << " -> %" << v << "\n    ";
    if (op.unary)
      body << "a.rt->unary_f32(" << op.code << ", " << args[0] << ", " << dst << ", m);\n";
    else
      body << "a.rt->binary_f32(" << op.code << ", " << args[0] << ", " << args[1] << ", " << dst << ", m);\n";
  }
  s << "static void body_" << index << "(void* ctx, int64_t lo, int64_t hi) {\n"
    << "  const flb_args& a = *static_cast<const flb_args*>(ctx);\n"
    << numbers.str();
  for (size_t b = 0; b < busy.size(); ++b) s << "  alignas(64) float t" << b << "[" << kTile << "];\n";
  s << "  for (int64_t tile = lo; tile < hi; ++tile) {\n"
    << "    const int64_t s = tile * " << kTile << ", m = a.n - s < " << kTile << " ? a.n - s : " << kTile << ";\n"
    << body.str() << "  }\n}\n"
    << "extern \"C\" void flb_kernel_" << index << "(const flb_args* a) {\n"
    << "  const int64_t tiles = (a->n + " << kTile - 1 << ") / " << kTile << ";\n"
    << "  a->rt->parallel_for(0, tiles, " << kSerialTiles << ", body_" << index
    << ", const_cast<flb_args*>(a));\n}\n";
  return s.str();
}

std::string source_of(const Graph& g, const Plan& p) {
  if (p.kernels == 0) return "";
  std::ostringstream s;
  s << "// Generated by flambeau.compile (the cpp backend).\n" << kRuntimeDecl;
  int index = 0;
  for (const auto& step : p.steps)
    if (auto* k = std::get_if<Kernel>(&step)) s << "\n" << kernel_source(g, *k, index++);
  return s.str();
}

struct KernelArgs {
  const Runtime* rt;
  const float* const* in;
  const int64_t* period;
  float* const* out;
  int64_t n;
};

bool needs_grad(const Graph& g, const std::vector<Tensor>& inputs) {
  if (!autograd::grad_mode_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  for (const Tensor& t : g.constants)
    if (t.requires_grad()) return true;
  return false;
}

}  // namespace

std::string generated_source(const Graph& g) { return source_of(g, plan(g)); }

CompiledFn cpp_backend(const Graph& g, const std::vector<Tensor>& example_inputs) {
  if (needs_grad(g, example_inputs)) return run_eagerly(g);
  auto p = std::make_shared<Plan>(plan(g));
  if (p->kernels == 0) return run_eagerly(g);
  const Library lib = load_library(source_of(g, *p));
  auto fns = std::make_shared<std::vector<void (*)(const KernelArgs*)>>();
  for (int i = 0; i < p->kernels; ++i)
    fns->push_back(reinterpret_cast<void (*)(const KernelArgs*)>(lib.symbol("flb_kernel_" + std::to_string(i))));
  return [g, p, fns](const std::vector<Tensor>& inputs) {
    std::vector<Tensor> env = bind(g, inputs);
    int k = 0;
    for (const auto& step : p->steps) {
      if (const int* n = std::get_if<int>(&step)) {
        run_node(g.nodes[*n], env);
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
        env[v] = empty(kern.shape, kFloat32);
        out_ptrs.push_back(env[v].data<float>());
      }
      const KernelArgs args{&runtime(), in_ptrs.data(), periods.data(), out_ptrs.data(), numel(kern.shape)};
      (*fns)[k++](&args);
    }
    std::vector<Tensor> outs;
    for (int v : g.outputs) outs.push_back(env[v]);
    return outs;
  };
}

}  // namespace flambeau::compiler
