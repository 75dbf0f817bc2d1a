// The "cpp" backend: fused float32 pointwise chains built by the system compiler, bitwise
// equal to eager (every op of the unary table, gelu, broadcast operands, numbers, several
// tiles and a partial one, 1 and 2 threads); buffer reuse; the on-disk cache (a warm cache
// starts no compiler, a corrupt entry is rebuilt, an unwritable directory falls back); a
// compiler error names the generated source; graphs that need gradients run eagerly; the
// kernels of a graph build as sources of their own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "flambeau/compile/build.h"
#include "flambeau/compile/cpp_backend.h"
#include "flambeau/compile/workers.h"
#include "flambeau/ops/registry.h"
#include "flambeau/flambeau.h"
#include "test_util.h"

using namespace flambeau;
using namespace flambeau::compiler;
using flambeau::testing::bitwise_equal;
namespace fs = std::filesystem;

namespace {

Tensor seeded(const Dims& shape, uint64_t seed, double lo = -2, double hi = 2) {
  Generator gen(seed);
  return rand(shape, kFloat32, gen) * (hi - lo) + lo;
}

// A private cache directory for one test (FLAMBEAU_CACHE_DIR), removed after.
struct TempCache {
  fs::path dir;
  std::string old;
  TempCache() {
    static int n = 0;
    dir = fs::temp_directory_path() / ("flambeau-cache-test-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    if (const char* o = std::getenv("FLAMBEAU_CACHE_DIR")) old = o;
    setenv("FLAMBEAU_CACHE_DIR", dir.c_str(), 1);
  }
  ~TempCache() {
    if (old.empty()) unsetenv("FLAMBEAU_CACHE_DIR");
    else setenv("FLAMBEAU_CACHE_DIR", old.c_str(), 1);
    std::error_code ec;
    fs::permissions(dir, fs::perms::owner_all, ec);
    fs::remove_all(dir, ec);
  }
};

void expect_compiled_equals_eager(const TensorFn& fn, const std::vector<Tensor>& in, const char* what) {
  Compiled f = compile(fn, {"cpp", true});
  (void)f(in);  // the trace
  const std::vector<Tensor> got = f(in), want = fn(in);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(bitwise_equal(got[i], want[i])) << what << " output " << i;
}

}  // namespace

TEST(CppBackend, EveryUnaryOpFusedIsBitwiseEager) {
  TempCache cache;
  // One graph (one build): op(x_i) * 1.5 + x_i for every op of the unary table, each x_i
  // in its op's domain; 5000 elements: four full tiles and a partial one.
  std::vector<std::string> names;
  std::vector<Tensor> inputs;
  uint64_t seed = 1;
#define FLB_ENTRY(name, kind, lo, hi) \
  names.push_back(#name);             \
  inputs.push_back(seeded({50, 100}, seed++, lo, hi));
  FLB_UNARY_OPS(FLB_ENTRY)
#undef FLB_ENTRY
  auto fn = [&names](const std::vector<Tensor>& in) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < names.size(); ++i)
      out.push_back(std::get<Tensor>(call_op(names[i], {in[i]}).at(0)) * 1.5 + in[i]);
    out.push_back(gelu(in[0], "none") - gelu(in[0], "tanh"));
    return out;
  };
  expect_compiled_equals_eager(fn, inputs, "unary table");
  const int threads = get_num_threads();
  set_num_threads(1);
  expect_compiled_equals_eager(fn, inputs, "unary table, 1 thread");
  set_num_threads(threads);
}

TEST(CppBackend, BroadcastOperandsNumbersAndNaN) {
  TempCache cache;
  Tensor x = seeded({64, 100}, 1), bias = seeded({100}, 2), row = seeded({1, 100}, 3);
  x.narrow(0, 0, 1).fill_(std::nan(""));
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor h = maximum(in[0] + in[1], in[0] * 0.5);  // NaN propagates
    return std::vector<Tensor>{minimum(h / 3.0, in[2]) - 1.0, h};
  };
  expect_compiled_equals_eager(fn, {x, bias, row}, "broadcast");
  Compiled f = compile(fn, {"cpp"});
  (void)f({x, bias, row});
  const std::string src = generated_source(f.graph(0));
  EXPECT_NE(src.find("binary_f32"), std::string::npos) << src;
}

