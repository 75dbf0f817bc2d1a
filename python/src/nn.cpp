// flambeau._C._nn: the C++ nn::functional (fused layer_norm / rms_norm, linear, dropout,
// losses, the fused linear_cross_entropy) and nn::init, wrapped by flambeau.nn.functional and flambeau.nn.init.
#include "bindings.h"

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
  nm.def("layer_norm", [](const Tensor& x, nb::handle shape, std::optional<Tensor> w, std::optional<Tensor> b,
                          double eps) { return release_call_t(F::layer_norm, x, dims_from(shape), w, b, eps); },
         "input"_a, "normalized_shape"_a, "weight"_a = nb::none(), "bias"_a = nb::none(), "eps"_a = 1e-5);
  nm.def("rms_norm", [](const Tensor& x, nb::handle shape, std::optional<Tensor> w, std::optional<double> eps) {
    return release_call_t(F::rms_norm, x, dims_from(shape), w, eps);
  }, "input"_a, "normalized_shape"_a, "weight"_a = nb::none(), "eps"_a = nb::none());
  nm.def("linear", &F::linear, "input"_a, "weight"_a, "bias"_a = nb::none(), release_gil());
  nm.def("dropout", &F::dropout, "input"_a, "p"_a = 0.5, "training"_a = true, "generator"_a = nb::none(),
         release_gil());
  nm.def("cross_entropy", &F::cross_entropy, "input"_a, "target"_a, "weight"_a = nb::none(), "ignore_index"_a = -100,
         "reduction"_a = "mean", "label_smoothing"_a = 0.0, release_gil());
  nm.def("linear_cross_entropy", &F::linear_cross_entropy, "input"_a, "linear_weight"_a, "target"_a,
         "linear_bias"_a = nb::none(), "weight"_a = nb::none(), "reduction"_a = "mean", "ignore_index"_a = -100,
         "label_smoothing"_a = 0.0, "z_loss"_a = 0.0, "chunk_size"_a = nb::none(), release_gil());
  nm.def("linear_cross_entropy_reference", &F::linear_cross_entropy_reference, "input"_a, "linear_weight"_a,
         "target"_a, "linear_bias"_a = nb::none(), "weight"_a = nb::none(), "reduction"_a = "mean",
         "ignore_index"_a = -100, "label_smoothing"_a = 0.0, "z_loss"_a = 0.0, release_gil());
  nm.def("nll_loss", &F::nll_loss, "input"_a, "target"_a, "weight"_a = nb::none(), "ignore_index"_a = -100,
         "reduction"_a = "mean", release_gil());
  nm.def("mse_loss", &F::mse_loss, "input"_a, "target"_a, "reduction"_a = "mean", release_gil());
  nm.def("l1_loss", &F::l1_loss, "input"_a, "target"_a, "reduction"_a = "mean", release_gil());
  nm.def("binary_cross_entropy_with_logits", &F::binary_cross_entropy_with_logits, "input"_a, "target"_a,
         "weight"_a = nb::none(), "reduction"_a = "mean", "pos_weight"_a = nb::none(), release_gil());

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
