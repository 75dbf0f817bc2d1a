// Unary elementwise ops (the FLB_UNARY_OPS table, gelu, softplus, isnan/isinf/isfinite,
// logical_not). Floating inputs run the SIMD kernels; integer inputs either keep their
// type (neg, abs, sign, relu, rounding) or are computed in float32.
#include <cmath>

#include "flambeau/core/op_hook.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/kernels/cpu/special_functions.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

using kernels::UnaryOp;
enum class UnaryKind { ToFloat, KeepInt, FloatOnly };

// Integer (and bool) versions of the KeepInt ops.
template <class T>
T int_unary(UnaryOp op, T x) {
  if constexpr (std::is_same_v<T, bool>) {
    return x;  // only sign reaches here for bool
  } else {
    switch (op) {
      case UnaryOp::neg: return T(0 - std::make_unsigned_t<T>(x));  // wraps like PyTorch, no UB
      case UnaryOp::abs: return x < 0 ? T(0 - std::make_unsigned_t<T>(x)) : x;
      case UnaryOp::sign: return T((T(0) < x) - (x < T(0)));
      case UnaryOp::relu: return x < 0 ? T(0) : x;
      case UnaryOp::floor: case UnaryOp::ceil: case UnaryOp::round: case UnaryOp::trunc: return x;  // exact
      // ToFloat and FloatOnly ops never run on integers: their cases come from the table.
#define FLB_FLOAT_CASE(name, kind, ...) FLB_FLOAT_CASE_##kind(name)
#define FLB_FLOAT_CASE_ToFloat(name) case UnaryOp::name:
#define FLB_FLOAT_CASE_FloatOnly(name) case UnaryOp::name:
#define FLB_FLOAT_CASE_KeepInt(name)
      FLB_UNARY_OPS(FLB_FLOAT_CASE)
#undef FLB_FLOAT_CASE
#undef FLB_FLOAT_CASE_ToFloat
#undef FLB_FLOAT_CASE_FloatOnly
#undef FLB_FLOAT_CASE_KeepInt
      case UnaryOp::gelu_erf: case UnaryOp::gelu_tanh: return x;
    }
    return x;
  }
}

// Runs a floating unary kernel (float or double compute) from `in` into `out`.
void run_float_unary(UnaryOp op, const Tensor& in, const Tensor& out) {
  ops::ElemLoop L = ops::make_elem_loop(out, {in});
  if (out.dtype() == kFloat64) {
    ops::for_each_row(L, [&](char* const* p, const int64_t* st, int64_t n) {
      ops::typed_row<double, double, 1>(p, st, L.dtype, n, [&](double* o, const double* const* x, int64_t m) {
        kernels::unary_f64(op, x[0], o, m);
      });
    });
  } else {
    ops::for_each_row(L, [&](char* const* p, const int64_t* st, int64_t n) {
      ops::typed_row<float, float, 1>(p, st, L.dtype, n, [&](float* o, const float* const* x, int64_t m) {
        kernels::unary_f32(op, x[0], o, m);
      });
    });
  }
}

Tensor unary(const char* name, UnaryOp op, UnaryKind kind, const Tensor& t, Tensor* inplace) {
  if (inplace && autograd::needs_grad(*inplace))
    return autograd::inplace_with_grad(name, *inplace, [&](const Tensor& self) {
      return unary(name, op, kind, self, nullptr);
    });
  const DType in_dt = t.dtype();
  DType out_dt = in_dt;
  if (!is_floating(in_dt)) {
    FLB_CHECK(kind != UnaryKind::FloatOnly, TypeError, "[", name, "] not implemented for '", dtype_name(in_dt),
              "': expected a floating point tensor");
    if (kind == UnaryKind::ToFloat) out_dt = kDefaultFloat;
    FLB_CHECK(!(in_dt == kBool && kind == UnaryKind::KeepInt && op != UnaryOp::sign), TypeError, "[", name,
              "] not supported on bool tensors",
              op == UnaryOp::neg ? "; use logical_not() to invert a mask" : "");
  }
  if (inplace) ops::check_inplace(name, *inplace, out_dt, t.sizes());
  Tensor out = inplace ? *inplace : ops::empty_result(t.sizes(), out_dt, {t});
  if (is_floating(out_dt)) {
    run_float_unary(op, t, out);
  } else {
    ops::ElemLoop L = ops::make_elem_loop(out, {t});
    visit_dtype(out_dt, [&]<class T>() {
      if constexpr (std::is_integral_v<T>)
        ops::map_elementwise<T, T, 1>(L, [op](T x) { return int_unary(op, x); });
    });
  }
  if (inplace) out.bump_version();
  else autograd::record_unary(op, t, out);
  return out;
}

