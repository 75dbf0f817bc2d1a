// Optimizers against reference loops written from torch.optim's formulas, on several
// parameters (one long enough to be split among threads), with 1 and 2 threads.
#include <cmath>

#include "test_util.h"

namespace flambeau::testing {
namespace {

std::vector<Tensor> make_params(uint64_t seed) {
  return {random_tensor({5, 7}, kFloat64, Layout::Contiguous, seed).requires_grad_(),
          random_tensor({70001}, kFloat64, Layout::Contiguous, seed + 1).requires_grad_()};
}

void set_grads(std::vector<Tensor>& ps, int step) {
  for (size_t i = 0; i < ps.size(); ++i)
    ps[i].set_grad(random_tensor(ps[i].sizes(), kFloat64, Layout::Contiguous, 100 + 10 * step + i));
}

TEST(Optim, SgdMatchesReference) {
  optim::SGDOptions o;
  o.lr = 0.05, o.momentum = 0.9, o.dampening = 0.1, o.weight_decay = 0.01;
  std::vector<Tensor> ps = make_params(1);
  std::vector<std::vector<double>> ref, buf(ps.size());
  for (const Tensor& p : ps) ref.push_back(values(p));
  optim::SGD sgd(ps, o);
  for (int step = 0; step < 5; ++step) {
    set_grads(ps, step);
    for (size_t i = 0; i < ps.size(); ++i) {
      std::vector<double> g = values(ps[i].grad());
      if (buf[i].empty()) buf[i].assign(g.size(), 0.0);
      for (size_t k = 0; k < g.size(); ++k) {
        const double gk = g[k] + o.weight_decay * ref[i][k];
        buf[i][k] = step == 0 ? gk : o.momentum * buf[i][k] + (1 - o.dampening) * gk;
        ref[i][k] -= o.lr * buf[i][k];
      }
    }
    sgd.step();
  }
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(all_close(values(ps[i]), ref[i], 1e-12, 1e-12));
}

TEST(Optim, AdamWMatchesReferenceAndIsThreadIndependent) {
  optim::AdamOptions o;
  o.lr = 1e-2, o.weight_decay = 0.1;
  std::vector<std::vector<double>> results;
  const int saved = get_num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    std::vector<Tensor> ps = make_params(7);
    std::vector<std::vector<double>> ref, m(ps.size()), v(ps.size());
    for (const Tensor& p : ps) ref.push_back(values(p));
    optim::AdamW adamw(ps, o);
    for (int step = 1; step <= 5; ++step) {
      set_grads(ps, step);
      for (size_t i = 0; i < ps.size(); ++i) {
        std::vector<double> g = values(ps[i].grad());
        if (m[i].empty()) m[i].assign(g.size(), 0.0), v[i].assign(g.size(), 0.0);
        const double bc1 = 1 - std::pow(o.beta1, step), bc2 = std::sqrt(1 - std::pow(o.beta2, step));
        for (size_t k = 0; k < g.size(); ++k) {
          ref[i][k] *= 1 - o.lr * o.weight_decay;
          m[i][k] += (1 - o.beta1) * (g[k] - m[i][k]);
          v[i][k] = v[i][k] * o.beta2 + (1 - o.beta2) * g[k] * g[k];
          ref[i][k] -= o.lr / bc1 * (m[i][k] / (std::sqrt(v[i][k]) / bc2 + o.eps));
        }
      }
      adamw.step();
    }
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(all_close(values(ps[i]), ref[i], 1e-12, 1e-12));
    EXPECT_EQ(adamw.step_count(0), 5);
    results.push_back(values(ps[1]));
  }
  set_num_threads(saved);
  EXPECT_EQ(results[0], results[1]);
}

TEST(Optim, ErrorsAndZeroGrad) {
  std::vector<Tensor> ps = make_params(3);
  EXPECT_THROW(optim::SGD(ps, optim::SGDOptions{0.1, 0.0, 0.0, 0.0, true}), ValueError);  // nesterov needs momentum
  optim::AdamOptions bad;
  bad.beta1 = 1.0;
  EXPECT_THROW(optim::Adam(ps, bad), ValueError);
  optim::SGD sgd(ps, {});
  set_grads(ps, 0);
  sgd.zero_grad(false);
  EXPECT_EQ(sum(abs(ps[0].grad())).item<double>(), 0.0);
  sgd.zero_grad();
  EXPECT_FALSE(ps[0].grad().defined());
  // A dense parameter of any layout steps (its hand-set row-major gradient laid out as it);
  // one with holes is refused.
  std::vector<Tensor> transposed = {arange(16).to(kFloat64).view({4, 4}).t().detach().requires_grad_()};
  transposed[0].set_grad(arange(16).to(kFloat64).view({4, 4}));
  optim::SGDOptions lr1;
  lr1.lr = 1.0;
  optim::SGD s1(transposed, lr1);
  s1.step();
  EXPECT_EQ(values(transposed[0]), values(sub(arange(16).to(kFloat64).view({4, 4}).t(), arange(16).to(kFloat64).view({4, 4}))));
  std::vector<Tensor> strided = {zeros({4, 8}, kFloat64).slice(1, 0, 8, 2).requires_grad_()};
  strided[0].set_grad(zeros({4, 4}, kFloat64));
  optim::SGD s2(strided, {});
  EXPECT_THROW(s2.step(), TypeError);
}

}  // namespace
}  // namespace flambeau::testing

