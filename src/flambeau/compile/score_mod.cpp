// See score_mod.h.
#include "flambeau/compile/score_mod.h"

#include <map>
#include <sstream>

#include "flambeau/autograd/node.h"
#include "flambeau/compile/build.h"
#include "flambeau/compile/codegen.h"
#include "flambeau/ops/ops.h"

namespace flambeau::compiler {

// Note [Compiled score_mods]
// The traced graph is one expression per score element. A value is uniform over a tile (made
// from b, h, captured tensors and numbers: computed once per call) or an element value (it
// reads the score, q_idx or kv_idx), held in a buffer of kChunk columns of one row. Element
// ops run as loops over the chunk, consecutive inline ops fused into one loop; a
// transcendental op (exp, tanh, ...) calls eager's SIMD kernel on the buffer, so every value
// has eager's bits (each op rounds to its dtype, in the trace's order; -ffp-contract=off).
//
// The backward recomputes the forward from the raw scores, then differentiates the expression
// symbolically in reverse mode, one element at a time: each float value on a path to the
// result gets an adjoint, the result's seeded with ds, and each node adds its operands' shares
// (eager's derivative formulas). The score's adjoint replaces ds; a captured float tensor's
// adds, in float64, into its accumulator at the element the forward read. Reverse mode gives
// all adjoints in one sweep (forward mode would take one per captured element read).

namespace {

namespace fa = flambeau::nn::attention;

constexpr int64_t kChunk = 256;  // columns per pass over a row (each element value's buffer)

using ForwardFn = int (*)(const Runtime* rt, const void* const* caps, int64_t b, int64_t h, int64_t q0, int64_t rows,
                          int64_t kv0, int64_t cols, int64_t ld, float* s);
using BackwardFn = int (*)(const Runtime* rt, const void* const* caps, double* const* grads, int64_t b, int64_t h,
                           int64_t q0, int64_t rows, int64_t kv0, int64_t cols, int64_t ld, const float* s, float* ds);

class CompiledScore final : public fa::ScoreMod {
 public:
  CompiledScore(ForwardFn f, BackwardFn b, std::vector<Tensor> caps)
      : forward_(f), backward_(b), caps_(std::move(caps)), data_(caps_.size()), ptrs_(caps_.size()) {
    for (const Tensor& c : caps_) sizes_.push_back(c.sizes());
    refresh();
  }
  void forward(const fa::Tile& t, float* s) const override {
    report(forward_(&runtime(), ptrs_.data(), t.b, t.h, t.q0, t.rows, t.kv0, t.cols, t.ld, s));
  }
  void backward(const fa::Tile& t, const float* s, float* ds, double* const* grads) const override {
    report(backward_(&runtime(), ptrs_.data(), grads, t.b, t.h, t.q0, t.rows, t.kv0, t.cols, t.ld, s, ds));
  }
  std::vector<Tensor> captured() const override { return caps_; }
  void check(int64_t, int64_t, int64_t, int64_t) const override { refresh(); }
  std::string name() const override { return "compiled_score_mod"; }

 private:
  // Contiguous copies of the captured tensors (views when they already are), re-read before
  // each run so that in-place updates (an optimizer step) are seen.
  void refresh() const {
    for (size_t i = 0; i < caps_.size(); ++i) {
      FLB_CHECK(caps_[i].sizes() == sizes_[i], ValueError, "[flex_attention] a tensor the compiled score_mod captured ",
                "changed shape from ", shape_str(sizes_[i]), " to ", shape_str(caps_[i].sizes()));
      data_[i] = caps_[i].detach().contiguous();
      ptrs_[i] = data_[i].data_ptr();
    }
  }
  void report(int bad) const {  // bad: 1 + the captured tensor indexed out of bounds
    FLB_CHECK(bad == 0, IndexError, "[flex_attention] the score_mod indexes the captured tensor of shape ",
              shape_str(sizes_[size_t(bad - 1)]), " out of bounds");
  }

