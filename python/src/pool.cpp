// nn.functional's pooling (nn/pooling.cpp, nn/unpooling.cpp) in flambeau._C._nn: max_pool*d and
// adaptive_max_pool*d return (values, indices) with return_indices=True; int[] arguments
// take an int or a sequence, stride None means kernel_size, and an adaptive output_size may
// hold None for "the input's size".
#include "bindings.h"
#include "def_op.h"

namespace flambeau::python {
namespace {

Dims opt_dims_from(nb::handle h) { return h.is_none() ? Dims{} : dims_from(h); }

// output_size with None entries read from x's last n sizes.
Dims output_size_from(nb::handle h, const Tensor& x, int64_t n) {
  if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) return dims_from(h);
  nb::list items;
  const Py_ssize_t len = PySequence_Size(h.ptr());
  for (Py_ssize_t i = 0; i < len; ++i) {
    nb::object e = nb::steal(PySequence_GetItem(h.ptr(), i));
    if (e.is_none()) {
      const int64_t d = x.dim() - len + int64_t(i);
      items.append(len == n && d >= 0 ? x.size(d) : -1);
    } else {
      items.append(e);
    }
  }
  return dims_from(items);
}

template <class Values, class WithIndices>
auto max_pool_binding(Values values, WithIndices with_indices) {
  return [values, with_indices](const Tensor& x, nb::handle kernel_size, nb::handle stride, nb::handle padding,
                                nb::handle dilation, bool ceil_mode, bool return_indices) -> nb::object {
    const Dims k = dims_from(kernel_size), s = opt_dims_from(stride), p = dims_from(padding), d = dims_from(dilation);
    if (!return_indices) return nb::cast(release_call_t(values, x, k, s, p, d, ceil_mode));
    auto [v, i] = release_call_t(with_indices, x, k, s, p, d, ceil_mode);
    return nb::make_tuple(v, i);
  };
}

template <class Values, class WithIndices>
auto adaptive_max_binding(int64_t n, Values values, WithIndices with_indices) {
  return [n, values, with_indices](const Tensor& x, nb::handle output_size, bool return_indices) -> nb::object {
    const Dims o = output_size_from(output_size, x, n);
    if (!return_indices) return nb::cast(release_call_t(values, x, o));
    auto [v, i] = release_call_t(with_indices, x, o);
    return nb::make_tuple(v, i);
  };
}

template <class F>
auto adaptive_avg_binding(int64_t n, F f) {
  return [n, f](const Tensor& x, nb::handle output_size) {
    const Dims o = output_size_from(output_size, x, n);
    return release_call_t(f, x, o);
  };
}

}  // namespace

void bind_pool(nb::module_& m, nb::class_<Tensor>&) {
  namespace F = nn::functional;
  nb::module_ nm = nb::borrow<nb::module_>(m.attr("_nn"));
  def_function<schemas::max_pool1d>(nm, max_pool_binding(&F::max_pool1d, &F::max_pool1d_with_indices));
  def_function<schemas::max_pool2d>(nm, max_pool_binding(&F::max_pool2d, &F::max_pool2d_with_indices));
  def_function<schemas::max_pool3d>(nm, max_pool_binding(&F::max_pool3d, &F::max_pool3d_with_indices));
  def_function<schemas::avg_pool1d>(nm, [](const Tensor& x, nb::handle kernel_size, nb::handle stride,
                                           nb::handle padding, bool ceil_mode, bool count_include_pad) {
    return release_call_t(F::avg_pool1d, x, dims_from(kernel_size), opt_dims_from(stride), dims_from(padding),
                          ceil_mode, count_include_pad);
  });
  auto avg = [](Tensor (*f)(const Tensor&, const Dims&, const Dims&, const Dims&, bool, bool,
                            std::optional<int64_t>)) {
    return [f](const Tensor& x, nb::handle kernel_size, nb::handle stride, nb::handle padding, bool ceil_mode,
               bool count_include_pad, std::optional<int64_t> divisor_override) {
      return release_call_t(f, x, dims_from(kernel_size), opt_dims_from(stride), dims_from(padding), ceil_mode,
                            count_include_pad, divisor_override);
    };
  };
  def_function<schemas::avg_pool2d>(nm, avg(&F::avg_pool2d));
  def_function<schemas::avg_pool3d>(nm, avg(&F::avg_pool3d));
  def_function<schemas::adaptive_avg_pool1d>(nm, adaptive_avg_binding(1, &F::adaptive_avg_pool1d));
  def_function<schemas::adaptive_avg_pool2d>(nm, adaptive_avg_binding(2, &F::adaptive_avg_pool2d));
  def_function<schemas::adaptive_avg_pool3d>(nm, adaptive_avg_binding(3, &F::adaptive_avg_pool3d));
  def_function<schemas::adaptive_max_pool1d>(
      nm, adaptive_max_binding(1, &F::adaptive_max_pool1d, &F::adaptive_max_pool1d_with_indices));
  def_function<schemas::adaptive_max_pool2d>(
      nm, adaptive_max_binding(2, &F::adaptive_max_pool2d, &F::adaptive_max_pool2d_with_indices));
  def_function<schemas::adaptive_max_pool3d>(
      nm, adaptive_max_binding(3, &F::adaptive_max_pool3d, &F::adaptive_max_pool3d_with_indices));
  auto lp = [](Tensor (*f)(const Tensor&, Scalar, const Dims&, const Dims&, bool)) {
    return [f](const Tensor& x, Scalar norm_type, nb::handle kernel_size, nb::handle stride, bool ceil_mode) {
      return release_call_t(f, x, norm_type, dims_from(kernel_size), opt_dims_from(stride), ceil_mode);
    };
  };
  def_function<schemas::lp_pool1d>(nm, lp(&F::lp_pool1d));
  def_function<schemas::lp_pool2d>(nm, lp(&F::lp_pool2d));
  def_function<schemas::lp_pool3d>(nm, lp(&F::lp_pool3d));
  auto unpool = [](Tensor (*f)(const Tensor&, const Tensor&, const Dims&, const Dims&, const Dims&, const Dims&)) {
    return [f](const Tensor& x, const Tensor& indices, nb::handle kernel_size, nb::handle stride, nb::handle padding,
               nb::handle output_size) {
      return release_call_t(f, x, indices, dims_from(kernel_size), opt_dims_from(stride), dims_from(padding),
                            opt_dims_from(output_size));
    };
  };
  def_function<schemas::max_unpool1d>(nm, unpool(&F::max_unpool1d));
  def_function<schemas::max_unpool2d>(nm, unpool(&F::max_unpool2d));
  def_function<schemas::max_unpool3d>(nm, unpool(&F::max_unpool3d));
}

}  // namespace flambeau::python
