// gradcheck (float64, central differences) over every differentiable op of ops.h, one
// table per family. Inputs stay away from kinks, domain edges and ties.
#include "test_util.h"

namespace flambeau::testing {
namespace {
using autograd::gradcheck;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Case {
  std::string name;
  Fn f;
  std::vector<Tensor> inputs;
};

Tensor leaf(const Dims& shape, uint64_t seed, double lo = -2, double hi = 2) {
  return random_tensor(shape, kFloat64, Layout::Contiguous, seed, lo, hi).requires_grad_();
}
Tensor leaf_of(const std::vector<double>& v, const Dims& shape) {
  return from_vector<double>(v, shape).requires_grad_();
}
// Values in ±[0.25, 1.35]: away from 0, from integers and halves (floor, round, abs, sign).
Tensor signed_leaf(const Dims& shape, uint64_t seed) {
  std::vector<double> v = random_values(numel_of(shape), seed, 0.25, 0.45, false);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 2 ? -1 : 1) * (v[i] + 0.1 * double(i % 10));
  return leaf_of(v, shape);
}
Tensor idx(const std::vector<int64_t>& v, std::optional<Dims> shape = {}) { return from_vector<int64_t>(v, shape); }
// A copy that is not a leaf: in-place ops are allowed on it.
Tensor nonleaf(const Tensor& t) { return mul(t, 1.0); }

void run(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    std::string report;
    EXPECT_TRUE(gradcheck(c.f, c.inputs, 1e-6, 1e-5, 1e-3, &report)) << c.name << ": " << report;
  }
}

