// Binary and ternary elementwise ops: arithmetic, comparisons, logical ops, addcmul,
// addcdiv, lerp, clamp, where, and result_type (PyTorch's promotion with weak scalars).
#include <cmath>

#include "flambeau/core/op_hook.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {

// ---- type promotion ---------------------------------------------------------------
namespace {
std::optional<DType> promote_opt(std::optional<DType> a, DType b) { return a ? promote_types(*a, b) : b; }

// A lower tier (0-dim tensors, then Python scalars) only matters when it is of a
// higher category than the tier above it (c10's combine_categories).
std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower || is_floating(*higher)) return higher;
  if (*higher == kBool || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}
template <class Range>
DType result_type_of(const Range& tensors) {
  std::optional<DType> dim, zero, wrapped;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (t.impl()->wrapped_number) wrapped = promote_opt(wrapped, is_floating(t.dtype()) ? kDefaultFloat : t.dtype());
    else if (t.dim() == 0) zero = promote_opt(zero, t.dtype());
    else dim = promote_opt(dim, t.dtype());
  }
  return combine_categories(dim, combine_categories(zero, wrapped)).value_or(kDefaultFloat);
}
}  // namespace

DType result_type(const std::vector<Tensor>& tensors) { return result_type_of(tensors); }
DType result_type(const Tensor& a, const Tensor& b) {
  const std::reference_wrapper<const Tensor> ts[] = {a, b};
  return result_type_of(ts);
}

namespace {

// Integer arithmetic that wraps on overflow (as PyTorch does) instead of being UB.
template <class T>
T wrap(std::make_unsigned_t<T> v) { return T(v); }
template <class T>
using U = std::make_unsigned_t<T>;

template <class T>
T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) return base == 1 ? T(1) : base == -1 ? T(exp % 2 ? -1 : 1) : T(0);
  }
  U<T> r = 1, b = U<T>(base);
  for (U<T> e = U<T>(exp); e; e >>= 1, b *= b)
    if (e & 1) r *= b;
  return T(r);
}

// Python-style floor division of floats (sign of the result follows the quotient).
template <class T>
T float_floor_div(T a, T b) {
  if (b == 0) return a / b;
  const T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(T(0), a / b);
  T fl = std::floor(div);
  if (div - fl > T(0.5)) fl += 1;
  return fl;
}

template <class T>
auto scalar_fn(BinaryOp op, T alpha) {
  return [op, alpha](T a, T b) -> T {
    if constexpr (std::is_same_v<T, bool>) {
      switch (op) {
        case BinaryOp::add: return a || (alpha && b);
        case BinaryOp::mul: case BinaryOp::minimum: return a && b;
        case BinaryOp::maximum: return a || b;
        // Refused for bool before getting here (sub, the divisions) or computed in int64
        // (pow) or float (div, atan2).
        case BinaryOp::sub: case BinaryOp::div: case BinaryOp::floor_divide: case BinaryOp::trunc_divide: case BinaryOp::remainder:
        case BinaryOp::pow: case BinaryOp::atan2: case BinaryOp::fmod: case BinaryOp::hypot: case BinaryOp::copysign:
          return a;
      }
      return a;
    } else if constexpr (std::is_integral_v<T>) {
      switch (op) {
        case BinaryOp::add: return T(U<T>(a) + U<T>(alpha) * U<T>(b));
        case BinaryOp::sub: return T(U<T>(a) - U<T>(alpha) * U<T>(b));
        case BinaryOp::mul: return T(U<T>(a) * U<T>(b));
        case BinaryOp::floor_divide: {
          if (b == -1) return T(0 - U<T>(a));
          T q = T(a / b);
          if (a % b != 0 && ((a < 0) != (b < 0))) --q;
          return q;
        }
        case BinaryOp::trunc_divide: return b == -1 ? T(0 - U<T>(a)) : T(a / b);
        case BinaryOp::remainder: {
          if (b == -1) return T(0);
          T r = T(a % b);
          if (r != 0 && ((r < 0) != (b < 0))) r = T(r + b);
          return r;
        }
        case BinaryOp::pow: return int_pow(a, b);
        case BinaryOp::maximum: return std::max(a, b);
        case BinaryOp::minimum: return std::min(a, b);
        case BinaryOp::fmod: return b == -1 ? T(0) : T(a % b);  // C's remainder: the sign of a
        // Computed in float, never on integers.
        case BinaryOp::div: case BinaryOp::atan2: case BinaryOp::hypot: case BinaryOp::copysign: return a;
      }
      return a;
    } else {
      switch (op) {
        case BinaryOp::add: return a + alpha * b;
        case BinaryOp::sub: return a - alpha * b;
        case BinaryOp::mul: return a * b;
        case BinaryOp::div: return a / b;
        case BinaryOp::floor_divide: return float_floor_div(a, b);
        case BinaryOp::trunc_divide: return std::trunc(a / b);
        case BinaryOp::remainder: {
          T m = std::fmod(a, b);
          if (m != 0 && ((b < 0) != (m < 0))) m += b;
          return m;
        }
        case BinaryOp::pow: return std::pow(a, b);
        case BinaryOp::maximum: return std::isnan(a) ? a : std::isnan(b) ? b : std::max(a, b);
        case BinaryOp::minimum: return std::isnan(a) ? a : std::isnan(b) ? b : std::min(a, b);
        case BinaryOp::atan2: return std::atan2(a, b);
        case BinaryOp::fmod: return std::fmod(a, b);
        case BinaryOp::hypot: return std::hypot(a, b);
        case BinaryOp::copysign: return std::copysign(a, b);
      }
      return a;
    }
  };
}

