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
  std::vector<Tensor> strided = {zeros({4, 4}, kFloat64).t().requires_grad_()};
  strided[0].set_grad(zeros({4, 4}, kFloat64));
  optim::SGD s2(strided, {});
  EXPECT_THROW(s2.step(), TypeError);
}

}  // namespace
}  // namespace flambeau::testing
