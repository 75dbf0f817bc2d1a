// The C++ layers of flambeau::nn (torch.nn's names, arguments and default initialisation)
// and the containers Sequential, ModuleList and ModuleDict. Create them with
// std::make_shared; a layer's parameters are also public members (weight, bias), handles
// to the registered tensors.
#pragma once
#include <optional>
#include <string>

#include "flambeau/nn/module.h"
#include "flambeau/nn/rnn.h"

namespace flambeau::nn {

// Linear's default initialisation, in place: weight [out, in] from kaiming_uniform_(a =
// sqrt(5)), bias [out] (when defined) from U(-1/sqrt(in), 1/sqrt(in)), as torch.
void init_linear_(const Tensor& weight, const Tensor& bias);

// x @ weight.T + bias, initialised by init_linear_.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dtype = kFloat32);
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when bias = false
};

// Rows of weight [num_embeddings, embedding_dim] (from N(0, 1)) picked by integer indices.
// The padding_idx row starts at zero and gets no gradient.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = {},
            DType dtype = kFloat32);
  Tensor forward(const Tensor& indices) override;
  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // in [0, num_embeddings)
  Tensor weight;
};

// PyTorch 2.13's LinearCrossEntropyLoss: owns `linear` (in_features -> num_classes, no bias
// unless asked) and computes functional::linear_cross_entropy(input, linear->weight,
// target, ...) with its options: the fused head + loss that never builds the logits. The
// class weights are the buffer "weight". Tie the head to an Embedding by sharing the
// parameter (linear->register_parameter("weight", emb->weight); linear->weight = emb->weight).
class LinearCrossEntropyLoss : public Module {
 public:
  LinearCrossEntropyLoss(int64_t in_features, int64_t num_classes, bool bias = false, DType dtype = kFloat32,
                         std::string reduction = "mean", std::optional<Tensor> weight = {},
                         int64_t ignore_index = -100, double label_smoothing = 0.0, double z_loss = 0.0);
  using Module::forward;
  using Module::operator();
  Tensor forward(const Tensor& input, const Tensor& target);
  // forward(input, target) with the module's hooks around it.
  Tensor operator()(const Tensor& input, const Tensor& target) { return call({input, target}); }
  std::shared_ptr<Linear> linear;
  int64_t num_classes;
  std::string reduction;
  Tensor weight;  // [num_classes] class weights, or undefined
  int64_t ignore_index;
  double label_smoothing, z_loss;
  std::optional<int64_t> chunk_size;  // rows per chunk; automatic when unset

 protected:
  Tensor forward_inputs(const TensorList& inputs) override;
};

// functional::layer_norm with weight (ones) and bias (zeros) when elementwise_affine.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Dims normalized_shape, double eps = 1e-5, bool elementwise_affine = true, bool bias = true,
                     DType dtype = kFloat32);
  Tensor forward(const Tensor& x) override;
  Dims normalized_shape;
  double eps;
  Tensor weight, bias;
};

// functional::rms_norm with weight (ones) when elementwise_affine.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(Dims normalized_shape, std::optional<double> eps = {}, bool elementwise_affine = true,
                   DType dtype = kFloat32);
  Tensor forward(const Tensor& x) override;
  Dims normalized_shape;
  std::optional<double> eps;
  Tensor weight;
};

// functional::dropout while training; the identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  double p;
};

class ReLU : public Module {
 public:
  ReLU() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};
class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string approximate;  // "none" or "tanh"
};
class SiLU : public Module {
 public:
  SiLU() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};
class Tanh : public Module {
 public:
  Tanh() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};
class Sigmoid : public Module {
 public:
  Sigmoid() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

// Shape layers: the input itself; x.flatten(start_dim, end_dim); x.unflatten(dim, sizes).
class Identity : public Module {
 public:
  Identity() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_dim, end_dim); }
  int64_t start_dim, end_dim;
};
class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, Dims unflattened_size)
      : Module("Unflatten"), dim(dim), unflattened_size(std::move(unflattened_size)) {}
  Tensor forward(const Tensor& x) override { return x.unflatten(dim, unflattened_size); }
  int64_t dim;
  Dims unflattened_size;
};

