// End-of-backward callbacks (autograd::queue_callback): run after the whole graph in the
// order queued, re-queueing, their own queue for a nested backward, exceptions out of
// backward, the error outside a pass, and DDP's pattern (post-accumulate-grad hooks queue
// one callback that sees every .grad).
#include "test_util.h"

#include "flambeau/autograd/autograd.h"

namespace flambeau::testing {
namespace {

Tensor leaf(std::vector<double> v) { return from_vector<double>(v).requires_grad_(); }

void add_hook(const Tensor& t, autograd::TensorHook hook) {
  autograd::AutogradMeta& meta = autograd::meta_of(t);
  if (meta.grad_fn) meta.grad_fn->pre_hooks[meta.output_nr].push_back(std::move(hook));
  else meta.hooks.push_back(std::move(hook));
}

TEST(QueueCallback, RunsAfterTheGraphInOrderAndMayRequeue) {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 3);
  std::vector<std::string> log;
  add_hook(h, [&](const Tensor& g) {
    log.push_back("hook");
    autograd::queue_callback([&] {
      // Runs after the leaf got its gradient.
      log.push_back(x.grad().defined() ? "first, grad ready" : "first, no grad");
      autograd::queue_callback([&] { log.push_back("queued by first"); });
    });
    autograd::queue_callback([&] { log.push_back("second"); });
    return Tensor();
  });
  sum(h).backward();
  EXPECT_EQ(log, (std::vector<std::string>{"hook", "first, grad ready", "second", "queued by first"}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 3}));
  EXPECT_FALSE(autograd::in_backward_pass());
}

TEST(QueueCallback, ErrorOutsideBackward) {
  EXPECT_TRUE(contains(error_of<Error>([] { autograd::queue_callback([] {}); }), "[queue_callback]"));
  EXPECT_TRUE(contains(error_of<Error>([] { autograd::queue_callback([] {}); }), "backward pass"));
}

TEST(QueueCallback, ExceptionPropagatesAndDropsTheRest) {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 2);
  bool later_ran = false;
  add_hook(h, [&](const Tensor&) {
    autograd::queue_callback([] { throw ValueError("[test] callback failed"); });
    autograd::queue_callback([&] { later_ran = true; });
    return Tensor();
  });
  EXPECT_TRUE(contains(error_of<ValueError>([&] { sum(h).backward(); }), "callback failed"));
  EXPECT_FALSE(later_ran);
  EXPECT_FALSE(autograd::in_backward_pass());  // the queue was uninstalled
  EXPECT_THROW(autograd::queue_callback([] {}), Error);
}

TEST(QueueCallback, NestedBackwardHasItsOwnQueue) {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 2);
  std::vector<std::string> log;
  add_hook(h, [&](const Tensor& g) {
    autograd::queue_callback([&] { log.push_back("outer"); });
    autograd::EnableGradGuard grad_on;  // hooks run with grad mode off
    Tensor y = leaf({5});
    Tensor z = mul(y, y);
    add_hook(z, [&](const Tensor& gz) {
      autograd::queue_callback([&] { log.push_back("inner"); });
      return Tensor();
    });
    sum(z).backward();  // a backward inside a hook
    log.push_back("inner backward returned");
    EXPECT_EQ(values(y.grad()), (std::vector<double>{10}));
    return Tensor();
  });
  sum(h).backward();
  EXPECT_EQ(log, (std::vector<std::string>{"inner", "inner backward returned", "outer"}));
}

TEST(QueueCallback, RunsForGradToo) {
  Tensor x = leaf({1, 2});
  Tensor h = exp(x);
  int ran = 0;
  add_hook(h, [&](const Tensor&) {
    autograd::queue_callback([&] { ++ran; });
    return Tensor();
  });
  std::vector<Tensor> g = autograd::grad({sum(h)}, {x});
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(all_close(values(g[0]), {std::exp(1.0), std::exp(2.0)}, 1e-12, 1e-12));
}

// DDP's pattern: every parameter's post-accumulate-grad hook marks it ready (launching a
// bucket's all-reduce there); the first queues one callback that waits for all of them.
TEST(QueueCallback, DdpPatternSeesEveryGrad) {
  std::vector<Tensor> params = {leaf({1, 2, 3}), leaf({4}), leaf({-1, 0.5})};
  int queued = 0, ready = 0;
  std::vector<std::vector<double>> seen;
  for (Tensor& p : params)
    autograd::meta_of(p).post_accumulate_hooks.push_back([&](Tensor& t) {
      ++ready;
      if (queued++ == 0)
        autograd::queue_callback([&] {
          EXPECT_EQ(ready, 3);
          for (const Tensor& q : params) {
            ASSERT_TRUE(q.grad().defined());
            seen.push_back(values(q.grad()));
          }
        });
    });
  Tensor loss = add(add(sum(mul(params[0], params[0])), sum(mul(params[1], 3))), sum(exp(params[2])));
  loss.backward();
  EXPECT_EQ(queued, 3);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(seen[1], (std::vector<double>{3}));
  EXPECT_TRUE(all_close(seen[2], {std::exp(-1.0), std::exp(0.5)}, 1e-12, 1e-12));
}

}  // namespace
}  // namespace flambeau::testing
