// The recurrent layers' computation (nn/rnn.cpp), shared by the C++ modules (nn::RNN, LSTM,
// GRU and their cells in modules.h) and the Python ones (flambeau.nn.modules.rnn).
// Note [RNN layout]: a sequence is handled as "packed" rows: step t owns batch_sizes[t]
// consecutive rows (batch_sizes non-increasing; a padded [T, B, *] input is T steps of B
// rows). Per layer and direction the input-to-hidden products of every step are one GEMM
// (x[N, in] @ W_ih^T + b), then rnn_layer runs the recurrence: per step one GEMM
// h @ W_hh^T and a fused pointwise gate kernel, with one backward node for the whole
// sequence whose weight gradients are single GEMMs over all steps.
#pragma once
#include <string>
#include <tuple>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::nn::functional {

enum class RnnMode { rnn_tanh, rnn_relu, lstm, gru };
// "RNN_TANH", "RNN_RELU", "LSTM", "GRU" (ValueError otherwise).
RnnMode rnn_mode_from(const std::string& mode);
// Gates per hidden unit: 1, 1, 4, 3.
int64_t rnn_gates(RnnMode mode);

// The recurrence of one layer in one direction over packed rows (Note [RNN layout]).
// xw [N, G * H]: the input projections (bias b_ih, and b_hh except for GRU, included);
// h0 [B, P], c0 [B, H] (LSTM; else undefined), w_hh [G * H, P], b_hh [G * H] (GRU, may be
// undefined), w_hr [P, H] (LSTM projection; undefined: P = H). reverse runs the steps last
// to first. Returns {output [N, P], h_n [B, P], c_n [B, H] (LSTM)}; a row's state stops at
// its sequence's last step. Differentiable in xw, h0, c0, w_hh, b_hh and w_hr.
std::vector<Tensor> rnn_layer(RnnMode mode, const Tensor& xw, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
                              const Tensor& b_hh, const Tensor& w_hr, const std::vector<int64_t>& batch_sizes,
                              bool reverse);

// The hyper-parameters of an RNN / LSTM / GRU module, as torch's.
struct RnnOptions {
  RnnMode mode = RnnMode::lstm;
  int64_t input_size = 0, hidden_size = 0, num_layers = 1;
  bool bias = true, batch_first = false;
  double dropout = 0.0;
  bool bidirectional = false;
  int64_t proj_size = 0;
};

// The flat parameter names in torch's order (weight_ih_l0, weight_hh_l0, bias_ih_l0,
// bias_hh_l0, weight_hr_l0, then the _reverse ones, then layer 1...) with their shapes.
std::vector<std::pair<std::string, Dims>> rnn_parameter_shapes(const RnnOptions& o);
// ValueError naming `name` for bad hyper-parameters (sizes, dropout, proj_size).
void check_rnn_options(const std::string& name, const RnnOptions& o);

// A whole RNN / LSTM / GRU forward as torch's module: input [T, B, in] ([B, T, in] when
// batch_first, [T, in] unbatched) or, when batch_sizes is given, packed data [N, in];
// hx [L * D, B, P] and cx [L * D, B, H] (LSTM), undefined for zeros; weights in
// rnn_parameter_shapes's order. Dropout between layers while training. Returns {output,
// h_n, c_n (LSTM; else undefined)} shaped as torch's. Errors name `name` and the shapes.
std::vector<Tensor> rnn(const std::string& name, const RnnOptions& o, const std::vector<Tensor>& weights,
                        const Tensor& input, const Tensor& hx, const Tensor& cx, bool training,
                        const std::vector<int64_t>& batch_sizes = {});

// RNNCell / LSTMCell / GRUCell: input [B, in] or [in], hx / cx [B, H] or [H] (undefined for
// zeros), weights {w_ih, w_hh, b_ih, b_hh} (biases may be undefined). Returns {h', c'
// (LSTM)}.
std::vector<Tensor> rnn_cell(const std::string& name, RnnMode mode, const Tensor& input, const Tensor& hx,
                             const Tensor& cx, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                             const Tensor& b_hh);

}  // namespace flambeau::nn::functional
