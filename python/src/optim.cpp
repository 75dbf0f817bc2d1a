// flambeau.optim's C++ optimizers: SGD, Adam, AdamW (fused steps; the GIL is released).
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace flambeau::python {

void bind_optim(nb::module_& m) {
  nb::module_ om = m.def_submodule("_optim", "optimizers (wrapped by flambeau.optim)");
  nb::class_<optim::Optimizer>(om, "Optimizer")
      .def("step", &optim::Optimizer::step, release_gil())
      .def("zero_grad", &optim::Optimizer::zero_grad, "set_to_none"_a = true)
      .def_prop_rw("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr)
      .def_prop_ro("params", &optim::Optimizer::params)
      .def("_options", &optim::Optimizer::options)
      .def("_set_option", &optim::Optimizer::set_option, "name"_a, "value"_a)
      .def("_state", [](const optim::Optimizer& o) {
        optim::OptimizerState s = o.state_dict();
        return nb::make_tuple(s.params, s.options);
      })
      .def("_load_state", [](optim::Optimizer& o, std::vector<std::map<std::string, Tensor>> params,
                             std::map<std::string, double> options) {
        o.load_state_dict({std::move(params), std::move(options)});
      }, "params"_a, "options"_a);
  nb::class_<optim::SGD, optim::Optimizer>(om, "SGD")
      .def("__init__", [](optim::SGD* self, std::vector<Tensor> params, double lr, double momentum, double dampening,
                          double weight_decay, bool nesterov, bool maximize) {
        new (self) optim::SGD(std::move(params), {lr, momentum, dampening, weight_decay, nesterov, maximize});
      }, "params"_a, "lr"_a = 1e-3, "momentum"_a = 0.0, "dampening"_a = 0.0, "weight_decay"_a = 0.0,
           "nesterov"_a = false, "maximize"_a = false)
      .def("momentum_buffer", [](const optim::SGD& s, size_t i) -> nb::object {
        const Tensor& b = s.momentum_buffer(i);
        return b.defined() ? nb::cast(b) : nb::none();
      });
  auto adam_init = [](bool decoupled) {
    return [decoupled](optim::Adam* self, std::vector<Tensor> params, double lr, std::pair<double, double> betas,
                       double eps, double weight_decay, bool maximize) {
      new (self) optim::Adam(std::move(params), {lr, betas.first, betas.second, eps, weight_decay, maximize}, decoupled);
    };
  };
  nb::class_<optim::Adam, optim::Optimizer>(om, "Adam")
      .def("__init__", adam_init(false), "params"_a, "lr"_a = 1e-3, "betas"_a = std::pair{0.9, 0.999}, "eps"_a = 1e-8,
           "weight_decay"_a = 0.0, "maximize"_a = false)
      .def("state", [](const optim::Adam& a, size_t i) {
        return nb::make_tuple(a.step_count(i), a.exp_avg(i), a.exp_avg_sq(i));
      });
  nb::class_<optim::AdamW, optim::Adam>(om, "AdamW")
      .def("__init__", [](optim::AdamW* self, std::vector<Tensor> params, double lr, std::pair<double, double> betas,
                          double eps, double weight_decay, bool maximize) {
        new (self) optim::AdamW(std::move(params), {lr, betas.first, betas.second, eps, weight_decay, maximize});
      }, "params"_a, "lr"_a = 1e-3, "betas"_a = std::pair{0.9, 0.999}, "eps"_a = 1e-8, "weight_decay"_a = 1e-2,
           "maximize"_a = false);
}

}  // namespace flambeau::python
