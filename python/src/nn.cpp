// flambeau._C._nn: the C++ nn::functional (fused layer_norm / rms_norm, linear, dropout,
// losses, the fused linear_cross_entropy) and nn::init, wrapped by flambeau.nn.functional and flambeau.nn.init.
#include "bindings.h"
#include "def_op.h"

namespace flambeau::python {
namespace {

// An in-place initialiser fi(Tensor&, args...) as a function returning its tensor's own
// Python object (a Parameter stays a Parameter).
template <class... A, class FI>
auto initialiser(FI fi) {
  return [fi](nb::handle t, A... args) {
    Tensor& self = nb::cast<Tensor&>(t);
    {
      nb::gil_scoped_release release;
      fi(self, args...);
    }
    return nb::borrow(t);
  };
}

}  // namespace

void bind_nn(nb::module_& m) {
  namespace F = nn::functional;
  namespace I = nn::init;
  nb::module_ nm = m.def_submodule("_nn", "nn.functional and nn.init in C++ (wrapped by flambeau.nn)");
  def_function<schemas::layer_norm>(nm, [](const Tensor& x, nb::handle shape, std::optional<Tensor> w,
                                            std::optional<Tensor> b, double eps) {
    return release_call_t(F::layer_norm, x, dims_from(shape), w, b, eps);
  });
  def_function<schemas::rms_norm>(nm, [](const Tensor& x, nb::handle shape, std::optional<Tensor> w,
                                          std::optional<double> eps) {
    return release_call_t(F::rms_norm, x, dims_from(shape), w, eps);
  });
  def_function<schemas::linear>(nm, &F::linear, release_gil());
  def_function<schemas::dropout>(nm, &F::dropout, release_gil());
  def_function<schemas::normalize>(nm, &F::normalize, release_gil());
  // Activations (nn/activation.cpp).
  def_function<schemas::elu>(nm, &F::elu, release_gil());
  def_function<schemas::selu>(nm, &F::selu, release_gil());
  def_function<schemas::celu>(nm, &F::celu, release_gil());
  def_function<schemas::leaky_relu>(nm, &F::leaky_relu, release_gil());
  def_function<schemas::prelu>(nm, &F::prelu, release_gil());
  def_function<schemas::rrelu>(nm, &F::rrelu, release_gil());
  def_function<schemas::hardtanh>(nm, &F::hardtanh, release_gil());
  def_function<schemas::relu6>(nm, &F::relu6, release_gil());
  def_function<schemas::hardsigmoid>(nm, &F::hardsigmoid, release_gil());
  def_function<schemas::hardswish>(nm, &F::hardswish, release_gil());
  def_function<schemas::mish>(nm, &F::mish, release_gil());
  def_function<schemas::glu>(nm, &F::glu, release_gil());
  def_function<schemas::log_sigmoid>(nm, &F::log_sigmoid, release_gil());
  def_function<schemas::softsign>(nm, &F::softsign, release_gil());
  def_function<schemas::softshrink>(nm, &F::softshrink, release_gil());
  def_function<schemas::hardshrink>(nm, &F::hardshrink, release_gil());
  def_function<schemas::tanhshrink>(nm, &F::tanhshrink, release_gil());
  def_function<schemas::threshold>(nm, &F::threshold, release_gil());
  def_function<schemas::softmin>(nm, &F::softmin, release_gil());
  def_function<schemas::batch_norm>(nm, &F::batch_norm, release_gil());
  def_function<schemas::group_norm>(nm, &F::group_norm, release_gil());
  def_function<schemas::instance_norm>(nm, &F::instance_norm, release_gil());
  def_function<schemas::local_response_norm>(nm, &F::local_response_norm, release_gil());
  def_function<schemas::embedding>(nm, [](const Tensor& i, const Tensor& w, std::optional<int64_t> p) {
    return embedding(w, i, p);
  }, release_gil());
  def_function<schemas::one_hot>(nm, [](const Tensor& t, int64_t n) { return one_hot(t, n); }, release_gil());
  def_function<schemas::scaled_dot_product_attention>(nm, &nn::scaled_dot_product_attention, release_gil());
  def_function<schemas::cross_entropy>(nm, &F::cross_entropy, release_gil());
  def_function<schemas::nll_loss>(nm, &F::nll_loss, release_gil());
  def_function<schemas::mse_loss>(nm, &F::mse_loss, release_gil());
  def_function<schemas::l1_loss>(nm, &F::l1_loss, release_gil());
  def_function<schemas::binary_cross_entropy_with_logits>(nm, &F::binary_cross_entropy_with_logits, release_gil());
  def_function<schemas::linear_cross_entropy>(nm, &F::linear_cross_entropy, release_gil());
  // Test-only: the unfused composite that linear_cross_entropy is checked against.
  nm.def("linear_cross_entropy_reference", &F::linear_cross_entropy_reference, "input"_a, "linear_weight"_a,
         "target"_a, "linear_bias"_a = nb::none(), "weight"_a = nb::none(), "reduction"_a = "mean",
         "ignore_index"_a = -100, "label_smoothing"_a = 0.0, "z_loss"_a = 0.0, release_gil());

  using Gen = std::optional<Generator>;
  nm.def("calculate_gain", &I::calculate_gain, "nonlinearity"_a, "param"_a = nb::none());
  nm.def("uniform_", initialiser<double, double, Gen>(&I::uniform_), "tensor"_a, "a"_a = 0.0, "b"_a = 1.0,
         "generator"_a = nb::none());
  nm.def("normal_", initialiser<double, double, Gen>(&I::normal_), "tensor"_a, "mean"_a = 0.0, "std"_a = 1.0,
         "generator"_a = nb::none());
  nm.def("constant_", initialiser<Scalar>(&I::constant_), "tensor"_a, "val"_a);
  nm.def("xavier_uniform_", initialiser<double, Gen>(&I::xavier_uniform_), "tensor"_a, "gain"_a = 1.0,
         "generator"_a = nb::none());
  nm.def("xavier_normal_", initialiser<double, Gen>(&I::xavier_normal_), "tensor"_a, "gain"_a = 1.0,
         "generator"_a = nb::none());
  nm.def("kaiming_uniform_", initialiser<double, std::string, std::string, Gen>(&I::kaiming_uniform_), "tensor"_a,
         "a"_a = 0.0, "mode"_a = "fan_in", "nonlinearity"_a = "leaky_relu", "generator"_a = nb::none());
  nm.def("kaiming_normal_", initialiser<double, std::string, std::string, Gen>(&I::kaiming_normal_), "tensor"_a,
         "a"_a = 0.0, "mode"_a = "fan_in", "nonlinearity"_a = "leaky_relu", "generator"_a = nb::none());
  nm.def("trunc_normal_", initialiser<double, double, double, double, Gen>(&I::trunc_normal_), "tensor"_a,
         "mean"_a = 0.0, "std"_a = 1.0, "a"_a = -2.0, "b"_a = 2.0, "generator"_a = nb::none());
  bind_cpp_layers(nm);
}

}  // namespace flambeau::python
