// nn::Module hooks: forward pre/post hooks (order with globals and prepend, replacement of
// inputs and output, always_call on an exception, removal), full backward pre/post hooks
// (grad_output and grad_input checked against hand-computed gradients, replacement, inputs
// that need no grad), containers calling their children through the hooks.
#include "test_util.h"

namespace flambeau::testing {
namespace {

using nn::Module;
using nn::TensorList;

// y = x W^T + b with W = [[1, 2, 3], [4, 5, 6]], b = [0.5, -0.5].
std::shared_ptr<nn::Linear> fixed_linear() {
  auto lin = std::make_shared<nn::Linear>(3, 2, true, kFloat64);
  autograd::NoGradGuard no_grad;
  lin->weight.copy_(from_vector<double>({1, 2, 3, 4, 5, 6}).reshape({2, 3}));
  lin->bias.copy_(from_vector<double>({0.5, -0.5}));
  return lin;
}

TEST(ModuleHooks, ForwardHooksRunInOrderWithGlobalsFirst) {
  auto lin = fixed_linear();
  std::vector<std::string> log;
  auto pre = [&](const char* tag) {
    return [&log, tag](Module&, const TensorList&) -> std::optional<TensorList> {
      log.push_back(tag);
      return std::nullopt;
    };
  };
  auto post = [&](const char* tag) {
    return [&log, tag](Module&, const TensorList&, const Tensor&) -> std::optional<Tensor> {
      log.push_back(tag);
      return std::nullopt;
    };
  };
  nn::RemovableHandle h1 = lin->register_forward_pre_hook(pre("pre1"));
  lin->register_forward_pre_hook(pre("pre0"), /*prepend=*/true);
  nn::RemovableHandle g1 = nn::register_module_forward_pre_hook(pre("global pre"));
  lin->register_forward_hook(post("post1"));
  lin->register_forward_hook(post("post0"), /*prepend=*/true);
  nn::RemovableHandle g2 = nn::register_module_forward_hook(post("global post"));
  const Tensor x = from_vector<double>({1, 0, -1}).reshape({1, 3});
  (*lin)(x);
  EXPECT_EQ(log, (std::vector<std::string>{"global pre", "pre0", "pre1", "global post", "post0", "post1"}));
  g1.remove();
  g2.remove();
  h1.remove();
  h1.remove();  // twice is fine
  log.clear();
  (*lin)(x);
  EXPECT_EQ(log, (std::vector<std::string>{"pre0", "post0", "post1"}));
}

TEST(ModuleHooks, ForwardHooksReplaceInputsAndOutput) {
  auto lin = fixed_linear();
  const Tensor x = from_vector<double>({1, 0, -1}).reshape({1, 3});
  nn::RemovableHandle pre =
      lin->register_forward_pre_hook([](Module&, const TensorList& in) -> std::optional<TensorList> {
        return TensorList{mul(in[0], 2.0)};
      });
  Tensor seen_input;
  nn::RemovableHandle post =
      lin->register_forward_hook([&](Module& m, const TensorList& in, const Tensor& out) -> std::optional<Tensor> {
        EXPECT_EQ(m.type_name(), "Linear");
        seen_input = in[0];
        return add(out, 100.0);
      });
  // x*2 = [2, 0, -2]: W x = [2 - 6, 8 - 12] = [-4, -4]; + b; + 100.
  EXPECT_EQ(values((*lin)(x)), (std::vector<double>{96.5, 95.5}));
  EXPECT_EQ(values(seen_input), (std::vector<double>{2, 0, -2}));
  pre.remove();
  post.remove();
  EXPECT_FALSE(lin->has_hooks());
  EXPECT_EQ(values((*lin)(x)), (std::vector<double>{-1.5, -2.5}));
}

struct Failing : Module {
  Failing() : Module("Failing") {}
  Tensor forward(const Tensor&) override { throw ValueError("[Failing] forward failed"); }
};

TEST(ModuleHooks, AlwaysCallRunsWhenForwardRaises) {
  auto m = std::make_shared<Failing>();
  int plain = 0, always = 0;
  bool output_was_undefined = false;
  m->register_forward_hook([&](Module&, const TensorList&, const Tensor&) -> std::optional<Tensor> {
    ++plain;
    return std::nullopt;
  });
  m->register_forward_hook(
      [&](Module&, const TensorList&, const Tensor& out) -> std::optional<Tensor> {
        ++always;
        output_was_undefined = !out.defined();
        throw Error("[hook] dropped, the forward error wins");
      },
      false, /*always_call=*/true);
  EXPECT_TRUE(contains(error_of<ValueError>([&] { (*m)(zeros({2})); }), "forward failed"));
  EXPECT_EQ(plain, 0);
  EXPECT_EQ(always, 1);
  EXPECT_TRUE(output_was_undefined);
}

TEST(ModuleHooks, ScopedHookRemovesAtScopeEnd) {
  auto lin = fixed_linear();
  int calls = 0;
  {
    nn::ScopedHook scoped(lin->register_forward_pre_hook([&](Module&, const TensorList&) -> std::optional<TensorList> {
      ++calls;
      return std::nullopt;
    }));
    (*lin)(zeros({1, 3}, kFloat64));
  }
  (*lin)(zeros({1, 3}, kFloat64));
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(lin->has_hooks());
}

TEST(ModuleHooks, FullBackwardHooksSeeTheGradients) {
  auto lin = fixed_linear();
  Tensor x = from_vector<double>({1, 0, -1, 2, 1, 0}).reshape({2, 3}).requires_grad_();
  const Tensor c = from_vector<double>({1, 2, 3, 4}).reshape({2, 2});  // loss = sum(y * c)
  std::vector<std::string> log;
  TensorList got_grad_input, got_grad_output, pre_grad_output;
  nn::RemovableHandle gh =
      nn::register_module_full_backward_pre_hook([&](Module&, const TensorList&) -> std::optional<TensorList> {
        log.push_back("global pre");
        return std::nullopt;
      });
  lin->register_full_backward_pre_hook([&](Module&, const TensorList& go) -> std::optional<TensorList> {
    log.push_back("pre");
    pre_grad_output = go;
    return std::nullopt;
  });
  lin->register_full_backward_hook(
      [&](Module&, const TensorList& gi, const TensorList& go) -> std::optional<TensorList> {
        log.push_back("post");
        got_grad_input = gi;
        got_grad_output = go;
        return std::nullopt;
      });
  sum(mul((*lin)(x), c)).backward();
  gh.remove();
  EXPECT_EQ(log, (std::vector<std::string>{"global pre", "pre", "post"}));
  ASSERT_EQ(pre_grad_output.size(), 1u);
  EXPECT_EQ(values(pre_grad_output[0]), values(c));
  ASSERT_EQ(got_grad_output.size(), 1u);
  EXPECT_EQ(values(got_grad_output[0]), values(c));
  // dL/dx = c W: rows [1*1 + 2*4, 1*2 + 2*5, 1*3 + 2*6] and [3*1 + 4*4, ...].
  ASSERT_EQ(got_grad_input.size(), 1u);
  EXPECT_EQ(values(got_grad_input[0]), (std::vector<double>{9, 12, 15, 19, 26, 33}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{9, 12, 15, 19, 26, 33}));
  // dL/dW = c^T x.
  EXPECT_EQ(values(lin->weight.grad()), (std::vector<double>{7, 3, -1, 10, 4, -2}));
}

TEST(ModuleHooks, FullBackwardHooksReplaceGradients) {
  auto lin = fixed_linear();
  Tensor x = from_vector<double>({1, 0, -1}).reshape({1, 3}).requires_grad_();
  // The pre-hook doubles grad_output: the weight's gradient doubles too.
  lin->register_full_backward_pre_hook([](Module&, const TensorList& go) -> std::optional<TensorList> {
    return TensorList{mul(go[0], 2.0)};
  });
  lin->register_full_backward_hook([](Module&, const TensorList& gi, const TensorList&) -> std::optional<TensorList> {
    return TensorList{add(gi[0], 1000.0)};
  });
  const Tensor y = (*lin)(x);
  EXPECT_EQ(y.grad_fn()->name(), "BackwardHookFunctionBackward");
  sum(y).backward();
  EXPECT_EQ(values(lin->weight.grad()), (std::vector<double>{2, 0, -2, 2, 0, -2}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1010, 1014, 1018}));  // 2 * (1 + 4, 2 + 5, 3 + 6) + 1000
  // A wrong count is an error naming the hook.
  auto bad = fixed_linear();
  bad->register_full_backward_hook([](Module&, const TensorList&, const TensorList&) -> std::optional<TensorList> {
    return TensorList{Tensor(), Tensor()};
  });
  Tensor z = (*bad)(x);
  EXPECT_TRUE(contains(error_of<Error>([&] { sum(z).backward(); }), "[Linear backward hook] returned 2 grad_input"));
}

TEST(ModuleHooks, InputsWithoutGradGetUndefinedGradInput) {
  auto lin = fixed_linear();
  const Tensor x = from_vector<double>({1, 0, -1}).reshape({1, 3});  // no grad: only W and b have one
  int calls = 0;
  auto hook = [&](Module&, const TensorList& gi, const TensorList& go) -> std::optional<TensorList> {
    ++calls;
    EXPECT_EQ(gi.size(), 1u);
    EXPECT_FALSE(gi[0].defined());
    EXPECT_EQ(values(go[0]), (std::vector<double>{1, 1}));
    return std::nullopt;
  };
  lin->register_full_backward_hook(hook);
  sum((*lin)(x)).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(values(lin->weight.grad()), (std::vector<double>{1, 0, -1, 1, 0, -1}));
  // Two inputs, one of them integer: LinearCrossEntropyLoss(input, target).
  auto loss = std::make_shared<nn::LinearCrossEntropyLoss>(3, 4, false, kFloat64);
  Tensor h = from_vector<double>({0.1, 0.2, 0.3, -1, 0, 1}).reshape({2, 3}).requires_grad_();
  TensorList gi;
  loss->register_full_backward_hook([&](Module&, const TensorList& in, const TensorList&) -> std::optional<TensorList> {
    gi = in;
    return std::nullopt;
  });
  (*loss)(h, from_vector<int64_t>({1, 3})).backward();
  ASSERT_EQ(gi.size(), 2u);
  EXPECT_TRUE(gi[0].defined());
  EXPECT_FALSE(gi[1].defined());
  EXPECT_EQ(values(gi[0]), values(h.grad()));
}

TEST(ModuleHooks, SequentialCallsChildrenThroughTheirHooks) {
  auto first = std::make_shared<nn::Linear>(3, 3);
  auto seq = std::make_shared<nn::Sequential>(
      std::initializer_list<std::shared_ptr<Module>>{first, std::make_shared<nn::ReLU>()});
  std::vector<std::string> names;
  nn::RemovableHandle g = nn::register_module_forward_hook(
      [&](Module& m, const TensorList&, const Tensor&) -> std::optional<Tensor> {
        names.push_back(m.type_name());
        return std::nullopt;
      });
  (*seq)(zeros({1, 3}));
  g.remove();
  EXPECT_EQ(names, (std::vector<std::string>{"Linear", "ReLU", "Sequential"}));
  EXPECT_FALSE(seq->has_hooks());
}

std::shared_ptr<nn::Sequential> three_layers() {
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<nn::Linear>(3, 4), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(4, 2)});
}

