// Backward formulas of the elementwise ops. Gradients may come back in the broadcast
// output shape: FunctionNode sums them to each input's shape.
#include <cmath>
#include <type_traits>

#include "flambeau/autograd/derivatives.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"

namespace flambeau::autograd {
using kernels::UnaryOp;

namespace {
// What the backward of a unary op saves: as in PyTorch only the tensor its formula needs,
// so that in-place changes to the other one are allowed.
enum class Saves { nothing, input, output };
struct UnaryRule {
  const char* name;  // PyTorch's node name
  Saves saves;
};

// One case per op, no default: a new op fails to build until its backward is written here.
UnaryRule unary_rule(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return {"NegBackward0", Saves::nothing};
    case UnaryOp::abs: return {"AbsBackward0", Saves::input};
    case UnaryOp::sign: return {"SignBackward0", Saves::nothing};
    case UnaryOp::exp: return {"ExpBackward0", Saves::output};
    case UnaryOp::exp2: return {"Exp2Backward0", Saves::output};
    case UnaryOp::expm1: return {"Expm1Backward0", Saves::output};
    case UnaryOp::log: return {"LogBackward0", Saves::input};
    case UnaryOp::log2: return {"Log2Backward0", Saves::input};
    case UnaryOp::log10: return {"Log10Backward0", Saves::input};
    case UnaryOp::log1p: return {"Log1PBackward0", Saves::input};
    case UnaryOp::sqrt: return {"SqrtBackward0", Saves::output};
    case UnaryOp::rsqrt: return {"RsqrtBackward0", Saves::output};
    case UnaryOp::reciprocal: return {"ReciprocalBackward0", Saves::output};
    case UnaryOp::sin: return {"SinBackward0", Saves::input};
    case UnaryOp::cos: return {"CosBackward0", Saves::input};
    case UnaryOp::tan: return {"TanBackward0", Saves::output};
    case UnaryOp::asin: return {"AsinBackward0", Saves::input};
    case UnaryOp::acos: return {"AcosBackward0", Saves::input};
    case UnaryOp::atan: return {"AtanBackward0", Saves::input};
    case UnaryOp::sinh: return {"SinhBackward0", Saves::input};
    case UnaryOp::cosh: return {"CoshBackward0", Saves::input};
    case UnaryOp::asinh: return {"AsinhBackward0", Saves::input};
    case UnaryOp::acosh: return {"AcoshBackward0", Saves::input};
    case UnaryOp::atanh: return {"AtanhBackward0", Saves::input};
    case UnaryOp::tanh: return {"TanhBackward0", Saves::output};
    case UnaryOp::sigmoid: return {"SigmoidBackward0", Saves::output};
    case UnaryOp::relu: return {"ReluBackward0", Saves::output};
    case UnaryOp::silu: return {"SiluBackward0", Saves::input};
    case UnaryOp::erf: return {"ErfBackward0", Saves::input};
    case UnaryOp::erfinv: return {"ErfinvBackward0", Saves::output};
    case UnaryOp::lgamma: return {"LgammaBackward0", Saves::input};
    case UnaryOp::digamma: return {"DigammaBackward0", Saves::input};
    case UnaryOp::i0: return {"I0Backward0", Saves::input};
    case UnaryOp::floor: return {"FloorBackward0", Saves::nothing};
    case UnaryOp::ceil: return {"CeilBackward0", Saves::nothing};
    case UnaryOp::round: return {"RoundBackward0", Saves::nothing};
    case UnaryOp::trunc: return {"TruncBackward0", Saves::nothing};
    case UnaryOp::gelu_erf: return {"GeluBackward0", Saves::input};
    case UnaryOp::gelu_tanh: return {"GeluBackward0", Saves::input};
  }
  FLB_CHECK(false, Error, "[autograd] unknown unary op ", int(op));
}

// d out / d in from the input x or the output y (whichever unary_rule saves); undefined
// for the ops whose derivative is zero wherever it exists.
Tensor unary_derivative(UnaryOp op, const Tensor& x, const Tensor& y) {
  switch (op) {
    case UnaryOp::neg: return Tensor(-1.0);
    case UnaryOp::abs: return sign(x);
    case UnaryOp::exp: return y;
    case UnaryOp::exp2: return mul(y, std::log(2.0));
    case UnaryOp::expm1: return add(y, 1);
    case UnaryOp::log: return reciprocal(x);
    case UnaryOp::log2: return reciprocal(mul(x, std::log(2.0)));
    case UnaryOp::log10: return reciprocal(mul(x, std::log(10.0)));
    case UnaryOp::log1p: return reciprocal(add(x, 1));
    case UnaryOp::sqrt: return div(Tensor(0.5), y);
    case UnaryOp::rsqrt: return mul(pow(y, 3), -0.5);
    case UnaryOp::reciprocal: return neg(mul(y, y));
    case UnaryOp::sin: return cos(x);
    case UnaryOp::cos: return neg(sin(x));
    case UnaryOp::tan: return add(mul(y, y), 1);
    case UnaryOp::asin: return rsqrt(sub(Tensor(1), mul(x, x)));
    case UnaryOp::acos: return neg(rsqrt(sub(Tensor(1), mul(x, x))));
    case UnaryOp::atan: return reciprocal(add(mul(x, x), 1));
    case UnaryOp::sinh: return cosh(x);
    case UnaryOp::cosh: return sinh(x);
    case UnaryOp::asinh: return rsqrt(add(mul(x, x), 1));
    case UnaryOp::acosh: return rsqrt(sub(mul(x, x), 1));
    case UnaryOp::atanh: return reciprocal(sub(Tensor(1), mul(x, x)));
    case UnaryOp::tanh: return sub(Tensor(1), mul(y, y));
    case UnaryOp::sigmoid: return mul(y, sub(Tensor(1), y));
    case UnaryOp::relu: return gt(y, 0).to(y.dtype());
    case UnaryOp::silu: {
      const Tensor s = sigmoid(x);
      return mul(s, add(mul(x, sub(Tensor(1), s)), 1));
    }
    case UnaryOp::erf: return mul(exp(neg(mul(x, x))), 2.0 / std::sqrt(M_PI));
    case UnaryOp::erfinv: return mul(exp(mul(y, y)), std::sqrt(M_PI) / 2);
    case UnaryOp::lgamma: return digamma(x);
    case UnaryOp::digamma: return ops::special_unary(ops::SpecialFn::trigamma, x);
    case UnaryOp::i0: return ops::special_unary(ops::SpecialFn::i1, x);
    case UnaryOp::gelu_erf: {
      const Tensor cdf = mul(add(erf(mul(x, M_SQRT1_2)), 1), 0.5);
      const Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 1.0 / std::sqrt(2 * M_PI));
      return add(cdf, mul(x, pdf));
    }
    case UnaryOp::gelu_tanh: {
      const double k = std::sqrt(2.0 / M_PI), c = 0.044715;
      const Tensor x2 = mul(x, x);
      const Tensor inner = mul(mul(x, add(mul(x2, c), 1)), k);
      const Tensor t = tanh(inner);
      const Tensor dinner = mul(add(mul(x2, 3 * c), 1), k);
      return add(mul(add(t, 1), 0.5), mul(mul(mul(x, sub(Tensor(1), mul(t, t))), dinner), 0.5));
    }
    // Piecewise constant: the derivative is zero wherever it exists (as in PyTorch).
    case UnaryOp::sign: return Tensor();
    case UnaryOp::floor: return Tensor();
    case UnaryOp::ceil: return Tensor();
    case UnaryOp::round: return Tensor();
    case UnaryOp::trunc: return Tensor();
  }
  FLB_CHECK(false, Error, "[autograd] unknown unary op ", int(op));
}
}  // namespace

