// See mask_mod.h.
#include "flambeau/compile/mask_mod.h"

#include <map>
#include <sstream>

#include "flambeau/compile/build.h"
#include "flambeau/compile/codegen.h"
#include "flambeau/ops/ops.h"

namespace flambeau::compiler {

namespace {

namespace fa = flambeau::nn::attention;

using TileFn = void (*)(int64_t b, int64_t h, int64_t q0, int64_t rows, int64_t kv0, int64_t cols, int64_t ld,
                        uint8_t* out);
// s = -inf where the mask is false, in one pass.
using ApplyFn = void (*)(int64_t b, int64_t h, int64_t q0, int64_t rows, int64_t kv0, int64_t cols, int64_t ld,
                         float* s);
// The mask over a whole tile by interval arithmetic: 0 false everywhere, 1 true
// everywhere, 2 unknown (then the tile is evaluated).
using ClassifyFn = int (*)(int64_t b, int64_t h, int64_t q_lo, int64_t q_hi, int64_t kv_lo, int64_t kv_hi);

class CompiledMask final : public fa::MaskMod {
 public:
  CompiledMask(TileFn fn, ApplyFn apply, ClassifyFn classify, std::string name)
      : fn_(fn), apply_(apply), classify_(classify), name_(std::move(name)) {}
  void eval(const fa::Tile& t, uint8_t* out) const override { fn_(t.b, t.h, t.q0, t.rows, t.kv0, t.cols, t.ld, out); }
  void apply(const fa::Tile& t, float* s, uint8_t*) const override {
    apply_(t.b, t.h, t.q0, t.rows, t.kv0, t.cols, t.ld, s);
  }
  fa::BlockKind classify(const fa::Tile& t) const override {
    if (t.rows > 0 && t.cols > 0) {
      const int k = classify_(t.b, t.h, t.q0, t.q0 + t.rows - 1, t.kv0, t.kv0 + t.cols - 1);
      if (k == 0) return fa::BlockKind::empty;
      if (k == 1) return fa::BlockKind::full;
    }
    return MaskMod::classify(t);
  }
  std::string name() const override { return name_; }

