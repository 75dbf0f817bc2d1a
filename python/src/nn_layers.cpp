// flambeau._C._nn._cpp_layer / _cpp_layer_names: the C++ layers of nn/modules.h made by
// name, for tests/python/test_layer_parity.py only (it checks that each Python layer and the
// C++ layer of the same name initialise and compute alike). Not a binding of the layers:
// a config with only the required arguments uses the C++ constructor's own defaults, one
// with every argument passes them all, so both stacks' defaults are compared.
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
  template <class T>
  std::optional<T> optional(const char* key) const {
    nb::object v = d_[key];
    return v.is_none() ? std::nullopt : std::optional<T>(nb::cast<T>(v));
  }
  size_t size() const { return d_.size(); }

 private:
  nb::dict d_;
};

using Factory = std::function<std::shared_ptr<nn::Module>(const Args&)>;

const std::map<std::string, Factory>& factories() {
  using std::make_shared;
  static const std::map<std::string, Factory> table = {
      {"Linear", [](const Args& a) -> std::shared_ptr<nn::Module> {
         const int64_t in = a.get<int64_t>("in_features"), out = a.get<int64_t>("out_features");
         if (a.size() == 2) return make_shared<nn::Linear>(in, out);
         return make_shared<nn::Linear>(in, out, a.get<bool>("bias"), a.get<DType>("dtype"));
       }},
      {"Embedding", [](const Args& a) -> std::shared_ptr<nn::Module> {
         const int64_t n = a.get<int64_t>("num_embeddings"), d = a.get<int64_t>("embedding_dim");
         if (a.size() == 2) return make_shared<nn::Embedding>(n, d);
         return make_shared<nn::Embedding>(n, d, a.optional<int64_t>("padding_idx"), a.get<DType>("dtype"));
       }},
      {"LayerNorm", [](const Args& a) -> std::shared_ptr<nn::Module> {
         if (a.size() == 1) return make_shared<nn::LayerNorm>(a.dims("normalized_shape"));
         return make_shared<nn::LayerNorm>(a.dims("normalized_shape"), a.get<double>("eps"),
                                           a.get<bool>("elementwise_affine"), a.get<bool>("bias"),
                                           a.get<DType>("dtype"));
       }},
      {"RMSNorm", [](const Args& a) -> std::shared_ptr<nn::Module> {
         if (a.size() == 1) return make_shared<nn::RMSNorm>(a.dims("normalized_shape"));
         return make_shared<nn::RMSNorm>(a.dims("normalized_shape"), a.optional<double>("eps"),
                                         a.get<bool>("elementwise_affine"), a.get<DType>("dtype"));
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
      {"LinearCrossEntropyLoss", [](const Args& a) -> std::shared_ptr<nn::Module> {
         const int64_t in = a.get<int64_t>("in_features"), classes = a.get<int64_t>("num_classes");
         if (a.size() == 2) return make_shared<nn::LinearCrossEntropyLoss>(in, classes);
         return make_shared<nn::LinearCrossEntropyLoss>(
             in, classes, a.get<bool>("bias"), a.get<DType>("dtype"), a.get<std::string>("reduction"),
             a.optional<Tensor>("weight"), a.get<int64_t>("ignore_index"), a.get<double>("label_smoothing"),
             a.get<double>("z_loss"));
       }},
  };
  return table;
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
  // (state_dict, load(state), forward(inputs, training)) of a new C++ layer.
  nm.def("_cpp_layer", [](const std::string& name, nb::dict args) {
    auto it = factories().find(name);
    FLB_CHECK(it != factories().end(), ValueError, "[_cpp_layer] no C++ layer named '", name, "'");
    std::shared_ptr<nn::Module> m = it->second(Args(std::move(args)));
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