std::vector<std::string> keys(const nn::StateDict& sd) {
  std::vector<std::string> out;
  for (const auto& [name, t] : sd) out.push_back(name);
  return out;
}

TEST(ModuleHooks, StateDictHooksSeeEachModuleWithItsPrefix) {
  auto m = three_layers();
  std::vector<std::string> log;
  m->register_state_dict_pre_hook([&](Module&, const std::string& prefix) { log.push_back("pre root '" + prefix + "'"); });
  m->at<nn::Linear>(2)->register_state_dict_pre_hook(
      [&](Module& mod, const std::string& prefix) { log.push_back("pre " + mod.type_name() + " '" + prefix + "'"); });
  // A child's post-hook runs once its own entries are in: the later sibling's are not yet.
  m->at<nn::Linear>(0)->register_state_dict_post_hook([&](Module&, nn::StateDict& sd, const std::string& prefix) {
    log.push_back("post '" + prefix + "' with " + std::to_string(sd.size()) + " entries");
  });
  nn::RemovableHandle extra = m->register_state_dict_post_hook([&](Module&, nn::StateDict& sd, const std::string&) {
    sd.insert("extra_state", full({1}, 3.0));
    log.push_back("post root");
  });
  EXPECT_FALSE(m->has_hooks());  // state hooks leave operator()'s fast path alone
  const nn::StateDict sd = m->state_dict();
  EXPECT_EQ(keys(sd), (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias", "extra_state"}));
  EXPECT_EQ(log, (std::vector<std::string>{"pre root ''", "post '0.' with 2 entries", "pre Linear '2.'", "post root"}));
  extra.remove();
  EXPECT_FALSE(m->state_dict().contains("extra_state"));
}

TEST(ModuleHooks, LoadStateDictPreHookRenamesOldEntries) {
  auto src = three_layers(), dst = three_layers();
  nn::StateDict old;  // an older checkpoint format: the first layer's weight was "w"
  for (const auto& [name, t] : src->state_dict()) old.insert(name == "0.weight" ? "0.w" : name, t);
  EXPECT_TRUE(contains(error_of<Error>([&] { dst->load_state_dict(old); }), "missing keys: '0.weight'"));
  std::vector<std::string> prefixes;
  dst->at<nn::Linear>(0)->register_load_state_dict_pre_hook(
      [&](Module&, nn::StateDict& local, const std::string& prefix) {
        prefixes.push_back(prefix);
        nn::StateDict renamed;  // the module sees its own entries only
        for (const auto& [name, t] : local) renamed.insert(name == prefix + "w" ? prefix + "weight" : name, t);
        local = renamed;
      });
  const auto result = dst->load_state_dict(old);
  EXPECT_TRUE(result.missing_keys.empty() && result.unexpected_keys.empty());
  EXPECT_EQ(prefixes, std::vector<std::string>{"0."});
  EXPECT_TRUE(bitwise_equal(dst->at<nn::Linear>(0)->weight, src->at<nn::Linear>(0)->weight));
}

TEST(ModuleHooks, LoadStateDictPostHooksRunChildrenFirstAndMayClearKeys) {
  auto src = three_layers(), dst = three_layers();
  nn::StateDict sd = src->state_dict();
  sd.insert("extra", zeros({1}));
  std::vector<std::string> log;
  dst->at<nn::Linear>(2)->register_load_state_dict_post_hook(
      [&](Module&, nn::LoadStateDictResult& r) { log.push_back("child sees " + r.unexpected_keys.at(0)); });
  nn::RemovableHandle clear = dst->register_load_state_dict_post_hook([&](Module&, nn::LoadStateDictResult& r) {
    log.push_back("root clears");
    r.unexpected_keys.clear();
  });
  const auto result = dst->load_state_dict(sd);  // strict, yet no error: the hook cleared the key
  EXPECT_TRUE(result.unexpected_keys.empty());
  EXPECT_EQ(log, (std::vector<std::string>{"child sees extra", "root clears"}));
  EXPECT_TRUE(bitwise_equal(dst->at<nn::Linear>(2)->bias, src->at<nn::Linear>(2)->bias));
  // Without the clearing hook the strict load copies (a post-hook could have cleared the
  // keys) and then raises on what is left.
  clear.remove();
  EXPECT_TRUE(contains(error_of<Error>([&] { dst->load_state_dict(sd); }), "unexpected keys: 'extra'"));
}

}  // namespace
}  // namespace flambeau::testing