TEST(CppBackend, ALongChainReusesOneBufferAndWritesOnlyWhatIsUsedAfter) {
  TempCache cache;
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor y = in[0];
    for (int i = 0; i < 10; ++i) y = i % 2 ? sin(y) : y * 1.25;
    return std::vector<Tensor>{y};
  };
  const Tensor x = seeded({4096}, 5);
  expect_compiled_equals_eager(fn, {x}, "chain");
  Compiled f = compile(fn, {"cpp"});
  (void)f({x});
  const std::string src = generated_source(f.graph(0));
  EXPECT_NE(src.find("float t0["), std::string::npos) << src;
  EXPECT_EQ(src.find("float t1["), std::string::npos) << src;  // one buffer for nine values
  EXPECT_NE(src.find("a.out[0]"), std::string::npos);
  EXPECT_EQ(src.find("a.out[1]"), std::string::npos);  // one value leaves the kernel
}

TEST(CppBackend, TheCacheServesASecondCompileAndRebuildsACorruptEntry) {
  TempCache cache;
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0] * 2.0) + 1.0}; };
  const Tensor x = seeded({3000}, 7);
  const int runs = compiler_runs();
  expect_compiled_equals_eager(fn, {x}, "cold");
  EXPECT_EQ(compiler_runs(), runs + 1);
  expect_compiled_equals_eager(fn, {x}, "warm");  // a new compile of the same program
  EXPECT_EQ(compiler_runs(), runs + 1);
  // Another file in its place (the library this process loaded keeps its own pages).
  for (const auto& e : fs::directory_iterator(cache.dir))
    if (e.path().extension() == ".so") {
      std::ofstream(e.path().string() + ".bad") << "not a library";
      fs::rename(e.path().string() + ".bad", e.path());
    }
  expect_compiled_equals_eager(fn, {x}, "corrupt");
  EXPECT_EQ(compiler_runs(), runs + 2);
}

TEST(CppBackend, AnUnwritableCacheFallsBackAndACompilerErrorNamesTheSource) {
  TempCache cache;
  std::ofstream(cache.dir) << "a file where the cache directory should be";  // unwritable, even for root
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0]) * 3.0 - in[0]}; };
  expect_compiled_equals_eager(fn, {seeded({100}, 8)}, "unwritable cache");
  fs::remove(cache.dir);
  setenv("CXX", "false", 1);  // a compiler that always fails
  auto other = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{cos(in[0]) * 7.0 - in[0]}; };
  Compiled f = compile(other, {"cpp"});
  try {
    (void)f({seeded({100}, 9)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("generated source"), std::string::npos) << e.what();
  }
  unsetenv("CXX");
}

// A graph that needs gradients is compiled for training (aot.h): its kernels for the forward
// and the backward; the gradient is eager's bits.
TEST(CppBackend, GraphsThatNeedGradientsCompileTheirBackward) {
  TempCache cache;
  Tensor w = seeded({8}, 10).requires_grad_();
  auto fn = [&w](const std::vector<Tensor>& in) { return std::vector<Tensor>{(sin(in[0] * w) * 2.0).sum()}; };
  Compiled f = compile(fn, {"cpp"});
  const Tensor x = seeded({8}, 11);
  (void)f({x});
  const Tensor y = f({x})[0];
  EXPECT_EQ(y.grad_fn()->name(), "CompiledFunctionBackward");
  y.backward();
  const Tensor g = w.grad().clone();
  w.set_grad(Tensor());
  fn({x})[0].backward();
  EXPECT_TRUE(bitwise_equal(g, w.grad()));
}

