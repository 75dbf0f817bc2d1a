// nn::Module and the C++ layers: registration and dotted names, traversal, state_dict
// round trip, strict load errors (nothing written), train/eval, zero_grad, to(dtype)
// keeping identity, apply, and each layer's init and forward.
#include "test_util.h"

namespace flambeau::testing {
namespace {

namespace F = nn::functional;
using nn::Module;

// A small model: embedding, norm, an MLP in a Sequential, two heads in a ModuleList, a
// persistent and a non-persistent buffer.
struct Block : Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::LayerNorm> norm;
  std::shared_ptr<nn::Sequential> mlp;
  std::shared_ptr<nn::ModuleList> heads;
  Tensor scale, cache;
  Block() : Module("Block") {
    emb = register_module("emb", std::make_shared<nn::Embedding>(11, 6, 0));
    norm = register_module("norm", std::make_shared<nn::LayerNorm>(Dims{6}));
    mlp = register_module("mlp", std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
                                     std::make_shared<nn::Linear>(6, 8), std::make_shared<nn::GELU>("tanh"),
                                     std::make_shared<nn::Linear>(8, 6)}));
    heads = register_module("heads", std::make_shared<nn::ModuleList>(std::initializer_list<std::shared_ptr<Module>>{
                                         std::make_shared<nn::Linear>(6, 5), std::make_shared<nn::Linear>(6, 5, false)}));
    scale = register_buffer("scale", full({1}, 2.0));
    cache = register_buffer("cache", zeros({3}), false);
  }
  Tensor forward(const Tensor& tokens) override {
    Tensor h = emb->forward(tokens);
    h = add(h, mlp->forward(norm->forward(h)));
    return mul(add((*heads)[0]->forward(h), (*heads)[1]->forward(h)), scale);
  }
};

std::vector<std::string> keys_of(const nn::StateDict& d) { return d.keys(); }

TEST(Module, NamesAndTraversal) {
  auto m = std::make_shared<Block>();
  const std::vector<std::string> params{"emb.weight",   "norm.weight",  "norm.bias",       "mlp.0.weight",
                                        "mlp.0.bias",   "mlp.2.weight", "mlp.2.bias",      "heads.0.weight",
                                        "heads.0.bias", "heads.1.weight"};
  EXPECT_EQ(keys_of(m->named_parameters()), params);
  EXPECT_EQ(m->parameters().size(), params.size());
  EXPECT_TRUE(m->parameters(false).empty());
  EXPECT_EQ(keys_of(m->named_buffers()), (std::vector<std::string>{"scale", "cache"}));
  std::vector<std::string> state = params;
  state.insert(state.begin(), "scale");  // own entries first, then the children's
  EXPECT_EQ(keys_of(m->state_dict()), state);
  EXPECT_EQ(m->named_children().keys(), (std::vector<std::string>{"emb", "norm", "mlp", "heads"}));
  EXPECT_EQ(m->children().size(), 4u);
  EXPECT_EQ(m->named_modules().keys(),
            (std::vector<std::string>{"", "emb", "norm", "mlp", "mlp.0", "mlp.1", "mlp.2", "heads", "heads.0",
                                      "heads.1"}));
  EXPECT_EQ(m->modules()[0].get(), m.get());
  for (const Tensor& p : m->parameters()) EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  // Handles in members are the registered tensors.
  EXPECT_EQ(m->named_parameters().at("mlp.0.weight").impl(), m->mlp->at<nn::Linear>(0)->weight.impl());
  // A module reached twice (weight tying) lists its parameters once, state_dict under both names.
  auto tied = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{m->heads});
  tied->push_back(m->heads);
  EXPECT_EQ(tied->parameters().size(), 3u);
  EXPECT_EQ(tied->state_dict().size(), 6u);
  // modules() needs a shared_ptr owner.
  nn::ReLU on_stack;
  EXPECT_TRUE(contains(error_of<Error>([&] { on_stack.modules(); }), "must be owned by a std::shared_ptr"));
}

TEST(Module, RegistrationErrors) {
  Module m("Custom");
  m.register_parameter("w", ones({2}));
  m.register_buffer("b", ones({2}));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { m.register_parameter("a.b", ones({1})); }),
                       "[Custom.register_parameter] invalid name 'a.b'"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { m.register_buffer("", ones({1})); }), "invalid name ''"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { m.register_buffer("w", ones({1})); }),
                       "'w' is already the name of another kind of entry"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { m.register_module("b", std::make_shared<nn::ReLU>()); }),
                       "'b' is already the name"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { m.register_module("r", std::shared_ptr<nn::ReLU>()); }), "is null"));
  // A parameter with history is detached; re-registering replaces it in place.
  const Tensor x = ones({2}, kFloat64).requires_grad_();
  Tensor& p = m.register_parameter("w", mul(x, 2.0));
  EXPECT_TRUE(p.is_leaf() && p.requires_grad());
  EXPECT_EQ(m.named_parameters().keys(), std::vector<std::string>{"w"});
  EXPECT_EQ(m.register_parameter("frozen", ones({1}), false).requires_grad(), false);
  EXPECT_TRUE(contains(error_of<NotImplementedError>([&] { m.forward(x); }), "[Custom.forward]"));
}

