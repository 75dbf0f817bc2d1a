// Gradients of the indexing writes beyond gradcheck: exact values where ties are shared,
// refusal of in-place writes into leaves that require grad, checks that run before any
// write, the untouched fast path without grad, and thread-count independence.
#include "test_util.h"

namespace flambeau::testing {
namespace {

Tensor idx(const std::vector<int64_t>& v, std::optional<Dims> shape = {}) { return from_vector<int64_t>(v, shape); }
Tensor leaf_of(const std::vector<double>& v, const Dims& shape) {
  return from_vector<double>(v, shape).requires_grad_();
}

TEST(IndexGrad, ScatterReduceTiesShareTheGradient) {
  // Target 0: self 5 and src 5, 5 tie (three ways); target 1: src 2 loses to self 4.
  const Tensor self = leaf_of({5, 4, 1}, {3}), src = leaf_of({5, 2, 5}, {3});
  scatter_reduce(self, 0, idx({0, 1, 0}), src, "amax").sum().backward();
  EXPECT_TRUE(all_close(values(self.grad()), {1.0 / 3, 1, 1}, 1e-15, 0));
  EXPECT_TRUE(all_close(values(src.grad()), {1.0 / 3, 0, 1.0 / 3}, 1e-15, 0));
  // Without self, self's old value (5, equal to the result) takes no share.
  const Tensor s2 = leaf_of({5, 4, 1}, {3}), src2 = leaf_of({5, 2, 3}, {3});
  scatter_reduce(s2, 0, idx({0, 1, 0}), src2, "amax", false).sum().backward();
  EXPECT_TRUE(all_close(values(s2.grad()), {0, 0, 1}, 0, 0));
  EXPECT_TRUE(all_close(values(src2.grad()), {1, 1, 0}, 0, 0));
}

TEST(IndexGrad, ProdAndCumprodWithZerosMatchTheProductOfOthers) {
  const Tensor x = leaf_of({2, 0, 3, 0, 5}, {5});
  prod(x.narrow(0, 0, 3)).backward();  // one zero: only it gets 2 * 3
  EXPECT_TRUE(all_close(values(x.grad()), {0, 6, 0, 0, 0}, 0, 0));
  const Tensor y = leaf_of({2, 0, 3}, {3});
  cumprod(y, 0).sum().backward();  // outputs 2, 0, 0: d/dy = [1, 2 + 6, 0]
  EXPECT_TRUE(all_close(values(y.grad()), {1, 8, 0}, 0, 0));
}

TEST(IndexGrad, InPlaceWritesRefuseLeavesThatRequireGrad) {
  Tensor x = leaf_of({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor src = from_vector<double>({7, 8, 9}, Dims{1, 3});
  const Tensor mask = from_vector<bool>({true, false, false}, Dims{3});
  const std::vector<std::pair<const char*, std::function<void()>>> ops{
      {"scatter_", [&] { scatter_(x, 0, idx({1, 0, 1}, Dims{1, 3}), src); }},
      {"scatter_add_", [&] { scatter_add_(x, 0, idx({1, 0, 1}, Dims{1, 3}), src); }},
      {"scatter_reduce_", [&] { scatter_reduce_(x, 0, idx({1, 0, 1}, Dims{1, 3}), src, "amax"); }},
      {"index_add_", [&] { index_add_(x, 0, idx({1}), src); }},
      {"index_copy_", [&] { index_copy_(x, 0, idx({1}), src); }},
      {"index_fill_", [&] { index_fill_(x, 1, idx({2}), 0.5); }},
      {"masked_fill_", [&] { masked_fill_(x, mask, 0.5); }},
      {"masked_scatter_", [&] { masked_scatter_(x, mask, src); }},
      {"index_put_", [&] { index_put_(x, {idx({0})}, src); }},
  };
  for (const auto& [name, op] : ops) {
    const std::string msg = error_of<Error>(op);
    EXPECT_TRUE(contains(msg, name) && contains(msg, "leaf tensor that requires grad")) << name << ": " << msg;
    EXPECT_EQ(values(x), (std::vector<double>{1, 2, 3, 4, 5, 6})) << name;
  }
  {
    autograd::NoGradGuard no_grad;  // allowed without grad mode, as in PyTorch (writes in place)
    const void* data = x.data_ptr();
    index_fill_(x, 1, idx({0}), 0.0);
    EXPECT_EQ(x.data_ptr(), data);
    EXPECT_EQ(values(x), (std::vector<double>{0, 2, 3, 0, 5, 6}));
  }
  EXPECT_TRUE(x.is_leaf());
}

TEST(IndexGrad, ChecksRunBeforeAnyWriteWithGrad) {
  const Tensor x = leaf_of({1, 2, 3, 4}, {4});
  Tensor h = mul(x, 2.0);
  const auto fn = h.grad_fn();
  EXPECT_THROW(scatter_(h, 0, idx({4}), from_vector<double>({9})), IndexError);
  EXPECT_THROW(index_add_(h, 0, idx({-1}), from_vector<double>({9})), IndexError);
  EXPECT_THROW(index_put_(h, {idx({7})}, from_vector<double>({9})), IndexError);
  EXPECT_THROW(masked_scatter_(h, from_vector<bool>({true, true, false, false}), from_vector<double>({9})), ValueError);
  EXPECT_THROW(masked_fill_(h, from_vector<bool>({true, false}), 0.0), ValueError);
  EXPECT_EQ(values(h), (std::vector<double>{2, 4, 6, 8}));
  EXPECT_EQ(h.grad_fn(), fn);  // history untouched
  // The bad write still lets the good graph run.
  h.sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2, 2, 2}));
}

TEST(IndexGrad, WithoutGradTheInPlaceFormsWriteSelfDirectly) {
  Tensor x = from_vector<double>({1, 2, 3, 4}, Dims{2, 2});
  const void* data = x.data_ptr();
  scatter_add_(x, 1, idx({1, 1}, Dims{1, 2}), from_vector<double>({10, 20}, Dims{1, 2}));
  index_put_(x, {idx({1})}, from_vector<double>({-1}), true);
  masked_fill_(x, from_vector<bool>({false, true}), 0.0);
  EXPECT_EQ(x.data_ptr(), data);
  EXPECT_EQ(values(x), (std::vector<double>{1, 0, 2, 0}));
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
}

TEST(IndexGrad, InPlaceOnNonLeafGivesTheResultHistory) {
  const Tensor x = leaf_of({1, 2, 3, 4}, {4}), s = leaf_of({10, 20}, {2});
  Tensor h = mul(x, 3.0);
  index_add_(h, 0, idx({3, 3}), s, 2);
  EXPECT_EQ(values(h), (std::vector<double>{3, 6, 9, 72}));
  mul(h, from_vector<double>({1, 2, 3, 4})).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 6, 9, 12}));
  EXPECT_EQ(values(s.grad()), (std::vector<double>{8, 8}));
}

