// Convolutions: torch.convolution and nn.functional's conv1d/2d/3d and conv_transpose1d/2d/3d,
// one primitive over kernels/cpu/conv.h. A transposed convolution is the input gradient of
// the convolution it transposes, so three kernels (forward, backward_input,
// backward_weight) serve both directions. float64 computes in float64, other floating
// dtypes in float32.
#include <string>

#include "flambeau/autograd/function.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/shape.h"
#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/kernels/cpu/conv.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

using kernels::ConvGeometry;

// A stride / padding / dilation argument as one value per spatial dim (int[N] takes one int).
Dims per_dim(const char* op, const char* what, const Dims& v, int64_t n) {
  if (int64_t(v.size()) == n) return v;
  FLB_CHECK(v.size() == 1, ValueError, "[", op, "] expected ", what,
            " to be a single integer value or a list of ", n,
            " values to match the convolution dimensions, but got ", what, "=", shape_str(v));
  return Dims(size_t(n), v[0]);
}

std::string sizes_str(const Dims& d, size_t from) {
  std::string s = "(";
  for (size_t i = from; i < d.size(); ++i) s += (i > from ? " x " : "") + std::to_string(d[i]);
  return s + ")";
}

struct ConvArgs {
  Dims stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

// Checks the call and returns the geometry of the forward convolution it is (for a
// transposed call: the convolution whose input gradient it computes). x is batched.
ConvGeometry geometry(const char* op, const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                      const ConvArgs& a) {
  const int64_t n = x.dim() - 2;
  FLB_CHECK(w.dim() == n + 2, ValueError, "[", op, "] expected weight to be ", n + 2, "-D for a ", n + 2,
            "-D input, got weight of shape ", shape_str(w.sizes()), " and input of shape ", shape_str(x.sizes()));
  FLB_CHECK(x.is_floating_point() && x.dtype() == w.dtype(), TypeError, "[", op, "] expected a floating point input ",
            "and weight of the same dtype, got input ", dtype_name(x.dtype()), " and weight ", dtype_name(w.dtype()));
  FLB_CHECK(a.groups > 0, ValueError, "[", op, "] non-positive groups is not supported, got groups=", a.groups);
  for (int64_t i = 0; i < n; ++i) {
    FLB_CHECK(a.stride[size_t(i)] > 0, ValueError, "[", op, "] non-positive stride is not supported, got stride=",
              shape_str(a.stride));
    FLB_CHECK(a.padding[size_t(i)] >= 0, ValueError, "[", op, "] negative padding is not supported, got padding=",
              shape_str(a.padding));
    FLB_CHECK(a.dilation[size_t(i)] > 0, ValueError, "[", op, "] dilation should be greater than zero, got dilation=",
              shape_str(a.dilation));
    const int64_t op_i = a.output_padding[size_t(i)];
    FLB_CHECK(op_i >= 0 && (op_i < a.stride[size_t(i)] || op_i < a.dilation[size_t(i)]), ValueError, "[", op,
              "] output padding must be smaller than either stride or dilation, got output_padding=",
              shape_str(a.output_padding), ", stride=", shape_str(a.stride), ", dilation=", shape_str(a.dilation));
  }
  const int64_t groups = a.groups, c_in = x.size(1);
  FLB_CHECK(w.size(0) % groups == 0, ValueError, "[", op, "] given groups=", groups,
            ", expected weight to be divisible by ", groups, " at dimension 0, but got weight of size ",
            shape_str(w.sizes()), " instead");
  const int64_t want_in = a.transposed ? w.size(0) : w.size(1) * groups;
  FLB_CHECK(c_in == want_in, ValueError, "[", op, "] given groups=", groups, a.transposed ? ", transposed" : "",
            ", weight of size ", shape_str(w.sizes()), ", expected input", shape_str(x.sizes()), " to have ", want_in,
            " channels, but got ", c_in, " channels instead");
  const int64_t c_out = a.transposed ? w.size(1) * groups : w.size(0);
  if (bias)
    FLB_CHECK(bias->dim() == 1 && bias->size(0) == c_out && bias->dtype() == w.dtype(), ValueError, "[", op,
              "] given weight of size ", shape_str(w.sizes()), ", expected bias to be 1-dimensional with ", c_out,
              " elements of dtype ", dtype_name(w.dtype()), ", but got bias of size ", shape_str(bias->sizes()),
              " and dtype ", dtype_name(bias->dtype()), " instead");

  ConvGeometry g;
  g.batch = x.size(0);
  g.groups = groups;
  g.in_channels = a.transposed ? c_out : c_in;
  g.out_channels = a.transposed ? c_in : c_out;
  Dims padded(x.sizes()), kernel(x.sizes()), out(x.sizes());
  for (int64_t i = 0; i < n; ++i) {
    const size_t s = size_t(i), d = size_t(3 - n + i);
    const int64_t k = w.size(2 + i), span = a.dilation[s] * (k - 1) + 1, len = x.size(2 + i);
    g.kernel[d] = k;
    g.stride[d] = a.stride[s];
    g.pad[d] = a.padding[s];
    g.dilation[d] = a.dilation[s];
    padded[s + 2] = len + 2 * a.padding[s];
    kernel[s + 2] = span;
    if (a.transposed) {
      out[s + 2] = (len - 1) * a.stride[s] - 2 * a.padding[s] + span + a.output_padding[s];
      g.out[d] = len;
      g.in[d] = out[s + 2];
    } else {
      out[s + 2] = (padded[s + 2] - span) / a.stride[s] + 1;
      g.in[d] = len;
      g.out[d] = out[s + 2];
    }
  }
  for (int64_t i = 0; i < n && !a.transposed; ++i)
    FLB_CHECK(padded[size_t(i + 2)] >= kernel[size_t(i + 2)], ValueError, "[", op,
              "] calculated padded input size per channel: ", sizes_str(padded, 2), ". Kernel size: ",
              sizes_str(kernel, 2), ". Kernel size can't be greater than actual input size (input ",
              shape_str(x.sizes()), ", weight ", shape_str(w.sizes()), ")");
  if (a.transposed)
    for (int64_t i = 0; i < n; ++i)
      FLB_CHECK(out[size_t(i + 2)] > 0, ValueError, "[", op, "] given input size per channel: ", sizes_str(x.sizes(), 2),
                ". Calculated output size per channel: ", sizes_str(out, 2), ". Output size is too small");
  return g;
}

Dims y_shape(const ConvGeometry& g, int64_t n, bool transposed) {
  const auto& sp = transposed ? g.in : g.out;
  Dims s = {g.batch, transposed ? g.in_channels : g.out_channels};
  for (int64_t i = 3 - n; i < 3; ++i) s.push_back(sp[size_t(i)]);
  return s;
}

template <class F>
void visit_compute(DType ct, F&& f) {
  if (ct == kFloat64) f.template operator()<double>();
  else f.template operator()<float>();
}

// Note [Channels-last convolutions]: as torch, a 2-d convolution whose input or weight is
// channels-last (suggest_memory_format) computes and returns channels-last tensors: its
// output and its input gradient (a 3-d one's are row-major, as torch's on the CPU). float32
// problems that oneDNN has a direct kernel for read and write that layout as it is, with
// no copy (oneDNN's NHWC kernels). The others copy to row-major, run the kernels of
// kernels/cpu/conv.h and copy the result back: float64, no oneDNN, FLAMBEAU_ONEDNN_F32=0,
// no direct kernel, and outputs of 16 positions or fewer with a kernel larger than 1x1,
// where oneDNN's NHWC kernels measured up to 2x slower than the row-major path (ResNet-18's
// last stages at 64x64) and the copies are small. On the no-copy path a channels-last
// weight of one group is read as it lies and its gradient is channels-last, as torch's
// (else the gradient is row-major). Bits do not depend on the thread count either way.
MemoryFormat conv_format(const Tensor& x, const Tensor& w) {
  const MemoryFormat cl = MemoryFormat::ChannelsLast;  // 2-d only: torch's conv3d gives row-major results
  return x.dim() == 4 && (suggest_memory_format(x) == cl || suggest_memory_format(w) == cl) ? cl
                                                                                              : MemoryFormat::Contiguous;
}

// g as its channels-last problem, when oneDNN may take one; a channels-last weight of one
// group is read (and its gradient written) as it lies too.
std::optional<ConvGeometry> channels_last(const ConvGeometry& g, MemoryFormat format, DType ct, const Tensor& w) {
  if (format == MemoryFormat::Contiguous || ct != kFloat32 || !kernels::onednn_f32()) return std::nullopt;
  if (g.kernel_volume() > 1 && g.out_volume() <= 16) return std::nullopt;  // small images: the copies are cheap
  ConvGeometry cl = g;
  cl.channels_last = true;
  cl.weight_channels_last = g.groups == 1 && ops::kept_memory_format(w) == MemoryFormat::ChannelsLast;
  return cl;
}

MemoryFormat weight_format(const ConvGeometry& g) {
  return g.weight_channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

// The forward product of either direction into a new tensor of the compute dtype, laid
// out in `format`. fwd: y-space from x-space (conv_forward); else x-space from y-space
// (backward_input).
Tensor run_product(const ConvGeometry& g, bool fwd, const Tensor& src, const Tensor& w, const Dims& shape, DType ct,
                   MemoryFormat format) {
  if (const auto cl = channels_last(g, format, ct, w)) {
    const Tensor s = src.to(ct).contiguous(format), wc = w.to(ct).contiguous(weight_format(*cl));
    Tensor out = empty(shape, ct, format);
    if (fwd ? kernels::onednn_conv_forward(*cl, s.data<float>(), wc.data<float>(), nullptr, out.data<float>())
            : kernels::onednn_conv_backward_input(*cl, s.data<float>(), wc.data<float>(), out.data<float>()))
      return out;
  }
  const Tensor s = src.to(ct).contiguous(), wc = w.to(ct).contiguous();
  Tensor out = empty(shape, ct);
  visit_compute(ct, [&]<class T>() {
    if (fwd) kernels::conv_forward(g, s.data<T>(), wc.data<T>(), static_cast<const T*>(nullptr), out.data<T>());
    else kernels::conv_backward_input(g, s.data<T>(), wc.data<T>(), out.data<T>());
  });
  return out.contiguous(format);
}

// gw (laid out as w where the channels-last path takes it, else row-major) from x-space
// and y-space tensors of the forward convolution g.
Tensor weight_grad(const ConvGeometry& g, const Tensor& x_space, const Tensor& y_space, const Tensor& w, DType ct,
                   MemoryFormat format) {
  if (const auto cl = channels_last(g, format, ct, w)) {
    const Tensor xs = x_space.to(ct).contiguous(format), ys = y_space.to(ct).contiguous(format);
    Tensor gw = empty(w.sizes(), ct, weight_format(*cl));
    if (kernels::conv_backward_weight_channels_last(*cl, xs.data<float>(), ys.data<float>(), gw.data<float>()))
      return gw;
  }
  Tensor gw = empty(w.sizes(), ct);
  const Tensor xs = x_space.to(ct).contiguous(), ys = y_space.to(ct).contiguous();
  visit_compute(ct, [&]<class T>() { kernels::conv_backward_weight(g, xs.data<T>(), ys.data<T>(), gw.data<T>()); });
  return gw;
}

// Note [Convolution double backward]: with grad mode on in backward (create_graph) and a
// tensor of the formula requiring grad, the gradients are computed with the differentiable
// convolution op itself, so they record a graph: for y = conv(x, w), gx = conv_transpose(gy,
// w) with the output_padding that gives back x's size, and gw a convolution of x with gy
// whose roles swap (channels for batch, stride for dilation), narrowed to the kernel. A
// transposed convolution swaps the two spaces. Otherwise the kernels run as before.

// t with spatial dims (from 2) cut to the sizes of `like` (which are not larger).
Tensor narrow_spatial(Tensor t, const Dims& like) {
  for (size_t i = 2; i < like.size(); ++i)
    if (t.size(int64_t(i)) != like[i]) t = t.narrow(int64_t(i), 0, like[i]);
  return t;
}

// gw of the convolution (stride, padding, dilation, groups of a) taking x_space to y_space,
// with the graph recorded: gw[g*Co+o, i, k] = sum over n, j of y[n, g*Co+o, j] * x[n, g*Ci+i, j*s + k*d - p].
Tensor weight_grad_graph(const Tensor& x_space, const Tensor& y_space, const ConvArgs& a, const Dims& w_shape) {
  const int64_t groups = a.groups, batch = x_space.size(0), ci = x_space.size(1) / groups,
                co = y_space.size(1) / groups, sp = x_space.dim() - 2;
  Dims x5 = {batch, groups, ci}, y5 = {batch, groups, co}, px = {2, 1, 0}, py = {1, 2, 0};
  for (int64_t i = 0; i < sp; ++i) {
    x5.push_back(x_space.size(2 + i)), y5.push_back(y_space.size(2 + i));
    px.push_back(3 + i), py.push_back(3 + i);
  }
  Dims xt_shape = {ci, groups * batch}, yt_shape = {groups * co, batch};
  for (int64_t i = 0; i < sp; ++i) xt_shape.push_back(x_space.size(2 + i)), yt_shape.push_back(y_space.size(2 + i));
  const Tensor xt = x_space.reshape(x5).permute(px).reshape(xt_shape);
  const Tensor yt = y_space.reshape(y5).permute(py).reshape(yt_shape);
  const Tensor r = convolution(xt, yt, std::nullopt, a.dilation, a.padding, a.stride, false, Dims(size_t(sp), 0), groups);
  Dims want(r.sizes());
  for (int64_t i = 0; i < sp; ++i) want[size_t(2 + i)] = w_shape[size_t(2 + i)];
  return narrow_spatial(r, want).transpose(0, 1);
}

// The gradients of Note [Convolution double backward] (need: x, w, b).
std::vector<Tensor> conv_backward_graph(const Tensor& gy, const Tensor& x, const Tensor& w, const ConvArgs& a,
                                        int64_t n, const bool need[3]) {
  std::vector<Tensor> out(3);
  if (need[0]) {
    if (a.transposed) {
      out[0] = narrow_spatial(convolution(gy, w, std::nullopt, a.stride, a.padding, a.dilation, false,
                                          Dims(size_t(n), 0), a.groups),
                              x.sizes());
    } else {
      Dims op(static_cast<size_t>(n), 0);
      for (int64_t i = 0; i < n; ++i) {
        const size_t s = size_t(i);
        op[s] = x.size(2 + i) - ((gy.size(2 + i) - 1) * a.stride[s] - 2 * a.padding[s] +
                                 a.dilation[s] * (w.size(2 + i) - 1) + 1);
      }
      out[0] = convolution(gy, w, std::nullopt, a.stride, a.padding, a.dilation, true, op, a.groups);
    }
  }
  if (need[1]) out[1] = a.transposed ? weight_grad_graph(gy, x, a, w.sizes()) : weight_grad_graph(x, gy, a, w.sizes());
  if (need[2]) {
    Dims dims = {0};
    for (int64_t i = 0; i < n; ++i) dims.push_back(2 + i);
    out[2] = sum(gy, dims);
  }
  return out;
}

Tensor conv_impl(const char* op, int64_t n, const Tensor& input, const Tensor& w, const std::optional<Tensor>& bias,
                 ConvArgs a) {
  FLB_CHECK(input.dim() == n + 1 || input.dim() == n + 2, ValueError, "[", op, "] expected ", n + 1,
            "D (unbatched) or ", n + 2, "D (batched) input, but got input of size: ", shape_str(input.sizes()));
  a.stride = per_dim(op, "stride", a.stride, n);
  a.padding = per_dim(op, "padding", a.padding, n);
  a.dilation = per_dim(op, "dilation", a.dilation, n);
  a.output_padding = per_dim(op, "output_padding", a.output_padding, n);
  const bool unbatched = input.dim() == n + 1;
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  const ConvGeometry g = geometry(op, x, w, bias, a);
  const DType ct = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  const MemoryFormat format = conv_format(x, w);  // Note [Channels-last convolutions]
  Tensor out;
  {
    autograd::NoGradGuard no_grad;
    Tensor y = run_product(g, !a.transposed, x, w, y_shape(g, n, a.transposed), ct, format);
    if (bias) {
      Dims b_shape(size_t(n + 2), 1);
      b_shape[1] = bias->size(0);
      y = add(y, bias->to(ct).reshape(b_shape));
    }
    out = y.to(x.dtype());
  }
  const bool need_x = autograd::requires_grad(x), need_w = autograd::requires_grad(w),
             need_b = bias && autograd::requires_grad(*bias);
  autograd::record("ConvolutionBackward0", {&out}, {&x, &w, bias ? &*bias : nullptr}, {x, w},
                   [g, n, ct, a, format, need_x, need_w, need_b](const std::vector<Tensor>& grads,
                                                        const std::vector<Tensor>& saved) {
                     const Tensor &gy = grads[0], &xs = saved[0], &ws = saved[1];
                     if (autograd::needs_grad(gy, xs, ws)) {  // Note [Convolution double backward]
                       const bool need[3] = {need_x, need_w, need_b};
                       return conv_backward_graph(gy, xs, ws, a, n, need);
                     }
                     std::vector<Tensor> out(3);
                     // Transposed: x is the y-space of g and the gradient is y-space from x-space.
                     if (need_x) out[0] = run_product(g, a.transposed, gy, ws, xs.sizes(), ct, format);
                     if (need_w)
                       out[1] = a.transposed ? weight_grad(g, gy, xs, ws, ct, format)
                                             : weight_grad(g, xs, gy, ws, ct, format);
                     if (need_b) {
                       Dims dims = {0};
                       for (int64_t i = 0; i < n; ++i) dims.push_back(2 + i);
                       out[2] = sum(gy.to(ct), dims);
                     }
                     return out;
                   });
  return unbatched ? out.squeeze(0) : out;
}

// padding="valid" or "same" as numbers; "same" with an odd total pads the input's end by
// one more first, as torch does.
Tensor conv_padding_mode(const char* op, int64_t n, const Tensor& x, const Tensor& w,
                         const std::optional<Tensor>& bias, const Dims& stride, nn::functional::PaddingMode mode,
                         const Dims& dilation, int64_t groups) {
  const Dims s = per_dim(op, "stride", stride, n), d = per_dim(op, "dilation", dilation, n);
  if (mode == nn::functional::PaddingMode::Valid) return conv_impl(op, n, x, w, bias, {s, {0}, d, {0}, false, groups});
  for (int64_t v : s)
    FLB_CHECK(v == 1, ValueError, "[", op, "] padding='same' is not supported for strided convolutions, got stride=",
              shape_str(s));
  FLB_CHECK(w.dim() == n + 2, ValueError, "[", op, "] expected weight to be ", n + 2, "-D, got weight of shape ",
            shape_str(w.sizes()));
  Dims padding(static_cast<size_t>(n), 0), extra;  // extra: F.pad's (last dim first) end padding
  bool odd = false;
  for (int64_t i = n - 1; i >= 0; --i) {
    const int64_t total = d[size_t(i)] * (w.size(2 + i) - 1);
    padding[size_t(i)] = total / 2;
    extra.push_back(0);
    extra.push_back(total % 2);
    odd = odd || total % 2;
  }
  const Tensor xp = odd ? nn::functional::pad(x, extra, "constant", 0.0) : x;
  return conv_impl(op, n, xp, w, bias, {s, padding, d, {0}, false, groups});
}

}  // namespace

FLB_OP(convolution,
       (const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const Dims& stride,
        const Dims& padding, const Dims& dilation, bool transposed, const Dims& output_padding, int64_t groups),
       (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups), Tensor) {
  FLB_CHECK(input.dim() >= 3 && input.dim() <= 5, ValueError,
            "[convolution] expected a 3D, 4D or 5D (batched) input, got shape ", shape_str(input.sizes()));
  return conv_impl("convolution", input.dim() - 2, input, weight, bias,
                   {stride, padding, dilation, output_padding, transposed, groups});
}

namespace nn::functional {

PaddingMode padding_mode_from(const char* op, const std::string& name) {
  FLB_CHECK(name == "valid" || name == "same", ValueError, "[", op, "] invalid padding string '", name,
            "', should be one of {'valid', 'same'}");
  return name == "same" ? PaddingMode::Same : PaddingMode::Valid;
}

#define FLB_CONV(N)                                                                                               \
  FLB_OP(conv##N##d,                                                                                             \
         (const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const Dims& stride,         \
          const Dims& padding, const Dims& dilation, int64_t groups),                                             \
         (input, weight, bias, stride, padding, dilation, groups), Tensor) {                                      \
    return conv_impl("conv" #N "d", N, input, weight, bias, {stride, padding, dilation, {0}, false, groups});     \
  }                                                                                                               \
  Tensor conv##N##d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,                 \
                    const Dims& stride, PaddingMode padding, const Dims& dilation, int64_t groups) {              \
    return conv_padding_mode("conv" #N "d", N, input, weight, bias, stride, padding, dilation, groups);           \
  }                                                                                                               \
  FLB_OP(conv_transpose##N##d,                                                                                   \
         (const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const Dims& stride,         \
          const Dims& padding, const Dims& output_padding, int64_t groups, const Dims& dilation),                 \
         (input, weight, bias, stride, padding, output_padding, groups, dilation), Tensor) {                      \
    return conv_impl("conv_transpose" #N "d", N, input, weight, bias,                                            \
                     {stride, padding, dilation, output_padding, true, groups});                                  \
  }
FLB_CONV(1)
FLB_CONV(2)
FLB_CONV(3)
#undef FLB_CONV

}  // namespace nn::functional
}  // namespace flambeau