// Conv1d/2d/3d and ConvTranspose1d/2d/3d (dims 1-3, transposed). weight [out, in / groups,
// *kernel] (transposed: [in, out / groups, *kernel]) from kaiming_uniform_(a = sqrt(5)) and
// bias [out] from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = weight.size(1) * kernel
// volume, as torch. A padding_mode other than "zeros" ("reflect", "replicate", "circular";
// not for transposed) pads with functional::pad, then convolves with no padding.
struct ConvOptions {
  Dims stride{1}, padding{0}, output_padding{0}, dilation{1};  // one value per dim, or one for all
  std::string padding_str;  // "valid" or "same" in place of the padding numbers; "": the numbers
  int64_t groups = 1;
  bool bias = true;
  std::string padding_mode = "zeros";
  DType dtype = kFloat32;
};
class Conv : public Module {
 public:
  Conv(int64_t dims, bool transposed, int64_t in_channels, int64_t out_channels, Dims kernel_size,
       ConvOptions options = {});
  Tensor forward(const Tensor& x) override;
  // ConvTranspose: the output_padding giving the spatial output_size (dims sizes, or with the
  // batch / channel sizes in front), as torch's forward(input, output_size); empty: forward(x).
  Tensor forward(const Tensor& x, const Dims& output_size);
  void reset_parameters();
  int64_t dims;
  bool transposed;
  int64_t in_channels, out_channels;
  Dims kernel_size;  // one value per dim, as the option lists (expanded by the constructor)
  ConvOptions options;
  Tensor weight, bias;  // bias undefined when options.bias = false

 private:
  Dims reversed_padding_;  // functional::pad's amounts for a padding_mode other than zeros
};

// The output_padding of a transposed convolution (named `op` in errors) of x that gives the
// spatial output_size: torch's _ConvTransposeNd._output_padding. output_size has kernel_size's
// length, or that plus x's non-spatial dims (dropped); each size must lie in [min, min + stride
// - 1], min = (in - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1. The other
// arguments hold one value per spatial dim.
Dims conv_transpose_output_padding(const std::string& op, const Tensor& x, const Dims& output_size,
                                   const Dims& stride, const Dims& padding, const Dims& kernel_size,
                                   const Dims& dilation);

// BatchNorm1d/2d/3d (dims 1-3): functional::batch_norm with weight (ones) and bias (zeros)
// when affine, and the buffers running_mean (zeros), running_var (ones) and
// num_batches_tracked (int64 0) when track_running_stats. momentum unset: the cumulative
// average (1 / num_batches_tracked). Training uses the batch's statistics; eval the running
// ones (or the batch's without them).
class BatchNorm : public Module {
 public:
  BatchNorm(int64_t dims, int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
            bool affine = true, bool track_running_stats = true, DType dtype = kFloat32, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t dims, num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};
// InstanceNorm1d/2d/3d: functional::instance_norm; no affine and no running statistics by
// default; takes unbatched inputs.
class InstanceNorm : public Module {
 public:
  InstanceNorm(int64_t dims, int64_t num_features, double eps = 1e-5, double momentum = 0.1, bool affine = false,
               bool track_running_stats = false, DType dtype = kFloat32, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t dims, num_features;
  double eps, momentum;
  bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
};
// functional::group_norm with weight (ones) and bias (zeros) [num_channels] when affine.
class GroupNorm : public Module {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5, bool affine = true,
            DType dtype = kFloat32, bool bias = true);
  Tensor forward(const Tensor& x) override;
  int64_t num_groups, num_channels;
  double eps;
  bool affine;
  Tensor weight, bias;
};
class LocalResponseNorm : public Module {
 public:
  explicit LocalResponseNorm(int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0)
      : Module("LocalResponseNorm"), size(size), alpha(alpha), beta(beta), k(k) {}
  Tensor forward(const Tensor& x) override;
  int64_t size;
  double alpha, beta, k;
};

// RNN / LSTM / GRU (nn/modules_rnn.cpp, computation in nn/rnn.h): torch's parameters
// (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_hr_l0, ..._reverse) in torch's
// order, each from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)). forward(input, hx, cx)
// returns {output, h_n, c_n (LSTM)}; the one-tensor forward returns the output alone.
// forward_packed takes packed data [N, input_size] with its batch_sizes (sorted batch).
class RNNBase : public Module {
 public:
  RNNBase(const std::string& name, const functional::RnnOptions& options, DType dtype = kFloat32);
  using Module::forward;
  Tensor forward(const Tensor& input) override;
  std::vector<Tensor> forward(const Tensor& input, const Tensor& hx, const Tensor& cx = {});
  std::vector<Tensor> forward_packed(const Tensor& data, const std::vector<int64_t>& batch_sizes,
                                     const Tensor& hx = {}, const Tensor& cx = {});
  void reset_parameters();
  // The parameters in torch's order (the registered tensors).
  std::vector<Tensor> flat_weights() const;
  functional::RnnOptions options;
  std::vector<std::string> flat_weights_names;

