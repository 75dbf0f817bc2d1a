// The C++ layers of nn/modules.h made by name, in flambeau._C._nn. The Python layers
// (flambeau/nn/modules/layers.py) are built by them: _make_layer runs the C++ constructor
// (argument checks, parameters and their initialisation) and hands its tensors to the Python
// module, whose forward calls the same C++ functional; so each layer has one implementation.
// _cpp_layer keeps the C++ layer itself (test_layer_parity.py compares its forward with the
// Python one); a config with only the required arguments uses the C++ constructor's own
// defaults, so both stacks' defaults are compared too.
#include <map>

#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>

#include "bindings.h"

namespace flambeau::python {
namespace {

// The config dict of a layer: required and optional constructor arguments by torch's names.
class Args {
 public:
  explicit Args(nb::dict d) : d_(std::move(d)) {}
  template <class T>
  T get(const char* key) const {
    FLB_CHECK(d_.contains(key), ValueError, "[_cpp_layer] missing argument '", key, "'");
    return nb::cast<T>(d_[key]);
  }
  Dims dims(const char* key) const { return dims_from(d_[key]); }
  bool is_str(const char* key) const { return d_.contains(key) && nb::isinstance<nb::str>(d_[key]); }
  template <class T>
  std::optional<T> optional(const char* key) const {
    if (!d_.contains(key)) return std::nullopt;
    nb::object v = d_[key];
    return v.is_none() ? std::nullopt : std::optional<T>(nb::cast<T>(v));
  }
  size_t size() const { return d_.size(); }

