// flambeau::compiler: tracing through the op hook, the graph IR and its passes, guards and
// retracing, breaks (fullgraph raises naming the op; otherwise eager), the backend registry,
// and the "eager" backend's results (bitwise equal to the function run eagerly).
#include <gtest/gtest.h>

#include "flambeau/compile/compile.h"
#include "flambeau/flambeau.h"
#include "test_util.h"

using namespace flambeau;
using namespace flambeau::compiler;
using flambeau::testing::bitwise_equal;

namespace {

Tensor seeded(const Dims& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat32, gen);
}

// A pointwise chain with a repeated subexpression and a dead one.
std::vector<Tensor> chain(const std::vector<Tensor>& in) {
  const Tensor& x = in[0];
  Tensor a = sin(x) * 2.0;
  Tensor b = sin(x) * 2.0;  // the same as a (CSE)
  (void)exp(x);             // unused (dead code)
  return {tanh(a + b) - x};
}

// Collects warnings while alive.
struct Warnings {
  std::vector<std::string> seen;
  Warnings() {
    set_warning_handler([this](const std::string& m) { seen.push_back(m); });
  }
  ~Warnings() { set_warning_handler(nullptr); }
};

}  // namespace

TEST(Compile, TracesTheOpsAndReplaysThemBitwise) {
  Compiled f = compile(chain, {"eager"});
  const Tensor x = seeded({4, 5}, 1);
  const std::vector<Tensor> first = f({x});  // the traced (eager) run
  ASSERT_EQ(f.traces(), 1u);
  const std::vector<Tensor> again = f({x});  // the backend
  EXPECT_TRUE(bitwise_equal(first[0], chain({x})[0]));
  EXPECT_TRUE(bitwise_equal(again[0], first[0]));
  // CSE merged the second sin(x) * 2 and DCE dropped it and exp: sin, mul, add, tanh, sub.
  const Graph& g = f.graph(0);
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.op);
  EXPECT_EQ(ops, (std::vector<std::string>{"sin", "mul", "add", "tanh", "sub"})) << g.str();
  EXPECT_NE(g.str().find("= sin(%0)"), std::string::npos) << g.str();
  EXPECT_NE(g.to_dot().find("digraph"), std::string::npos);
}

TEST(Compile, RetracesOnAGuardFailureUpToTheLimitThenRunsEagerly) {
  Warnings w;
  Compiled f = compile(chain, {"eager", false, 2});
  (void)f({seeded({4, 5}, 1)});
  (void)f({seeded({4, 5}, 2)});  // same guards: no new trace
  EXPECT_EQ(f.traces(), 1u);
  (void)f({seeded({3, 5}, 3)});  // another shape
  (void)f({seeded({4, 5}, 4).to(kFloat64)});  // another dtype: over the limit of 2
  EXPECT_EQ(f.traces(), 2u);
  ASSERT_EQ(w.seen.size(), 1u);
  EXPECT_NE(w.seen[0].find("cache_size_limit"), std::string::npos);
  const Tensor x = seeded({4, 5}, 4).to(kFloat64);
  EXPECT_TRUE(bitwise_equal(f({x})[0], chain({x})[0]));
  // Strides are guarded: a transposed input is another trace (eager: same values).
  Compiled g = compile(chain, {"eager"});
  const Tensor y = seeded({5, 4}, 5).t();
  (void)g({seeded({4, 5}, 6)});
  EXPECT_TRUE(bitwise_equal(g({y})[0], chain({y})[0]));
  EXPECT_EQ(g.traces(), 2u);
}

TEST(Compile, ABreakRaisesUnderFullgraphAndRunsEagerlyOtherwise) {
  auto reads = [](const std::vector<Tensor>& in) {
    const double m = in[0].sum().item<double>();  // a value read: the trace breaks here
    return std::vector<Tensor>{in[0] * m};
  };
  Compiled strict = compile(reads, {"eager", true});
  try {
    (void)strict({seeded({3}, 1)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'item'"), std::string::npos) << e.what();
  }
  Warnings w;
  Compiled lenient = compile(reads, {"eager"});
  for (uint64_t seed : {1, 2}) {  // data-dependent: each call's own value
    const Tensor x = seeded({3}, seed);
    EXPECT_TRUE(bitwise_equal(lenient({x})[0], reads({x})[0]));
  }
  EXPECT_EQ(w.seen.size(), 1u);
  // nonzero's shape depends on the values.
  Compiled nz = compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{nonzero(in[0])}; },
                        {"eager", true});
  EXPECT_THROW((void)nz({seeded({4}, 1)}), Error);
}

