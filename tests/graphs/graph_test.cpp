// Graph capture: replays give eager's bits (an MLP, in-place ops and views), inputs copied
// into the static inputs are seen, the default generator continues its stream, the edges
// of a hand-built graph are its data dependencies, correlation ids match the profiler's,
// and what cannot be replayed is refused by name.
#include "flambeau/graphs/graph.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "flambeau/flambeau.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau {
namespace {

using graphs::Graph;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.sizes() != b.sizes() || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel()) * x.element_size()) == 0;
}

Tensor seeded(const Dims& shape, uint64_t seed) {
  Generator g(seed);
  return randn(shape, kFloat32, g);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(Graphs, MlpReplayGivesEagerBits) {
  manual_seed(1);
  nn::Linear l1(32, 64), l2(64, 16);
  auto mlp = [&](const Tensor& x) { return l2(gelu(l1(x))); };
  Tensor static_in = seeded({8, 32}, 2);
  Graph g;
  g.capture_begin();
  const Tensor out = mlp(static_in);
  g.capture_end();
  for (uint64_t seed : {3, 4}) {
    const Tensor x = seeded({8, 32}, seed);
    static_in.copy_(x);
    g.replay();
    autograd::NoGradGuard no_grad;
    EXPECT_TRUE(same_bits(out, mlp(x))) << "seed " << seed;
  }
}

TEST(Graphs, InPlaceOpsAndViewsReplay) {
  Tensor x = seeded({4, 6}, 5);
  Graph g;
  g.capture_begin();
  Tensor t = mul(x, 2.0);
  Tensor rows = t.narrow(0, 1, 2);  // a view: no node, it sees t's buffer
  rows.add_(1.0);
  Tensor acc = zeros({6});
  acc.add_(t.sum(Dims{0}));
  acc.mul_(x[0]);
  const Tensor out = exp(acc);
  g.capture_end();
  const Tensor fresh = seeded({4, 6}, 6);
  x.copy_(fresh);
  g.replay();
  Tensor t2 = mul(fresh, 2.0);
  t2.narrow(0, 1, 2).add_(1.0);
  const Tensor expected = exp(mul(add(zeros({6}), t2.sum(Dims{0})), fresh[0]));
  EXPECT_TRUE(same_bits(out, expected));
  EXPECT_TRUE(same_bits(t, t2));
  g.replay();  // replays from the start: the constant zeros() is restored first
  EXPECT_TRUE(same_bits(out, expected));
}

TEST(Graphs, DefaultGeneratorContinuesItsStream) {
  manual_seed(7);
  const Tensor first = randn({5}), second = randn({5}), third = randn({5});
  manual_seed(7);
  Graph g;
  g.capture_begin();
  const Tensor r = randn({5});
  g.capture_end();
  EXPECT_TRUE(same_bits(r, first));
  g.replay();
  EXPECT_TRUE(same_bits(r, second));
  EXPECT_TRUE(same_bits(randn({5}), third));  // eager draws continue after the replay's
}

TEST(Graphs, EdgesAreTheDataDependencies) {
  const Tensor x = seeded({3, 3}, 8), w = seeded({3, 3}, 9);
  Graph g;
  g.capture_begin();
  Tensor a = mm(x, w);  // 0: reads x, w
  Tensor b = exp(x);    // 1: reads x
  a.add_(b);            // 2: reads a (0) and b (1), writes a
  const Tensor c = mul(a, 2.0);  // 3: reads a (2)
  b.zero_();            // 4: writes b, which 1 wrote and 2 read
  g.capture_end();
  const graphs::GraphData d = g.get_graph_data();
  ASSERT_EQ(d.nodes.size(), 5u);
  const std::vector<std::string> names{"mm", "exp", "add_", "mul", "zero_"};
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(d.nodes[i].op_name, names[i]);
    EXPECT_EQ(d.nodes[i].kernel_name, "flambeau::" + names[i]);
    EXPECT_EQ(d.nodes[i].id, int64_t(i));
    EXPECT_EQ(d.execution_order[i], int64_t(i));
  }
  EXPECT_EQ(d.nodes[0].type, graphs::NodeType::Kernel);
  EXPECT_EQ(d.nodes[4].type, graphs::NodeType::Memset);
  EXPECT_EQ(d.nodes[0].shapes, (std::vector<std::vector<int64_t>>{{3, 3}, {3, 3}}));
  const std::set<std::pair<int64_t, int64_t>> edges(d.edges.begin(), d.edges.end());
  EXPECT_EQ(edges, (std::set<std::pair<int64_t, int64_t>>{{0, 2}, {1, 2}, {2, 3}, {1, 4}, {2, 4}}));
  const std::string dot = g.to_dot();
  EXPECT_NE(dot.find("n0 -> n2;"), std::string::npos);
  EXPECT_NE(dot.find("flambeau::zero_"), std::string::npos);
  const std::string path = (std::filesystem::temp_directory_path() / "flambeau_graph_test.dot").string();
  g.debug_dump(path);
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_EQ(text.str(), dot);
  std::filesystem::remove(path);
}

