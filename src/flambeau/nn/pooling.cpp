// Pooling: nn.functional's max_pool, avg_pool, adaptive_avg_pool and adaptive_max_pool over
// 1-3 spatial dims, primitives over kernels/cpu/pool.h with torch's checks, messages and
// grad_fn names. As in torch, the 1-d forms run the 2-d primitive on a [..., 1, L] view
// (their grad_fn is SqueezeBackward1), and an adaptive average to size 1 is a mean.
#include <cmath>
#include <string>
#include <utility>

#include "flambeau/autograd/function.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/shape.h"
#include "flambeau/kernels/cpu/pool.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

using kernels::PoolGeometry;

// Floating inputs compute in float32 / float64; integer ones (max pooling, int64 average) as they are.
DType compute_dtype(const Tensor& x) {
  if (!x.is_floating_point()) return x.dtype();
  return x.dtype() == kFloat64 ? kFloat64 : kFloat32;
}

// f.template operator()<T>() for the T of Ts whose dtype is t (the callers checked t).
template <class... Ts>
struct Types {};
template <class... Ts, class F>
void visit_types(Types<Ts...>, DType t, F&& f) {
  ((t == dtype_v<Ts> ? (f.template operator()<Ts>(), 0) : 0), ...);
}
using Floats = Types<float, double>;
using MaxTypes = Types<float, double, uint8_t, int8_t, int16_t, int32_t, int64_t>;
using AvgTypes = Types<float, double, int64_t>;
template <class F>
void visit_compute(DType ct, F&& f) {
  visit_types(Floats{}, ct, std::forward<F>(f));
}

// "(3x8x8)": the sizes from dim `from` on.
std::string sizes_str(const Dims& d, size_t from) {
  std::string s = "(";
  for (size_t i = from; i < d.size(); ++i) {
    if (i > from) s += 'x';
    s += std::to_string(d[i]);
  }
  return s + ")";
}

// A pooling's geometry and the shape of its result.
struct Pool {
  PoolGeometry g;
  Dims out_shape;
};

// The integer inputs an op takes besides floating point ones, as torch 2.13's CPU kernels:
// the max poolings of a window take every integer type (max_pool1d only with its indices:
// torch's values-only kernel is floating), the average poolings of a window int64.
enum class Ints { None, All, Int64 };

// x is [C, *spatial] or [N, C, *spatial] with n spatial dims, empty only in N, of a dtype `ints` allows.
void check_input(const char* op, int64_t n, const Tensor& x, Ints ints) {
  const DType t = x.dtype();
  const bool ok = x.is_floating_point() || (ints == Ints::All && is_integral(t, false)) ||
                  (ints == Ints::Int64 && t == kInt64);
  FLB_CHECK(ok, NotImplementedError, "[", op, "] not implemented for ", dtype_name(t), " input (expected ",
            ints == Ints::All ? "floating point or integer" : ints == Ints::Int64 ? "floating point or int64"
                                                                                 : "floating point",
            ")");
  FLB_CHECK(x.dim() == n + 1 || x.dim() == n + 2, ValueError, "[", op, "] expected a ", n + 1, "D or ", n + 2,
            "D (batch mode) tensor for input, got input of shape ", shape_str(x.sizes()));
  for (int64_t i = x.dim() == n + 2 ? 1 : 0; i < x.dim(); ++i)
    FLB_CHECK(x.size(i) > 0, ValueError, "[", op,
              "] expected input to have non-zero size for non-batch dimensions, but input has shape ",
              shape_str(x.sizes()), " with dimension ", i, " being empty");
}

