// The recurrent layers' forward (nn/rnn.h): torch's argument and shape checks, unbatched
// and batch_first inputs, packed rows, then per layer and direction one input-projection
// GEMM (functional::linear over all steps) and the rnn_layer primitive (nn/rnn_layer.cpp);
// dropout between layers while training. The cells are one step of the same primitive.
#include <numeric>

#include "flambeau/nn/functional.h"
#include "flambeau/nn/rnn.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

std::string dims_str(std::initializer_list<int64_t> d) {
  std::string s = "(";
  for (auto it = d.begin(); it != d.end(); ++it) s += (it == d.begin() ? "" : ", ") + std::to_string(*it);
  return s + ")";
}

std::string list_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

Tensor xw_of(RnnMode mode, const Tensor& x, const Tensor& w_ih, const Tensor& b_ih, const Tensor& b_hh) {
  std::optional<Tensor> bias;
  if (b_ih.defined() && b_hh.defined() && mode != RnnMode::gru) bias = add(b_ih, b_hh);
  else if (b_ih.defined()) bias = b_ih;
  return functional::linear(x, w_ih, bias);
}

void check_dtype(const std::string& name, const Tensor& input, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  FLB_CHECK(t.dtype() == input.dtype(), TypeError, "[", name, "] expected ", what, " of dtype ",
            dtype_name(input.dtype()), " like the input, got ", dtype_name(t.dtype()));
}

}  // namespace

RnnMode rnn_mode_from(const std::string& mode) {
  if (mode == "RNN_TANH") return RnnMode::rnn_tanh;
  if (mode == "RNN_RELU") return RnnMode::rnn_relu;
  if (mode == "LSTM") return RnnMode::lstm;
  if (mode == "GRU") return RnnMode::gru;
  throw ValueError(detail::str_cat("[rnn] unknown mode '", mode, "': expected RNN_TANH, RNN_RELU, LSTM or GRU"));
}

int64_t rnn_gates(RnnMode mode) {
  return mode == RnnMode::lstm ? 4 : mode == RnnMode::gru ? 3 : 1;
}

void check_rnn_options(const std::string& name, const RnnOptions& o) {
  FLB_CHECK(o.dropout >= 0 && o.dropout <= 1, ValueError, "[", name,
            "] dropout should be a number in range [0, 1] representing the probability of an element being zeroed, "
            "got ", o.dropout);
  FLB_CHECK(o.input_size >= 0, ValueError, "[", name, "] input_size must be >= 0, got ", o.input_size);
  FLB_CHECK(o.hidden_size > 0, ValueError, "[", name, "] hidden_size must be greater than zero, got ", o.hidden_size);
  FLB_CHECK(o.num_layers > 0, ValueError, "[", name, "] num_layers must be greater than zero, got ", o.num_layers);
  FLB_CHECK(o.proj_size >= 0, ValueError, "[", name,
            "] proj_size should be a positive integer or zero to disable projections, got ", o.proj_size);
  FLB_CHECK(o.proj_size == 0 || o.mode == RnnMode::lstm, ValueError, "[", name,
            "] proj_size argument is only supported for LSTM, not RNN or GRU");
  FLB_CHECK(o.proj_size < o.hidden_size, ValueError, "[", name, "] proj_size has to be smaller than hidden_size (got ",
            "proj_size=", o.proj_size, ", hidden_size=", o.hidden_size, ")");
}

std::vector<std::pair<std::string, Dims>> rnn_parameter_shapes(const RnnOptions& o) {
  const int64_t gh = rnn_gates(o.mode) * o.hidden_size, real = o.proj_size > 0 ? o.proj_size : o.hidden_size;
  const int64_t dirs = o.bidirectional ? 2 : 1;
  std::vector<std::pair<std::string, Dims>> out;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string s = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      const int64_t in = l == 0 ? o.input_size : real * dirs;
      out.push_back({"weight_ih" + s, {gh, in}});
      out.push_back({"weight_hh" + s, {gh, real}});
      if (o.bias) {
        out.push_back({"bias_ih" + s, {gh}});
        out.push_back({"bias_hh" + s, {gh}});
      }
      if (o.proj_size > 0) out.push_back({"weight_hr" + s, {o.proj_size, o.hidden_size}});
    }
  }
  return out;
}