 private:
  nb::dict d_;
};

// dtype=None: float32.
DType dtype(const Args& a) { return a.optional<DType>("dtype").value_or(kFloat32); }

// Conv*d / ConvTranspose*d: the required arguments alone use the C++ defaults.
std::shared_ptr<nn::Module> conv_layer(const Args& a, int64_t dims, bool transposed) {
  const int64_t in = a.get<int64_t>("in_channels"), out = a.get<int64_t>("out_channels");
  const Dims kernel = a.dims("kernel_size");
  if (a.size() == 3) return std::make_shared<nn::Conv>(dims, transposed, in, out, kernel);
  nn::ConvOptions o;
  o.stride = a.dims("stride");
  if (a.is_str("padding")) o.padding_str = a.get<std::string>("padding");
  else o.padding = a.dims("padding");
  if (transposed) o.output_padding = a.dims("output_padding");
  o.dilation = a.dims("dilation");
  o.groups = a.get<int64_t>("groups");
  o.bias = a.get<bool>("bias");
  o.padding_mode = a.get<std::string>("padding_mode");
  o.dtype = dtype(a);
  return std::make_shared<nn::Conv>(dims, transposed, in, out, kernel, o);
}

// BatchNorm*d / InstanceNorm*d: num_features alone uses the C++ defaults.
template <class Norm>
std::shared_ptr<nn::Module> norm_layer(const Args& a, int64_t dims) {
  const int64_t c = a.get<int64_t>("num_features");
  if (a.size() == 1) return std::make_shared<Norm>(dims, c);
  using Momentum = std::conditional_t<std::is_same_v<Norm, nn::BatchNorm>, std::optional<double>, double>;
  Momentum momentum;
  if constexpr (std::is_same_v<Norm, nn::BatchNorm>) momentum = a.optional<double>("momentum");
  else momentum = a.get<double>("momentum");
  return std::make_shared<Norm>(dims, c, a.get<double>("eps"), momentum, a.get<bool>("affine"),
                                a.get<bool>("track_running_stats"), dtype(a), a.get<bool>("bias"));
}

// RNN / LSTM / GRU (and their cells): input_size and hidden_size alone use the C++ defaults.
std::shared_ptr<nn::Module> rnn_layer(const Args& a, const std::string& kind) {
  const int64_t in = a.get<int64_t>("input_size"), hidden = a.get<int64_t>("hidden_size");
  const bool defaults = a.size() == 2;
  if (kind == "RNN") {
    if (defaults) return std::make_shared<nn::RNN>(in, hidden);
    return std::make_shared<nn::RNN>(in, hidden, a.get<int64_t>("num_layers"), a.get<std::string>("nonlinearity"),
                                     a.get<bool>("bias"), a.get<bool>("batch_first"), a.get<double>("dropout"),
                                     a.get<bool>("bidirectional"), dtype(a));
  }
  if (kind == "LSTM") {
    if (defaults) return std::make_shared<nn::LSTM>(in, hidden);
    return std::make_shared<nn::LSTM>(in, hidden, a.get<int64_t>("num_layers"), a.get<bool>("bias"),
                                      a.get<bool>("batch_first"), a.get<double>("dropout"),
                                      a.get<bool>("bidirectional"), a.get<int64_t>("proj_size"), dtype(a));
  }
  if (kind == "GRU") {
    if (defaults) return std::make_shared<nn::GRU>(in, hidden);
    return std::make_shared<nn::GRU>(in, hidden, a.get<int64_t>("num_layers"), a.get<bool>("bias"),
                                     a.get<bool>("batch_first"), a.get<double>("dropout"),
                                     a.get<bool>("bidirectional"), dtype(a));
  }
  if (kind == "RNNCell") {
    if (defaults) return std::make_shared<nn::RNNCell>(in, hidden);
    return std::make_shared<nn::RNNCell>(in, hidden, a.get<bool>("bias"), a.get<std::string>("nonlinearity"),
                                         dtype(a));
  }
  if (kind == "LSTMCell") {
    if (defaults) return std::make_shared<nn::LSTMCell>(in, hidden);
    return std::make_shared<nn::LSTMCell>(in, hidden, a.get<bool>("bias"), dtype(a));
  }
  if (defaults) return std::make_shared<nn::GRUCell>(in, hidden);
  return std::make_shared<nn::GRUCell>(in, hidden, a.get<bool>("bias"), dtype(a));
}

using Factory = std::function<std::shared_ptr<nn::Module>(const Args&)>;

const std::map<std::string, Factory>& factories() {
  using std::make_shared;
  static const std::map<std::string, Factory> table = {
      {"Linear", [](const Args& a) -> std::shared_ptr<nn::Module> {
         const int64_t in = a.get<int64_t>("in_features"), out = a.get<int64_t>("out_features");
         if (a.size() == 2) return make_shared<nn::Linear>(in, out);
         return make_shared<nn::Linear>(in, out, a.get<bool>("bias"), dtype(a));
       }},
      {"Embedding", [](const Args& a) -> std::shared_ptr<nn::Module> {
         const int64_t n = a.get<int64_t>("num_embeddings"), d = a.get<int64_t>("embedding_dim");
         if (a.size() == 2) return make_shared<nn::Embedding>(n, d);
         return make_shared<nn::Embedding>(n, d, a.optional<int64_t>("padding_idx"), dtype(a));
       }},
      {"LayerNorm", [](const Args& a) -> std::shared_ptr<nn::Module> {
         if (a.size() == 1) return make_shared<nn::LayerNorm>(a.dims("normalized_shape"));
         return make_shared<nn::LayerNorm>(a.dims("normalized_shape"), a.get<double>("eps"),
                                           a.get<bool>("elementwise_affine"), a.get<bool>("bias"),
                                           dtype(a));
       }},
      {"RMSNorm", [](const Args& a) -> std::shared_ptr<nn::Module> {
         if (a.size() == 1) return make_shared<nn::RMSNorm>(a.dims("normalized_shape"));
         return make_shared<nn::RMSNorm>(a.dims("normalized_shape"), a.optional<double>("eps"),
                                         a.get<bool>("elementwise_affine"), dtype(a));
       }},
      {"Dropout", [](const Args& a) -> std::shared_ptr<nn::Module> {
         return a.size() == 0 ? make_shared<nn::Dropout>() : make_shared<nn::Dropout>(a.get<double>("p"));
       }},
      {"GELU", [](const Args& a) -> std::shared_ptr<nn::Module> {
         return a.size() == 0 ? make_shared<nn::GELU>() : make_shared<nn::GELU>(a.get<std::string>("approximate"));
       }},
      {"ReLU", [](const Args&) -> std::shared_ptr<nn::Module> { return make_shared<nn::ReLU>(); }},
      {"SiLU", [](const Args&) -> std::shared_ptr<nn::Module> { return make_shared<nn::SiLU>(); }},
      {"Tanh", [](const Args&) -> std::shared_ptr<nn::Module> { return make_shared<nn::Tanh>(); }},
      {"Sigmoid", [](const Args&) -> std::shared_ptr<nn::Module> { return make_shared<nn::Sigmoid>(); }},
      {"Identity", [](const Args&) -> std::shared_ptr<nn::Module> { return make_shared<nn::Identity>(); }},
      {"Flatten", [](const Args& a) -> std::shared_ptr<nn::Module> {
         if (a.size() == 0) return make_shared<nn::Flatten>();
         return make_shared<nn::Flatten>(a.get<int64_t>("start_dim"), a.get<int64_t>("end_dim"));
       }},
      {"Unflatten", [](const Args& a) -> std::shared_ptr<nn::Module> {
         return make_shared<nn::Unflatten>(a.get<int64_t>("dim"), a.dims("unflattened_size"));
       }},
      {"Conv1d", [](const Args& a) { return conv_layer(a, 1, false); }},
      {"Conv2d", [](const Args& a) { return conv_layer(a, 2, false); }},
      {"Conv3d", [](const Args& a) { return conv_layer(a, 3, false); }},
      {"ConvTranspose1d", [](const Args& a) { return conv_layer(a, 1, true); }},
      {"ConvTranspose2d", [](const Args& a) { return conv_layer(a, 2, true); }},
      {"ConvTranspose3d", [](const Args& a) { return conv_layer(a, 3, true); }},
      {"BatchNorm1d", [](const Args& a) { return norm_layer<nn::BatchNorm>(a, 1); }},
      {"BatchNorm2d", [](const Args& a) { return norm_layer<nn::BatchNorm>(a, 2); }},
      {"BatchNorm3d", [](const Args& a) { return norm_layer<nn::BatchNorm>(a, 3); }},
      {"InstanceNorm1d", [](const Args& a) { return norm_layer<nn::InstanceNorm>(a, 1); }},
      {"InstanceNorm2d", [](const Args& a) { return norm_layer<nn::InstanceNorm>(a, 2); }},
      {"InstanceNorm3d", [](const Args& a) { return norm_layer<nn::InstanceNorm>(a, 3); }},
      {"GroupNorm", [](const Args& a) -> std::shared_ptr<nn::Module> {
         const int64_t g = a.get<int64_t>("num_groups"), c = a.get<int64_t>("num_channels");
         if (a.size() == 2) return make_shared<nn::GroupNorm>(g, c);
         return make_shared<nn::GroupNorm>(g, c, a.get<double>("eps"), a.get<bool>("affine"), dtype(a),
                                           a.get<bool>("bias"));
       }},
      {"LocalResponseNorm", [](const Args& a) -> std::shared_ptr<nn::Module> {
         const int64_t size = a.get<int64_t>("size");
         if (a.size() == 1) return make_shared<nn::LocalResponseNorm>(size);
         return make_shared<nn::LocalResponseNorm>(size, a.get<double>("alpha"), a.get<double>("beta"),
                                                   a.get<double>("k"));
       }},
      {"RNN", [](const Args& a) { return rnn_layer(a, "RNN"); }},
      {"LSTM", [](const Args& a) { return rnn_layer(a, "LSTM"); }},
      {"GRU", [](const Args& a) { return rnn_layer(a, "GRU"); }},
      {"RNNCell", [](const Args& a) { return rnn_layer(a, "RNNCell"); }},
      {"LSTMCell", [](const Args& a) { return rnn_layer(a, "LSTMCell"); }},
      {"GRUCell", [](const Args& a) { return rnn_layer(a, "GRUCell"); }},
      {"LinearCrossEntropyLoss", [](const Args& a) -> std::shared_ptr<nn::Module> {
         const int64_t in = a.get<int64_t>("in_features"), classes = a.get<int64_t>("num_classes");
         if (a.size() == 2) return make_shared<nn::LinearCrossEntropyLoss>(in, classes);
         return make_shared<nn::LinearCrossEntropyLoss>(
             in, classes, a.get<bool>("bias"), dtype(a), a.get<std::string>("reduction"),
             a.optional<Tensor>("weight"), a.get<int64_t>("ignore_index"), a.get<double>("label_smoothing"),
             a.get<double>("z_loss"));
       }},
  };
  return table;
}

// (parameters, buffers, children) of m as registered: [(name, tensor or None)],
// [(name, tensor or None, persistent)], [(name, subtree)].
nb::tuple registered(const nn::Module& m) {
  auto opt = [](const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); };
  nb::list params, buffers, children;
  for (const auto& [name, t] : m.own_parameters()) params.append(nb::make_tuple(name, opt(t)));
  for (const auto& [name, t] : m.own_buffers())
    buffers.append(nb::make_tuple(name, opt(t), m.is_persistent_buffer(name)));
  for (const auto& [name, child] : m.named_children()) children.append(nb::make_tuple(name, registered(*child)));
  return nb::make_tuple(params, buffers, children);
}

std::shared_ptr<nn::Module> make(const std::string& name, nb::dict args) {
  auto it = factories().find(name);
  FLB_CHECK(it != factories().end(), ValueError, "[_make_layer] no C++ layer named '", name, "'");
  return it->second(Args(std::move(args)));
}

nb::dict state_of(nn::Module& m) {
  nb::dict d;
  for (const auto& [name, t] : m.state_dict()) d[name.c_str()] = t;
  return d;
}

}  // namespace