std::optional<kernels::SimdBinaryOp> simd_op(BinaryOp op, const Scalar& alpha) {
  const bool unit = alpha.to_double() == 1.0;
  switch (op) {
    case BinaryOp::add: return unit ? std::optional(kernels::SimdBinaryOp::add) : std::nullopt;
    case BinaryOp::sub: return unit ? std::optional(kernels::SimdBinaryOp::sub) : std::nullopt;
    case BinaryOp::mul: return kernels::SimdBinaryOp::mul;
    case BinaryOp::div: return kernels::SimdBinaryOp::div;
    case BinaryOp::maximum: return kernels::SimdBinaryOp::maximum;
    case BinaryOp::minimum: return kernels::SimdBinaryOp::minimum;
    case BinaryOp::floor_divide: case BinaryOp::trunc_divide: case BinaryOp::remainder: case BinaryOp::pow: case BinaryOp::atan2:
    case BinaryOp::fmod: case BinaryOp::hypot: case BinaryOp::copysign:
      return std::nullopt;  // scalar loop
  }
  return std::nullopt;
}

Tensor binary(const char* name, BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha, Tensor* inplace) {
  if (inplace && autograd::needs_grad(a, b))
    return autograd::inplace_with_grad(name, *inplace, [&](const Tensor& self) {
      return binary(name, op, self, b, alpha, nullptr);
    });
  const Dims shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  DType dt = result_type(a, b);
  if (op == BinaryOp::sub)
    FLB_CHECK(a.dtype() != kBool && b.dtype() != kBool, TypeError, "[", name,
              "] subtraction, the `-` operator, with a bool tensor is not supported; use logical_xor() instead");
  const bool int_division = op == BinaryOp::floor_divide || op == BinaryOp::trunc_divide ||
                            op == BinaryOp::remainder || op == BinaryOp::fmod;
  if (int_division) FLB_CHECK(dt != kBool, TypeError, "[", name, "] not implemented for 'bool'");
  FLB_CHECK(op != BinaryOp::hypot || is_floating(dt), NotImplementedError, "[", name, "] not implemented for '",
            dtype_name(dt), "' (shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), ")");
  if (!is_floating(dt) && (op == BinaryOp::div || op == BinaryOp::atan2 || op == BinaryOp::copysign)) dt = kDefaultFloat;
  if (dt == kBool && op == BinaryOp::pow) dt = kInt64;
  if (!is_floating(dt) && int_division)
    FLB_CHECK(!any(eq(b, 0)).item<bool>(), Error, "[", name, "] ZeroDivisionError: integer division by zero");
  if (!is_floating(dt) && op == BinaryOp::add) FLB_CHECK(!alpha.is_floating(), TypeError, "[", name,
                                                    "] for integral input tensors, argument alpha must not be a floating point number");
  if (inplace) ops::check_inplace(name, *inplace, dt, shape);
  Tensor out = inplace ? *inplace : ops::empty_result(shape, dt, {a, b});
  Tensor b_copy;
  const Tensor& bb = inplace ? (b_copy = ops::unalias(out, b)) : b;
  ops::ElemLoop L = ops::make_elem_loop(out, {a, bb});
  const auto simd = simd_op(op, alpha);
  if (simd && (dt == kFloat32 || is_reduced_float(dt))) {
    ops::for_each_row(L, [&](char* const* p, const int64_t* st, int64_t n) {
      ops::typed_row<float, float, 2>(p, st, L.dtype, n, [&](float* o, const float* const* x, int64_t m) {
        kernels::binary_f32(*simd, x[0], x[1], o, m);
      });
    });
  } else if (simd && dt == kFloat64) {
    ops::for_each_row(L, [&](char* const* p, const int64_t* st, int64_t n) {
      ops::typed_row<double, double, 2>(p, st, L.dtype, n, [&](double* o, const double* const* x, int64_t m) {
        kernels::binary_f64(*simd, x[0], x[1], o, m);
      });
    });
  } else {
    ops::visit_compute_type(dt, [&]<class CT>() {
      ops::map_elementwise<CT, CT, 2>(L, scalar_fn<CT>(op, kernels::scalar_to<CT>(alpha)));
    });
  }
  if (inplace) out.bump_version();
  else autograd::record_binary(op, a, b, alpha, out);
  return out;
}