 private:
  TileFn fn_;
  ApplyFn apply_;
  ClassifyFn classify_;
  std::string name_;
};

const char* kIntervalPrelude = R"(
// Interval arithmetic over a tile (indices are far from int64's range: no wrapping); bools
// as 0 (false), 1 (true), 2 (either).
struct I { int64_t lo, hi; };
static const I kAny{-(int64_t(1) << 40), int64_t(1) << 40};
static inline I i_add(I a, I b) { return {a.lo + b.lo, a.hi + b.hi}; }
static inline I i_sub(I a, I b) { return {a.lo - b.hi, a.hi - b.lo}; }
static inline I i_neg(I a) { return {-a.hi, -a.lo}; }
static inline I i_mul(I a, I b) {
  const int64_t p[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
  I r{p[0], p[0]};
  for (int64_t x : p) r.lo = x < r.lo ? x : r.lo, r.hi = x > r.hi ? x : r.hi;
  return r;
}
static inline I i_abs(I a) { return a.lo >= 0 ? a : a.hi <= 0 ? i_neg(a) : I{0, -a.lo > a.hi ? -a.lo : a.hi}; }
static inline I i_max(I a, I b) { return {a.lo > b.lo ? a.lo : b.lo, a.hi > b.hi ? a.hi : b.hi}; }
static inline I i_min(I a, I b) { return {a.lo < b.lo ? a.lo : b.lo, a.hi < b.hi ? a.hi : b.hi}; }
static inline I i_clip(I a) { return a.lo < kAny.lo || a.hi > kAny.hi ? kAny : a; }
static inline int t_lt(I a, I b) { return a.hi < b.lo ? 1 : a.lo >= b.hi ? 0 : 2; }
static inline int t_le(I a, I b) { return a.hi <= b.lo ? 1 : a.lo > b.hi ? 0 : 2; }
static inline int t_eq(I a, I b) { return a.lo == a.hi && b.lo == b.hi && a.lo == b.lo ? 1 : a.hi < b.lo || b.hi < a.lo ? 0 : 2; }
static inline int t_not(int a) { return a == 2 ? 2 : 1 - a; }
static inline int t_and(int a, int b) { return a == 0 || b == 0 ? 0 : a == 1 && b == 1 ? 1 : 2; }
static inline int t_or(int a, int b) { return a == 1 || b == 1 ? 1 : a == 0 && b == 0 ? 0 : 2; }
static inline int t_xor(int a, int b) { return a == 2 || b == 2 ? 2 : a ^ b; }
static inline int t_of(I a) { return a.lo == 0 && a.hi == 0 ? 0 : a.lo > 0 || a.hi < 0 ? 1 : 2; }  // int as bool
)";

// One node over intervals: the expression of its interval (int) or tri-state (bool); the
// ops interval arithmetic does not follow give "either" (kAny, 2).
std::string interval_expression(const std::string& op, const std::vector<std::string>& a,
                                const std::vector<bool>& is_bool, bool boolean_out) {
  auto tri = [&](size_t i) { return is_bool[i] ? a[i] : "t_of(" + a[i] + ")"; };
  auto ival = [&](size_t i) { return is_bool[i] ? "I{" + a[i] + " == 1 ? 1 : 0, " + a[i] + " == 0 ? 0 : 1}" : a[i]; };
  if (a.size() >= 2) {
    if (op == "lt") return "t_lt(" + ival(0) + ", " + ival(1) + ")";
    if (op == "le") return "t_le(" + ival(0) + ", " + ival(1) + ")";
    if (op == "gt") return "t_lt(" + ival(1) + ", " + ival(0) + ")";
    if (op == "ge") return "t_le(" + ival(1) + ", " + ival(0) + ")";
    if (op == "eq") return "t_eq(" + ival(0) + ", " + ival(1) + ")";
    if (op == "ne") return "t_not(t_eq(" + ival(0) + ", " + ival(1) + "))";
    if (boolean_out && (op == "logical_and" || op == "bitwise_and" || op == "mul"))
      return "t_and(" + tri(0) + ", " + tri(1) + ")";
    if (boolean_out && (op == "logical_or" || op == "bitwise_or" || op == "add"))
      return "t_or(" + tri(0) + ", " + tri(1) + ")";
    if (boolean_out && (op == "logical_xor" || op == "bitwise_xor")) return "t_xor(" + tri(0) + ", " + tri(1) + ")";
    if (!boolean_out && op == "add") return "i_clip(i_add(" + ival(0) + ", " + ival(1) + "))";
    if (!boolean_out && op == "sub") return "i_clip(i_sub(" + ival(0) + ", " + ival(1) + "))";
    if (!boolean_out && op == "mul") return "i_clip(i_mul(" + ival(0) + ", " + ival(1) + "))";
    if (!boolean_out && op == "maximum") return "i_max(" + ival(0) + ", " + ival(1) + ")";
    if (!boolean_out && op == "minimum") return "i_min(" + ival(0) + ", " + ival(1) + ")";
  }
  if (boolean_out && (op == "logical_not" || op == "bitwise_not")) return "t_not(" + tri(0) + ")";
  if (!boolean_out && op == "neg") return "i_neg(" + ival(0) + ")";
  if (!boolean_out && op == "abs") return "i_abs(" + ival(0) + ")";
  return boolean_out ? "2" : "kAny";
}

}  // namespace

fa::MaskModPtr compile_mask_mod(const TensorFn& fn, std::string* why) {
  auto fail = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return fa::MaskModPtr();
  };
  const std::vector<Tensor> idx{scalar_tensor(0, kInt64), scalar_tensor(0, kInt64),
                                arange(0, 2, 1, kInt64).reshape({2, 1}), arange(0, 3, 1, kInt64).reshape({1, 3})};
  Trace t = trace(fn, idx);
  if (!t.whole()) return fail("the trace breaks at '" + t.break_op + "': " + t.break_reason);
  const Graph& g = t.graph;
  if (g.outputs.size() != 1) return fail("a mask_mod returns one tensor");
  std::map<int, std::string> name{{g.inputs[0], "b"}, {g.inputs[1], "h"}, {g.inputs[2], "q"}, {g.inputs[3], "kv"}};
  std::ostringstream body, interval;
  std::map<int, std::string> iname{{g.inputs[0], "I{b, b}"}, {g.inputs[1], "I{h, h}"}, {g.inputs[2], "I{q_lo, q_hi}"},
                                   {g.inputs[3], "I{kv_lo, kv_hi}"}};
  for (const Graph::Node& n : g.nodes) {
    if (n.outputs.size() != 1) return fail("'" + n.op + "' has several outputs");
    const TensorMeta& out = g.values[n.outputs[0]].meta;
    if (out.dtype != kBool && out.dtype != kInt64) return fail("'" + n.op + "' makes a " + dtype_name(out.dtype));
    std::vector<std::string> args, iargs;
    std::vector<bool> arg_bool;
    bool all_bool = true;
    for (const Graph::Arg& a : n.args) {
      if (a.kind == Graph::Arg::Kind::Value) {
        if (!name.count(a.value)) return fail("'" + n.op + "' reads a tensor the mask_mod captured");
        args.push_back(name[a.value]);
        iargs.push_back(iname[a.value]);
        arg_bool.push_back(g.values[a.value].meta.dtype == kBool);
        all_bool = all_bool && arg_bool.back();
      } else if (const auto i = integer(a.constant)) {
        args.push_back("int64_t(" + std::to_string(*i) + ")");
        iargs.push_back("I{" + args.back() + ", " + args.back() + "}");
        arg_bool.push_back(false);
        all_bool = false;
      } else if (const auto* b = std::get_if<bool>(&a.constant)) {
        args.push_back(*b ? "true" : "false");
        iargs.push_back(*b ? "1" : "0");
        arg_bool.push_back(true);
      } else if (a.kind == Graph::Arg::Kind::ValueList || !std::holds_alternative<std::monostate>(a.constant)) {
        return fail("'" + n.op + "' takes an argument the generator does not know");
      }
    }
    // add/sub's alpha: 1 only
    if ((n.op == "add" || n.op == "sub") && args.size() == 3) {
      if (args[2] != "int64_t(1)") return fail("'" + n.op + "' with alpha");
      args.pop_back();
    }
    const std::string e = int_expression(n.op, args, all_bool);
    if (e.empty()) return fail("'" + n.op + "' is not an integer or bool op the generator knows");
    const std::string v = "v" + std::to_string(n.outputs[0]);
    body << "      const " << (out.dtype == kBool ? "bool " : "int64_t ") << v << " = " << e << ";\n";
    name[n.outputs[0]] = v;
    interval << "  const " << (out.dtype == kBool ? "int " : "I ") << v << " = "
             << interval_expression(n.op, iargs, arg_bool, out.dtype == kBool) << ";\n";
    iname[n.outputs[0]] = v;
  }
  if (!name.count(g.outputs[0])) return fail("the result is not computed from the indices");
  std::ostringstream src;
  // The tile loop around the mask's expression; `store` writes element (r, c) from `m`.
  auto tile_loop = [&](const std::string& fn, const std::string& out_type, const std::string& store) {
    src << "extern \"C\" void " << fn << "(int64_t b, int64_t h, int64_t q0, int64_t rows, int64_t kv0, "
        << "int64_t cols, int64_t ld, " << out_type << " out) {\n"
        << "  (void)b, (void)h;\n"
        << "  for (int64_t r = 0; r < rows; ++r) {\n    const int64_t q = q0 + r;\n    (void)q;\n"
        << "    for (int64_t c = 0; c < cols; ++c) {\n      const int64_t kv = kv0 + c;\n      (void)kv;\n"
        << body.str() << "      const bool m = bool(" << name[g.outputs[0]] << ");\n      " << store
        << "\n    }\n  }\n}\n";
  };
  src << "// Generated by flambeau.compile: a mask_mod.\n" << kIntPrelude << kIntervalPrelude;
  tile_loop("flb_mask", "unsigned char*", "out[r * ld + c] = (unsigned char)m;");
  tile_loop("flb_apply", "float*", "out[r * ld + c] = m ? out[r * ld + c] : -__builtin_inff();");
  src
      << "extern \"C\" int flb_classify(int64_t b, int64_t h, int64_t q_lo, int64_t q_hi, int64_t kv_lo, "
         "int64_t kv_hi) {\n"
      << interval.str() << "  return "
      << (g.values[g.outputs[0]].meta.dtype == kBool ? iname[g.outputs[0]] : "t_of(" + iname[g.outputs[0]] + ")")
      << ";\n}\n";
  const Library lib = load_library(src.str());
  return std::make_shared<CompiledMask>(reinterpret_cast<TileFn>(lib.symbol("flb_mask")),
                                        reinterpret_cast<ApplyFn>(lib.symbol("flb_apply")),
                                        reinterpret_cast<ClassifyFn>(lib.symbol("flb_classify")), "compiled_mask_mod");
}

}  // namespace flambeau::compiler