// A graph of two kernels (a matmul between them): one source per compile worker (at most one
// per kernel), built in parallel; bitwise eager, no compiler run when warm.
TEST(CppBackend, TheKernelsOfAGraphBuildInOneSourcePerWorker) {
  TempCache cache;
  const int sources = std::min(2, workers::max_workers());
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor a = sin(in[0]) * 2.0;
    return std::vector<Tensor>{tanh(mm(a, a)) + 1.0, a - 1.0};
  };
  const Tensor x = seeded({24, 24}, 16);
  const int runs = compiler_runs();
  expect_compiled_equals_eager(fn, {x}, "two kernels");
  EXPECT_EQ(compiler_runs(), runs + sources);
  expect_compiled_equals_eager(fn, {x}, "two kernels, warm");
  EXPECT_EQ(compiler_runs(), runs + sources);
  Compiled f = compile(fn, {"cpp"});
  (void)f({x});
  const std::string src = generated_source(f.graph(0));
  EXPECT_NE(src.find("flb_kernel_0("), std::string::npos) << src;
  EXPECT_NE(src.find("flb_kernel_1("), std::string::npos) << src;
}

// Reductions over the last dimension join the kernel, which then walks rows: RMSNorm, a
// centring and softmax written with ops, bitwise equal to eager (eager's row sums, in its
// order, and row maxima).
TEST(CppBackend, RowReductionsFuseRmsNormBitwise) {
  TempCache cache;
  auto rms = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    return std::vector<Tensor>{x * rsqrt((x * x).mean({-1}, true) + 1e-6) * in[1]};
  };
  auto centred = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const Tensor mu = x.mean({-1}, true);
    return std::vector<Tensor>{(x - mu) * 2.0 + sum(x, {-1}, true), mu};
  };
  auto softmax_ops = [](const std::vector<Tensor>& in) {
    const Tensor e = exp(in[0] - in[0].amax({-1}, true));
    return std::vector<Tensor>{e / sum(e, {-1}, true), in[0] - in[0].amin({-1}, true)};
  };
  for (const Dims& shape : {Dims{37, 300}, Dims{2, 5, 64}}) {
    const Tensor x = seeded(shape, 12), w = seeded({shape.back()}, 13);
    expect_compiled_equals_eager(rms, {x, w}, "rms");
    expect_compiled_equals_eager(centred, {x}, "centred");
    expect_compiled_equals_eager(softmax_ops, {x * 10.0}, "softmax");
  }
  Compiled sm = compile(softmax_ops, {"cpp"});
  (void)sm({seeded({4, 8}, 1)});
  EXPECT_EQ(sm.graph(0).nodes.size(), 7u);
  EXPECT_NE(generated_source(sm.graph(0)).find("max_f32(i0, m)"), std::string::npos);
  Compiled f = compile(rms, {"cpp"});
  (void)f({seeded({8, 16}, 1), seeded({16}, 2)});
  const std::string src = generated_source(f.graph(0));
  // x * x is summed as x loads (sum_sq_f32), not stored; the rest is one pass per row.
  EXPECT_NE(src.find("sum_sq_f32(i0, m)) / float(m)"), std::string::npos) << src;
  EXPECT_NE(src.find("for (int64_t row = lo"), std::string::npos) << src;
}

// add, sub, mul and div are written inline, a chain of them as one expression per element
// (each operation rounded as eager rounds it).
TEST(CppBackend, ArithmeticChainsBecomeOneExpression) {
  TempCache cache;
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{((in[0] * 2.0 + in[1]) / 3.0 - in[0]) * in[1]};
  };
  expect_compiled_equals_eager(fn, {seeded({3000}, 14), seeded({3000}, 15)}, "arithmetic");
  Compiled f = compile(fn, {"cpp"});
  (void)f({seeded({8}, 1), seeded({8}, 2)});
  const std::string src = generated_source(f.graph(0));
  EXPECT_EQ(src.find("binary_f32("), src.rfind("binary_f32("));  // only its declaration
  EXPECT_NE(src.find("((((i0[e] * 0x1p+1f) + i1[e]) / 0x1.8p+1f)"), std::string::npos) << src;
}