enum class Cmp { eq, ne, lt, le, gt, ge };

Tensor compare(const char* name, Cmp op, const Tensor& a, const Tensor& b) {
  const Dims shape = broadcast_shapes(a.sizes(), b.sizes(), name);
  const DType dt = result_type(a, b);
  Tensor out = ops::empty_result(shape, kBool, {a, b});
  ops::ElemLoop L = ops::make_elem_loop(out, {a, b});
  ops::visit_compute_type(dt, [&]<class CT>() {
    switch (op) {
      case Cmp::eq: return ops::map_elementwise<CT, bool, 2>(L, [](CT x, CT y) { return x == y; });
      case Cmp::ne: return ops::map_elementwise<CT, bool, 2>(L, [](CT x, CT y) { return x != y; });
      case Cmp::lt: return ops::map_elementwise<CT, bool, 2>(L, [](CT x, CT y) { return x < y; });
      case Cmp::le: return ops::map_elementwise<CT, bool, 2>(L, [](CT x, CT y) { return x <= y; });
      case Cmp::gt: return ops::map_elementwise<CT, bool, 2>(L, [](CT x, CT y) { return x > y; });
      case Cmp::ge: return ops::map_elementwise<CT, bool, 2>(L, [](CT x, CT y) { return x >= y; });
    }
  });
  return out;
}

template <class F>
Tensor logical(const char* name, const Tensor& a, const Tensor& b, const F& f) {
  Tensor out = ops::empty_result(broadcast_shapes(a.sizes(), b.sizes(), name), kBool, {a, b});
  ops::map_elementwise<bool, bool, 2>(ops::make_elem_loop(out, {a, b}), f);
  return out;
}

// A new output for a ternary op: the broadcast shape of its three operands.
Tensor ternary_out(const char* name, const Tensor& a, const Tensor& b, const Tensor& c, DType dt) {
  return ops::empty_result(broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes(), name), c.sizes(), name), dt,
                           {a, b, c});
}

}  // namespace

FLB_OP(add,
       (const Tensor& a, const Tensor& b, Scalar alpha),
       (a, b, alpha), Tensor) { return binary("add", BinaryOp::add, a, b, alpha, nullptr); }
FLB_OP(sub,
       (const Tensor& a, const Tensor& b, Scalar alpha),
       (a, b, alpha), Tensor) { return binary("sub", BinaryOp::sub, a, b, alpha, nullptr); }
FLB_OP(add_,
       (Tensor& a, const Tensor& b, Scalar alpha),
       (a, b, alpha), Tensor&) { return binary("add_", BinaryOp::add, a, b, alpha, &a), a; }
FLB_OP(sub_,
       (Tensor& a, const Tensor& b, Scalar alpha),
       (a, b, alpha), Tensor&) { return binary("sub_", BinaryOp::sub, a, b, alpha, &a), a; }
FLB_OP(mul_, (Tensor& a, const Tensor& b), (a, b), Tensor&) { return binary("mul_", BinaryOp::mul, a, b, 1, &a), a; }