TEST(Compile, BreakTraceAndIsTracing) {
  bool seen_tracing = false;
  auto fn = [&](const std::vector<Tensor>& in) {
    seen_tracing = is_tracing();
    Tensor y = sin(in[0]);
    break_trace("my_disabled_fn", "compiler.disable");
    return std::vector<Tensor>{y + 1.0};
  };
  EXPECT_FALSE(is_tracing());
  Compiled f = compile(fn, {"eager", true});
  try {
    (void)f({seeded({2}, 1)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("my_disabled_fn"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(seen_tracing);
  EXPECT_FALSE(is_tracing());
}

TEST(Compile, ConstantsAreHeldByReferenceAndInPlaceOpsReplayInOrder) {
  Tensor w = seeded({5}, 7);  // a "parameter" the function reads
  auto fn = [&w](const std::vector<Tensor>& in) {
    Tensor y = in[0] * w;
    y.add_(1.0);
    return std::vector<Tensor>{y.relu()};
  };
  Compiled f = compile(fn, {"eager"});
  const Tensor x = seeded({5}, 8);
  (void)f({x});
  {
    autograd::NoGradGuard no_grad;
    w.mul_(3.0);  // an optimizer step: the graph sees it
  }
  EXPECT_TRUE(bitwise_equal(f({x})[0], fn({x})[0]));
}

TEST(Compile, TheEagerBackendIsDifferentiable) {
  Tensor w = seeded({5}, 9).requires_grad_();
  auto fn = [&w](const std::vector<Tensor>& in) { return std::vector<Tensor>{(tanh(in[0] * w)).sum()}; };
  Compiled f = compile(fn, {"eager"});
  const Tensor x = seeded({5}, 10);
  (void)f({x});
  f({x})[0].backward();
  const Tensor g1 = w.grad().clone();
  w.set_grad(Tensor());
  fn({x})[0].backward();
  EXPECT_TRUE(bitwise_equal(g1, w.grad()));
}

TEST(Compile, TheBackendRegistry) {
  int calls = 0;
  register_backend("counting", [&calls](const Graph& g, const std::vector<Tensor>&) {
    ++calls;
    return run_eagerly(g);
  });
  const auto names = list_backends();
  EXPECT_NE(std::find(names.begin(), names.end(), "counting"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "eager"), names.end());  // tagged "debug"
  const auto all = list_backends({});
  EXPECT_NE(std::find(all.begin(), all.end(), "eager"), all.end());
  const std::string before = get_default_backend();
  set_default_backend("counting");
  Compiled f = compile(chain);
  (void)f({seeded({2}, 1)});
  (void)f({seeded({2}, 2)});
  EXPECT_EQ(calls, 1);
  set_default_backend(before);
  EXPECT_THROW(set_default_backend("no-such-backend"), ValueError);
  EXPECT_THROW(compile(chain, {"no-such-backend"}), ValueError);
  register_backend("raising", [](const Graph&, const std::vector<Tensor>&) -> CompiledFn {
    throw ValueError("backend failed");
  });
  Compiled r = compile(chain, {"raising"});
  EXPECT_THROW((void)r({seeded({2}, 1)}), ValueError);
}

TEST(Compile, TheSameTensorTwiceIsGuarded) {
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor a = in[0];
    a.add_(1.0);  // seen through in[1] when they are one tensor
    return std::vector<Tensor>{a * in[1]};
  };
  Compiled f = compile(fn, {"eager"});
  auto run = [&](bool same) {
    Tensor x = seeded({3}, 1), y = same ? x : seeded({3}, 1);
    Tensor x2 = seeded({3}, 1), y2 = same ? x2 : seeded({3}, 1);
    EXPECT_TRUE(bitwise_equal(f({x, y})[0], fn({x2, y2})[0])) << same;
  };
  run(true);
  run(false);
  run(true);
  EXPECT_EQ(f.traces(), 2u);
}

// x * 1, x / 1, x - 0 and neg(neg(x)) read as x (results stay eager's bits); what is
// computed from a parameter is not folded (test_compile.py folds a tensor the function
// made). A graph that writes is left as it is.
TEST(Compile, ConstantFoldingAndAlgebraicSimplification) {
  Tensor param = seeded({5}, 6);
  auto fn = [&param](const std::vector<Tensor>& in) {
    const Tensor x = ((in[0] * 1.0 - 0.0) / 1.0);  // simplified away
    return std::vector<Tensor>{x * (param * 2.0) + neg(neg(in[0]))};  // param * 2: not folded
  };
  Compiled f = compile(fn, {"eager"});
  const Tensor x = seeded({3, 5}, 4);
  (void)f({x});
  EXPECT_TRUE(bitwise_equal(f({x})[0], fn({x})[0]));
  std::vector<std::string> ops;
  for (const auto& n : f.graph(0).nodes) ops.push_back(n.op);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "neg"), 0) << f.graph(0).str();
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "div"), 0) << f.graph(0).str();
  EXPECT_EQ(ops, (std::vector<std::string>{"mul", "mul", "add"})) << f.graph(0).str();
  {
    autograd::NoGradGuard no_grad;
    param.mul_(3.0);  // the parameter changes: the graph sees it
  }
  EXPECT_TRUE(bitwise_equal(f({x})[0], fn({x})[0]));
  // x + 0 is not x (-0.0 + 0 = +0.0), and a graph output is a fresh tensor: both stay.
  auto plus_zero = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0] + 0.0, in[0] * 1.0}; };
  Compiled g = compile(plus_zero, {"eager"});
  const Tensor z = full({2}, -0.0);
  (void)g({z});
  const std::vector<Tensor> out = g({z});
  EXPECT_EQ(g.graph(0).nodes.size(), 2u);
  EXPECT_TRUE(bitwise_equal(out[0], plus_zero({z})[0]));
  EXPECT_NE(out[1].impl(), z.impl());
  // In-place ops: nothing is folded or bypassed.
  auto writes = [](const std::vector<Tensor>& in) {
    Tensor r = arange(0, 2, 1, kFloat32);
    r.mul_(2.0);
    return std::vector<Tensor>{in[0] * 1.0 + r};
  };
  Compiled w = compile(writes, {"eager"});
  const Tensor y = seeded({2}, 5);
  (void)w({y});
  EXPECT_TRUE(bitwise_equal(w({y})[0], writes({y})[0]));
  EXPECT_TRUE(bitwise_equal(w({y})[0], writes({y})[0]));  // the arange is made anew each call
}

