// The layers and containers of modules.h: registration and default initialisation in the
// constructors, forward through nn::functional and the ops.
#include "flambeau/nn/modules.h"

#include <cmath>

#include "flambeau/autograd/node.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/init.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype)
    : Module("Linear"), in_features(in), out_features(out) {
  FLB_CHECK(in >= 0 && out >= 0, ValueError, "[Linear] in_features and out_features must be >= 0, got ", in, " and ",
            out);
  weight = register_parameter("weight", empty({out, in}, dtype));
  bias = register_parameter("bias", with_bias ? empty({out}, dtype) : Tensor());
  reset_parameters();
}

void init_linear_(const Tensor& weight, const Tensor& bias) {
  FLB_CHECK(weight.dim() == 2, ValueError, "[Linear] weight must be 2-D [out_features, in_features], got ",
            shape_str(weight.sizes()));
  Tensor w = weight;
  init::kaiming_uniform_(w, std::sqrt(5.0));
  if (bias.defined()) {
    const int64_t in = weight.size(1);
    const double bound = in > 0 ? 1 / std::sqrt(double(in)) : 0;
    Tensor b = bias;
    init::uniform_(b, -bound, bound);
  }
}

void Linear::reset_parameters() { init_linear_(weight, bias); }

Tensor Linear::forward(const Tensor& x) {
  return functional::linear(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
}

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad, DType dtype)
    : Module("Embedding"), num_embeddings(num), embedding_dim(dim) {
  if (pad) {
    FLB_CHECK(*pad >= -num && *pad < num, ValueError, "[Embedding] padding_idx ", *pad,
              " must be within num_embeddings ", num);
    padding_idx = *pad < 0 ? *pad + num : *pad;
  }
  weight = register_parameter("weight", empty({num, dim}, dtype));
  init::normal_(weight);
  if (padding_idx) {
    autograd::NoGradGuard no_grad;
    weight.select(0, *padding_idx).zero_();
  }
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices, padding_idx); }

LinearCrossEntropyLoss::LinearCrossEntropyLoss(int64_t in, int64_t classes, bool with_bias, DType dtype,
                                               std::string reduction_, std::optional<Tensor> weight_,
                                               int64_t ignore_index_, double label_smoothing_, double z_loss_)
    : Module("LinearCrossEntropyLoss"),
      num_classes(classes),
      reduction(std::move(reduction_)),
      ignore_index(ignore_index_),
      label_smoothing(label_smoothing_),
      z_loss(z_loss_) {
  const char* op = "LinearCrossEntropyLoss";
  FLB_CHECK(reduction == "mean" || reduction == "sum" || reduction == "none", ValueError, "[", op,
            "] reduction must be 'mean', 'sum' or 'none', got '", reduction, "'");
  FLB_CHECK(label_smoothing >= 0 && label_smoothing <= 1, ValueError, "[", op,
            "] label_smoothing must be between 0.0 and 1.0, got ", label_smoothing);
  FLB_CHECK(std::isfinite(z_loss) && z_loss >= 0, ValueError, "[", op, "] z_loss must be finite and >= 0, got ", z_loss);
  FLB_CHECK(!weight_ || weight_->sizes() == Dims{classes}, ValueError, "[", op, "] expected weight of shape [", classes,
            "], got ", shape_str(weight_ ? weight_->sizes() : Dims{}));
  linear = register_module("linear", std::make_shared<Linear>(in, classes, with_bias, dtype));
  if (weight_) weight = register_buffer("weight", *weight_);
}

Tensor LinearCrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  auto opt = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return functional::linear_cross_entropy(input, linear->weight, target, opt(linear->bias), opt(weight), reduction,
                                          ignore_index, label_smoothing, z_loss, chunk_size);
}

Tensor LinearCrossEntropyLoss::forward_inputs(const TensorList& inputs) {
  FLB_CHECK(inputs.size() == 2, ValueError, "[LinearCrossEntropyLoss] forward takes (input, target), got ",
            inputs.size(), " tensors");
  return forward(inputs[0], inputs[1]);
}

LayerNorm::LayerNorm(Dims shape, double eps_, bool elementwise_affine, bool with_bias, DType dtype)
    : Module("LayerNorm"), normalized_shape(std::move(shape)), eps(eps_) {
  weight = register_parameter("weight", elementwise_affine ? ones(normalized_shape, dtype) : Tensor());
  bias = register_parameter("bias", elementwise_affine && with_bias ? zeros(normalized_shape, dtype) : Tensor());
}

Tensor LayerNorm::forward(const Tensor& x) {
  auto opt = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return functional::layer_norm(x, normalized_shape, opt(weight), opt(bias), eps);
}

RMSNorm::RMSNorm(Dims shape, std::optional<double> eps_, bool elementwise_affine, DType dtype)
    : Module("RMSNorm"), normalized_shape(std::move(shape)), eps(eps_) {
  weight = register_parameter("weight", elementwise_affine ? ones(normalized_shape, dtype) : Tensor());
}

Tensor RMSNorm::forward(const Tensor& x) {
  return functional::rms_norm(x, normalized_shape, weight.defined() ? std::optional<Tensor>(weight) : std::nullopt,
                              eps);
}

Dropout::Dropout(double p_) : Module("Dropout"), p(p_) {
  FLB_CHECK(p >= 0 && p <= 1, ValueError, "[Dropout] dropout probability has to be between 0 and 1, but got ", p);
}

Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
GELU::GELU(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  FLB_CHECK(approximate == "none" || approximate == "tanh", ValueError,
            "[GELU] approximate must be 'none' or 'tanh', got '", approximate, "'");
}
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }

void ModuleSequence::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(size()), std::move(module));
}

std::shared_ptr<Module> ModuleSequence::operator[](size_t i) const {
  FLB_CHECK(i < size(), IndexError, "[", type_name(), "] index ", i, " is out of range for ", size(), " modules");
  return named_children().item(i).second;
}

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : ModuleSequence("Sequential") {
  for (const auto& m : modules) push_back(m);
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& [name, m] : named_children()) h = (*m)(h);
  return h;
}

ModuleList::ModuleList(std::initializer_list<std::shared_ptr<Module>> modules) : ModuleSequence("ModuleList") {
  for (const auto& m : modules) push_back(m);
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& key) const {
  const auto* m = named_children().find(key);
  FLB_CHECK(m, IndexError, "[ModuleDict] no module named '", key, "'");
  return *m;
}

}  // namespace flambeau::nn
