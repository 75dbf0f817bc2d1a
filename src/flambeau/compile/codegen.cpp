// See codegen.h.
#include "flambeau/compile/codegen.h"

#include <cstdio>
#include <map>

#include "flambeau/core/parallel.h"

namespace flambeau::compiler {

const char* const kRuntimeDecl =
    "#include <cmath>\n#include <cstdint>\nstruct flb_runtime { " FLB_TEXT(FLB_RUNTIME_FIELDS) " };\n";

const Runtime& runtime() {
  static const Runtime r{
      [](int op, const float* x, float* y, int64_t n) { kernels::unary_f32(kernels::UnaryOp(op), x, y, n); },
      [](int op, const float* a, const float* b, float* y, int64_t n) {
        kernels::binary_f32(kernels::SimdBinaryOp(op), a, b, y, n);
      },
      [](int64_t begin, int64_t end, int64_t grain, void (*fn)(void*, int64_t, int64_t), void* ctx) {
        parallel_for(begin, end, grain, [&](int64_t lo, int64_t hi) { fn(ctx, lo, hi); });
      },
      [](const float* x, int64_t n) { return kernels::sum_f32(x, n); },
      [](const float* x, int64_t n) { return kernels::sum_sq_f32(x, n); },
      [](const float* x, int64_t n) { return kernels::max_f32(x, n); },
      [](const float* x, int64_t n) { return kernels::min_f32(x, n); },
      [](int op, const double* x, double* y, int64_t n) { kernels::unary_f64(kernels::UnaryOp(op), x, y, n); }};
  return r;
}

std::optional<kernels::UnaryOp> unary_of(const std::string& op) {
#define FLB_NAME(name, ...) \
  if (op == #name) return kernels::UnaryOp::name;
  FLB_UNARY_OPS(FLB_NAME)
#undef FLB_NAME
  return std::nullopt;
}

std::string float_literal(double v) { return double_literal(double(float(v))) + "f"; }

std::string double_literal(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", v);
  return b;
}

std::string ieee_unary(kernels::UnaryOp op, const std::string& x, bool is_double) {
  const std::string one = is_double ? "1.0" : "1.0f", zero = is_double ? "0.0" : "0.0f";
  using U = kernels::UnaryOp;
  switch (op) {
    case U::neg: return "(-" + x + ")";
    case U::abs: return "std::fabs(" + x + ")";
    case U::sqrt: return "std::sqrt(" + x + ")";
    case U::rsqrt: return "(" + one + " / std::sqrt(" + x + "))";
    case U::reciprocal: return "(" + one + " / " + x + ")";
    case U::relu: return "(" + x + " < " + zero + " ? " + zero + " : " + x + ")";
    default: return "";
  }
}

const char* const kIntPrelude = R"(#include <cstdint>
static inline int64_t w_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
static inline int64_t w_sub(int64_t a, int64_t b) { return int64_t(uint64_t(a) - uint64_t(b)); }
static inline int64_t w_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }
static inline int64_t w_abs(int64_t a) { return a < 0 ? w_sub(0, a) : a; }
static inline int64_t py_rem(int64_t a, int64_t b) { int64_t r = b ? a % b : 0; return r != 0 && ((r < 0) != (b < 0)) ? r + b : r; }
static inline int64_t py_div(int64_t a, int64_t b) { int64_t q = b ? a / b : 0; return (b && (a % b != 0) && ((a < 0) != (b < 0))) ? q - 1 : q; }
)";

std::optional<int64_t> integer(const op_hook::Value& v) {
  if (const auto* s = std::get_if<Scalar>(&v); s && !s->is_floating()) return s->to<int64_t>();
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return std::nullopt;
}

std::string int_expression(const std::string& op, const std::vector<std::string>& a, bool boolean) {
  static const std::map<std::string, std::string> compare{{"eq", "=="}, {"ne", "!="}, {"lt", "<"},
                                                          {"le", "<="}, {"gt", ">"},  {"ge", ">="}};
  if (auto it = compare.find(op); it != compare.end() && a.size() >= 2) return a[0] + " " + it->second + " " + a[1];
  if (a.size() >= 2) {
    if (op == "add") return boolean ? a[0] + " || " + a[1] : "w_add(" + a[0] + ", " + a[1] + ")";
    if (op == "sub" && !boolean) return "w_sub(" + a[0] + ", " + a[1] + ")";
    if (op == "mul") return boolean ? a[0] + " && " + a[1] : "w_mul(" + a[0] + ", " + a[1] + ")";
    if (op == "logical_and") return "bool(" + a[0] + ") && bool(" + a[1] + ")";
    if (op == "logical_or") return "bool(" + a[0] + ") || bool(" + a[1] + ")";
    if (op == "logical_xor") return "bool(" + a[0] + ") != bool(" + a[1] + ")";
    if (op == "bitwise_and") return a[0] + " & " + a[1];
    if (op == "bitwise_or") return a[0] + " | " + a[1];
    if (op == "bitwise_xor") return a[0] + " ^ " + a[1];
    if (op == "maximum") return a[0] + " > " + a[1] + " ? " + a[0] + " : " + a[1];
    if (op == "minimum") return a[0] + " < " + a[1] + " ? " + a[0] + " : " + a[1];
    if (op == "remainder" && !boolean) return "py_rem(" + a[0] + ", " + a[1] + ")";
    if (op == "floor_divide" && !boolean) return "py_div(" + a[0] + ", " + a[1] + ")";
  }
  if (op == "where" && a.size() == 3) return "bool(" + a[0] + ") ? " + a[1] + " : " + a[2];
  if (op == "logical_not") return "!bool(" + a[0] + ")";
  if (op == "bitwise_not") return boolean ? "!" + a[0] : "~" + a[0];
  if (op == "neg" && !boolean) return "w_sub(0, " + a[0] + ")";
  if (op == "abs" && !boolean) return "w_abs(" + a[0] + ")";
  return "";
}

}  // namespace flambeau::compiler