// Every op of the unary schema (core/op_list.h), with no list to keep: an op is checked on
// signed values in ±[0.25, 1.35] (away from 0, integers, halves and tan's poles), or, where
// one of its results there is not finite (outside its domain: log, asin, ...), on the middle
// 80% of the schema's [lo, hi].
TEST(GradcheckAll, Unary) {
  const Tensor x = signed_leaf({2, 3}, 1);
  const Tensor pos = leaf({2, 3}, 2, 0.3, 1.4);
  std::vector<Case> cases;
  auto add_case = [&](const char* name, std::function<Tensor(const Tensor&)> op, double lo, double hi) {
    const bool in_domain = all(isfinite(op(x.detach()))).item<bool>();
    const double margin = 0.1 * (hi - lo);
    const Tensor sample = in_domain ? x : leaf({2, 3}, 2, lo + margin, hi - margin);
    cases.push_back({name, [op](const std::vector<Tensor>& in) { return op(in[0]); }, {sample}});
  };
#define FLB_CASE(name, kind, lo, hi) add_case(#name, [](const Tensor& t) { return flambeau::name(t); }, lo, hi);
  FLB_UNARY_OPS(FLB_CASE)
#undef FLB_CASE
  EXPECT_GE(cases.size(), 25u);
  cases.push_back({"gelu", [](auto& in) { return gelu(in[0]); }, {x}});
  cases.push_back({"gelu tanh", [](auto& in) { return gelu(in[0], "tanh"); }, {x}});
  cases.push_back({"softplus", [](auto& in) { return softplus(in[0], 2.0, 1.5); }, {x}});
  cases.push_back({"exp_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return exp_(h); }, {x}});
  cases.push_back({"sqrt_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return sqrt_(h); }, {pos}});
  run(cases);
}

TEST(GradcheckAll, BinaryWithBroadcasting) {
  const Tensor a = signed_leaf({2, 3}, 3), b = leaf({3}, 4, 0.6, 1.9), c = leaf({2, 1}, 5, 0.6, 1.9);
  const Tensor pa = leaf({2, 3}, 6, 0.5, 2.0);
  run({
      {"add alpha", [](auto& in) { return add(in[0], in[1], 2.5); }, {a, b}},
      {"sub alpha", [](auto& in) { return sub(in[0], in[1], -1.5); }, {a, c}},
      {"mul", [](auto& in) { return mul(in[0], in[1]); }, {a, c}},
      {"div", [](auto& in) { return div(in[0], in[1]); }, {a, b}},
      {"div floor (zero grad)", [](auto& in) { return div(in[0], in[1], "floor"); }, {a, b}},
      {"maximum", [](auto& in) { return maximum(in[0], in[1]); }, {a, b}},
      {"minimum", [](auto& in) { return minimum(in[0], in[1]); }, {a, c}},
      {"pow", [](auto& in) { return pow(in[0], in[1]); }, {pa, b}},
      {"pow scalar exponent", [](auto& in) { return pow(in[0], 3.0); }, {a}},
      {"pow scalar base", [](auto& in) { return pow(1.7, in[0]); }, {a}},
      {"atan2", [](auto& in) { return atan2(in[0], in[1]); }, {a, c}},
      {"remainder", [](auto& in) { return remainder(in[0], in[1]); }, {pa, leaf({3}, 7, 3.1, 3.3)}},
      {"scalar operands", [](auto& in) { return sub(div(mul(in[0], 2.0), 3.0), 1.0); }, {a}},
      {"add_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return add_(h, in[1], 2); }, {a, b}},
      {"mul_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return mul_(h, in[1]); }, {a, c}},
      {"div_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return div_(h, in[1]); }, {a, b}},
      {"pow_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return pow_(h, in[1]); }, {pa, b}},
  });
}

TEST(GradcheckAll, TernaryAndClamp) {
  const Tensor a = signed_leaf({2, 3}, 8), b = leaf({3}, 9, 0.6, 1.9), c = leaf({2, 1}, 10, 0.6, 1.9);
  const Tensor w = leaf({2, 3}, 11, 0.1, 0.9);
  const Tensor cond = from_vector<bool>({true, false, true, false, false, true}, Dims{2, 3});
  run({
      {"where", [&](auto& in) { return where(cond, in[0], in[1]); }, {a, b}},
      {"where broadcast cond", [&](auto& in) { return where(cond.select(0, 0), in[0], in[1]); }, {a, c}},
      {"clamp scalars", [](auto& in) { return clamp(in[0], -0.5, 0.8); }, {a}},
      {"clamp tensors", [](auto& in) { return clamp(in[0], neg(in[1]), in[2]); }, {a, b, c}},
      {"clamp max only", [](auto& in) { return clamp(in[0], std::nullopt, 0.3); }, {a}},
      {"clamp_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return clamp_(h, -0.5, 0.8); }, {a}},
      {"addcmul", [](auto& in) { return addcmul(in[0], in[1], in[2], 0.7); }, {a, b, c}},
      {"addcdiv", [](auto& in) { return addcdiv(in[0], in[1], in[2], -1.3); }, {a, b, c}},
      {"addcmul_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return addcmul_(h, in[1], in[2]); }, {a, b, c}},
      {"lerp", [](auto& in) { return lerp(in[0], in[1], in[2]); }, {a, c, w}},
      {"lerp_ in place", [](auto& in) { Tensor h = nonleaf(in[0]); return lerp_(h, in[1], in[2]); }, {a, c, w}},
  });
}

TEST(GradcheckAll, Reductions) {
  const Tensor x = leaf({3, 4, 2}, 12, 0.5, 2.0);  // positive: prod stays well scaled
  const Tensor s = signed_leaf({3, 4}, 13);
  // prod with one zero in a row and two zeros in another (the product of the others).
  const Tensor z = leaf_of({0.0, 1.5, -0.7, 1.2, 0.0, 2.0, 0.0, -1.1, 0.9, 1.3, 0.8, -1.4}, {3, 4});
  run({
      {"sum all", [](auto& in) { return sum(in[0]); }, {x}},
      {"sum dims keepdim", [](auto& in) { return sum(in[0], {0, 2}, true); }, {x}},
      {"mean", [](auto& in) { return mean(in[0], {-1}); }, {x}},
      {"mean keepdim", [](auto& in) { return mean(in[0], {0, 1}, true); }, {x}},
      {"prod all", [](auto& in) { return prod(in[0]); }, {x}},
      {"prod dims", [](auto& in) { return prod(in[0], {0, 2}, true); }, {x}},
      {"prod with zeros", [](auto& in) { return prod(in[0], {1}); }, {z}},
      {"prod all with zeros", [](auto& in) { return prod(in[0].narrow(0, 0, 1)); }, {z}},
      {"amax dims", [](auto& in) { return amax(in[0], {1, 2}); }, {x}},
      {"amin keepdim", [](auto& in) { return amin(in[0], {0}, true); }, {x}},
      {"max / min all", [](auto& in) { return add(max(in[0]), min(in[0])); }, {x}},
      {"max(dim)", [](auto& in) { return max(in[0], 1).first; }, {x}},
      {"min(dim) keepdim", [](auto& in) { return min(in[0], -1, true).first; }, {x}},
      {"var", [](auto& in) { return var(in[0], {1}); }, {x}},
      {"var correction 0 keepdim", [](auto& in) { return var(in[0], {0, 2}, 0, true); }, {x}},
      {"std", [](auto& in) { return flambeau::std(in[0], {}, 1); }, {x}},
      {"norm 2", [](auto& in) { return norm(in[0]); }, {s}},
      {"norm 1 dims", [](auto& in) { return norm(in[0], 1, {1}); }, {s}},
      {"norm inf", [](auto& in) { return norm(in[0], INFINITY, {0}, true); }, {s}},
      {"norm 3", [](auto& in) { return norm(in[0], 3, {1}); }, {s}},
      {"logsumexp", [](auto& in) { return logsumexp(in[0], {1}); }, {x}},
      {"logsumexp keepdim", [](auto& in) { return logsumexp(in[0], {0, 2}, true); }, {x}},
  });
}

TEST(GradcheckAll, Views) {
  const Tensor x = leaf({2, 3, 4}, 14);
  const Tensor w = arange(24, kFloat64).reshape({2, 3, 4});  // weights: every element matters
  run({
      {"view", [](auto& in) { return in[0].view({6, 4}); }, {x}},
      {"reshape (copy)", [](auto& in) { return in[0].transpose(0, 2).reshape({-1}); }, {x}},
      {"permute", [&](auto& in) { return mul(in[0], w).permute({2, 0, 1}); }, {x}},
      {"transpose", [](auto& in) { return in[0].transpose(0, 1); }, {x}},
      {"t", [](auto& in) { return in[0].select(2, 1).t(); }, {x}},
      {"expand", [](auto& in) { return in[0].narrow(2, 0, 1).expand({2, 3, 5}); }, {x}},
      {"broadcast_to", [](auto& in) { return in[0].select(0, 1).broadcast_to({2, 3, 4}); }, {x}},
      {"slice with step", [](auto& in) { return in[0].slice(2, 1, {}, 2); }, {x}},
      {"slice negative", [](auto& in) { return in[0].slice(1, -2); }, {x}},
      {"select", [](auto& in) { return in[0].select(1, -1); }, {x}},
      {"narrow", [](auto& in) { return in[0].narrow(2, 1, 2); }, {x}},
      {"squeeze / unsqueeze", [](auto& in) { return in[0].unsqueeze(1).narrow(3, 1, 1).squeeze(); }, {x}},
      {"squeeze dim", [](auto& in) { return in[0].narrow(0, 1, 1).squeeze(0); }, {x}},
      {"flatten", [](auto& in) { return in[0].flatten(1); }, {x}},
      {"unflatten", [](auto& in) { return in[0].unflatten(2, {2, 2}); }, {x}},
      {"view of a view", [](auto& in) { return in[0].transpose(1, 2).select(0, 0).slice(0, 1, 3); }, {x}},
  });
}

TEST(GradcheckAll, JoinsAndSoftmax) {
  const Tensor x = leaf({2, 3, 4}, 15), y = leaf({2, 1, 4}, 16);
  run({
      {"cat", [](auto& in) { return cat({in[0], mul(in[1], 2)}, 1); }, {x, y}},
      {"cat negative dim", [](auto& in) { return cat({in[0], in[0]}, -1); }, {x}},
      {"stack", [](auto& in) { return stack({in[0].select(1, 0), in[1].squeeze(1)}, 1); }, {x, y}},
      {"split", [](auto& in) { return mul(split(in[0], 3, 2)[0], split(in[0], {1, 3}, 2)[1]); }, {x}},
      {"chunk", [](auto& in) { return chunk(in[0], 2, 2)[1]; }, {x}},
      {"softmax", [](auto& in) { return softmax(in[0], 1); }, {x}},
      {"softmax last", [](auto& in) { return softmax(in[0], -1, kFloat64); }, {x}},
      {"log_softmax", [](auto& in) { return log_softmax(in[0], 0); }, {x}},
  });
}

TEST(GradcheckAll, Scans) {
  const Tensor x = leaf({3, 4}, 17);
  const Tensor z = leaf_of({1.2, 0.0, -0.7, 1.1, 0.0, 0.9, 0.0, -1.3, 0.8, 1.4, -0.6, 0.0}, {3, 4});
  const Tensor s = leaf_of({0.7}, Dims{});
  run({
      {"cumsum", [](auto& in) { return cumsum(in[0], 0); }, {x}},
      {"cumprod", [](auto& in) { return cumprod(in[0], 1); }, {x}},
      {"cumprod dim 0", [](auto& in) { return cumprod(in[0], 0); }, {x}},
      {"cumprod with zeros", [](auto& in) { return cumprod(in[0], 1); }, {z}},
      {"cumprod with zeros dim 0", [](auto& in) { return cumprod(in[0], -2); }, {z}},
      {"cumprod 0-dim", [](auto& in) { return cumprod(in[0], 0); }, {s}},
      {"cummax", [](auto& in) { return cummax(in[0], 1).first; }, {x}},
      {"cummin", [](auto& in) { return cummin(in[0], 0).first; }, {x}},
      {"logcumsumexp", [](auto& in) { return logcumsumexp(in[0], 1); }, {x}},
      {"logcumsumexp dim 0", [](auto& in) { return logcumsumexp(mul(in[0], 20.0), 0); }, {x}},
      {"logcumsumexp 0-dim", [](auto& in) { return logcumsumexp(in[0], 0); }, {s}},
  });
}

TEST(GradcheckAll, SortLike) {
  const Tensor x = leaf({3, 5}, 18);  // continuous random values: no ties
  run({
      {"sort", [](auto& in) { return sort(in[0], 1).first; }, {x}},
      {"sort descending dim 0", [](auto& in) { return sort(in[0], 0, true).first; }, {x}},
      {"topk", [](auto& in) { return topk(in[0], 2, 1).first; }, {x}},
      {"topk smallest", [](auto& in) { return topk(in[0], 3, 1, false).first; }, {x}},
      {"kthvalue", [](auto& in) { return kthvalue(in[0], 2, 0).first; }, {x}},
      {"kthvalue keepdim", [](auto& in) { return kthvalue(in[0], 4, 1, true).first; }, {x}},
      {"max with indices", [](auto& in) { return max(in[0], 0, true).first; }, {x}},
  });
}

TEST(GradcheckAll, MatrixProducts) {
  const Tensor a = leaf({3, 4}, 19), b = leaf({4, 2}, 20), v = leaf({4}, 21), u = leaf({3}, 22);
  const Tensor ba = leaf({2, 3, 4}, 23), bb = leaf({2, 4, 2}, 24), bias = leaf({2}, 25), self3 = leaf({3, 1}, 26);
  run({
      {"mm", [](auto& in) { return mm(in[0], in[1]); }, {a, b}},
      {"mm transposed", [](auto& in) { return mm(in[1].t(), in[0].t()); }, {a, b}},
      {"bmm", [](auto& in) { return bmm(in[0], in[1]); }, {ba, bb}},
      {"matmul 1-D x 1-D", [](auto& in) { return matmul(in[0], in[0]); }, {v}},
      {"matmul 1-D x 2-D", [](auto& in) { return matmul(in[0], in[1]); }, {v, b}},
      {"matmul 2-D x 1-D", [](auto& in) { return matmul(in[0], in[1]); }, {a, v}},
      {"matmul 3-D x 2-D", [](auto& in) { return matmul(in[0], in[1]); }, {ba, b}},
      {"matmul 2-D x 3-D", [](auto& in) { return matmul(in[0], in[1]); }, {a, bb}},
      {"matmul broadcast batch", [](auto& in) { return matmul(in[0].unsqueeze(1), in[1].unsqueeze(0)); }, {ba, bb}},
      {"addmm", [](auto& in) { return addmm(in[2], in[0], in[1], 0.5, 2); }, {a, b, bias}},
      {"addmm beta 0", [](auto& in) { return addmm(in[2], in[0], in[1], 0, 1); }, {a, b, self3}},
      {"baddbmm", [](auto& in) { return baddbmm(in[2], in[0], in[1], 0.5, -1.5); }, {ba, bb, self3}},
      {"linear", [](auto& in) { return linear(in[0], in[1].t(), in[2]); }, {a, b, bias}},
      {"linear 3-D no bias", [](auto& in) { return linear(in[0], in[1]); }, {ba, a}},
      {"outer", [](auto& in) { return outer(in[0], in[1]); }, {u, v}},
      {"dot", [](auto& in) { return dot(in[0], in[1]); }, {v, a.select(0, 1).detach().clone().requires_grad_()}},
  });
}

TEST(GradcheckAll, IndexingReads) {
  const Tensor x = leaf({4, 5}, 27), x3 = leaf({3, 4, 2}, 28);
  const Tensor mask = from_vector<bool>({true, false, false, true, true, false, true, false, true, true,
                                         false, false, true, false, true, true, false, true, false, false},
                                        Dims{4, 5});
  run({
      {"index_select dups", [](auto& in) { return index_select(in[0], 1, idx({4, 0, 4, 2})); }, {x}},
      {"index_select int32", [](auto& in) { return index_select(in[0], 0, idx({3, 1}).to(kInt32)); }, {x}},
      {"gather dups", [](auto& in) { return gather(in[0], 0, idx({0, 3, 3, 1, 2, 0, 0, 1, 2, 3}, Dims{2, 5})); }, {x}},
      {"embedding padding", [](auto& in) { return embedding(in[0], idx({1, 3, 1, 2}, Dims{2, 2}), 0); }, {x}},
      {"index two tensors", [](auto& in) { return index(in[0], {idx({0, 2, 2}), idx({4, 1, 4})}); }, {x}},
      {"index non-adjacent", [](auto& in) { return index(in[0], {idx({2, 0}), std::nullopt, idx({1})}); }, {x3}},
      {"index bool mask", [&](auto& in) { return index(in[0], {mask}); }, {x}},
      {"masked_select", [&](auto& in) { return masked_select(in[0], mask); }, {x}},
      {"masked_select broadcast self", [&](auto& in) { return masked_select(in[0].select(0, 1), mask); }, {x}},
      {"masked_select broadcast mask", [&](auto& in) { return masked_select(in[0], mask.select(0, 0)); }, {x}},
      {"take", [](auto& in) { return take(in[0], idx({-1, 3, 3, 19, 0, -20}, Dims{2, 3})); }, {x}},
  });
}

TEST(GradcheckAll, IndexingWrites) {
  const Tensor x = leaf({4, 5}, 29), src = leaf({3, 5}, 30), src2 = leaf({4, 3}, 31), v = leaf_of({0.9}, Dims{});
  const Tensor big = leaf({4, 6}, 37);  // more elements than the mask has true ones
  const Tensor uniq = idx({0, 3, 1, 2, 0, 2, 1, 3, 0, 1}, Dims{2, 5});  // distinct per column
  const Tensor dups = idx({0, 0, 4, 1, 1, 1, 3, 2, 3, 4, 4, 0}, Dims{4, 3});  // repeats along dim 1
  const Tensor mask = gt(random_tensor({4, 5}, kFloat64, Layout::Contiguous, 32), 0);
  std::vector<Case> cases{
      {"scatter", [&](auto& in) { return scatter(in[0], 0, uniq, in[1]); }, {x, src}},
      {"scatter src larger than index", [&](auto& in) { return scatter(in[0], 0, uniq.narrow(1, 0, 3), in[1]); },
       {x, src}},
      {"scatter scalar", [&](auto& in) { return scatter(in[0], 1, dups, 2.5); }, {x}},
      {"scatter_add dups", [&](auto& in) { return scatter_add(in[0], 1, dups, in[1]); }, {x, src2}},
      {"index_add alpha", [](auto& in) { return index_add(in[0], 0, idx({3, 0, 3}), in[1], 2.5); }, {x, src}},
      {"index_copy", [](auto& in) { return index_copy(in[0], 1, idx({4, 0, 2}), in[1]); }, {x, src2}},
      {"index_fill tensor value", [](auto& in) { return index_fill(in[0], 1, idx({-1, 1, 1}), in[1]); }, {x, v}},
      {"index_fill scalar", [](auto& in) { return index_fill(in[0], 0, idx({2}), -3.0); }, {x}},
      {"index_put", [](auto& in) { return index_put(in[0], {idx({2, 0}), idx({1, 4})}, in[1][0].narrow(0, 0, 2)); },
       {x, src}},
      {"index_put broadcast rows", [](auto& in) { return index_put(in[0], {idx({3, 1})}, in[1].select(0, 2)); },
       {x, src}},
      {"index_put accumulate dups", [](auto& in) { return index_put(in[0], {idx({1, 1, 3})}, in[1], true); }, {x, src}},
      {"index_put bool mask", [&](auto& in) { return index_put(in[0], {mask}, in[1]); }, {x, v}},
      {"masked_fill tensor value", [&](auto& in) { return masked_fill(in[0], mask, in[1]); }, {x, v}},
      {"masked_scatter", [&](auto& in) { return masked_scatter(in[0], mask, in[1]); }, {x, big}},
      {"masked_scatter broadcast mask", [&](auto& in) { return masked_scatter(in[0], mask.select(0, 1), in[1]); },
       {x, big}},
  };
  for (const char* r : {"sum", "mean", "prod", "amax", "amin"})
    for (bool include_self : {true, false})
      cases.push_back({std::string("scatter_reduce ") + r + (include_self ? "" : " exclude self"),
                       [&, r, include_self](auto& in) {
                         return scatter_reduce(in[0], 1, dups, in[1], r, include_self);
                       },
                       {x, src2}});
  run(cases);
}

TEST(GradcheckAll, ScatterReduceProdWithZeros) {
  // self: a zero at a scattered and at an untouched place; src: a single zero at target
  // (0, 0), two zeros meeting at target (2, 3).
  const Tensor self = leaf_of({0.0, 1.3, -0.8, 1.1, 0.7, 0.9, 0.0, 1.2, -1.4}, {3, 3});
  const Tensor src = leaf_of({0.0, 1.5, 0.8, 1.2, -0.9, 1.1, 0.0, 0.0, 1.3}, {3, 3});
  const Tensor index = idx({0, 0, 2, 1, 1, 0, 2, 2, 1}, Dims{3, 3});
  for (bool include_self : {true, false}) {
    run({{std::string("prod zeros include_self=") + (include_self ? "true" : "false"),
          [&](auto& in) { return scatter_reduce(in[0], 1, index, in[1], "prod", include_self); }, {self, src}}});
  }
}

TEST(GradcheckAll, InPlaceWritesOnNonLeaves) {
  const Tensor x = leaf({4, 5}, 33), src = leaf({3, 5}, 34), src2 = leaf({4, 3}, 35), v = leaf_of({-0.4}, Dims{});
  const Tensor uniq = idx({0, 3, 1, 2, 0, 2, 1, 3, 0, 1}, Dims{2, 5});
  const Tensor dups = idx({0, 0, 4, 1, 1, 1, 3, 2, 3, 4, 4, 0}, Dims{4, 3});
  const Tensor mask = gt(random_tensor({4, 5}, kFloat64, Layout::Contiguous, 36), 0);
  using Op = std::function<void(Tensor&, const std::vector<Tensor>&)>;
  auto on = [](Op op) -> Fn {  // op applied in place to a non-leaf copy of in[0]
    return [op](const std::vector<Tensor>& in) {
      Tensor h = nonleaf(in[0]);
      op(h, in);
      return h;
    };
  };
  run({
      {"scatter_", on([&](Tensor& h, auto& in) { scatter_(h, 0, uniq, in[1]); }), {x, src}},
      {"scatter_ scalar", on([&](Tensor& h, auto&) { scatter_(h, 1, dups, 1.5); }), {x}},
      {"scatter_add_", on([&](Tensor& h, auto& in) { scatter_add_(h, 1, dups, in[1]); }), {x, src2}},
      {"scatter_reduce_ amax", on([&](Tensor& h, auto& in) { scatter_reduce_(h, 1, dups, in[1], "amax"); }), {x, src2}},
      {"scatter_reduce_ prod", on([&](Tensor& h, auto& in) { scatter_reduce_(h, 1, dups, in[1], "prod", false); }),
       {x, src2}},
      {"index_add_", on([](Tensor& h, auto& in) { index_add_(h, 0, idx({1, 1, 2}), in[1], -2); }), {x, src}},
      {"index_copy_", on([](Tensor& h, auto& in) { index_copy_(h, 1, idx({3, 0, 1}), in[1]); }), {x, src2}},
      {"index_fill_", on([](Tensor& h, auto& in) { index_fill_(h, 0, idx({2, 0}), in[1]); }), {x, v}},
      {"masked_fill_", on([&](Tensor& h, auto& in) { masked_fill_(h, mask, in[1]); }), {x, v}},
      {"masked_scatter_", on([&](Tensor& h, auto& in) { masked_scatter_(h, mask, in[1]); }), {x, src}},
      {"index_put_", on([](Tensor& h, auto& in) { index_put_(h, {idx({0, 3})}, in[1].select(0, 1)); }), {x, src}},
      {"index_put_ accumulate", on([](Tensor& h, auto& in) { index_put_(h, {idx({2, 2, 0})}, in[1], true); }),
       {x, src}},
      // self needs no grad: only src does; self takes the history of the result.
      {"index_add_ into zeros",
       [](auto& in) {
         Tensor z = zeros({4, 5}, kFloat64);
         return index_add_(z, 0, idx({3, 3, 0}), in[0]);
       },
       {src}},
      {"scatter_ into zeros",
       [&](auto& in) {
         Tensor z = zeros({4, 5}, kFloat64);
         return scatter_(z, 0, uniq, in[0]);
       },
       {src}},
  });
}

// Sampling in place cuts the history (zero gradient, as PyTorch) and refuses leaves.
TEST(GradcheckAll, InPlaceSamplersGiveZeroGradient) {
  const Tensor x = leaf({2, 3}, 38);
  const std::vector<std::pair<const char*, std::function<void(Tensor&)>>> samplers{
      {"uniform_", [](Tensor& t) { uniform_(t, -1, 1); }},
      {"normal_", [](Tensor& t) { normal_(t); }},
      {"exponential_", [](Tensor& t) { exponential_(t); }},
      {"bernoulli_", [](Tensor& t) { bernoulli_(t, 0.5); }},
  };
  for (const auto& [name, sample] : samplers) {
    Tensor h = mul(x, 2.0);
    sample(h);
    EXPECT_TRUE(h.requires_grad()) << name;
    const Tensor g = autograd::grad({add(h, x).sum()}, {x})[0];  // only the direct path counts
    EXPECT_EQ(values(g), std::vector<double>(6, 1.0)) << name;
    Tensor leaf_x = x.detach().clone().requires_grad_();
    EXPECT_TRUE(contains(error_of<Error>([&] { sample(leaf_x); }), "leaf tensor that requires grad")) << name;
    EXPECT_TRUE(bitwise_equal(leaf_x.detach(), x.detach())) << name;
  }
  const Tensor p = leaf({4}, 39, 0.2, 0.8);
  const Tensor b = bernoulli(p);
  EXPECT_EQ(values(autograd::grad({b.sum()}, {p})[0]), std::vector<double>(4, 0.0));
}

}  // namespace
}  // namespace flambeau::testing