 protected:
  // inputs: {input} or {input, hx} or {input, hx, cx}; returns the output.
  Tensor forward_inputs(const TensorList& inputs) override;
};
class RNN : public RNNBase {
 public:
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, const std::string& nonlinearity = "tanh",
      bool bias = true, bool batch_first = false, double dropout = 0.0, bool bidirectional = false,
      DType dtype = kFloat32);
};
class LSTM : public RNNBase {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
       double dropout = 0.0, bool bidirectional = false, int64_t proj_size = 0, DType dtype = kFloat32);
};
class GRU : public RNNBase {
 public:
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true, bool batch_first = false,
      double dropout = 0.0, bool bidirectional = false, DType dtype = kFloat32);
};
// RNNCell / LSTMCell / GRUCell: weight_ih [G * hidden, input], weight_hh [G * hidden, hidden],
// bias_ih, bias_hh [G * hidden] from U(-1/sqrt(hidden), 1/sqrt(hidden)). forward(input, hx,
// cx) returns {h'} or {h', c'} (LSTM); the one-tensor forward returns h'.
class RNNCellBase : public Module {
 public:
  RNNCellBase(const std::string& name, functional::RnnMode mode, int64_t input_size, int64_t hidden_size, bool bias,
              DType dtype);
  using Module::forward;
  Tensor forward(const Tensor& input) override;
  std::vector<Tensor> forward(const Tensor& input, const Tensor& hx, const Tensor& cx = {});
  void reset_parameters();
  functional::RnnMode mode;
  int64_t input_size, hidden_size;
  bool bias;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  Tensor forward_inputs(const TensorList& inputs) override;
};
class RNNCell : public RNNCellBase {
 public:
  RNNCell(int64_t input_size, int64_t hidden_size, bool bias = true, const std::string& nonlinearity = "tanh",
          DType dtype = kFloat32);
};
class LSTMCell : public RNNCellBase {
 public:
  LSTMCell(int64_t input_size, int64_t hidden_size, bool bias = true, DType dtype = kFloat32);
};
class GRUCell : public RNNCellBase {
 public:
  GRUCell(int64_t input_size, int64_t hidden_size, bool bias = true, DType dtype = kFloat32);
};

// Submodules in order, named "0", "1", ... (the base of Sequential and ModuleList).
class ModuleSequence : public Module {
 public:
  using Module::Module;
  void push_back(std::shared_ptr<Module> module);
  std::shared_ptr<Module> operator[](size_t i) const;
  // The i-th module as an M (TypeError if it is not one).
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    FLB_CHECK(m, TypeError, "[", type_name(), "] module ", i, " is a ", (*this)[i]->type_name(),
              ", not the type asked for");
    return m;
  }
  size_t size() const { return named_children().size(); }
};

// Applies its modules one after the other.
class Sequential : public ModuleSequence {
 public:
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules = {});
  Tensor forward(const Tensor& x) override;
};

class ModuleList : public ModuleSequence {
 public:
  ModuleList(std::initializer_list<std::shared_ptr<Module>> modules = {});
};

// Submodules by name, in insertion order.
class ModuleDict : public Module {
 public:
  ModuleDict() : Module("ModuleDict") {}
  void insert(const std::string& key, std::shared_ptr<Module> module) { register_module(key, std::move(module)); }
  // IndexError for an unknown key.
  std::shared_ptr<Module> operator[](const std::string& key) const;
  bool contains(const std::string& key) const { return named_children().contains(key); }
  size_t size() const { return named_children().size(); }
  std::vector<std::string> keys() const { return named_children().keys(); }
};

}  // namespace flambeau::nn
