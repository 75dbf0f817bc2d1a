// torch.convolution, nn.functional's conv*d / conv_transpose*d (padding as numbers or
// "valid" / "same") and pad (nn/convolution.cpp, nn/padding.cpp).
#include "bindings.h"
#include "def_op.h"

namespace flambeau::python {
namespace {

using OptTensor = std::optional<Tensor>;

// conv*d(input, weight, bias, stride, padding, dilation, groups), padding an int, a list or a str.
template <class Numeric, class Named>
auto conv_binding(const char* op, Numeric numeric, Named named) {
  return [op, numeric, named](const Tensor& x, const Tensor& w, OptTensor b, nb::handle stride, nb::handle padding,
                          nb::handle dilation, int64_t groups) {
    const Dims s = dims_from(stride), d = dims_from(dilation);
    if (nb::isinstance<nb::str>(padding)) {
      const auto mode = nn::functional::padding_mode_from(op, nb::cast<std::string>(padding));
      return release_call_t(named, x, w, b, s, mode, d, groups);
    }
    return release_call_t(numeric, x, w, b, s, dims_from(padding), d, groups);
  };
}

auto conv_transpose_binding(Tensor (*f)(const Tensor&, const Tensor&, const OptTensor&, const Dims&, const Dims&,
                                        const Dims&, int64_t, const Dims&)) {
  return [f](const Tensor& x, const Tensor& w, OptTensor b, nb::handle stride, nb::handle padding,
             nb::handle output_padding, int64_t groups, nb::handle dilation) {
    return release_call_t(f, x, w, b, dims_from(stride), dims_from(padding), dims_from(output_padding), groups,
                          dims_from(dilation));
  };
}

}  // namespace

void bind_conv(nb::module_& m, nb::class_<Tensor>& cls) {
  namespace F = nn::functional;
  using Numeric = Tensor (*)(const Tensor&, const Tensor&, const OptTensor&, const Dims&, const Dims&, const Dims&,
                             int64_t);
  using Named = Tensor (*)(const Tensor&, const Tensor&, const OptTensor&, const Dims&, F::PaddingMode,
                           const Dims&, int64_t);
  def_op<schemas::convolution>(m, cls, [](const Tensor& x, const Tensor& w, OptTensor b, nb::handle stride,
                                          nb::handle padding, nb::handle dilation, bool transposed,
                                          nb::handle output_padding, int64_t groups) {
    return release_call_t(convolution, x, w, b, dims_from(stride), dims_from(padding), dims_from(dilation),
                          transposed, dims_from(output_padding), groups);
  });
  nb::module_ nm = nb::borrow<nb::module_>(m.attr("_nn"));
  def_function<schemas::conv1d>(nm, conv_binding("conv1d", Numeric(&F::conv1d), Named(&F::conv1d)));
  def_function<schemas::conv2d>(nm, conv_binding("conv2d", Numeric(&F::conv2d), Named(&F::conv2d)));
  def_function<schemas::conv3d>(nm, conv_binding("conv3d", Numeric(&F::conv3d), Named(&F::conv3d)));
  def_function<schemas::conv_transpose1d>(nm, conv_transpose_binding(&F::conv_transpose1d));
  def_function<schemas::conv_transpose2d>(nm, conv_transpose_binding(&F::conv_transpose2d));
  def_function<schemas::conv_transpose3d>(nm, conv_transpose_binding(&F::conv_transpose3d));
  def_function<schemas::pad>(nm, [](const Tensor& x, nb::handle padding, const std::string& mode,
                                    std::optional<double> value) {
    return release_call_t(F::pad, x, dims_from(padding), mode, value);
  });
}

}  // namespace flambeau::python