TEST(Graphs, CorrelationIdsMatchTheProfilers) {
  const Tensor x = seeded({4, 4}, 10);
  profiler::start({});
  Graph g;
  g.capture_begin();
  const Tensor y = exp(mm(x, x));
  g.capture_end();
  std::vector<profiler::Event> captured = profiler::stop();
  std::vector<uint64_t> op_ids;
  for (const auto& e : captured)
    if (e.kind == profiler::EventKind::Op) op_ids.push_back(e.correlation);
  const graphs::GraphData d = g.get_graph_data();
  ASSERT_EQ(d.nodes.size(), 2u);
  EXPECT_EQ(op_ids, (std::vector<uint64_t>{d.nodes[0].correlation_id, d.nodes[1].correlation_id}));
  EXPECT_NE(d.nodes[0].correlation_id, d.nodes[1].correlation_id);
  // A replay's kernel events carry the same ids, and no op events (no dispatch).
  profiler::start({});
  g.replay();
  std::vector<uint64_t> kernel_ids;
  int64_t ops = 0;
  for (const auto& e : profiler::stop()) {
    if (e.kind == profiler::EventKind::Kernel && e.name.rfind("flambeau::", 0) == 0) kernel_ids.push_back(e.correlation);
    ops += e.kind == profiler::EventKind::Op;
  }
  EXPECT_EQ(kernel_ids, op_ids);
  EXPECT_EQ(ops, 0);
}

TEST(Graphs, RefusesWhatCannotBeReplayed) {
  const Tensor x = seeded({6}, 11);
  auto refusal = [&](const std::function<void()>& body) {
    Graph g;
    g.capture_begin();
    body();
    const std::string e = error_of([&] { g.capture_end(); });
    EXPECT_FALSE(g.captured());
    EXPECT_FALSE(graphs::is_capturing());
    return e;
  };
  EXPECT_NE(refusal([&] { (void)x.sum().item<float>(); }).find("refused at item: "), std::string::npos);
  EXPECT_NE(refusal([&] { (void)nonzero(gt(x, 0.0)); }).find("refused at nonzero: its output's shape depends"),
            std::string::npos);
  // from_vector writes its buffer without an op: the graph could not restore it.
  EXPECT_NE(refusal([&] { (void)add(x, from_vector<float>({1, 2, 3, 4, 5, 6}, Dims{6})); })
                .find("refused at add: it reads a tensor made by empty() whose values code the graph does not see wrote"),
            std::string::npos);
  Generator own(3);
  EXPECT_NE(refusal([&] { (void)randn({4}, kFloat32, own); }).find("refused at randn: it draws from an explicit"),
            std::string::npos);
}

TEST(Graphs, MisuseIsAnError) {
  Graph g;
  EXPECT_NE(error_of([&] { g.replay(); }).find("[Graph.replay] nothing was captured"), std::string::npos);
  EXPECT_NE(error_of([&] { g.capture_end(); }).find("capture_begin() was not called"), std::string::npos);
  g.capture_begin();
  EXPECT_TRUE(graphs::is_capturing());
  Graph other;
  EXPECT_NE(error_of([&] { other.capture_begin(); }).find("capturing another graph"), std::string::npos);
  EXPECT_NE(error_of([&] { g.replay(); }).find("has not ended"), std::string::npos);
  g.capture_end();
  EXPECT_FALSE(graphs::is_capturing());
  EXPECT_NE(error_of([&] { g.capture_begin(); }).find("reset() first"), std::string::npos);
  g.reset();
  EXPECT_FALSE(g.captured());
  g.capture_begin();  // usable again after reset
  g.capture_end();
  g.replay();  // an empty graph replays nothing
}

}  // namespace
}  // namespace flambeau