// relu's gradient selects, as torch's threshold_backward: 0 where y <= 0 (even for an inf
// or NaN gradient), the gradient elsewhere (y NaN included). One pass over the memory for
// same-shape float tensors laid out alike without holes (row-major, channels-last, ...)
// when no graph is built and nobody listens to the op hook; where() otherwise
// (differentiable for create_graph, and ops the compiler's trace of a backward sees).
static Tensor relu_backward(const Tensor& g, const Tensor& y) {
  const bool fused = !grad_mode_enabled() && !op_hook::active() && g.sizes() == y.sizes() && g.dtype() == y.dtype() &&
                     (g.dtype() == kFloat32 || g.dtype() == kFloat64) && g.strides() == y.strides() &&
                     is_non_overlapping_and_dense(g);
  if (!fused) return where(le(y, 0), Tensor(0.0), g);
  Tensor out = empty_like(g, g.dtype(), MemoryFormat::Preserve);
  visit_dtype(g.dtype(), [&]<class T>() {
    if constexpr (std::is_floating_point_v<T>) {
      const T *gp = g.data<T>(), *yp = y.data<T>();
      T* o = out.data<T>();
      parallel_for(0, g.numel(), 1 << 15, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const T gi = gp[i];  // loaded whatever the test: the select then vectorizes
          o[i] = yp[i] <= T(0) ? T(0) : gi;
        }
      });
    }
  });
  return out;
}