// Sums of many gradients into few places give the same bits with 1 or 2 threads.
TEST(IndexGrad, GradientsDoNotDependOnThreads) {
  ThreadGuard guard;
  const int64_t n = 1 << 17;
  const Tensor src = random_tensor({n, 2}, kFloat32, Layout::Contiguous, 40).requires_grad_();
  const Tensor rows = remainder(arange(n), 7);
  const Tensor w = random_tensor({n, 2}, kFloat32, Layout::Contiguous, 41);
  auto grads = [&] {
    const Tensor t = take(src, remainder(mul(arange(2 * n), 31), 2 * n - 5));
    const Tensor ia = index_add(zeros({7, 2}), 0, rows, src);
    const Tensor sa = scatter_add(zeros({7, 2}), 0, rows.unsqueeze(1).expand({n, 2}).contiguous(), src);
    const Tensor ip = index_put(zeros({7, 2}), {rows}, src, true);
    const Tensor loss = add(add(mul(t, w.reshape({-1})).sum(), mul(index_select(ia, 0, rows), w).sum()),
                            add(mul(gather(sa, 0, rows.unsqueeze(1).expand({n, 2}).contiguous()), w).sum(),
                                mul(index(ip, {rows}), w).sum()));
    return autograd::grad({loss}, {src})[0];
  };
  set_num_threads(1);
  const Tensor one = grads();
  set_num_threads(2);
  EXPECT_TRUE(bitwise_equal(one, grads()));
}

}  // namespace
}  // namespace flambeau::testing