static BinaryOp div_kind(const char* name, const std::string& mode) {
  FLB_CHECK(mode.empty() || mode == "floor" || mode == "trunc", ValueError, "[", name,
            "] expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", mode, "'");
  return mode.empty() ? BinaryOp::div : mode == "floor" ? BinaryOp::floor_divide : BinaryOp::trunc_divide;
}
FLB_OP(div, (const Tensor& a, const Tensor& b, const std::string& mode), (a, b, mode), Tensor) {
  return binary("div", div_kind("div", mode), a, b, 1, nullptr);
}
FLB_OP(div_, (Tensor& a, const Tensor& b, const std::string& mode), (a, b, mode), Tensor&) {
  return binary("div_", div_kind("div_", mode), a, b, 1, &a), a;
}

#define FLB_DEFINE_BINARY(name)                                   \
  FLB_OP(name, (const Tensor& a, const Tensor& b), (a, b), Tensor) { \
    return binary(#name, BinaryOp::name, a, b, 1, nullptr);              \
  }
#define FLB_DEFINE_BINARY_(name)                                                                 \
  FLB_OP(name##_, (Tensor& a, const Tensor& b), (a, b), Tensor&) {                              \
    return binary(#name "_", BinaryOp::name, a, b, 1, &a), a;                                         \
  }                                                                                              \
  Tensor& Tensor::name##_(const Tensor& o) { return flambeau::name##_(*this, o); }
FLB_BINARY_OPS(FLB_DEFINE_BINARY)
FLB_BINARY_INPLACE_OPS(FLB_DEFINE_BINARY_)
#undef FLB_DEFINE_BINARY
#undef FLB_DEFINE_BINARY_

#define FLB_DEFINE_COMPARE(name) \
  FLB_OP(name, (const Tensor& a, const Tensor& b), (a, b), Tensor) { return compare(#name, Cmp::name, a, b); }
FLB_COMPARE_OPS(FLB_DEFINE_COMPARE)
#undef FLB_DEFINE_COMPARE

FLB_OP(logical_and, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  return logical("logical_and", a, b, [](bool x, bool y) { return x && y; });
}
FLB_OP(logical_or, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  return logical("logical_or", a, b, [](bool x, bool y) { return x || y; });
}
FLB_OP(logical_xor, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  return logical("logical_xor", a, b, [](bool x, bool y) { return x != y; });
}

FLB_DIFF_OP(addcmul,
            (const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value),
            (self, t1, t2, value), Tensor) {
  const DType dt = result_type({self, t1, t2});
  Tensor out = ternary_out("addcmul", self, t1, t2, dt);
  ops::ElemLoop L = ops::make_elem_loop(out, {self, t1, t2});
  ops::visit_compute_type(dt, [&]<class CT>() {
    const CT v = kernels::scalar_to<CT>(value);
    if constexpr (std::is_same_v<CT, bool>) ops::map_elementwise<CT, CT, 3>(L, [v](bool a, bool b, bool c) { return a || (v && b && c); });
    else ops::map_elementwise<CT, CT, 3>(L, [v](CT a, CT b, CT c) { return CT(a + v * b * c); });
  });
  return out;
}

FLB_DIFF_OP(addcdiv,
            (const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value),
            (self, t1, t2, value), Tensor) {
  const DType dt = result_type({self, t1, t2});
  FLB_CHECK(is_floating(dt), TypeError, "[addcdiv] integer division with addcdiv is not supported (inputs ",
            dtype_name(t1.dtype()), " and ", dtype_name(t2.dtype()), ")");
  Tensor out = ternary_out("addcdiv", self, t1, t2, dt);
  ops::ElemLoop L = ops::make_elem_loop(out, {self, t1, t2});
  ops::visit_compute_type(dt, [&]<class CT>() {
    const CT v = kernels::scalar_to<CT>(value);
    ops::map_elementwise<CT, CT, 3>(L, [v](CT a, CT b, CT c) { return a + v * (b / c); });
  });
  return out;
}

FLB_DIFF_OP(lerp, (const Tensor& start, const Tensor& end, const Tensor& weight), (start, end, weight), Tensor) {
  FLB_CHECK(start.dtype() == end.dtype() && is_floating(start.dtype()), TypeError,
            "[lerp] expected start and end to be floating tensors of the same dtype, got ",
            dtype_name(start.dtype()), " and ", dtype_name(end.dtype()));
  Tensor out = ternary_out("lerp", start, end, weight, start.dtype());
  ops::ElemLoop L = ops::make_elem_loop(out, {start, end, weight});
  ops::visit_compute_type(start.dtype(), [&]<class CT>() {
    if constexpr (std::is_floating_point_v<CT>)
      ops::map_elementwise<CT, CT, 3>(L, [](CT s, CT e, CT w) {
        return std::abs(w) < CT(0.5) ? s + w * (e - s) : e - (e - s) * (CT(1) - w);
      });
  });
  return out;
}

namespace {
// In-place form of an op computed out of place: checks dtype and shape, then copies. Under
// autograd (`grad`) the op runs on a clone of self, so that the tensors it saves for
// backward are not the ones the copy overwrites.
template <class F>
Tensor& assign_inplace(const char* op, Tensor& self, bool grad, const F& compute) {
  if (grad) autograd::check_inplace_allowed(op, self);
  const Tensor result = compute(grad ? self.clone() : self);
  ops::check_inplace(op, self, result.dtype(), result.sizes());
  if (grad) return autograd::assign_with_grad(op, self, result);
  return self.copy_(result);
}
}  // namespace

FLB_OP(addcmul_,
       (Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value),
       (self, t1, t2, value), Tensor&) {
  return assign_inplace("addcmul_", self, autograd::needs_grad(self, t1, t2),
                        [&](const Tensor& s) { return addcmul(s, t1, t2, value); });
}
FLB_OP(addcdiv_,
       (Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value),
       (self, t1, t2, value), Tensor&) {
  return assign_inplace("addcdiv_", self, autograd::needs_grad(self, t1, t2),
                        [&](const Tensor& s) { return addcdiv(s, t1, t2, value); });
}
FLB_OP(lerp_, (Tensor& start, const Tensor& end, const Tensor& weight), (start, end, weight), Tensor&) {
  return assign_inplace("lerp_", start, autograd::needs_grad(start, end, weight),
                        [&](const Tensor& s) { return lerp(s, end, weight); });
}

FLB_DIFF_OP(clamp, (const Tensor& t, std::optional<Tensor> min, std::optional<Tensor> max), (t, min, max), Tensor) {
  FLB_CHECK(min || max, ValueError, "[clamp] at least one of 'min' or 'max' must not be None");
  Tensor r;
  r = min ? maximum(t, *min) : t;
  if (max) r = minimum(r, *max);
  return r;
}
FLB_OP(clamp_, (Tensor& t, std::optional<Tensor> min, std::optional<Tensor> max), (t, min, max), Tensor&) {
  const bool grad = autograd::needs_grad(t, min.value_or(Tensor()), max.value_or(Tensor()));
  return assign_inplace("clamp_", t, grad, [&](const Tensor& s) { return clamp(s, min, max); });
}

FLB_DIFF_OP(where, (const Tensor& cond, const Tensor& a, const Tensor& b), (cond, a, b), Tensor) {
  FLB_CHECK(cond.dtype() == kBool, TypeError, "[where] expected condition to be a boolean tensor, but got a tensor with dtype ",
            dtype_name(cond.dtype()));
  const DType dt = result_type(a, b);
  Tensor out = ternary_out("where", cond, a, b, dt);
  ops::ElemLoop L = ops::make_elem_loop(out, {cond, a, b});
  ops::visit_compute_type(dt, [&]<class CT>() {
    ops::map_elementwise<CT, CT, 3>(L, [](CT c, CT x, CT y) { return c != CT(0) ? x : y; });
  });
  return out;
}

// ---- Tensor methods -----------------------------------------------------------------
Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return flambeau::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return flambeau::sub(*this, o, alpha); }
Tensor Tensor::div(const Tensor& o) const { return flambeau::div(*this, o); }
Tensor& Tensor::add_(const Tensor& o, Scalar alpha) { return flambeau::add_(*this, o, alpha); }
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) { return flambeau::sub_(*this, o, alpha); }
Tensor& Tensor::mul_(const Tensor& o) { return flambeau::mul_(*this, o); }
Tensor& Tensor::div_(const Tensor& o) { return flambeau::div_(*this, o); }
#define FLB_METHOD(name) \
  Tensor Tensor::name(const Tensor& o) const { return flambeau::name(*this, o); }
FLB_BINARY_OPS(FLB_METHOD)
FLB_COMPARE_OPS(FLB_METHOD)
FLB_LOGICAL_OPS(FLB_METHOD)
#undef FLB_METHOD
Tensor Tensor::clamp(std::optional<Tensor> min, std::optional<Tensor> max) const {
  return flambeau::clamp(*this, std::move(min), std::move(max));
}
Tensor& Tensor::clamp_(std::optional<Tensor> min, std::optional<Tensor> max) {
  return flambeau::clamp_(*this, std::move(min), std::move(max));
}

}  // namespace flambeau