void record_unary(UnaryOp op, const Tensor& in, Tensor& out) {
  if (!needs_grad(in)) return;
  const UnaryRule rule = unary_rule(op);
  const bool x = rule.saves == Saves::input, y = rule.saves == Saves::output;
  record(rule.name, {&out}, {&in}, {x ? in : Tensor(), y ? out : Tensor()},
         [op](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
           if (op == UnaryOp::relu) return std::vector<Tensor>{relu_backward(g[0], s[1])};
           const Tensor d = unary_derivative(op, s[0], s[1]);
           return std::vector<Tensor>{d.defined() ? mul(g[0], d) : zeros_like(g[0])};
         });
}

void record_softplus(const Tensor& in, double beta, double threshold, Tensor& out) {
  record("SoftplusBackward0", {&out}, {&in}, {in}, [beta, threshold](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    const Tensor bx = mul(s[0], beta);
    return std::vector<Tensor>{mul(g[0], where(gt(bx, threshold), Tensor(1.0), sigmoid(bx)))};
  });
}

namespace {
// PyTorch's node names; its overloads (numbered) depend on which operand is a Python number.
const char* binary_node_name(BinaryOp op, const Tensor& a, const Tensor& b) {
  const bool a_number = a.impl()->wrapped_number, b_number = b.impl()->wrapped_number;
  switch (op) {
    case BinaryOp::add: return "AddBackward0";
    case BinaryOp::sub: return a_number && !b_number ? "RsubBackward1" : "SubBackward0";  // 2 - x is rsub
    case BinaryOp::mul: return "MulBackward0";
    case BinaryOp::div: return "DivBackward0";
    case BinaryOp::floor_divide: return "DivBackward2";  // div(rounding_mode=...)
    case BinaryOp::trunc_divide: return "DivBackward2";
    case BinaryOp::maximum: return "MaximumBackward0";
    case BinaryOp::minimum: return "MinimumBackward0";
    case BinaryOp::pow: return b_number ? "PowBackward0" : a_number ? "PowBackward2" : "PowBackward1";
    case BinaryOp::atan2: return "Atan2Backward0";
    case BinaryOp::remainder: return b_number ? "RemainderBackward0" : "RemainderBackward1";
    case BinaryOp::fmod: return b_number ? "FmodBackward0" : "FmodBackward1";
    case BinaryOp::hypot: return "HypotBackward0";
    case BinaryOp::copysign: return b_number ? "CopysignBackward1" : "CopysignBackward0";
  }
  FLB_CHECK(false, Error, "[autograd] unknown binary op ", int(op));
}
}  // namespace

