// The recurrent layers' computation (nn/rnn.h) for flambeau.nn.modules.rnn, in
// flambeau._C._nn: _rnn (a whole RNN / LSTM / GRU forward, padded or packed) and _rnn_cell.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "flambeau/nn/rnn.h"

namespace flambeau::python {

void bind_rnn(nb::module_& m) {
  namespace F = nn::functional;
  nb::module_ nm = nb::borrow<nb::module_>(m.attr("_nn"));
  // (output, h_n, c_n or None); batch_sizes: None for a padded input, else packed data.
  nm.def("_rnn", [](const std::string& name, const std::string& mode, int64_t input_size, int64_t hidden_size,
                    int64_t num_layers, bool bias, bool batch_first, double dropout, bool bidirectional,
                    int64_t proj_size, std::vector<Tensor> weights, const Tensor& input, std::optional<Tensor> hx,
                    std::optional<Tensor> cx, bool training, std::optional<std::vector<int64_t>> batch_sizes) {
    F::RnnOptions o;
    o.mode = F::rnn_mode_from(mode), o.input_size = input_size, o.hidden_size = hidden_size;
    o.num_layers = num_layers, o.bias = bias, o.batch_first = batch_first, o.dropout = dropout;
    o.bidirectional = bidirectional, o.proj_size = proj_size;
    std::vector<Tensor> r = release_call_t(F::rnn, name, o, weights, input, hx.value_or(Tensor()),
                                           cx.value_or(Tensor()), training,
                                           batch_sizes.value_or(std::vector<int64_t>{}));
    return nb::make_tuple(r[0], r[1], r[2].defined() ? nb::cast(r[2]) : nb::none());
  }, "name"_a, "mode"_a, "input_size"_a, "hidden_size"_a, "num_layers"_a, "bias"_a, "batch_first"_a, "dropout"_a,
     "bidirectional"_a, "proj_size"_a, "weights"_a, "input"_a, "hx"_a.none(), "cx"_a.none(), "training"_a,
     "batch_sizes"_a.none());
  // (h', c' or None).
  nm.def("_rnn_cell", [](const std::string& name, const std::string& mode, const Tensor& input,
                         std::optional<Tensor> hx, std::optional<Tensor> cx, const Tensor& w_ih, const Tensor& w_hh,
                         std::optional<Tensor> b_ih, std::optional<Tensor> b_hh) {
    std::vector<Tensor> r = release_call_t(F::rnn_cell, name, F::rnn_mode_from(mode), input, hx.value_or(Tensor()),
                                           cx.value_or(Tensor()), w_ih, w_hh, b_ih.value_or(Tensor()),
                                           b_hh.value_or(Tensor()));
    return nb::make_tuple(r[0], r.size() > 1 ? nb::cast(r[1]) : nb::none());
  }, "name"_a, "mode"_a, "input"_a, "hx"_a.none(), "cx"_a.none(), "w_ih"_a, "w_hh"_a, "b_ih"_a.none(),
     "b_hh"_a.none());
  // RNN parameter names and shapes in torch's order.
  nm.def("_rnn_parameter_shapes", [](const std::string& mode, int64_t input_size, int64_t hidden_size,
                                     int64_t num_layers, bool bias, bool bidirectional, int64_t proj_size) {
    F::RnnOptions o;
    o.mode = F::rnn_mode_from(mode), o.input_size = input_size, o.hidden_size = hidden_size;
    o.num_layers = num_layers, o.bias = bias, o.bidirectional = bidirectional, o.proj_size = proj_size;
    nb::list l;
    for (const auto& [n, s] : F::rnn_parameter_shapes(o)) {
      nb::list shape;
      for (int64_t d : s) shape.append(d);
      l.append(nb::make_tuple(n, nb::tuple(shape)));
    }
    return l;
  });
}

}  // namespace flambeau::python
