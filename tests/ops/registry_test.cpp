// The op registry (ops/registry.h): every schema op callable by name, defaults from the
// schema, checked arguments, custom ops, and, generated from the schemas, the op hook
// naming each call after its schema and gradcheck of every differentiable op.
#include <map>
#include <set>

#include "flambeau/core/op_hook.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/registry.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

Tensor first(const std::vector<Value>& r) { return std::get<Tensor>(r.at(0)); }
void expect_equal(const Tensor& a, const Tensor& b) { EXPECT_TRUE(bitwise_equal(a, b)) << a << "\n" << b; }
template <class ErrT, class F>
void expect_error(F&& f, const std::string& part) {
  const std::string message = error_of<ErrT>(f);
  EXPECT_TRUE(contains(message, part)) << "'" << message << "' lacks '" << part << "'";
}

TEST(Registry, EverySchemaOpHasAKernel) {
  const std::vector<std::string> names = registered_ops();
  std::set<std::string> registered(names.begin(), names.end());
  for (const OpSchema& op : op_schemas()) EXPECT_TRUE(registered.count(op.qualified_name())) << op.text;
  EXPECT_EQ(find_op("sum")->schema.text, op_schema("sum").text);
  EXPECT_EQ(find_op("no_such_op"), nullptr);
}

TEST(Registry, CallsByNameAsTheFunctionsWithTheSchemaDefaults) {
  const Tensor x = random_tensor({3, 4, 5}, kFloat64, Layout::Contiguous, 1);
  expect_equal(first(call_op("sum", {x})), sum(x));
  expect_equal(first(call_op("sum", {x, Dims{1}, true})), sum(x, {1}, true));
  expect_equal(first(call_op("sum", {x, int64_t(2)})), sum(x, {2}));  // int[] takes one int
  expect_equal(first(call_op("var", {x, Dims{0}, Value(), false, 0.0})), var(x, {0}, 0.0));
  expect_equal(first(call_op("add", {x, 2.5, Scalar(2)})), add(x, Tensor(Scalar(2.5)), 2));
  expect_equal(first(call_op("gelu", {x})), gelu(x, "none"));
  const std::vector<Value> both = call_op("max", {x, int64_t(1)});
  ASSERT_EQ(both.size(), 2u);
  expect_equal(std::get<Tensor>(both[1]), max(x, 1).second);
  expect_equal(first(call_op("max", {x})), max(x));
  const std::vector<Value> parts = call_op("split", {x, int64_t(2), int64_t(1)});
  EXPECT_EQ(std::get<std::vector<Tensor>>(parts.at(0)).size(), 2u);
  EXPECT_EQ(std::get<std::vector<Tensor>>(call_op("split", {x, Dims{1, 3}, int64_t(1)}).at(0))[1].size(1), 3);
  const Tensor w = random_tensor({6, 5}, kFloat64, Layout::Contiguous, 2);  // nn.functional's ops too
  expect_equal(first(call_op("linear", {x, w})), nn::functional::linear(x, w));
  expect_equal(first(call_op("layer_norm", {x, Dims{5}})), nn::functional::layer_norm(x, {5}));
  Tensor y = zeros({2}, kFloat64);
  call_op("fill_", {y, 3.0});
  expect_equal(y, full({2}, 3.0, kFloat64));  // in place, on the caller's tensor
}

TEST(Registry, DefaultValuesAsWritten) {
  const OpSchema op = parse_schema(
      "f(int a=-1, float b=2.5, bool c=True, str d=\"none\", int[] e=[1, 2], Tensor? g=None, Scalar h=1) -> Tensor");
  const std::vector<Value> expected = {int64_t(-1), 2.5, true, std::string("none"), Dims{1, 2}, Value(), int64_t(1)};
  for (size_t i = 0; i < expected.size(); ++i) {
    const Value got = default_value(op.arguments[i]);
    ASSERT_EQ(got.index(), expected[i].index()) << i;
    std::visit([&](const auto& want) {
      using T = std::decay_t<decltype(want)>;
      if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> || std::is_same_v<T, bool> ||
                    std::is_same_v<T, std::string> || std::is_same_v<T, Dims>)
        EXPECT_EQ(std::get<T>(got), want) << i;
    }, expected[i]);
  }
}

TEST(Registry, BadCallsNameTheOpAndTheArgument) {
  const Tensor x = ones({2, 3});
  expect_error<ValueError>([&] { call_op("no_such_op", {x}); }, "[call_op] no op named 'no_such_op'");
  expect_error<TypeError>([&] { call_op("sum", {x, Dims{0}, std::string("yes")}); },
                          "[call_op] sum: argument 'keepdim' must be bool");
  expect_error<TypeError>([&] { call_op("transpose", {x, int64_t(0)}); },
                          "[call_op] transpose: missing argument 'dim1'");
  expect_error<TypeError>([&] { call_op("exp", {x, x}); }, "[call_op] exp takes 1 arguments, got 2");
  expect_error<TypeError>([&] { call_op("cat", {x}); }, "argument 'tensors' must be Tensor[]");
}