  ForwardFn forward_;
  BackwardFn backward_;
  std::vector<Tensor> caps_;
  std::vector<Dims> sizes_;
  mutable std::vector<Tensor> data_;
  mutable std::vector<const void*> ptrs_;
};

const char* kHelpers = R"(template <class T> static inline T flb_max(T a, T b) { return a != a ? a : b != b ? b : a > b ? a : b; }
template <class T> static inline T flb_min(T a, T b) { return a != a ? a : b != b ? b : a < b ? a : b; }
// An index into a dim of n (negative ones count from the end); out of range sets *bad.
// Branch-free, so that the loops around it vectorise.
static inline int64_t flb_index(int64_t i, int64_t n, int* bad, int code) {
  i += i < 0 ? n : 0;
  const bool out = uint64_t(i) >= uint64_t(n);
  *bad = out ? code : *bad;
  return out ? 0 : i;
}
)";

struct Unsupported {
  std::string why;
};

const char* c_type(DType dt) {
  if (dt == kFloat32) return "float";
  if (dt == kFloat64) return "double";
  if (dt == kInt64) return "int64_t";
  if (dt == kBool) return "bool";
  throw Unsupported{"it makes a " + std::string(dtype_name(dt)) + " tensor"};
}

// An operand of a node: a value of the graph (its expression) or a number.
struct Operand {
  int value = -1;
  std::string expr;
  DType dtype = kInt64;
  op_hook::Value number;
};

class Generator {
 public:
  explicit Generator(const Graph& g) : g_(g), info_(g.values.size()) {}

  // The forward's and the backward's source.
  std::string source() {
    const std::vector<int>& in = g_.inputs;
    define_input(in[0], "sp[e]", true);
    define_input(in[1], "b", false);
    define_input(in[2], "h", false);
    define_input(in[3], "q", true);
    define_input(in[4], "(kv0 + c0 + e)", true);
    for (const Graph::Node& n : g_.nodes) node(n);
    const int out = g_.outputs[0];
    operand_of(out);  // a captured tensor returned as it is
    std::ostringstream src;
    src << "// Generated by flambeau.compile: a score_mod.\n" << kRuntimeDecl << kIntPrelude << kHelpers;
    auto elements = element_;
    elements.push_back({false, "sp[e] = float(" + info_[out].ref + ");"});
    const std::string tile = "int64_t b, int64_t h, int64_t q0, int64_t rows, int64_t kv0, int64_t cols, int64_t ld, ";
    function(src, "flb_forward", tile + "float* s", elements, "");
    function(src, "flb_backward", "double* const* grads, " + tile + "const float* s, float* ds", element_,
             reverse_sweep());
    return src.str();
  }

  std::vector<Tensor> captured;  // by slot

 private:
  struct Info {
    bool defined = false, element = false, on_path = false;
    DType dtype = kInt64;
    std::string ref;   // its expression inside the element loop
    int slot = -1;     // a read of captured tensor `slot` ...
    std::string flat;  // ... at this flat index
  };
  struct Step {  // one element statement, or a kernel call on the chunk's buffers
    bool call;
    std::string text;
  };

  void define_input(int v, const std::string& ref, bool element) {
    Info& i = info_[v];
    i.defined = true, i.element = element, i.dtype = g_.values[v].meta.dtype, i.ref = ref;
  }

  // Declares value v = expr at its level (element: in a buffer).
  void define(int v, const std::string& expr, bool element) {
    Info& i = info_[v];
    i.defined = true, i.element = element, i.dtype = g_.values[v].meta.dtype;
    const std::string name = "v" + std::to_string(v), type = c_type(i.dtype);
    if (element) {
      arrays_ << "      alignas(64) " << type << " " << name << "[" << kChunk << "];\n";
      element_.push_back({false, name + "[e] = " + expr + ";"});
      i.ref = name + "[e]";
    } else {
      uniform_ << "  const " << type << " " << name << " = " << expr << ";\n";
      i.ref = name;
    }
  }

  // The slot of the captured tensor held by constant value v.
  int slot_of(int v) {
    const Tensor& t = g_.constants[size_t(g_.values[v].index)];
    for (size_t i = 0; i < captured.size(); ++i)
      if (captured[i].impl() == t.impl()) return int(i);
    c_type(t.dtype());
    captured.push_back(t);
    return int(captured.size()) - 1;
  }

