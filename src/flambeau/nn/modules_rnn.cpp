// nn::RNN / LSTM / GRU and RNNCell / LSTMCell / GRUCell of modules.h: torch's argument
// checks, parameter names, order and initialisation; forward through nn/rnn.h.
#include <cmath>

#include "flambeau/nn/init.h"
#include "flambeau/nn/modules.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn {
namespace {

functional::RnnOptions rnn_options(functional::RnnMode mode, int64_t in, int64_t hidden, int64_t layers, bool bias,
                                   bool batch_first, double dropout, bool bidirectional, int64_t proj) {
  functional::RnnOptions o;
  o.mode = mode, o.input_size = in, o.hidden_size = hidden, o.num_layers = layers, o.bias = bias;
  o.batch_first = batch_first, o.dropout = dropout, o.bidirectional = bidirectional, o.proj_size = proj;
  return o;
}

functional::RnnMode rnn_nonlinearity(const char* name, const std::string& nonlinearity) {
  FLB_CHECK(nonlinearity == "tanh" || nonlinearity == "relu", ValueError, "[", name, "] Unknown nonlinearity '",
            nonlinearity, "'. Select from 'tanh' or 'relu'.");
  return nonlinearity == "tanh" ? functional::RnnMode::rnn_tanh : functional::RnnMode::rnn_relu;
}

void init_uniform(const std::vector<Tensor>& params, int64_t hidden) {
  const double stdv = hidden > 0 ? 1.0 / std::sqrt(double(hidden)) : 0.0;
  for (Tensor t : params)
    if (t.defined()) init::uniform_(t, -stdv, stdv);
}

}  // namespace

RNNBase::RNNBase(const std::string& name, const functional::RnnOptions& o, DType dtype)
    : Module(name), options(o) {
  functional::check_rnn_options(name, o);
  for (const auto& [pname, shape] : functional::rnn_parameter_shapes(o)) {
    register_parameter(pname, empty(shape, dtype));
    flat_weights_names.push_back(pname);
  }
  reset_parameters();
}

std::vector<Tensor> RNNBase::flat_weights() const {
  std::vector<Tensor> w;
  for (const std::string& n : flat_weights_names) w.push_back(*own_parameters().find(n));
  return w;
}

void RNNBase::reset_parameters() { init_uniform(flat_weights(), options.hidden_size); }

std::vector<Tensor> RNNBase::forward(const Tensor& input, const Tensor& hx, const Tensor& cx) {
  return functional::rnn(type_name(), options, flat_weights(), input, hx, cx, is_training());
}

std::vector<Tensor> RNNBase::forward_packed(const Tensor& data, const std::vector<int64_t>& batch_sizes,
                                            const Tensor& hx, const Tensor& cx) {
  FLB_CHECK(!batch_sizes.empty(), ValueError, "[", type_name(), "] forward_packed needs batch_sizes");
  return functional::rnn(type_name(), options, flat_weights(), data, hx, cx, is_training(), batch_sizes);
}

Tensor RNNBase::forward(const Tensor& input) { return forward(input, Tensor(), Tensor())[0]; }

Tensor RNNBase::forward_inputs(const TensorList& inputs) {
  FLB_CHECK(!inputs.empty() && inputs.size() <= 3, ValueError, "[", type_name(), "] expected 1 to 3 inputs, got ",
            inputs.size());
  return forward(inputs[0], inputs.size() > 1 ? inputs[1] : Tensor(), inputs.size() > 2 ? inputs[2] : Tensor())[0];
}

RNN::RNN(int64_t in, int64_t hidden, int64_t layers, const std::string& nonlinearity, bool bias, bool batch_first,
         double dropout, bool bidirectional, DType dtype)
    : RNNBase("RNN", rnn_options(rnn_nonlinearity("RNN", nonlinearity), in, hidden, layers, bias, batch_first, dropout,
                                 bidirectional, 0),
              dtype) {}

LSTM::LSTM(int64_t in, int64_t hidden, int64_t layers, bool bias, bool batch_first, double dropout,
           bool bidirectional, int64_t proj, DType dtype)
    : RNNBase("LSTM", rnn_options(functional::RnnMode::lstm, in, hidden, layers, bias, batch_first, dropout,
                                  bidirectional, proj),
              dtype) {}

GRU::GRU(int64_t in, int64_t hidden, int64_t layers, bool bias, bool batch_first, double dropout, bool bidirectional,
         DType dtype)
    : RNNBase("GRU", rnn_options(functional::RnnMode::gru, in, hidden, layers, bias, batch_first, dropout,
                                 bidirectional, 0),
              dtype) {}

RNNCellBase::RNNCellBase(const std::string& name, functional::RnnMode mode_, int64_t in, int64_t hidden, bool bias_,
                         DType dtype)
    : Module(name), mode(mode_), input_size(in), hidden_size(hidden), bias(bias_) {
  FLB_CHECK(in >= 0, ValueError, "[", name, "] input_size must be >= 0, got ", in);
  FLB_CHECK(hidden > 0, ValueError, "[", name, "] hidden_size must be greater than zero, got ", hidden);
  const int64_t gh = functional::rnn_gates(mode) * hidden;
  weight_ih = register_parameter("weight_ih", empty({gh, in}, dtype));
  weight_hh = register_parameter("weight_hh", empty({gh, hidden}, dtype));
  bias_ih = register_parameter("bias_ih", bias ? empty({gh}, dtype) : Tensor());
  bias_hh = register_parameter("bias_hh", bias ? empty({gh}, dtype) : Tensor());
  reset_parameters();
}

void RNNCellBase::reset_parameters() { init_uniform({weight_ih, weight_hh, bias_ih, bias_hh}, hidden_size); }

std::vector<Tensor> RNNCellBase::forward(const Tensor& input, const Tensor& hx, const Tensor& cx) {
  return functional::rnn_cell(type_name(), mode, input, hx, cx, weight_ih, weight_hh, bias_ih, bias_hh);
}

Tensor RNNCellBase::forward(const Tensor& input) { return forward(input, Tensor(), Tensor())[0]; }

Tensor RNNCellBase::forward_inputs(const TensorList& inputs) {
  FLB_CHECK(!inputs.empty() && inputs.size() <= 3, ValueError, "[", type_name(), "] expected 1 to 3 inputs, got ",
            inputs.size());
  return forward(inputs[0], inputs.size() > 1 ? inputs[1] : Tensor(), inputs.size() > 2 ? inputs[2] : Tensor())[0];
}

RNNCell::RNNCell(int64_t in, int64_t hidden, bool bias, const std::string& nonlinearity, DType dtype)
    : RNNCellBase("RNNCell", rnn_nonlinearity("RNNCell", nonlinearity), in, hidden, bias, dtype) {}
LSTMCell::LSTMCell(int64_t in, int64_t hidden, bool bias, DType dtype)
    : RNNCellBase("LSTMCell", functional::RnnMode::lstm, in, hidden, bias, dtype) {}
GRUCell::GRUCell(int64_t in, int64_t hidden, bool bias, DType dtype)
    : RNNCellBase("GRUCell", functional::RnnMode::gru, in, hidden, bias, dtype) {}

}  // namespace flambeau::nn