TEST(Module, StateDictRoundTrip) {
  manual_seed(1);
  auto a = std::make_shared<Block>();
  manual_seed(2);
  auto b = std::make_shared<Block>();
  const Tensor tokens = from_vector<int64_t>({1, 4, 0, 9, 3, 3}, Dims{2, 3});
  EXPECT_FALSE(bitwise_equal(a->forward(tokens), b->forward(tokens)));
  const nn::StateDict sd = a->state_dict();
  for (const auto& [name, t] : sd) EXPECT_FALSE(t.requires_grad()) << name;
  const Tensor b_weight = b->emb->weight;
  const auto result = b->load_state_dict(sd);
  EXPECT_TRUE(result.missing_keys.empty() && result.unexpected_keys.empty());
  EXPECT_TRUE(bitwise_equal(a->forward(tokens), b->forward(tokens)));
  EXPECT_EQ(b->emb->weight.impl(), b_weight.impl());  // copied in place
  EXPECT_TRUE(b->emb->weight.requires_grad() && b->emb->weight.is_leaf());
  // state_dict entries share storage with the parameters.
  Tensor entry = a->state_dict().at("norm.bias");
  entry.fill_(7);
  EXPECT_EQ(values(a->norm->bias), std::vector<double>(6, 7.0));
}

TEST(Module, LoadStateDictChecksEverythingFirst) {
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 2)});
  const nn::StateDict before = m->state_dict();
  std::vector<Tensor> copies;
  for (const auto& [name, t] : before) copies.push_back(t.clone());
  nn::StateDict bad;
  bad.insert("0.weight", zeros({4, 3}));    // fine, but must not be written
  bad.insert("0.bias", zeros({5}));         // shape mismatch
  bad.insert("2.weight", zeros({2, 4}));
  bad.insert("extra", zeros({1}));          // unexpected; 2.bias missing
  const std::string msg = error_of<Error>([&] { m->load_state_dict(bad); });
  EXPECT_TRUE(contains(msg, "[Sequential.load_state_dict]")) << msg;
  EXPECT_TRUE(contains(msg, "missing keys: '2.bias'")) << msg;
  EXPECT_TRUE(contains(msg, "unexpected keys: 'extra'")) << msg;
  EXPECT_TRUE(contains(msg, "size mismatch for '0.bias': copying a tensor of shape (5,) into one of shape (4,)"))
      << msg;
  size_t i = 0;
  for (const auto& [name, t] : m->state_dict()) EXPECT_TRUE(bitwise_equal(t, copies[i++])) << name;
  // Non-strict: key problems are reported, shapes still checked.
  EXPECT_TRUE(contains(error_of<Error>([&] { m->load_state_dict(bad, false); }), "size mismatch"));
  nn::StateDict partial;
  partial.insert("0.weight", zeros({4, 3}));
  partial.insert("extra", zeros({1}));
  const auto result = m->load_state_dict(partial, false);
  EXPECT_EQ(result.missing_keys, (std::vector<std::string>{"0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(result.unexpected_keys, std::vector<std::string>{"extra"});
  EXPECT_EQ(max(abs(m->at<nn::Linear>(0)->weight)).item<double>(), 0.0);
}

TEST(Module, TrainEvalZeroGradApply) {
  auto m = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::Dropout>(0.5)});
  const Tensor x = ones({200, 3});
  EXPECT_TRUE(m->is_training() && (*m)[1]->is_training());
  m->eval();
  EXPECT_FALSE((*m)[1]->is_training());
  EXPECT_TRUE(bitwise_equal(m->forward(x), m->at<nn::Linear>(0)->forward(x)));  // dropout is off
  m->train();
  EXPECT_TRUE((*m)[1]->is_training());
  EXPECT_FALSE(bitwise_equal(m->forward(x), m->at<nn::Linear>(0)->forward(x)));

  sum(m->forward(x)).backward();
  for (const Tensor& p : m->parameters()) EXPECT_TRUE(p.grad().defined());
  m->zero_grad(false);
  for (const Tensor& p : m->parameters()) EXPECT_EQ(max(abs(p.grad())).item<double>(), 0.0);
  m->zero_grad();
  for (const Tensor& p : m->parameters()) EXPECT_FALSE(p.grad().defined());

  std::vector<std::string> order;
  m->apply([&](Module& mod) { order.push_back(mod.type_name()); });
  EXPECT_EQ(order, (std::vector<std::string>{"Linear", "Dropout", "Sequential"}));
}