  std::string read(int slot, const std::string& flat) {
    return "((const " + std::string(c_type(captured[size_t(slot)].dtype())) + "*)caps[" + std::to_string(slot) + "])[" +
           flat + "]";
  }

  Operand operand_of(int v) {
    Info& i = info_[v];
    if (!i.defined) {  // a captured tensor read whole: one value only
      const Dims& sizes = g_.values[v].meta.sizes;
      if (numel_of(sizes) != 1)
        throw Unsupported{"it reads a captured tensor of shape " + shape_str(sizes) + " other than by index"};
      const int slot = slot_of(v);
      define(v, read(slot, "0"), false);
      i.slot = slot, i.flat = "0";
    }
    return Operand{v, i.ref, i.dtype, {}};
  }

  // o as an expression of type `to`.
  static std::string cast(const Operand& o, DType to) {
    if (o.value < 0) {
      if (const auto i = integer(o.number); i && !is_floating(to))
        return to == kBool ? (*i ? "true" : "false") : "int64_t(" + std::to_string(*i) + ")";
      const auto* b = std::get_if<bool>(&o.number);
      const auto x = b ? std::optional<double>(*b) : number_of(o.number);
      if (!x) throw Unsupported{"an argument is not a number or a tensor"};
      if (to == kFloat32) return float_literal(*x);
      if (to == kFloat64) return double_literal(*x);
      if (to == kBool) return *x != 0 ? "true" : "false";
      throw Unsupported{"a float number in integer arithmetic"};
    }
    if (o.dtype == to) return o.expr;
    if (to == kBool) return "(" + o.expr + " != 0)";
    return std::string("(") + c_type(to) + ")(" + o.expr + ")";
  }

  // The dtype eager computes a binary op of a and b in (torch.result_type).
  DType compute_type(const Operand& a, const Operand& b) const {
    auto tensor = [&](const Operand& o) {
      if (o.value >= 0) return empty(g_.values[o.value].meta.sizes, o.dtype);
      if (const auto* x = std::get_if<bool>(&o.number)) return Tensor(Scalar(*x));
      if (const auto i = integer(o.number)) return Tensor(Scalar(*i));
      return Tensor(Scalar(number_of(o.number).value_or(0)));
    };
    return result_type(tensor(a), tensor(b));
  }

