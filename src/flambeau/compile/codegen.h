// Pieces shared by the C++ generators (the cpp backend, compiled mask_mods and score_mods):
// the table of flambeau functions generated code calls, literals, and the C++ forms of the
// elementwise ops whose results are eager's bits.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "flambeau/core/op_hook.h"
#include "flambeau/kernels/cpu/simd.h"

namespace flambeau::compiler {

// The table of flambeau functions generated code calls: one text, compiled here and pasted
// into the generated source (kRuntimeDecl), so the layouts agree.
#define FLB_RUNTIME_FIELDS                                                                                   \
  void (*unary_f32)(int op, const float* x, float* y, int64_t n);                                           \
  void (*binary_f32)(int op, const float* a, const float* b, float* y, int64_t n);                          \
  void (*parallel_for)(int64_t begin, int64_t end, int64_t grain, void (*fn)(void*, int64_t, int64_t), void* ctx); \
  double (*sum_f32)(const float* x, int64_t n);                                                             \
  double (*sum_sq_f32)(const float* x, int64_t n);                                                          \
  float (*max_f32)(const float* x, int64_t n);                                                              \
  float (*min_f32)(const float* x, int64_t n);                                                              \
  void (*unary_f64)(int op, const double* x, double* y, int64_t n);
#define FLB_TEXT(...) FLB_TEXT_(__VA_ARGS__)
#define FLB_TEXT_(...) #__VA_ARGS__

struct Runtime {
  FLB_RUNTIME_FIELDS
};
const Runtime& runtime();
// "#include <cmath>, <cstdint>" and struct flb_runtime (Runtime's layout).
extern const char* const kRuntimeDecl;

// The unary op of the schema table called `op`, or nothing.
std::optional<kernels::UnaryOp> unary_of(const std::string& op);
// A number as a C++ literal of a float32 value ("0x1.8p+0f", as eager rounds a Scalar), or of
// a float64 one.
std::string float_literal(double v);
std::string double_literal(double v);
// Unary op on the float expression x written inline (neg, abs, sqrt, rsqrt, reciprocal, relu:
// one or two IEEE operations, the SIMD kernel's bits with -ffp-contract=off), or "" for an op
// that calls its kernel. is_double: x is a double.
std::string ieee_unary(kernels::UnaryOp op, const std::string& x, bool is_double = false);

// Integer and bool index arithmetic (mask_mods, the index part of score_mods): int64 wraps as
// tensors wrap (w_add, ...) and Python's remainder / floor division (py_rem, py_div).
extern const char* const kIntPrelude;
// An integer constant argument (an int, or a Scalar holding one), or nothing.
std::optional<int64_t> integer(const op_hook::Value& v);
// An integer or bool op as a C++ expression of its operands' expressions (boolean: the
// operands are bools); empty when unsupported.
std::string int_expression(const std::string& op, const std::vector<std::string>& a, bool boolean);

}  // namespace flambeau::compiler
