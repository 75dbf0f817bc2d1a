// nn::Conv (Conv1d/2d/3d, ConvTranspose1d/2d/3d of modules.h): torch's argument checks and
// default initialisation, forward through functional::conv*d / conv_transpose*d.
#include <cmath>

#include "flambeau/nn/functional.h"
#include "flambeau/nn/init.h"
#include "flambeau/nn/modules.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn {
namespace {

std::string conv_name(int64_t dims, bool transposed) {
  return std::string(transposed ? "ConvTranspose" : "Conv") + std::to_string(dims) + "d";
}

Dims expand(const std::string& op, const char* what, const Dims& v, int64_t n) {
  if (int64_t(v.size()) == n) return v;
  FLB_CHECK(v.size() == 1, ValueError, "[", op, "] ", what, " must be one int or ", n, " ints, got ", shape_str(v));
  return Dims(size_t(n), v[0]);
}

}  // namespace

Conv::Conv(int64_t dims_, bool transposed_, int64_t in, int64_t out, Dims kernel, ConvOptions o)
    : Module(conv_name(dims_, transposed_)), dims(dims_), transposed(transposed_), in_channels(in), out_channels(out) {
  const std::string op = type_name();
  FLB_CHECK(dims >= 1 && dims <= 3, ValueError, "[Conv] dims must be 1, 2 or 3, got ", dims);
  FLB_CHECK(o.groups > 0, ValueError, "[", op, "] groups must be a positive integer, got ", o.groups);
  FLB_CHECK(in >= 0 && out >= 0, ValueError, "[", op, "] in_channels and out_channels must be >= 0, got ", in,
            " and ", out);
  FLB_CHECK(in % o.groups == 0, ValueError, "[", op, "] in_channels (", in, ") must be divisible by groups (",
            o.groups, ")");
  FLB_CHECK(out % o.groups == 0, ValueError, "[", op, "] out_channels (", out, ") must be divisible by groups (",
            o.groups, ")");
  kernel_size = expand(op, "kernel_size", kernel, dims);
  o.stride = expand(op, "stride", o.stride, dims);
  o.padding = expand(op, "padding", o.padding, dims);
  o.output_padding = expand(op, "output_padding", o.output_padding, dims);
  o.dilation = expand(op, "dilation", o.dilation, dims);
  const std::string& mode = o.padding_mode;
  FLB_CHECK(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular", ValueError, "[", op,
            "] padding_mode must be one of 'zeros', 'reflect', 'replicate' or 'circular', but got padding_mode='",
            mode, "'");
  FLB_CHECK(!transposed || mode == "zeros", ValueError, "[", op, "] only 'zeros' padding mode is supported, got '",
            mode, "'");
  if (!o.padding_str.empty()) {
    FLB_CHECK(!transposed, ValueError, "[", op, "] padding must be numbers, got '", o.padding_str, "'");
    functional::padding_mode_from(op.c_str(), o.padding_str);
    for (int64_t s : o.stride)
      FLB_CHECK(o.padding_str != "same" || s == 1, ValueError, "[", op,
                "] padding='same' is not supported for strided convolutions");
  }
  // F.pad's amounts, last dim first: the numbers, or "same"'s split (the odd one at the end).
  for (int64_t i = dims - 1; i >= 0; --i) {
    const size_t d = size_t(i);
    if (o.padding_str.empty()) {
      reversed_padding_.push_back(o.padding[d]);
      reversed_padding_.push_back(o.padding[d]);
    } else {
      const int64_t total = o.padding_str == "same" ? o.dilation[d] * (kernel_size[d] - 1) : 0;
      reversed_padding_.push_back(total / 2);
      reversed_padding_.push_back(total - total / 2);
    }
  }
  options = std::move(o);
  Dims w_shape = transposed ? Dims{in, out / options.groups} : Dims{out, in / options.groups};
  for (int64_t k : kernel_size) w_shape.push_back(k);
  weight = register_parameter("weight", empty(w_shape, options.dtype));
  bias = register_parameter("bias", options.bias ? empty({out}, options.dtype) : Tensor());
  reset_parameters();
}

void Conv::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t fan_in = init::calculate_fan_in_and_fan_out(weight).first;
    const double bound = fan_in > 0 ? 1 / std::sqrt(double(fan_in)) : 0;
    init::uniform_(bias, -bound, bound);
  }
}