// options {"target": "armv9-a+sve2", "sve_bits": 128|256}: the kernel built by the aarch64
// cross compiler for SVE of that width and run under qemu-aarch64, against eager (its own
// libm and summation order: within float rounding, not bitwise).
TEST(CppBackend, Armv9SveKernelsUnderQemuMatchEager) {
  for (const char* tool : {"/usr/bin/aarch64-linux-gnu-g++", "/usr/bin/qemu-aarch64"})
    if (::access(tool, X_OK) != 0) GTEST_SKIP() << tool << " is not installed (g++-aarch64-linux-gnu, qemu-user)";
  TempCache cache;
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const Tensor y = (sigmoid(x) * 1.5 + exp(x * 0.25)) / in[1];
    return std::vector<Tensor>{y * rsqrt((y * y).mean({-1}, true) + 1e-6), y.amax({-1}, true)};
  };
  const Tensor x = seeded({37, 130}, 21), b = seeded({130}, 22, 1, 2);
  const std::vector<Tensor> want = fn({x, b});
  for (const char* bits : {"128", "256"}) {
    CompileOptions o{"cpp", true, 8, {{"target", "armv9-a+sve2"}, {"sve_bits", bits}}};
    Compiled f = compile(fn, o);
    autograd::NoGradGuard no_grad;
    (void)f({x, b});
    const std::vector<Tensor> got = f({x, b});
    for (size_t i = 0; i < want.size(); ++i) {
      const double err = (got[i] - want[i]).abs().amax({}, false).item<double>();
      EXPECT_LE(err, 1e-5 * (1 + want[i].abs().amax({}, false).item<double>())) << bits << " bits, output " << i;
    }
  }
  CompileOptions bad{"cpp", true, 8, {{"target", "riscv"}}};
  EXPECT_THROW((void)compile(fn, bad)({x, b}), ValueError);
  CompileOptions unfusable{"cpp", true, 8, {{"target", "armv9-a+sve2"}}};
  EXPECT_THROW((void)compile([](const std::vector<Tensor>& in) { return std::vector<Tensor>{mm(in[0], in[0])}; },
                             unfusable)({seeded({4, 4}, 1)}),
               NotImplementedError);
}

// dynamic: new batch and sequence sizes trace again without counting toward the limit, and the
// kernels (sizes are arguments) come from the cache: no compiler run after the first.
TEST(CppBackend, DynamicBatchAndSequenceSizesReuseTheKernels) {
  TempCache cache;
  auto fn = [](const std::vector<Tensor>& in) { return std::vector<Tensor>{tanh(in[0] * 2.0 + in[1]) * in[0]}; };
  CompileOptions o{"cpp", false, 2};
  o.dynamic = true;
  Compiled f = compile(fn, o);
  const Tensor bias = seeded({16}, 1);
  int runs = -1;
  for (int64_t b : {4, 6, 8, 3, 5}) {
    const Tensor x = seeded({b, 7, 16}, uint64_t(b));
    (void)f({x, bias});
    EXPECT_TRUE(bitwise_equal(f({x, bias})[0], fn({x, bias})[0])) << b;
    if (runs < 0) runs = compiler_runs();
    EXPECT_EQ(compiler_runs(), runs) << b;
  }
  EXPECT_EQ(f.traces(), 5u);  // more than cache_size_limit (2): one kind
  // A change elsewhere is a new kind; the third kind is over the limit and runs eagerly.
  (void)f({seeded({4, 7, 16}, 1), seeded({7, 16}, 2)});
  EXPECT_EQ(f.traces(), 6u);
  (void)f({seeded({4, 7, 8}, 1), seeded({8}, 2)});
  EXPECT_EQ(f.traces(), 6u);
}
