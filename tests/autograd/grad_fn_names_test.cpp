// Backward nodes carry PyTorch 2.13's names (tests/python/test_grad_fn_names.py compares
// the whole op table with torch; these are a few names checked without Python).
#include "test_util.h"

namespace flambeau::testing {
namespace {

std::string node_of(const Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "<none>"; }

TEST(GradFnNames, AsPyTorch) {
  const Tensor x = random_tensor({3, 4}, kFloat32, Layout::Contiguous, 1).requires_grad_();
  const Tensor y = random_tensor({3, 4}, kFloat32, Layout::Contiguous, 2).requires_grad_();
  EXPECT_EQ(node_of(exp(x)), "ExpBackward0");
  EXPECT_EQ(node_of(log1p(x)), "Log1PBackward0");
  EXPECT_EQ(node_of(floor(x)), "FloorBackward0");
  EXPECT_EQ(node_of(mul(x, y)), "MulBackward0");
  EXPECT_EQ(node_of(add(x, y)), "AddBackward0");
  EXPECT_EQ(node_of(pow(x, 2.0)), "PowBackward0");   // a number as exponent
  EXPECT_EQ(node_of(pow(x, y)), "PowBackward1");
  EXPECT_EQ(node_of(pow(2.0, x)), "PowBackward2");   // a number as base
  EXPECT_EQ(node_of(sum(x)), "SumBackward0");
  EXPECT_EQ(node_of(sum(x, {1})), "SumBackward1");
  EXPECT_EQ(node_of(mean(x)), "MeanBackward0");
  EXPECT_EQ(node_of(max(x)), "MaxBackward1");
  EXPECT_EQ(node_of(max(x, 0).first), "MaxBackward0");
  EXPECT_EQ(node_of(var(x, {0})), "VarBackward0");
  EXPECT_EQ(node_of(mm(x, y.t())), "MmBackward0");
  EXPECT_EQ(node_of(x.view({12})), "ViewBackward0");
  EXPECT_EQ(node_of(x.t()), "TBackward0");
  EXPECT_EQ(node_of(x.transpose(0, 1)), "TransposeBackward0");
  EXPECT_EQ(node_of(x.t().reshape({12})), "UnsafeViewBackward0");  // a copy
  EXPECT_EQ(node_of(softmax(x, 1)), "SoftmaxBackward0");
  EXPECT_EQ(node_of(log_softmax(x, 1)), "LogSoftmaxBackward0");
  EXPECT_EQ(node_of(index_select(x, 0, from_vector<int64_t>({2, 0}))), "IndexSelectBackward0");
  EXPECT_EQ(node_of(cat({x, y}, 0)), "CatBackward0");
  EXPECT_EQ(node_of(x.to(kFloat64)), "ToCopyBackward0");
  EXPECT_EQ(node_of(x.clone()), "CloneBackward0");
  Tensor h = mul(x, 1.0);
  exp_(h);  // in place: the out-of-place op's node
  EXPECT_EQ(node_of(h), "ExpBackward0");
}

}  // namespace
}  // namespace flambeau::testing