// A factory's tensor is a constant of the graph (folded with what follows from it); one the
// function writes in place or returns breaks the trace (it would carry over between calls).
// A factory's tensor is a constant of the graph; one the function writes in place (through
// a view too) or returns is made anew on each call (a clone of the constant as made).
TEST(Compile, FactoriesMakeConstantsAndFreshTensorsWhereWrittenOrReturned) {
  auto ramp = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] * (arange(0, 5, 1, kFloat32) * 0.5 + 1.0)};
  };
  Compiled f = compile(ramp, {"eager", true});
  const Tensor x = seeded({3, 5}, 7);
  (void)f({x});
  EXPECT_TRUE(bitwise_equal(f({x})[0], ramp({x})[0]));
  ASSERT_EQ(f.graph(0).nodes.size(), 1u) << f.graph(0).str();  // the ramp folded: one mul
  auto accumulates = [](const std::vector<Tensor>& in) {
    Tensor acc = zeros({4});
    acc.view({2, 2}).add_(in[0]);  // written through a view
    return std::vector<Tensor>{acc * 2.0};
  };
  Compiled acc = compile(accumulates, {"eager", true});
  for (uint64_t seed : {1, 2, 3}) {  // nothing carries over between calls
    const Tensor y = seeded({2, 2}, seed);
    EXPECT_TRUE(bitwise_equal(acc({y})[0], accumulates({y})[0]));
  }
  EXPECT_EQ(acc.graph(0).nodes[0].op, "clone") << acc.graph(0).str();
  auto returns = [](const std::vector<Tensor>&) { return std::vector<Tensor>{zeros({2})}; };
  Compiled ret = compile(returns, {"eager", true});
  const Tensor a = ret({x})[0], b = ret({x})[0], c = ret({x})[0];
  EXPECT_NE(b.impl(), c.impl());
  EXPECT_TRUE(bitwise_equal(c, zeros({2})));
}