void record_binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha, Tensor& out) {
  if (!needs_grad(a, b)) return;
  const double al = alpha.to_double();
  BackwardFn fn;
  std::vector<Tensor> saved;
  switch (op) {
    case BinaryOp::add:
    case BinaryOp::sub: {
      const double sb = op == BinaryOp::add ? al : -al;
      fn = [sb](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
        return std::vector<Tensor>{g[0], sb == 1 ? g[0] : mul(g[0], sb)};
      };
      break;
    }
    case BinaryOp::mul:
      saved = {requires_grad(b) ? a : Tensor(), requires_grad(a) ? b : Tensor()};
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        return std::vector<Tensor>{s[1].defined() ? mul(g[0], s[1]) : Tensor(), s[0].defined() ? mul(g[0], s[0]) : Tensor()};
      };
      break;
    case BinaryOp::div:
      saved = {a, b};
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        const Tensor ga = div(g[0], s[1]);
        return std::vector<Tensor>{ga, neg(mul(ga, div(s[0], s[1])))};
      };
      break;
    case BinaryOp::maximum:
    case BinaryOp::minimum: {
      const bool is_max = op == BinaryOp::maximum;
      saved = {a, b};
      fn = [is_max](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        // Ties split the gradient in half, as in PyTorch.
        const Tensor a_wins = (is_max ? gt(s[0], s[1]) : lt(s[0], s[1])).to(g[0].dtype());
        const Tensor tie = eq(s[0], s[1]).to(g[0].dtype());
        const Tensor wa = add(a_wins, mul(tie, 0.5));
        return std::vector<Tensor>{mul(g[0], wa), mul(g[0], sub(Tensor(1), wa))};
      };
      break;
    }
    case BinaryOp::pow:
      saved = {a, b, out};
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        const Tensor& x = s[0];
        const Tensor& p = s[1];
        // A number exponent minus 1 stays a number of full precision (sub of two numbers is float32).
        const Tensor p1 = !p.impl()->wrapped_number ? sub(p, 1)
                          : p.dtype() == kFloat64   ? Tensor(Scalar(*p.data<double>() - 1))
                          : p.dtype() == kInt64     ? Tensor(Scalar(*p.data<int64_t>() - 1))
                                                    : sub(p, 1);
        const Tensor gx = mul(g[0], mul(p, pow(x, p1)));
        // d/dp x^p = x^p log x, taken as 0 where x == 0 (and p >= 0), as PyTorch does.
        const Tensor gp = mul(g[0], where(logical_and(eq(x, 0), ge(p, 0)), Tensor(0.0), mul(s[2], log(x))));
        return std::vector<Tensor>{where(eq(p, 0), Tensor(0.0), gx), gp};
      };
      break;
    case BinaryOp::atan2:
      saved = {a, b};
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        const Tensor denom = add(mul(s[0], s[0]), mul(s[1], s[1]));
        return std::vector<Tensor>{mul(g[0], div(s[1], denom)), neg(mul(g[0], div(s[0], denom)))};
      };
      break;
    case BinaryOp::remainder:
      saved = {a, b};
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        return std::vector<Tensor>{g[0], neg(mul(g[0], floor(div(s[0], s[1]))))};
      };
      break;
    case BinaryOp::fmod:
      saved = {a, b};
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        return std::vector<Tensor>{g[0], neg(mul(g[0], trunc(div(s[0], s[1]))))};
      };
      break;
    case BinaryOp::hypot:
      saved = {a, b, out};
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        const Tensor scale = div(g[0], s[2]);
        return std::vector<Tensor>{mul(scale, s[0]), mul(scale, s[1])};
      };
      break;
    case BinaryOp::copysign:
      // d/da copysign(a, b) = out / a: +-1, taken as 0 at a == 0 (as PyTorch); zero for b.
      saved = {a, out};
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
        const Tensor ratio = where(eq(s[0], 0), Tensor(0.0), div(s[1], s[0]));
        return std::vector<Tensor>{mul(g[0], ratio), zeros_like(g[0])};
      };
      break;
    case BinaryOp::floor_divide:
    case BinaryOp::trunc_divide:  // piecewise constant: zero gradient wherever it exists
      fn = [](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
        return std::vector<Tensor>{zeros_like(g[0]), zeros_like(g[0])};
      };
      break;
  }
  record(binary_node_name(op, a, b), {&out}, {&a, &b}, std::move(saved), std::move(fn));
}