TEST(Module, ToDtypeKeepsIdentity) {
  auto m = std::make_shared<Block>();
  const Tensor w = m->mlp->at<nn::Linear>(0)->weight;
  const std::vector<double> before = values(w);
  optim::SGD opt(m->parameters(), {0.1});
  sum(m->forward(from_vector<int64_t>({1, 2}))).backward();
  m->to(kFloat64);
  EXPECT_EQ(w.dtype(), kFloat64);
  EXPECT_EQ(w.impl(), m->named_parameters().at("mlp.0.weight").impl());
  EXPECT_EQ(values(w), before);  // float32 values are exact in float64
  EXPECT_TRUE(w.requires_grad() && w.is_leaf());
  EXPECT_EQ(w.grad().dtype(), kFloat64);
  EXPECT_EQ(m->scale.dtype(), kFloat64);
  EXPECT_EQ(m->cache.dtype(), kFloat64);
  EXPECT_EQ(m->forward(from_vector<int64_t>({1, 2})).dtype(), kFloat64);
  opt.step();  // built before to(): still updates the converted parameters
  EXPECT_NE(values(w), before);
  EXPECT_TRUE(contains(error_of<TypeError>([&] { m->to(kInt64); }), "expected a floating point dtype, got int64"));
}

TEST(Layers, LinearEmbeddingNorms) {
  manual_seed(3);
  nn::Linear lin(50, 40);
  const double bound = 1 / std::sqrt(50.0);  // kaiming_uniform(a = sqrt(5)) gives 1/sqrt(fan_in)
  EXPECT_LE(max(abs(lin.weight)).item<double>(), bound);
  EXPECT_GT(max(abs(lin.weight)).item<double>(), 0.9 * bound);
  EXPECT_LE(max(abs(lin.bias)).item<double>(), bound);
  const Tensor x = random_tensor({3, 50}, kFloat32, Layout::Contiguous, 1);
  EXPECT_TRUE(all_close(values(lin.forward(x)), values(add(matmul(x, lin.weight.t()), lin.bias)), 1e-5, 1e-6));
  EXPECT_EQ(nn::Linear(3, 2, false).named_parameters().keys(), std::vector<std::string>{"weight"});

  nn::Embedding emb(10, 4, -1);
  EXPECT_EQ(emb.padding_idx, 9);
  EXPECT_EQ(values(emb.weight[9]), std::vector<double>(4, 0.0));
  EXPECT_NEAR(flambeau::std(emb.weight.narrow(0, 0, 9)).item<double>(), 1.0, 0.5);
  const Tensor rows = emb.forward(from_vector<int64_t>({2, 9}));
  EXPECT_EQ(values(rows[0]), values(emb.weight[2]));
  EXPECT_TRUE(contains(error_of<ValueError>([] { nn::Embedding(5, 2, 5); }), "[Embedding] padding_idx 5"));

  nn::LayerNorm ln(Dims{4});
  const Tensor h = random_tensor({2, 4}, kFloat32, Layout::Contiguous, 2);
  EXPECT_TRUE(bitwise_equal(ln.forward(h), F::layer_norm(h, {4}, ones({4}), zeros({4}))));
  EXPECT_TRUE(nn::LayerNorm(Dims{4}, 1e-5, false).parameters().empty());
  EXPECT_EQ(nn::LayerNorm(Dims{4}, 1e-5, true, false).named_parameters().keys(), std::vector<std::string>{"weight"});
  nn::RMSNorm rms(Dims{4}, 1e-6);
  EXPECT_TRUE(bitwise_equal(rms.forward(h), F::rms_norm(h, {4}, ones({4}), 1e-6)));
  EXPECT_TRUE(contains(error_of<ValueError>([] { nn::Dropout(1.2); }), "[Dropout] dropout probability"));
  EXPECT_TRUE(contains(error_of<ValueError>([] { nn::GELU("fast"); }), "[GELU] approximate must be"));
}

TEST(Layers, ContainersAndActivations) {
  auto seq = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<nn::Linear>(2, 2), std::make_shared<nn::Tanh>(), std::make_shared<nn::SiLU>(),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::GELU>()});
  const Tensor x = random_tensor({5, 2}, kFloat64, Layout::Contiguous, 3);
  seq->to(kFloat64);
  const Tensor want = gelu(relu(silu(tanh(seq->at<nn::Linear>(0)->forward(x)))));
  EXPECT_TRUE(bitwise_equal(seq->forward(x), want));
  EXPECT_EQ(seq->size(), 5u);
  EXPECT_TRUE(contains(error_of<TypeError>([&] { seq->at<nn::ReLU>(0); }), "module 0 is a Linear"));
  EXPECT_TRUE(contains(error_of<IndexError>([&] { (*seq)[5]; }), "[Sequential] index 5 is out of range for 5"));
  nn::ModuleList list;
  list.push_back(std::make_shared<nn::ReLU>());
  EXPECT_THROW(list.forward(x), NotImplementedError);
  nn::ModuleDict dict;
  dict.insert("act", std::make_shared<nn::Tanh>());
  dict.insert("proj", std::make_shared<nn::Linear>(2, 3));
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"act", "proj"}));
  EXPECT_EQ(dict["act"]->type_name(), "Tanh");
  EXPECT_EQ(dict.named_parameters().keys(), (std::vector<std::string>{"proj.weight", "proj.bias"}));
  EXPECT_TRUE(contains(error_of<IndexError>([&] { dict["nope"]; }), "[ModuleDict] no module named 'nope'"));
}

}  // namespace
}  // namespace flambeau::testing