void bind_cpp_layers(nb::module_& nm) {
  nm.def("_cpp_layer_names", [] {
    std::vector<std::string> names;
    for (const auto& [name, f] : factories()) names.push_back(name);
    return names;
  });
  // The registered tensors of a new C++ layer (see registered()), for a Python layer to adopt.
  nm.def("_make_layer", [](const std::string& name, nb::dict args) { return registered(*make(name, std::move(args))); },
         "name"_a, "args"_a);
  nm.def("_init_linear_", [](const Tensor& weight, std::optional<Tensor> bias) {
    nn::init_linear_(weight, bias.value_or(Tensor()));
  }, "weight"_a, "bias"_a.none());
  // ConvTranspose*d.forward(input, output_size)'s output_padding (nn::conv_transpose_output_padding).
  nm.def("_conv_transpose_output_padding",
         [](const std::string& op, const Tensor& x, nb::handle output_size, nb::handle stride, nb::handle padding,
            nb::handle kernel_size, nb::handle dilation) {
           return nn::conv_transpose_output_padding(op, x, dims_from(output_size), dims_from(stride),
                                                    dims_from(padding), dims_from(kernel_size), dims_from(dilation))
               .vec();
         },
         "op"_a, "input"_a, "output_size"_a, "stride"_a, "padding"_a, "kernel_size"_a, "dilation"_a);
  // (state_dict, load(state), forward(inputs, training)) of a new C++ layer.
  nm.def("_cpp_layer", [](const std::string& name, nb::dict args) {
    std::shared_ptr<nn::Module> m = make(name, std::move(args));
    nb::object load = nb::cpp_function([m](nb::dict state) {
      nn::StateDict sd;
      for (auto [k, v] : state) sd.insert(nb::cast<std::string>(k), nb::cast<Tensor>(v));
      m->load_state_dict(sd);
    });
    nb::object forward = nb::cpp_function([m](std::vector<Tensor> inputs, bool training) {
      m->train(training);
      return m->call(std::move(inputs));
    });
    return nb::make_tuple(state_of(*m), load, forward);
  }, "name"_a, "args"_a);
}

}  // namespace flambeau::python