void record_where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out) {
  if (!needs_grad(a, b)) return;
  record("WhereBackward0", {&out}, {nullptr, &a, &b}, {cond}, [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    const Tensor zero = zeros({}, g[0].dtype());
    return std::vector<Tensor>{Tensor(), where(s[0], g[0], zero), where(s[0], zero, g[0])};
  });
}

void record_clamp(const Tensor& t, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi, Tensor& out) {
  const Tensor l = lo.value_or(Tensor()), h = hi.value_or(Tensor());
  if (!needs_grad(t, l, h)) return;
  // ClampBackward1: bounds given as numbers; ClampBackward0: as tensors.
  const bool numbers = (!l.defined() || l.impl()->wrapped_number) && (!h.defined() || h.impl()->wrapped_number);
  record(numbers ? "ClampBackward1" : "ClampBackward0", {&out}, {&t, &l, &h}, {t, l, h}, [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    const Tensor zero = zeros({}, g[0].dtype());
    Tensor pass = g[0], gl, gh;
    if (s[1].defined()) {
      const Tensor below = lt(s[0], s[1]);
      gl = where(below, g[0], zero);
      pass = where(below, zero, pass);
    }
    if (s[2].defined()) {
      const Tensor above = gt(s[0], s[2]);
      gh = where(above, g[0], zero);
      pass = where(above, zero, pass);
    }
    return std::vector<Tensor>{pass, gl, gh};
  });
}

void record_addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value, bool divide, Tensor& out) {
  if (!needs_grad(self, t1, t2)) return;
  const double v = value.to_double();
  record(divide ? "AddcdivBackward0" : "AddcmulBackward0", {&out}, {&self, &t1, &t2}, {t1, t2},
         [v, divide](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
           if (!divide) return std::vector<Tensor>{g[0], mul(g[0], mul(s[1], v)), mul(g[0], mul(s[0], v))};
           const Tensor g1 = div(mul(g[0], v), s[1]);
           return std::vector<Tensor>{g[0], g1, neg(mul(g1, div(s[0], s[1])))};
         });
}

void record_lerp(const Tensor& start, const Tensor& end, const Tensor& weight, Tensor& out) {
  if (!needs_grad(start, end, weight)) return;
  record(weight.impl()->wrapped_number ? "LerpBackward0" : "LerpBackward1", {&out}, {&start, &end, &weight}, {start, end, weight},
         [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
           return std::vector<Tensor>{mul(g[0], sub(Tensor(1), s[2])), mul(g[0], s[2]), mul(g[0], sub(s[1], s[0]))};
         });
}

void record_identity(const char* name, const Tensor& in, Tensor& out) {
  if (!needs_grad(in)) return;
  record(name, {&out}, {&in}, {}, [](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
    return std::vector<Tensor>{g[0]};
  });
}

void record_zero_grad(const char* name, const Tensor& in, Tensor& out) {
  if (!needs_grad(in)) return;
  record(name, {&out}, {&in}, {}, [](const std::vector<Tensor>& g, const std::vector<Tensor>&) {
    return std::vector<Tensor>{zeros_like(g[0])};
  });
}

}  // namespace flambeau::autograd