  void node(const Graph::Node& n) {
    if (n.outputs.size() != 1) throw Unsupported{"'" + n.op + "' has several outputs"};
    const int v = n.outputs[0];
    const TensorMeta& meta = g_.values[v].meta;
    const DType T = meta.dtype;
    const std::string type = c_type(T);
    if (broadcast_shapes(meta.sizes, {2, 3}, "score_mod") != Dims{2, 3})
      throw Unsupported{"'" + n.op + "' makes a tensor of shape " + shape_str(meta.sizes) + ", not one per score"};
    if (n.op == "index") return index(n, v);
    std::vector<Operand> a;
    bool element = false;
    for (const Graph::Arg& arg : n.args) {
      if (arg.kind == Graph::Arg::Kind::ValueList) throw Unsupported{"'" + n.op + "' takes a list of tensors"};
      if (arg.kind == Graph::Arg::Kind::Value) {
        a.push_back(operand_of(arg.value));
        element = element || info_[arg.value].element;
      } else {
        a.push_back(Operand{-1, "", kInt64, arg.constant});
      }
    }
    if ((n.op == "add" || n.op == "sub") && a.size() == 3) {
      if (a[2].value >= 0 || number_of(a[2].number) != 1.0) throw Unsupported{"'" + n.op + "' with alpha"};
      a.pop_back();
    }
    if (n.op == "div") {
      if (!plain_division(n)) throw Unsupported{"'div' with a rounding mode"};
      a.resize(2);
    }
    ops_.push_back({&n, a});
    static const std::map<std::string, std::string> arithmetic{{"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"div", "/"}},
        compare{{"eq", "=="}, {"ne", "!="}, {"lt", "<"}, {"le", "<="}, {"gt", ">"}, {"ge", ">="}};
    const bool binary = a.size() == 2 && (a[0].value >= 0 || a[1].value >= 0);
    std::optional<kernels::UnaryOp> unary;
    if (a.size() == 1) unary = unary_of(n.op);
    auto any_float = [&] {
      for (const Operand& o : a)
        if (o.value >= 0 ? is_floating(o.dtype)
                         : number_of(o.number) && !integer(o.number) && !std::get_if<bool>(&o.number))
          return true;
      return false;
    };
    if (n.op == "to" && a.size() == 2) return define(v, cast(a[0], T), element);
    if (binary && compare.count(n.op)) {
      const DType ct = compute_type(a[0], a[1]);
      return define(v, "(" + cast(a[0], ct) + " " + compare.at(n.op) + " " + cast(a[1], ct) + ")", element);
    }
    if (n.op == "where" && a.size() == 3)
      return define(v, "(bool(" + cast(a[0], kBool) + ") ? " + cast(a[1], T) + " : " + cast(a[2], T) + ")", element);
    if (!is_floating(T)) {  // integer and bool arithmetic, as mask_mods
      std::vector<std::string> args;
      bool all_bool = true;
      for (const Operand& o : a) {
        args.push_back(o.value >= 0 ? o.expr : cast(o, std::get_if<bool>(&o.number) ? kBool : kInt64));
        all_bool = all_bool && (o.value >= 0 ? o.dtype == kBool : std::holds_alternative<bool>(o.number));
      }
      const std::string e = any_float() ? "" : int_expression(n.op, args, all_bool);
      if (e.empty()) throw Unsupported{"'" + n.op + "' is not an op the score_mod generator knows"};
      return define(v, "(" + e + ")", element);
    }
    if (binary && arithmetic.count(n.op))
      return define(v, "(" + cast(a[0], T) + " " + arithmetic.at(n.op) + " " + cast(a[1], T) + ")", element);
    if (binary && (n.op == "maximum" || n.op == "minimum"))
      return define(v, "flb_" + n.op.substr(0, 3) + "(" + cast(a[0], T) + ", " + cast(a[1], T) + ")", element);
    if (unary && a[0].value >= 0) {
      const std::string x = cast(a[0], T), e = ieee_unary(*unary, x, T == kFloat64);
      if (!e.empty()) return define(v, e, element);
      // eager's kernel on the value (in place on its buffer)
      define(v, x, element);
      const std::string name = "v" + std::to_string(v), fn = T == kFloat64 ? "unary_f64" : "unary_f32";
      const std::string code = std::to_string(int(*unary));
      if (element) element_.push_back({true, "rt->" + fn + "(" + code + ", " + name + ", " + name + ", m);"});
      else uniform_ << "  " << type << " " << name << "_k = " << name << ";\n  rt->" << fn << "(" << code << ", &"
                    << name << "_k, &" << name << "_k, 1);\n";
      if (!element) info_[v].ref = name + "_k";
      return;
    }
    throw Unsupported{"'" + n.op + "' is not an op the score_mod generator knows"};
  }

  // index(captured, [i0, i1, ...]): one element of the captured tensor per score.
  void index(const Graph::Node& n, int v) {
    if (n.args.size() != 2 || n.args[0].kind != Graph::Arg::Kind::Value ||
        g_.values[n.args[0].value].kind != Graph::Kind::Constant || n.args[1].kind != Graph::Arg::Kind::ValueList)
      throw Unsupported{"it indexes a tensor that is not a captured one"};
    const int table = n.args[0].value;
    const Dims& sizes = g_.values[table].meta.sizes;
    const std::vector<int>& idx = n.args[1].values;
    if (idx.size() != sizes.size()) throw Unsupported{"it indexes a captured tensor with fewer indices than dims"};
    const int slot = slot_of(table);
    std::string flat;
    bool element = false;
    int64_t stride = 1;
    for (size_t d = idx.size(); d-- > 0;) {
      if (idx[d] < 0) throw Unsupported{"it indexes a captured tensor with a slice or None"};
      const Operand o = operand_of(idx[d]);
      if (o.dtype != kInt64)
        throw Unsupported{"it indexes a captured tensor with " + std::string(dtype_name(o.dtype)) + " indices"};
      element = element || info_[idx[d]].element;
      flat = "flb_index(" + o.expr + ", " + std::to_string(sizes[d]) + ", &bad, " + std::to_string(slot + 1) + ") * " +
             std::to_string(stride) + (flat.empty() ? "" : " + " + flat);
      stride *= sizes[d];
    }
    const std::string name = "i" + std::to_string(v);
    if (element) {
      arrays_ << "      int64_t " << name << "[" << kChunk << "];\n";
      element_.push_back({false, name + "[e] = " + flat + ";"});
    } else {
      uniform_ << "  const int64_t " << name << " = " << flat << ";\n";
    }
    const std::string at = element ? name + "[e]" : name;
    define(v, read(slot, at), element);
    info_[v].slot = slot, info_[v].flat = at;
  }

  // The per-element reverse sweep (Note [Compiled score_mods]).
  std::string reverse_sweep() {
    const int out = g_.outputs[0];
    info_[out].on_path = is_floating(info_[out].dtype);
    std::ostringstream rev;
    auto g = [](int v) { return "g" + std::to_string(v); };
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
      const Graph::Node& n = *it->first;
      const std::vector<Operand>& a = it->second;
      const int v = n.outputs[0];
      if (!info_[v].on_path) continue;
      const std::string gv = g(v), y = info_[v].ref, T = c_type(info_[v].dtype);
      // Adds `share` to operand i's adjoint (a float value only).
      auto add = [&](size_t i, const std::string& share) {
        if (a[i].value < 0 || !is_floating(a[i].dtype)) return;
        info_[a[i].value].on_path = true;
        rev << "        " << g(a[i].value) << " += (" << c_type(a[i].dtype) << ")(" << share << ");\n";
      };
      auto x = [&](size_t i) { return cast(a[i], info_[v].dtype); };
      const std::string& op = n.op;
      if (op == "add") add(0, gv), add(1, gv);
      else if (op == "sub") add(0, gv), add(1, "-" + gv);
      else if (op == "mul") add(0, gv + " * " + x(1)), add(1, gv + " * " + x(0));
      else if (op == "div")
        add(0, gv + " / " + x(1)), add(1, "-" + gv + " * " + x(0) + " / (" + x(1) + " * " + x(1) + ")");
      else if (op == "maximum" || op == "minimum") {
        const std::string gt = op == "maximum" ? " > " : " < ";
        add(0, x(0) + gt + x(1) + " ? " + gv + " : " + x(0) + " == " + x(1) + " ? " + gv + " / 2 : " + T + "(0)");
        add(1, x(1) + gt + x(0) + " ? " + gv + " : " + x(0) + " == " + x(1) + " ? " + gv + " / 2 : " + T + "(0)");
      } else if (op == "where") {
        add(1, "bool(" + cast(a[0], kBool) + ") ? " + gv + " : " + T + "(0)");
        add(2, "bool(" + cast(a[0], kBool) + ") ? " + T + "(0) : " + gv);
      } else if (op == "to") add(0, gv);
      else if (op == "neg") add(0, "-" + gv);
      else if (op == "abs") add(0, x(0) + " > 0 ? " + gv + " : " + x(0) + " < 0 ? -" + gv + " : " + T + "(0)");
      else if (op == "exp") add(0, gv + " * " + y);
      else if (op == "log") add(0, gv + " / " + x(0));
      else if (op == "tanh") add(0, gv + " * (1 - " + y + " * " + y + ")");
      else if (op == "sigmoid") add(0, gv + " * (1 - " + y + ") * " + y);
      else if (op == "sqrt") add(0, gv + " / (2 * " + y + ")");
      else if (op == "rsqrt") add(0, T + "(-0.5) * " + gv + " * " + y + " * " + y + " * " + y);
      else if (op == "reciprocal") add(0, "-" + gv + " * " + y + " * " + y);
      else if (op == "relu") add(0, y + " > 0 ? " + gv + " : " + T + "(0)");
      else throw Unsupported{"no derivative for '" + op + "'"};
    }
    std::ostringstream s;
    s << "      for (int64_t e = 0; e < m; ++e) {\n";
    for (size_t v = 0; v < info_.size(); ++v)
      if (info_[v].on_path) s << "        " << c_type(info_[v].dtype) << " " << g(int(v)) << " = 0;\n";
    if (info_[out].on_path) s << "        " << g(out) << " += dsp[e];\n";
    s << rev.str();
    const int score = g_.inputs[0];
    s << "        dsp[e] = " << (info_[score].on_path ? "float(" + g(score) + ")" : "0.0f") << ";\n";
    for (size_t v = 0; v < info_.size(); ++v)
      if (info_[v].on_path && info_[v].slot >= 0)
        s << "        if (grads && grads[" << info_[v].slot << "]) grads[" << info_[v].slot << "][" << info_[v].flat
          << "] += double(" << g(int(v)) << ");\n";
    s << "      }\n";
    return s.str();
  }

  // One extern "C" function: the uniform values, then per row and chunk of columns the
  // element steps (inline ones fused into loops), then `tail` (the backward's sweep).
  void function(std::ostringstream& src, const std::string& name, const std::string& params,
                const std::vector<Step>& steps, const std::string& tail) {
    const bool backward = !tail.empty();
    src << "extern \"C\" int " << name << "(const flb_runtime* rt, const void* const* caps, " << params
        << ") {\n  int bad = 0;\n  (void)rt, (void)caps, (void)b, (void)h;\n" << uniform_.str()
        << "  for (int64_t r = 0; r < rows; ++r) {\n    const int64_t q = q0 + r;\n    (void)q;\n"
        << "    for (int64_t c0 = 0; c0 < cols; c0 += " << kChunk << ") {\n"
        << "      const int64_t m = cols - c0 < " << kChunk << " ? cols - c0 : " << kChunk << ";\n"
        << (backward ? "      const float* sp = s + r * ld + c0;\n      float* dsp = ds + r * ld + c0;\n"
                     : "      float* sp = s + r * ld + c0;\n")
        << "      (void)sp;\n" << arrays_.str();
    bool open = false;
    for (const Step& st : steps) {
      if (st.call == open) src << (open ? "      }\n" : "      for (int64_t e = 0; e < m; ++e) {\n");
      open = !st.call;
      src << (st.call ? "      " : "        ") << st.text << "\n";
    }
    if (open) src << "      }\n";
    src << tail << "    }\n  }\n  return bad;\n}\n";
  }

  const Graph& g_;
  std::vector<Info> info_;
  std::ostringstream uniform_, arrays_;
  std::vector<Step> element_;
  std::vector<std::pair<const Graph::Node*, std::vector<Operand>>> ops_;  // the nodes with their operands
};

}  // namespace

fa::ScoreModPtr compile_score_mod(const TensorFn& fn, std::string* why) {
  auto fail = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return fa::ScoreModPtr();
  };
  const std::vector<Tensor> in{arange(0, 6, 1, kFloat32).reshape({2, 3}), scalar_tensor(0, kInt64),
                               scalar_tensor(0, kInt64), arange(0, 2, 1, kInt64).reshape({2, 1}),
                               arange(0, 3, 1, kInt64).reshape({1, 3})};
  Trace t;
  {
    autograd::NoGradGuard no_grad;
    t = trace(fn, in, /*replayable=*/false);
  }
  if (!t.whole()) return fail("the trace breaks at '" + t.break_op + "': " + t.break_reason);
  if (t.graph.outputs.size() != 1) return fail("a score_mod returns one tensor");
  Generator gen(t.graph);
  std::string source;
  try {
    source = gen.source();
  } catch (const Unsupported& u) {
    return fail(u.why);
  }
  const Library lib = load_library(source);
  return std::make_shared<CompiledScore>(reinterpret_cast<ForwardFn>(lib.symbol("flb_forward")),
                                         reinterpret_cast<BackwardFn>(lib.symbol("flb_backward")), gen.captured);
}

}  // namespace flambeau::compiler