std::vector<Tensor> rnn(const std::string& name, const RnnOptions& o, const std::vector<Tensor>& weights,
                        const Tensor& input, const Tensor& hx_in, const Tensor& cx_in, bool training,
                        const std::vector<int64_t>& batch_sizes) {
  const bool lstm = o.mode == RnnMode::lstm, packed = !batch_sizes.empty();
  const int64_t dirs = o.bidirectional ? 2 : 1, H = o.hidden_size, P = o.proj_size > 0 ? o.proj_size : H;
  const auto shapes = rnn_parameter_shapes(o);
  FLB_CHECK(weights.size() == shapes.size(), ValueError, "[", name, "] expected ", shapes.size(),
            " weights, got ", weights.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    FLB_CHECK(weights[i].defined() && weights[i].sizes() == shapes[i].second, ValueError, "[", name, "] expected ",
              shapes[i].first, " of shape ", shape_str(shapes[i].second), ", got ",
              weights[i].defined() ? shape_str(weights[i].sizes()) : std::string("None"));
    check_dtype(name, input, weights[i], shapes[i].first.c_str());
  }
  FLB_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, TypeError, "[", name,
            "] expected a float32 or float64 input, got ", dtype_name(input.dtype()));
  Tensor x, hx = hx_in, cx = cx_in;
  std::vector<int64_t> bs = batch_sizes;
  bool unbatched = false;
  int64_t T = 0, B = 0;
  if (packed) {
    FLB_CHECK(input.dim() == 2, ValueError, "[", name, "] expected packed data of 2 dims [N, input_size], got shape ",
              shape_str(input.sizes()));
    const int64_t n = std::accumulate(bs.begin(), bs.end(), int64_t(0));
    FLB_CHECK(n == input.size(0), ValueError, "[", name, "] batch_sizes sum to ", n, " but the packed data has ",
              input.size(0), " rows");
    for (size_t t = 0; t < bs.size(); ++t)
      FLB_CHECK(bs[t] > 0 && (t == 0 || bs[t] <= bs[t - 1]), ValueError, "[", name,
                "] batch_sizes must be positive and non-increasing, got ", list_str(bs));
    B = bs[0], T = int64_t(bs.size());
    x = input;
  } else {
    FLB_CHECK(input.dim() == 2 || input.dim() == 3, ValueError, "[", name, "] Expected input to be 2D or 3D, got ",
              input.dim(), "D instead (input shape ", shape_str(input.sizes()), ")");
    unbatched = input.dim() == 2;
    for (const Tensor* h : {&hx, &cx}) {
      if (!h->defined()) continue;
      FLB_CHECK(h->dim() == (unbatched ? 2 : 3), Error, "[", name, "] For ", unbatched ? "unbatched 2-D" : "batched 3-D",
                " input, hx should also be ", unbatched ? "2-D" : "3-D", " but got ", h->dim(), "-D tensor (shape ",
                shape_str(h->sizes()), ", input shape ", shape_str(input.sizes()), ")");
    }
    Tensor seq = unbatched ? input.unsqueeze(1) : o.batch_first ? input.transpose(0, 1) : input;
    if (unbatched) {
      if (hx.defined()) hx = hx.unsqueeze(1);
      if (cx.defined()) cx = cx.unsqueeze(1);
    }
    T = seq.size(0), B = seq.size(1);
    x = seq.contiguous().reshape({T * B, seq.size(2)});
    bs.assign(size_t(T), B);
  }
  FLB_CHECK(input.size(-1) == o.input_size, Error, "[", name, "] input.size(-1) must be equal to input_size. Expected ",
            o.input_size, ", got ", input.size(-1), " (input shape ", shape_str(input.sizes()), ")");
  FLB_CHECK(T > 0 && B > 0, ValueError, "[", name, "] expected a non-empty input, got shape ",
            shape_str(input.sizes()));
  const int64_t layers = o.num_layers * dirs;
  if (hx.defined())
    FLB_CHECK(hx.sizes() == Dims({layers, B, P}), Error, "[", name, "] Expected hidden", lstm ? "[0]" : "", " size ",
              dims_str({layers, B, P}), ", got ", list_str(hx.sizes()));
  if (cx.defined())
    FLB_CHECK(cx.sizes() == Dims({layers, B, H}), Error, "[", name, "] Expected hidden[1] size ",
              dims_str({layers, B, H}), ", got ", list_str(cx.sizes()));
  check_dtype(name, input, hx, "hx");
  check_dtype(name, input, cx, "cx");
  const size_t per = shapes.size() / size_t(layers);
  std::vector<Tensor> hn, cn;
  Tensor layer_in = x;
  for (int64_t l = 0; l < o.num_layers; ++l) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t k = l * dirs + d;
      const Tensor* w = &weights[size_t(k) * per];
      const Tensor b_ih = o.bias ? w[2] : Tensor(), b_hh = o.bias ? w[3] : Tensor();
      const Tensor w_hr = o.proj_size > 0 ? w[o.bias ? 4 : 2] : Tensor();
      const Tensor xw = xw_of(o.mode, layer_in, w[0], b_ih, b_hh);
      const Tensor h0 = hx.defined() ? hx.select(0, k) : zeros({B, P}, input.dtype());
      const Tensor c0 = !lstm ? Tensor() : cx.defined() ? cx.select(0, k) : zeros({B, H}, input.dtype());
      std::vector<Tensor> r = rnn_layer(o.mode, xw, h0, c0, w[1], o.mode == RnnMode::gru ? b_hh : Tensor(), w_hr, bs,
                                        d == 1);
      outs.push_back(r[0]);
      hn.push_back(r[1]);
      if (lstm) cn.push_back(r[2]);
    }
    layer_in = dirs == 2 ? cat(outs, 1) : outs[0];
    if (o.dropout > 0 && training && l + 1 < o.num_layers) layer_in = dropout(layer_in, o.dropout, true);
  }
  Tensor h_n = stack(hn, 0), c_n = lstm ? stack(cn, 0) : Tensor();
  Tensor out = layer_in;
  if (!packed) {
    out = out.reshape({T, B, dirs * P});
    if (unbatched) {
      out = out.squeeze(1), h_n = h_n.squeeze(1);
      if (lstm) c_n = c_n.squeeze(1);
    } else if (o.batch_first) {
      out = out.transpose(0, 1);
    }
  }
  return {out, h_n, c_n};
}

