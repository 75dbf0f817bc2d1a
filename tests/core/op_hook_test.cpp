// The op hook: a listener sees each user-level op once, with its arguments and outputs, and
// none of the ops those call internally; removal, nesting through backward, exceptions.
#include "flambeau/core/op_hook.h"

#include <mutex>

#include "flambeau/autograd/autograd.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

// Records the calls made on this thread while alive.
class Recorder {
 public:
  Recorder()
      : id_(op_hook::add_listener([this](const op_hook::OpCall& c) {
          std::lock_guard lock(mu_);
          calls.push_back({std::string(c.name), c.args, c.outputs});
        })) {}
  ~Recorder() { op_hook::remove_listener(id_); }
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& c : calls) n.push_back(c.name);
    return n;
  }
  struct Call {
    std::string name;
    std::vector<op_hook::Value> args;
    std::vector<Tensor> outputs;
  };
  std::vector<Call> calls;

 private:
  std::mutex mu_;
  int id_;
};

bool same(const Tensor& a, const Tensor& b) { return a.impl() == b.impl(); }

TEST(OpHook, SeesUserLevelOpsOnlyWithArgumentsAndOutputs) {
  const Tensor x = random_tensor({4, 3}, kFloat32, Layout::Contiguous, 1).requires_grad_();
  Recorder r;
  const Tensor y = exp(x);
  const Tensor m = mean(y, {1});  // sum and div inside: not reported
  const Tensor p = matmul(x.t(), x);
  Tensor s = sum(m);
  s.backward();  // the ops backward runs are not reported either
  const auto v = var(x, {0});
  EXPECT_EQ(r.names(), (std::vector<std::string>{"exp", "mean", "t", "matmul", "sum", "backward", "var"}));
  ASSERT_EQ(r.calls.size(), 7u);
  const auto& mean_call = r.calls[1];
  ASSERT_EQ(mean_call.args.size(), 4u);
  EXPECT_TRUE(same(std::get<Tensor>(mean_call.args[0]), y));
  EXPECT_EQ(std::get<Dims>(mean_call.args[1]), (Dims{1}));
  EXPECT_EQ(std::get<bool>(mean_call.args[2]), false);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(mean_call.args[3]));  // dtype not given
  ASSERT_EQ(mean_call.outputs.size(), 1u);
  EXPECT_TRUE(same(mean_call.outputs[0], m));
  EXPECT_TRUE(same(r.calls[3].outputs[0], p));
  EXPECT_TRUE(r.calls[5].outputs.empty());  // backward returns nothing
}

TEST(OpHook, MultiOutputInPlaceAndMethodOps) {
  Tensor x = random_tensor({5, 6}, kFloat32, Layout::Contiguous, 2);
  Recorder r;
  const auto [values, indices] = max(x, 1);
  x.add_(x);
  const Tensor v = x.reshape({30});
  const std::vector<Tensor> parts = split(v, 10);
  EXPECT_EQ(r.names(), (std::vector<std::string>{"max", "add_", "reshape", "split"}));
  ASSERT_EQ(r.calls[0].outputs.size(), 2u);
  EXPECT_TRUE(same(r.calls[0].outputs[0], values) && same(r.calls[0].outputs[1], indices));
  EXPECT_TRUE(same(r.calls[1].outputs[0], x));
  EXPECT_EQ(std::get<int64_t>(r.calls[3].args[1]), 10);
  EXPECT_EQ(r.calls[3].outputs.size(), 3u);
}

TEST(OpHook, RaisingOpsAreNotReportedAndLeaveTheDepthAlone) {
  const Tensor a = zeros({2, 3}), b = zeros({4, 5});
  Recorder r;
  EXPECT_THROW(matmul(a, b), ValueError);
  const Tensor c = add(a, a);  // still reported: the failed call restored the depth
  EXPECT_EQ(r.names(), (std::vector<std::string>{"add"}));
}

TEST(OpHook, RemovedListenersHearNothingAndListenersDoNotHearThemselves) {
  std::vector<std::string> heard;
  const int id = op_hook::add_listener([&](const op_hook::OpCall& c) {
    heard.emplace_back(c.name);
    (void)sum(c.outputs.at(0));  // a listener's own ops are not reported
  });
  const Tensor x = ones({3});
  (void)neg(x);
  op_hook::remove_listener(id);
  EXPECT_FALSE(op_hook::active());
  (void)neg(x);
  EXPECT_EQ(heard, (std::vector<std::string>{"ones", "neg"}));
}

}  // namespace
}  // namespace flambeau::testing