template <class F>
Tensor predicate(const Tensor& t, const F& f) {
  Tensor out = ops::empty_result(t.sizes(), kBool, {t});
  ops::ElemLoop L = ops::make_elem_loop(out, {t});
  ops::visit_compute_type(t.dtype(), [&]<class CT>() { ops::map_elementwise<CT, bool, 1>(L, f); });
  return out;
}

}  // namespace

#define FLB_DEFINE_UNARY(name, kind, ...)                                                             \
  FLB_OP(name, (const Tensor& t), (t), Tensor) {                                                      \
    return unary(#name, UnaryOp::name, UnaryKind::kind, t, nullptr);                                  \
  }                                                                                                   \
  FLB_OP(name##_, (Tensor& t), (t), Tensor&) {                                                        \
    unary(#name "_", UnaryOp::name, UnaryKind::kind, t, &t);                                          \
    return t;                                                                                         \
  }                                                                                                   \
  Tensor Tensor::name() const { return flambeau::name(*this); }                                      \
  Tensor& Tensor::name##_() { return flambeau::name##_(*this); }
FLB_UNARY_OPS(FLB_DEFINE_UNARY)
#undef FLB_DEFINE_UNARY

Tensor ops::special_unary(SpecialFn fn, const Tensor& x) {
  Tensor out = empty(x.sizes(), x.dtype());
  ops::ElemLoop L = ops::make_elem_loop(out, {x});
  ops::map_elementwise<double, double, 1>(L, [fn](double v) {
    return fn == SpecialFn::trigamma ? kernels::special::trigamma(v) : kernels::special::i1(v);
  });
  return out;
}

FLB_OP(gelu, (const Tensor& t, const std::string& approximate), (t, approximate), Tensor) {
  FLB_CHECK(approximate == "none" || approximate == "tanh", ValueError,
            "[gelu] approximate argument must be either none or tanh, got '", approximate, "'");
  return unary("gelu", approximate == "tanh" ? UnaryOp::gelu_tanh : UnaryOp::gelu_erf, UnaryKind::FloatOnly, t,
               nullptr);
}

FLB_DIFF_OP(softplus, (const Tensor& t, double beta, double threshold), (t, beta, threshold), Tensor) {
  FLB_CHECK(is_floating(t.dtype()), TypeError, "[softplus] not implemented for '", dtype_name(t.dtype()),
            "': expected a floating point tensor");
  Tensor out = ops::empty_result(t.sizes(), t.dtype(), {t});
  ops::ElemLoop L = ops::make_elem_loop(out, {t});
  ops::visit_compute_type(t.dtype(), [&]<class CT>() {
    const CT b = CT(beta), th = CT(threshold);
    ops::map_elementwise<CT, CT, 1>(L, [=](CT x) { return x * b > th ? x : std::log1p(std::exp(x * b)) / b; });
  });
  return out;
}

FLB_OP(isnan, (const Tensor& t), (t), Tensor) {
  return predicate(t, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>) return std::isnan(x);
    else return false;
  });
}
FLB_OP(isinf, (const Tensor& t), (t), Tensor) {
  return predicate(t, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>) return std::isinf(x);
    else return false;
  });
}
FLB_OP(isfinite, (const Tensor& t), (t), Tensor) {
  return predicate(t, [](auto x) {
    if constexpr (std::is_floating_point_v<decltype(x)>) return std::isfinite(x);
    else return true;
  });
}
FLB_OP(logical_not, (const Tensor& t), (t), Tensor) {
  return predicate(t, [](auto x) { return !kernels::cast_value<bool>(x); });
}
Tensor Tensor::logical_not() const { return flambeau::logical_not(*this); }

}  // namespace flambeau