// An int[n] argument as n values: n of them, or one for all; empty gives *if_empty when set.
Dims per_dim(const char* op, const char* what, const Dims& v, int64_t n, const Dims* if_empty = nullptr) {
  if (v.empty() && if_empty) return *if_empty;
  if (int64_t(v.size()) == n) return v;
  FLB_CHECK(v.size() == 1, ValueError, "[", op, "] ", what, " must either be ", if_empty ? "omitted, " : "",
            "a single int, or a tuple of ", n, " ints, got ", what, "=", shape_str(v));
  return Dims(size_t(n), v[0]);
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

// torch's pooling_output_shape: the last window of ceil_mode must start inside the input
// or its left padding.
int64_t pooled_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  const int64_t num = in + 2 * pad - dilation * (k - 1) - 1;
  int64_t out = (ceil_mode ? -floor_div(-num, stride) : floor_div(num, stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Checks a max / average pooling call of n spatial dims on x.
Pool window_pool(const char* op, int64_t n, const Tensor& x, const Dims& kernel_size, const Dims& stride,
                 const Dims& padding, const Dims& dilation, bool ceil_mode, Ints ints) {
  check_input(op, n, x, ints);
  const Dims k = per_dim(op, "kernel_size", kernel_size, n), s = per_dim(op, "stride", stride, n, &k),
             p = per_dim(op, "padding", padding, n), d = per_dim(op, "dilation", dilation, n);
  for (size_t i = 0; i < size_t(n); ++i) {
    FLB_CHECK(k[i] > 0, ValueError, "[", op, "] kernel_size should be greater than zero, but got kernel_size=",
              shape_str(k));
    FLB_CHECK(s[i] > 0, ValueError, "[", op, "] stride should be greater than zero, but got stride=", shape_str(s));
    FLB_CHECK(d[i] > 0, ValueError, "[", op, "] dilation should be greater than zero, but got dilation=",
              shape_str(d));
    FLB_CHECK(p[i] >= 0, ValueError, "[", op, "] pad must be non-negative, but got pad=", shape_str(p));
    // torch's rule: half the kernel, whatever the dilation.
    FLB_CHECK(p[i] <= k[i] / 2, ValueError, "[", op, "] pad should be at most half of kernel size, but got pad=",
              shape_str(p),
              ", kernel_size=", shape_str(k), " and dilation=", shape_str(d));
  }
  Pool r;
  r.out_shape = Dims(x.sizes());
  const size_t lead = size_t(x.dim() - n);
  bool fits = true;
  for (size_t i = 0; i < size_t(n); ++i) {
    r.out_shape[lead + i] = pooled_size(x.size(int64_t(lead + i)), k[i], p[i], s[i], d[i], ceil_mode);
    fits = fits && r.out_shape[lead + i] > 0;
  }
  const Dims in_shape(x.sizes());
  FLB_CHECK(fits, ValueError, "[", op, "] given input size: ", sizes_str(in_shape, lead - 1),
            ". Calculated output size: ", sizes_str(r.out_shape, lead - 1), ". Output size is too small (input ",
            shape_str(in_shape), ", kernel_size=", shape_str(k), ", stride=", shape_str(s), ", padding=",
            shape_str(p), ", dilation=", shape_str(d), ")");
  r.g.planes = numel_of(Dims(in_shape.data(), lead));
  for (size_t i = 0; i < size_t(n); ++i) {
    const size_t a = 3 - size_t(n) + i;
    r.g.in[a] = in_shape[lead + i];
    r.g.out[a] = r.out_shape[lead + i];
    r.g.kernel[a] = k[i];
    r.g.stride[a] = s[i];
    r.g.pad[a] = p[i];
    r.g.dilation[a] = d[i];
  }
  return r;
}

// Checks an adaptive pooling call of n spatial dims on x.
Pool adaptive_pool(const char* op, int64_t n, const Tensor& x, const Dims& output_size) {
  check_input(op, n, x, Ints::None);
  const Dims o = per_dim(op, "output_size", output_size, n);
  for (int64_t v : o)
    FLB_CHECK(v >= 0, ValueError, "[", op, "] output_size must be non-negative, got output_size=", shape_str(o),
              " for input of shape ", shape_str(x.sizes()));
  Pool r;
  const Dims in_shape(x.sizes());
  const size_t lead = size_t(x.dim() - n);
  r.out_shape = in_shape;
  r.g.planes = numel_of(Dims(in_shape.data(), lead));
  for (size_t i = 0; i < size_t(n); ++i) {
    r.out_shape[lead + i] = o[i];
    r.g.in[3 - size_t(n) + i] = in_shape[lead + i];
    r.g.out[3 - size_t(n) + i] = o[i];
  }
  return r;
}

// A 1-d pooling as the 2-d one of x.unsqueeze(-2): the same geometry, one more output dim.
Pool as_2d(Pool p) {
  p.out_shape.insert(p.out_shape.size() - 1, 1);
  return p;
}

// Note [Max pooling double backward]: gx is gy added at the indices, linear in gy. In a
// backward with create_graph (grad mode on) where gy or x requires grad, gx is recorded as
// the op `node2` (torch's MaxPool*WithIndicesBackwardBackward0) of (gy, x): its gradients are
// the gather of ggx at the indices for gy and zeros for x, as torch's. x is saved for that
// edge only (torch saves it too).
Tensor max_backward(const PoolGeometry& g, const Dims& shape, DType ct, const Tensor& gy_in, const Tensor& idx_in) {
  autograd::NoGradGuard no_grad;
  const MemoryFormat format = g.channels_last == 0 ? MemoryFormat::Contiguous
                              : shape.size() == 5   ? MemoryFormat::ChannelsLast3d
                                                    : MemoryFormat::ChannelsLast;
  const Tensor gy = gy_in.to(ct).contiguous(format), idx = idx_in.contiguous(format);
  Tensor gx = empty(shape, ct, format);
  visit_compute(ct, [&]<class T>() { kernels::max_pool_backward<T>(g, gy.data<T>(), idx.data<int64_t>(), gx.data<T>()); });
  return gx;
}

// Values (and int64 indices) of a max kernel on x, with its backward recorded as `node`;
// channels-last inputs are worked on as they lie, with channels-last results, unless
// keep_layout is false (torch's adaptive_max_pool3d gives row-major ones).
template <class Kernel>
std::pair<Tensor, Tensor> max_primitive(const char* node, const char* node2, const Tensor& x, const Pool& pool,
                                        Kernel kernel, bool keep_layout = true) {
  const DType ct = compute_dtype(x);
  const MemoryFormat format = keep_layout ? ops::kept_memory_format(x) : MemoryFormat::Contiguous;
  PoolGeometry g = pool.g;
  if (format != MemoryFormat::Contiguous) g.channels_last = x.size(1);
  Tensor values, indices = empty(pool.out_shape, kInt64, format);
  {
    autograd::NoGradGuard no_grad;
    const Tensor xc = x.to(ct).contiguous(format);
    Tensor y = empty(pool.out_shape, ct, format);
    visit_types(MaxTypes{}, ct, [&]<class T>() { kernel(g, xc.data<T>(), y.data<T>(), indices.data<int64_t>()); });
    values = y.to(x.dtype());
  }
  autograd::record(node, {&values}, {&x}, {indices, x},
                   [g, shape = Dims(x.sizes()), ct, node2](const std::vector<Tensor>& grads,
                                                                   const std::vector<Tensor>& saved) {
                     const Tensor &gy = grads[0], &idx = saved[0], &xs = saved[1];
                     Tensor gx = max_backward(g, shape, ct, gy, idx);
                     // Note [Max pooling double backward]
                     autograd::record(node2, {&gx}, {&gy, &xs}, {idx},
                                      [g, out_shape = Dims(gy.sizes())](const std::vector<Tensor>& gg,
                                                                        const std::vector<Tensor>& sv) {
                                        const Tensor ggx = gg[0].reshape({g.planes, g.in_volume()});
                                        const Tensor i2 = sv[0].reshape({g.planes, g.out_volume()});
                                        return std::vector<Tensor>{gather(ggx, 1, i2).reshape(out_shape),
                                                                   zeros_like(gg[0])};
                                      });
                     return std::vector<Tensor>{gx};
                   });
  return {values, indices};
}

// An average kernel on x: forward(g, x, y) for the types of `types`, backward(g, gy, gx), recorded as `node`.
// gx is linear in gy: in a backward with create_graph it is recorded as the op `node2` (torch's
// AvgPool*BackwardBackward0) of gy, whose gradient is this pooling of ggx.
template <class Forward, class Backward, class... Ts>
Tensor avg_primitive(const char* node, const char* node2, const Tensor& x, const Pool& pool, Forward forward,
                     Backward backward, Types<Ts...> types) {
  const DType ct = compute_dtype(x);
  Tensor out;
  {
    autograd::NoGradGuard no_grad;
    const Tensor xc = x.to(ct).contiguous();
    Tensor y = empty(pool.out_shape, ct);
    visit_types(types, ct, [&]<class T>() { forward(pool.g, xc.data<T>(), y.data<T>()); });
    out = y.to(x.dtype());
  }
  autograd::record(node, {&out}, {&x}, {},
                   [node, node2, pool, shape = Dims(x.sizes()), ct, forward, backward](
                       const std::vector<Tensor>& grads, const std::vector<Tensor>&) {
                     Tensor gx;
                     {
                       autograd::NoGradGuard no_grad;
                       const Tensor gy = grads[0].to(ct).contiguous();
                       gx = empty(shape, ct);
                       visit_compute(ct, [&]<class T>() { backward(pool.g, gy.data<T>(), gx.data<T>()); });
                     }
                     autograd::record(node2, {&gx}, {&grads[0]}, {},
                                      [node, node2, pool, forward, backward](const std::vector<Tensor>& gg,
                                                                             const std::vector<Tensor>&) {
                                        return std::vector<Tensor>{
                                            avg_primitive(node, node2, gg[0], pool, forward, backward, Floats{})};
                                      });
                     return std::vector<Tensor>{gx};
                   });
  return out;
}

struct MaxForward {
  template <class T>
  void operator()(const PoolGeometry& g, const T* x, T* y, int64_t* i) const {
    kernels::max_pool_forward<T>(g, x, y, i);
  }
};
struct AdaptiveMaxForward {
  template <class T>
  void operator()(const PoolGeometry& g, const T* x, T* y, int64_t* i) const {
    kernels::adaptive_max_pool_forward<T>(g, x, y, i);
  }
};

// with_indices: whether the caller returns the indices (max_pool1d takes integers only then).
std::pair<Tensor, Tensor> max_pool(const char* op, int64_t n, const Tensor& x, const Dims& kernel_size,
                                   const Dims& stride, const Dims& padding, const Dims& dilation, bool ceil_mode,
                                   bool with_indices) {
  const Ints ints = n > 1 || with_indices ? Ints::All : Ints::None;
  const Pool pool = window_pool(op, n, x, kernel_size, stride, padding, dilation, ceil_mode, ints);
  if (n == 1) {
    auto [v, i] = max_primitive("MaxPool2DWithIndicesBackward0", "MaxPool2DWithIndicesBackwardBackward0",
                                x.unsqueeze(-2), as_2d(pool), MaxForward{});
    return {v.squeeze(-2), i.squeeze(-2)};
  }
  auto [v, i] = max_primitive(n == 2 ? "MaxPool2DWithIndicesBackward0" : "MaxPool3DWithIndicesBackward0",
                              n == 2 ? "MaxPool2DWithIndicesBackwardBackward0" : "MaxPool3DWithIndicesBackwardBackward0",
                              x, pool, MaxForward{});
  return {v, i};
}

std::pair<Tensor, Tensor> adaptive_max(const char* op, int64_t n, const Tensor& x, const Dims& output_size) {
  const Pool pool = adaptive_pool(op, n, x, output_size);
  if (n == 1) {
    auto [v, i] = max_primitive("AdaptiveMaxPool2DBackward0", "AdaptiveMaxPool2DBackwardBackward0", x.unsqueeze(-2),
                                as_2d(pool), AdaptiveMaxForward{});
    return {v.squeeze(-2), i.squeeze(-2)};
  }
  return max_primitive(n == 2 ? "AdaptiveMaxPool2DBackward0" : "AdaptiveMaxPool3DBackward0",
                       n == 2 ? "AdaptiveMaxPool2DBackwardBackward0" : "AdaptiveMaxPool3DBackwardBackward0", x, pool,
                       AdaptiveMaxForward{}, n == 2);
}

Tensor avg_pool(const char* op, int64_t n, const Tensor& x, const Dims& kernel_size, const Dims& stride,
                const Dims& padding, bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  const Pool pool = window_pool(op, n, x, kernel_size, stride, padding, {1}, ceil_mode, Ints::Int64);
  FLB_CHECK(!divisor_override || *divisor_override != 0, ValueError, "[", op, "] divisor must be not zero");
  // A negative divisor divides as given (as torch); 0 tells the kernels "none" (0 is refused above).
  const int64_t div = divisor_override.value_or(0);
  auto forward = [count_include_pad, div]<class T>(const PoolGeometry& g, const T* a, T* y) {
    kernels::avg_pool_forward<T>(g, count_include_pad, div, a, y);
  };
  auto backward = [count_include_pad, div]<class T>(const PoolGeometry& g, const T* gy, T* gx) {
    kernels::avg_pool_backward<T>(g, count_include_pad, div, gy, gx);
  };
  if (n == 1)
    return avg_primitive("AvgPool2DBackward0", "AvgPool2DBackwardBackward0", x.unsqueeze(-2), as_2d(pool), forward,
                         backward, AvgTypes{})
        .squeeze(-2);
  return in_layout_of(avg_primitive(n == 2 ? "AvgPool2DBackward0" : "AvgPool3DBackward0",
                                    n == 2 ? "AvgPool2DBackwardBackward0" : "AvgPool3DBackwardBackward0", x, pool,
                                    forward, backward, AvgTypes{}),
                      x);
}

Tensor adaptive_avg(const char* op, int64_t n, const Tensor& x, const Dims& output_size) {
  const Pool pool = adaptive_pool(op, n, x, output_size);
  auto forward = []<class T>(const PoolGeometry& g, const T* a, T* y) { kernels::adaptive_avg_pool_forward<T>(g, a, y); };
  auto backward = []<class T>(const PoolGeometry& g, const T* gy, T* gx) {
    kernels::adaptive_avg_pool_backward<T>(g, gy, gx);
  };
  const bool ones = pool.g.out_volume() == 1;  // torch's path to size 1: a mean
  if (n == 1) {
    const Tensor x2 = x.unsqueeze(-2);
    if (ones) return mean(x2, {-1, -2}, true).squeeze(-2);
    return avg_primitive("AdaptiveAvgPool2DBackward0", "AdaptiveAvgPool2DBackwardBackward0", x2, as_2d(pool), forward,
                         backward, Floats{})
        .squeeze(-2);
  }
  if (ones) return in_layout_of(mean(x, n == 2 ? Dims{-1, -2} : Dims{-1, -2, -3}, true), x);
  return in_layout_of(avg_primitive(n == 2 ? "AdaptiveAvgPool2DBackward0" : "AdaptiveAvgPool3DBackward0",
                                    n == 2 ? "AdaptiveAvgPool2DBackwardBackward0" : "AdaptiveAvgPool3DBackwardBackward0",
                                    x, pool, forward, backward, Floats{}),
                      x);
}

// Note [lp_pool]: composite, as torch's F.lp_pool*d: s = avg_pool(x^p) (no padding) times the
// window volume is the window's sum of x^p, and the result (sign(s) * relu(|s|))^(1/p): a zero
// sum has a zero derivative through sign. p = inf is the max of |x|, p = -inf minus the max of
// -|x|. An int p keeps integer inputs integer up to the root (the average truncating), a float
// p makes them float, as torch's pow does. Shapes and dtypes are checked under the op's name.
Tensor lp_pool(const char* op, int64_t n, const Tensor& x, const Scalar& p, const Dims& kernel_size,
               const Dims& stride, bool ceil_mode) {
  const double pd = p.to_double();
  const Dims none{0}, one{1};
  auto max_of = [&](const Tensor& a) {
    window_pool(op, n, a, kernel_size, stride, none, one, ceil_mode, n > 1 ? Ints::All : Ints::None);
    return n == 1 ? max_pool1d(a, kernel_size, stride, none, one, ceil_mode)
           : n == 2 ? max_pool2d(a, kernel_size, stride, none, one, ceil_mode)
                    : max_pool3d(a, kernel_size, stride, none, one, ceil_mode);
  };
  if (std::isinf(pd)) return pd > 0 ? max_of(abs(x)) : neg(max_of(neg(abs(x))));
  const Tensor xp = pow(x, Tensor(p));
  const Pool pool = window_pool(op, n, xp, kernel_size, stride, none, one, ceil_mode, Ints::Int64);
  const Tensor avg = n == 1   ? avg_pool1d(xp, kernel_size, stride, none, ceil_mode)
                     : n == 2 ? avg_pool2d(xp, kernel_size, stride, none, ceil_mode)
                              : avg_pool3d(xp, kernel_size, stride, none, ceil_mode);
  const int64_t volume = pool.g.kernel[0] * pool.g.kernel[1] * pool.g.kernel[2];
  return pow(mul(mul(sign(avg), relu(abs(avg))), Tensor(Scalar(volume))), Tensor(Scalar(1.0 / pd)));
}

}  // namespace

#define FLB_POOL(N)                                                                                             \
  FLB_OP(max_pool##N##d,                                                                                       \
         (const Tensor& input, const Dims& kernel_size, const Dims& stride, const Dims& padding,                \
          const Dims& dilation, bool ceil_mode),                                                               \
         (input, kernel_size, stride, padding, dilation, ceil_mode), Tensor) {                                 \
    return max_pool("max_pool" #N "d", N, input, kernel_size, stride, padding, dilation, ceil_mode, false).first; \
  }                                                                                                             \
  std::pair<Tensor, Tensor> max_pool##N##d_with_indices(const Tensor& input, const Dims& kernel_size,          \
                                                        const Dims& stride, const Dims& padding,               \
                                                        const Dims& dilation, bool ceil_mode) {                \
    return op_hook::call(                                                                                      \
        "max_pool" #N "d",                                                                                     \
        [&] {                                                                                                 \
          return max_pool("max_pool" #N "d", N, input, kernel_size, stride, padding, dilation, ceil_mode, true); \
        },                                                                                                    \
        input, kernel_size, stride, padding, dilation, ceil_mode, true);                                      \
  }                                                                                                             \
  FLB_OP(adaptive_avg_pool##N##d, (const Tensor& input, const Dims& output_size), (input, output_size), Tensor) { \
    return adaptive_avg("adaptive_avg_pool" #N "d", N, input, output_size);                                   \
  }                                                                                                             \
  FLB_OP(adaptive_max_pool##N##d, (const Tensor& input, const Dims& output_size), (input, output_size), Tensor) { \
    return adaptive_max("adaptive_max_pool" #N "d", N, input, output_size).first;                             \
  }                                                                                                             \
  std::pair<Tensor, Tensor> adaptive_max_pool##N##d_with_indices(const Tensor& input, const Dims& output_size) { \
    return op_hook::call(                                                                                      \
        "adaptive_max_pool" #N "d",                                                                            \
        [&] { return adaptive_max("adaptive_max_pool" #N "d", N, input, output_size); }, input, output_size,  \
        true);                                                                                                 \
  }
FLB_POOL(1)
FLB_POOL(2)
FLB_POOL(3)
#undef FLB_POOL

#define FLB_LP_POOL(N)                                                                                          \
  FLB_OP(lp_pool##N##d,                                                                                        \
         (const Tensor& input, Scalar norm_type, const Dims& kernel_size, const Dims& stride, bool ceil_mode),  \
         (input, norm_type, kernel_size, stride, ceil_mode), Tensor) {                                         \
    return lp_pool("lp_pool" #N "d", N, input, norm_type, kernel_size, stride, ceil_mode);                    \
  }
FLB_LP_POOL(1)
FLB_LP_POOL(2)
FLB_LP_POOL(3)
#undef FLB_LP_POOL

FLB_OP(avg_pool1d,
       (const Tensor& input, const Dims& kernel_size, const Dims& stride, const Dims& padding, bool ceil_mode,
        bool count_include_pad),
       (input, kernel_size, stride, padding, ceil_mode, count_include_pad), Tensor) {
  return avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, {});
}
FLB_OP(avg_pool2d,
       (const Tensor& input, const Dims& kernel_size, const Dims& stride, const Dims& padding, bool ceil_mode,
        bool count_include_pad, std::optional<int64_t> divisor_override),
       (input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override), Tensor) {
  return avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override);
}
FLB_OP(avg_pool3d,
       (const Tensor& input, const Dims& kernel_size, const Dims& stride, const Dims& padding, bool ceil_mode,
        bool count_include_pad, std::optional<int64_t> divisor_override),
       (input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override), Tensor) {
  return avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                  divisor_override);
}

}  // namespace flambeau::nn::functional