TEST(Registry, CustomOpsRegisterWithTheirSchema) {
  register_op("testlib::scaled(Tensor x, float scale=2.0) -> Tensor", [](const std::vector<Value>& a) {
    return std::vector<Value>{mul(std::get<Tensor>(a[0]), Tensor(Scalar(std::get<double>(a[1]))))};
  });
  const Tensor x = full({3}, 1.5, kFloat64);
  expect_equal(first(call_op("testlib::scaled", {x})), full({3}, 3.0, kFloat64));
  expect_equal(first(call_op("testlib::scaled", {x, 4.0})), full({3}, 6.0, kFloat64));
  expect_error<ValueError>([] { register_op("testlib::scaled(Tensor x) -> Tensor", [](const auto&) {
    return std::vector<Value>{};
  }); }, "already registered");
  expect_error<ValueError>([] { register_op("sum(Tensor x) -> Tensor", [](const auto&) {
    return std::vector<Value>{};
  }); }, "an op named 'sum' is already registered");
  expect_error<ValueError>([] { register_op("testlib::bad(Tensr x) -> Tensor", [](const auto&) {
    return std::vector<Value>{};
  }); }, "[parse_schema] unexpected type 'Tensr'");
}

// Generated samples: each op whose required arguments these rules fill (a first Tensor
// argument; others by name) is called with them alone, inputs in [0.5, 2] (inside every
// domain but the unary table's, which gives its own range).
const std::map<std::string, int64_t> kIntArgs = {{"dim", 1}, {"k", 2}, {"dim0", 0}, {"dim1", 2},
                                                 {"index", 1}, {"start", 1}, {"length", 2}, {"chunks", 2}};
const std::set<std::string> kTensorArgs = {"other", "end", "weight", "tensor1", "tensor2"};
// Samples that are not defined for these inputs.
const std::set<std::string> kRejected = {"t", "matmul", "clamp", "diag", "trace", "bincount",
                                         // square matrices only
                                         "linalg_det", "linalg_slogdet", "linalg_inv", "linalg_cholesky", "linalg_eigh",
                                         "linalg_eigvalsh"};
// Ops with floating results and no derivative, as in torch.
const std::set<std::string> kNoDerivative = {"histc"};

std::optional<std::vector<Value>> sample(const OpSchema& op, uint64_t seed) {
  std::map<std::string, std::pair<double, double>> domains;
#define FLB_DOMAIN(name, kind, lo, hi) domains[#name] = {lo, hi};
  FLB_UNARY_OPS(FLB_DOMAIN)
#undef FLB_DOMAIN
  auto [lo, hi] = domains.count(op.name) ? domains[op.name] : std::pair{0.5, 2.0};
  std::vector<Value> args;
  if (op.variants == OpVariants::Functional) return std::nullopt;  // nn's arguments have shapes of their own
  for (size_t i = 0; i < op.arguments.size(); ++i) {
    const SchemaArg& a = op.arguments[i];
    if (a.kind == ArgKind::Generator || kRejected.count(op.name)) return std::nullopt;
    if (i > 0 && a.default_value) break;
    if (a.kind == ArgKind::Tensor && !a.list && (i == 0 || kTensorArgs.count(a.name)))
      args.push_back(random_tensor({2, 3, 4}, kFloat64, Layout::Contiguous, seed + i, lo, hi));
    else if (a.kind == ArgKind::Int && kIntArgs.count(a.name))
      args.push_back(a.list ? Value(Dims{kIntArgs.at(a.name)}) : Value(kIntArgs.at(a.name)));
    else
      return std::nullopt;
  }
  return args;
}

// Ops the op hook reports under another name: their C++ kernel is another public op.
const std::map<std::string, std::string> kReportedAs = {{"expand_as", "expand"}, {"view_as", "view"}};

TEST(Registry, TheOpHookNamesEachCallAfterItsSchema) {
  int sampled = 0;
  for (const OpSchema& op : op_schemas()) {
    std::optional<std::vector<Value>> args = sample(op, 7);
    if (!args) continue;
    ++sampled;
    std::vector<std::string> seen;
    // Removed however call_op leaves (it captures `seen`, a local).
    struct Listener {
      int id;
      ~Listener() { op_hook::remove_listener(id); }
    } listener{op_hook::add_listener([&](const op_hook::OpCall& c) { seen.emplace_back(c.name); })};
    call_op(op.qualified_name(), *args);
    const std::string expected = kReportedAs.count(op.name) ? kReportedAs.at(op.name) : op.name;
    EXPECT_EQ(seen, std::vector<std::string>{expected}) << op.text;
  }
  EXPECT_GT(sampled, 90);
}

TEST(Registry, GradcheckEveryGeneratedDifferentiableOp) {
  int checked = 0;
  for (const OpSchema& op : op_schemas()) {
    if (op.name.back() == '_') continue;  // in place (tests/autograd/inplace_test.cpp)
    std::optional<std::vector<Value>> args = sample(op, 11);
    if (!args) continue;
    std::vector<Tensor> inputs;
    for (Value& v : *args)
      if (auto* t = std::get_if<Tensor>(&v)) inputs.push_back(t->requires_grad_());
    auto f = [&](const std::vector<Tensor>& xs) {
      std::vector<Value> a = *args;
      size_t k = 0;
      for (Value& v : a)
        if (std::holds_alternative<Tensor>(v)) v = xs[k++];
      const std::vector<Value> r = call_op(op.qualified_name(), a);
      return std::holds_alternative<Tensor>(r.at(0)) ? std::get<Tensor>(r[0])
                                                     : std::get<std::vector<Tensor>>(r[0]).at(0);
    };
    const Tensor out = f(inputs);
    if (!is_floating(out.dtype()) || kNoDerivative.count(op.name)) {
      EXPECT_FALSE(out.requires_grad()) << op.text;
      continue;
    }
    EXPECT_TRUE(out.requires_grad()) << op.text << ": no derivative";
    std::string report;
    EXPECT_TRUE(autograd::gradcheck(f, inputs, 1e-6, 1e-5, 1e-3, &report)) << op.text << ": " << report;
    ++checked;
  }
  EXPECT_GT(checked, 70);
}

}  // namespace
}  // namespace flambeau::testing