Dims conv_transpose_output_padding(const std::string& op, const Tensor& x, const Dims& output_size,
                                   const Dims& stride, const Dims& padding, const Dims& kernel_size,
                                   const Dims& dilation) {
  const int64_t n = int64_t(kernel_size.size()), lead = x.dim() == n + 2 ? 2 : 1;
  Dims o = output_size;
  if (int64_t(o.size()) == lead + n) o = Dims(o.data() + lead, size_t(n));
  FLB_CHECK(int64_t(o.size()) == n, ValueError, "[", op, "] for ", x.dim(), "D input, output_size must have ", n,
            " or ", lead + n, " elements (got ", output_size.size(), ")");
  FLB_CHECK(x.dim() == n + 1 || x.dim() == n + 2, ValueError, "[", op, "] expected ", n + 1, "D (unbatched) or ",
            n + 2, "D (batched) input, but got input of size: ", shape_str(x.sizes()));
  Dims lo, hi, in, result;
  for (size_t d = 0; d < size_t(n); ++d) {
    in.push_back(x.size(lead + int64_t(d)));
    lo.push_back((in[d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (kernel_size[d] - 1) + 1);
    hi.push_back(lo[d] + stride[d] - 1);
  }
  for (size_t d = 0; d < size_t(n); ++d) {
    FLB_CHECK(o[d] >= lo[d] && o[d] <= hi[d], ValueError, "[", op, "] requested an output size of ", shape_str(o),
              ", but valid sizes range from ", shape_str(lo), " to ", shape_str(hi), " (for an input of ",
              shape_str(in), ")");
    result.push_back(o[d] - lo[d]);
  }
  return result;
}

Tensor Conv::forward(const Tensor& x, const Dims& output_size) {
  if (!transposed || output_size.empty()) return forward(x);
  const Dims op = conv_transpose_output_padding(type_name(), x, output_size, options.stride, options.padding,
                                                kernel_size, options.dilation);
  namespace F = functional;
  const std::optional<Tensor> b = bias.defined() ? std::optional<Tensor>(bias) : std::nullopt;
  const ConvOptions& o = options;
  switch (dims) {
    case 1: return F::conv_transpose1d(x, weight, b, o.stride, o.padding, op, o.groups, o.dilation);
    case 2: return F::conv_transpose2d(x, weight, b, o.stride, o.padding, op, o.groups, o.dilation);
    default: return F::conv_transpose3d(x, weight, b, o.stride, o.padding, op, o.groups, o.dilation);
  }
}

Tensor Conv::forward(const Tensor& x) {
  namespace F = functional;
  const std::optional<Tensor> b = bias.defined() ? std::optional<Tensor>(bias) : std::nullopt;
  const ConvOptions& o = options;
  if (transposed) {
    switch (dims) {
      case 1: return F::conv_transpose1d(x, weight, b, o.stride, o.padding, o.output_padding, o.groups, o.dilation);
      case 2: return F::conv_transpose2d(x, weight, b, o.stride, o.padding, o.output_padding, o.groups, o.dilation);
      default: return F::conv_transpose3d(x, weight, b, o.stride, o.padding, o.output_padding, o.groups, o.dilation);
    }
  }
  if (o.padding_mode != "zeros") {
    const Tensor xp = F::pad(x, reversed_padding_, o.padding_mode);
    const Dims none{0};
    switch (dims) {
      case 1: return F::conv1d(xp, weight, b, o.stride, none, o.dilation, o.groups);
      case 2: return F::conv2d(xp, weight, b, o.stride, none, o.dilation, o.groups);
      default: return F::conv3d(xp, weight, b, o.stride, none, o.dilation, o.groups);
    }
  }
  if (!o.padding_str.empty()) {
    const F::PaddingMode mode = F::padding_mode_from(type_name().c_str(), o.padding_str);
    switch (dims) {
      case 1: return F::conv1d(x, weight, b, o.stride, mode, o.dilation, o.groups);
      case 2: return F::conv2d(x, weight, b, o.stride, mode, o.dilation, o.groups);
      default: return F::conv3d(x, weight, b, o.stride, mode, o.dilation, o.groups);
    }
  }
  switch (dims) {
    case 1: return F::conv1d(x, weight, b, o.stride, o.padding, o.dilation, o.groups);
    case 2: return F::conv2d(x, weight, b, o.stride, o.padding, o.dilation, o.groups);
    default: return F::conv3d(x, weight, b, o.stride, o.padding, o.dilation, o.groups);
  }
}

}  // namespace flambeau::nn