namespace flambeau::testing {
namespace {

// A fresh optimizer loaded with another's state_dict continues exactly as the original.
template <class Make>
void expect_resume_matches(Make make) {
  std::vector<Tensor> a = make_params(7), b = make_params(7);
  auto opt_a = make(a);
  for (int s = 0; s < 3; ++s) {
    set_grads(a, s);
    opt_a->step();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    autograd::NoGradGuard no_grad;
    b[i].copy_(a[i]);
  }
  auto opt_b = make(b);
  opt_b->load_state_dict(opt_a->state_dict());
  for (int s = 3; s < 6; ++s) {
    set_grads(a, s);
    set_grads(b, s);
    opt_a->step();
    opt_b->step();
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i], b[i])) << "parameter " << i;
}

TEST(OptimState, ResumeFromStateDict) {
  expect_resume_matches([](std::vector<Tensor>& p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.1, 0.9, 0.0, 0.01, true, false});
  });
  expect_resume_matches([](std::vector<Tensor>& p) { return std::make_unique<optim::AdamW>(p); });
  expect_resume_matches([](std::vector<Tensor>& p) {
    return std::make_unique<optim::Adam>(p, optim::AdamOptions{1e-2, 0.8, 0.9, 1e-6, 0.1, false});
  });
}

TEST(OptimState, ContentsAndOptions) {
  std::vector<Tensor> p = make_params(1);
  optim::AdamW opt(p, optim::AdamOptions{2e-3, 0.9, 0.95, 1e-8, 0.1, false});
  optim::OptimizerState s = opt.state_dict();
  EXPECT_TRUE(s.params[0].empty());  // no state before the first step
  EXPECT_EQ(s.options.at("lr"), 2e-3);
  EXPECT_EQ(s.options.at("beta2"), 0.95);
  set_grads(p, 0);
  opt.step();
  opt.step();
  s = opt.state_dict();
  EXPECT_EQ(s.params[0].at("step").item<double>(), 2.0);
  EXPECT_EQ(s.params[0].at("step").dtype(), kFloat32);
  EXPECT_TRUE(bitwise_equal(s.params[1].at("exp_avg"), opt.exp_avg(1)));
  // state_dict copies: changing it leaves the optimizer alone.
  s.params[1].at("exp_avg").fill_(7.0);
  EXPECT_FALSE(bitwise_equal(s.params[1].at("exp_avg"), opt.exp_avg(1)));
  opt.set_option("lr", 0.5);
  EXPECT_EQ(opt.lr(), 0.5);
  EXPECT_THROW(opt.set_option("momentum", 0.5), ValueError);
  EXPECT_THROW(opt.set_option("beta1", 1.5), ValueError);
  EXPECT_EQ(opt.options().at("beta1"), 0.9);
}

TEST(OptimState, BadStateIsRefusedAndNothingChanges) {
  std::vector<Tensor> p = make_params(2);
  optim::Adam opt(p);
  set_grads(p, 0);
  opt.step();
  const optim::OptimizerState good = opt.state_dict();
  auto refused = [&](optim::OptimizerState bad, const std::string& part) {
    EXPECT_TRUE(contains(error_of<ValueError>([&] { opt.load_state_dict(bad); }), part)) << part;
    const optim::OptimizerState now = opt.state_dict();
    EXPECT_EQ(now.options, good.options);
    for (size_t i = 0; i < p.size(); ++i) EXPECT_TRUE(bitwise_equal(now.params[i].at("exp_avg"), good.params[i].at("exp_avg")));
  };
  optim::OptimizerState s = good;
  s.params.pop_back();
  refused(s, "the optimizer 2");
  s = opt.state_dict();
  s.params[0].erase("exp_avg_sq");
  s.params[1].at("exp_avg").fill_(1.0);  // would be written if the check came late
  refused(s, "lacks 'exp_avg_sq'");
  s = opt.state_dict();
  s.params[1]["momentum_buffer"] = zeros(p[1].sizes(), kFloat32);
  refused(s, "unknown state 'momentum_buffer'");
  s = opt.state_dict();
  s.params[0].at("exp_avg") = zeros({1, 2}, kFloat32);
  refused(s, "must be a floating tensor of shape");
  s = opt.state_dict();
  s.options["momentum"] = 0.9;
  refused(s, "unknown option 'momentum'");
  s = opt.state_dict();
  s.options["beta1"] = 2.0;
  s.params[1].at("exp_avg").fill_(1.0);
  refused(s, "invalid betas");
}

}  // namespace
}  // namespace flambeau::testing