std::vector<Tensor> rnn_cell(const std::string& name, RnnMode mode, const Tensor& input, const Tensor& hx_in,
                             const Tensor& cx_in, const Tensor& w_ih, const Tensor& w_hh, const Tensor& b_ih,
                             const Tensor& b_hh) {
  const int64_t H = w_hh.size(1), in = w_ih.size(1);
  FLB_CHECK(input.dim() == 1 || input.dim() == 2, ValueError, "[", name, "] Expected input to be 1D or 2D, got ",
            input.dim(), "D instead (input shape ", shape_str(input.sizes()), ")");
  FLB_CHECK(input.dtype() == kFloat32 || input.dtype() == kFloat64, TypeError, "[", name,
            "] expected a float32 or float64 input, got ", dtype_name(input.dtype()));
  const bool unbatched = input.dim() == 1;
  FLB_CHECK(input.size(-1) == in, Error, "[", name, "] input has inconsistent input_size: got ", input.size(-1),
            " expected ", in, " (input shape ", shape_str(input.sizes()), ")");
  const Tensor x = unbatched ? input.unsqueeze(0) : input;
  const int64_t B = x.size(0);
  FLB_CHECK(B > 0, ValueError, "[", name, "] expected a non-empty batch, got input shape ", shape_str(input.sizes()));
  Tensor state[2] = {hx_in, cx_in};
  for (int i = 0; i < 2; ++i) {
    Tensor& h = state[i];
    if (!h.defined()) continue;
    const char* what = mode == RnnMode::lstm ? (i ? "cx" : "hx") : "hx";
    FLB_CHECK(h.dim() == input.dim(), Error, "[", name, "] Expected ", what, " to be ", input.dim(), "D like the ",
              input.dim(), "D input, got ", h.dim(), "D (shape ", shape_str(h.sizes()), ")");
    if (unbatched) h = h.unsqueeze(0);
    FLB_CHECK(h.sizes() == Dims({B, H}), Error, "[", name, "] Expected ", what, " of shape ", dims_str({B, H}),
              ", got ", shape_str(h.sizes()), " (input shape ", shape_str(input.sizes()), ")");
    check_dtype(name, input, h, what);
  }
  for (const Tensor* w : {&w_ih, &w_hh, &b_ih, &b_hh}) check_dtype(name, input, *w, "weights");
  const Tensor xw = xw_of(mode, x, w_ih, b_ih, b_hh);
  const Tensor h0 = state[0].defined() ? state[0] : zeros({B, H}, input.dtype());
  const bool lstm = mode == RnnMode::lstm;
  const Tensor c0 = !lstm ? Tensor() : state[1].defined() ? state[1] : zeros({B, H}, input.dtype());
  std::vector<Tensor> r = rnn_layer(mode, xw, h0, c0, w_hh, mode == RnnMode::gru ? b_hh : Tensor(), Tensor(), {B},
                                    false);
  Tensor h = r[0], c = lstm ? r[2] : Tensor();
  if (unbatched) {
    h = h.squeeze(0);
    if (lstm) c = c.squeeze(0);
  }
  return lstm ? std::vector<Tensor>{h, c} : std::vector<Tensor>{h};
}

}  // namespace flambeau::nn::functional
