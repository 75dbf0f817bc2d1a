// The cpp backend's templates (compile/templates.h): each GEMM epilogue pattern against eager
// (bitwise where BLAS sums a block as it sums eager's call, else within the GEMM's rounding
// bound), odd shapes (M, N, K off the tiles, K = 1, M = 1), operands BLAS cannot read in place
// left to BLAS, gemm_backends respected, max-autotune's winner cached on disk (a second
// compile times nothing), RMSNorm + residual bitwise, and no compiler needed for templates.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "flambeau/compile/build.h"
#include "flambeau/compile/compile.h"
#include "flambeau/compile/templates.h"
#include "flambeau/flambeau.h"
#include "flambeau/nn/functional.h"
#include "test_util.h"

using namespace flambeau;
using namespace flambeau::compiler;
namespace fs = std::filesystem;

namespace {

Tensor uniform(const Dims& shape, uint64_t seed) {
  Generator gen(seed);
  return rand(shape, kFloat32, gen) * 2.0 - 1.0;
}

// FLAMBEAU_CACHE_DIR pointed at a fresh directory for the test's life.
class CacheDir {
 public:
  CacheDir() : dir_(fs::temp_directory_path() / ("flambeau-templates-" + std::to_string(getpid()) + "-" +
                                                 std::to_string(counter_++))) {
    setenv("FLAMBEAU_CACHE_DIR", dir_.c_str(), 1);
  }
  ~CacheDir() {
    unsetenv("FLAMBEAU_CACHE_DIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  const fs::path& path() const { return dir_; }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

CompileOptions with(std::map<std::string, std::string> options) { return {"cpp", true, 8, std::move(options)}; }

// The largest |eager - compiled| allowed for a GEMM of inner size k on inputs in [-1, 1]
// (|a||b| <= 1 per term, plus a bias term) followed by Lipschitz-1 epilogues: (k + 1)^2 * eps,
// as any regrouping of the sum over k may round differently (the BLAS behind eager may add
// in another order than the template: oneDNN's sgemm does, even for small k).
float tolerance(int64_t k) { return float(k + 1) * float(k + 1) * 1.2e-7f; }

// Runs fn compiled with the template only and checks every output against eager; returns how
// many template steps ran.
int64_t expect_template_matches_eager(const TensorFn& fn, const std::vector<Tensor>& in, int64_t k, const char* what) {
  const int64_t before = templates::template_runs();
  Compiled f = compile(fn, with({{"gemm_backends", "template"}}));
  (void)f(in);  // the trace (eager's results)
  const std::vector<Tensor> got = f(in), want = fn(in);
  const int64_t ran = templates::template_runs() - before;
  EXPECT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    EXPECT_EQ(got[i].sizes(), want[i].sizes()) << what;
    const float diff = max(abs(got[i] - want[i])).item<float>();
    EXPECT_LE(diff, tolerance(k)) << what << " output " << i;
  }
  return ran;
}

}  // namespace

TEST(Templates, EachEpilogueMatchesEager) {
  CacheDir cache;
  const int64_t m = 70, k = 96, n = 130;
  const Tensor x = uniform({m, k}, 1), w = uniform({n, k}, 2), b = uniform({n}, 3), res = uniform({m, n}, 4);
  const Tensor wt = uniform({k, n}, 5), x3 = uniform({2, 35, k}, 6), wg = uniform({n, k}, 7);
  struct Case {
    const char* name;
    TensorFn fn;
    std::vector<Tensor> in;
  };
  const std::vector<Case> cases{
      {"linear + bias, relu", [](const std::vector<Tensor>& a) { return std::vector{relu(linear(a[0], a[1], a[2]))}; },
       {x, w, b}},
      {"linear, bias add, gelu tanh",
       [](const std::vector<Tensor>& a) { return std::vector{gelu(linear(a[0], a[1]) + a[2], "tanh")}; }, {x, w, b}},
      {"mm, silu, * 0.5, + residual",
       [](const std::vector<Tensor>& a) { return std::vector{silu(mm(a[0], a[1])) * 0.5 + a[2]}; }, {x, wt, res}},
      {"addmm, tanh, residual - ",
       [](const std::vector<Tensor>& a) { return std::vector{a[3] - tanh(addmm(a[2], a[0], a[1]))}; },
       {x, wt, b, res}},
      {"matmul 3-D with W^T view, gelu, sigmoid",
       [](const std::vector<Tensor>& a) { return std::vector{sigmoid(gelu(matmul(a[0], a[1].t()) / 3.0))}; },
       {x3, w}},
      {"SwiGLU", [](const std::vector<Tensor>& a) { return std::vector{silu(linear(a[0], a[1])) * linear(a[0], a[2])}; },
       {x, wg, w}},
      {"GEMM alone, output read twice",
       [](const std::vector<Tensor>& a) {
         const Tensor y = linear(a[0], a[1]);
         return std::vector{y, relu(y)};
       },
       {x, w}},
  };
  for (const Case& c : cases) EXPECT_GE(expect_template_matches_eager(c.fn, c.in, k, c.name), 1) << c.name;
}

TEST(Templates, OddShapes) {
  CacheDir cache;
  // Rows and columns off the tiles (192 / 96 x 512), one row, one column, K = 1, large K.
  const std::vector<std::array<int64_t, 3>> shapes{{1, 7, 5}, {200, 530, 3}, {5, 1, 9}, {33, 70, 1},
                                                   {197, 515, 300}, {1, 600, 1024}};
  uint64_t seed = 10;
  for (const auto& [m, n, k] : shapes) {
    const Tensor x = uniform({m, k}, seed++), w = uniform({n, k}, seed++), b = uniform({n}, seed++);
    auto fn = [](const std::vector<Tensor>& a) { return std::vector{relu(linear(a[0], a[1], a[2])) * 2.0}; };
    const std::string what = "M " + std::to_string(m) + " N " + std::to_string(n) + " K " + std::to_string(k);
    EXPECT_EQ(expect_template_matches_eager(fn, {x, w, b}, k, what.c_str()), 1) << what;
  }
}

TEST(Templates, OperandsBlasCannotReadInPlaceStayWithBlas) {
  CacheDir cache;
  const Tensor big = uniform({40, 64}, 20), w = uniform({16, 32}, 21);
  const Tensor strided = big.slice(1, 0, 64, 2);  // columns with step 2: not a BLAS layout
  auto fn = [](const std::vector<Tensor>& a) { return std::vector{relu(linear(a[0], a[1]))}; };
  const int64_t before = templates::template_runs();
  Compiled f = compile(fn, with({{"gemm_backends", "template"}}));
  (void)f({strided, w});
  const Tensor got = f({strided, w})[0];
  EXPECT_EQ(templates::template_runs(), before);
  EXPECT_TRUE(flambeau::testing::bitwise_equal(got, fn({strided, w})[0]));
}

TEST(Templates, GemmBackendsOptionIsRespected) {
  CacheDir cache;
  const Tensor x = uniform({64, 64}, 30), w = uniform({128, 64}, 31);
  auto fn = [](const std::vector<Tensor>& a) { return std::vector{gelu(linear(a[0], a[1]))}; };
  const Tensor want = fn({x, w})[0];
  for (const auto& [backends, expect_template] :
       std::vector<std::pair<std::string, bool>>{{"blas", false}, {"['template']", true}, {"aten, templates", false}}) {  // both: the default (BLAS)
    const int64_t before = templates::template_runs();
    Compiled f = compile(fn, with({{"max_autotune_gemm_backends", backends}}));
    (void)f({x, w});
    const Tensor got = f({x, w})[0];
    EXPECT_EQ(templates::template_runs() > before, expect_template) << backends;
    EXPECT_TRUE(flambeau::testing::bitwise_equal(got, want)) << backends;
  }
  Compiled bad = compile(fn, with({{"gemm_backends", "blas, triton"}}));
  EXPECT_THROW((bad({x, w}), bad({x, w})), ValueError);
}

TEST(Templates, MaxAutotuneCachesItsWinnerOnDisk) {
  CacheDir cache;
  const Tensor x = uniform({96, 128}, 40), w = uniform({256, 128}, 41), b = uniform({256}, 42);
  auto fn = [](const std::vector<Tensor>& a) { return std::vector{silu(linear(a[0], a[1], a[2]))}; };
  const int before = templates::autotune_timings();
  Compiled first = compile(fn, with({{"max_autotune", "true"}}));
  (void)first({x, w, b});
  const Tensor got = first({x, w, b})[0];
  EXPECT_EQ(templates::autotune_timings(), before + 1);
  EXPECT_LE(max(abs(got - fn({x, w, b})[0])).item<float>(), tolerance(128));
  EXPECT_EQ(std::distance(fs::directory_iterator(cache.path() / "autotune"), fs::directory_iterator{}), 1);
  // A new compile of the same pattern (as a new process would) reads the choice: no timing.
  Compiled second = compile(fn, with({{"mode", "max-autotune"}}));
  (void)second({x, w, b});
  (void)second({x, w, b});
  EXPECT_EQ(templates::autotune_timings(), before + 1);
}

TEST(Templates, RmsNormWithResidualIsBitwiseEager) {
  CacheDir cache;
  auto fn = [](const std::vector<Tensor>& a) {
    const Tensor h = a[0] + a[1];
    return std::vector{h, nn::functional::rms_norm(h, {a[0].size(-1)}, a[2], 1e-6)};
  };
  for (int64_t c : {1, 67, 512}) {
    const std::vector<Tensor> in{uniform({3, 5, c}, 50), uniform({3, 5, c}, 51), uniform({c}, 52)};
    const int64_t before = templates::template_runs();
    Compiled f = compile(fn, with({}));
    (void)f(in);
    const std::vector<Tensor> got = f(in), want = fn(in);
    EXPECT_EQ(templates::template_runs(), before + 1) << c;
    for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(flambeau::testing::bitwise_equal(got[i], want[i])) << c << " " << i;
  }
}

TEST(Templates, NeedNoCompiler) {
  // Templates are compiled into libflambeau: with a compiler that always fails, a graph of
  // only template steps still compiles and gives eager's values.
  CacheDir cache;
  setenv("CXX", "false", 1);
  const Tensor x = uniform({50, 40}, 60), w = uniform({30, 40}, 61);
  auto fn = [](const std::vector<Tensor>& a) { return std::vector{tanh(linear(a[0], a[1])) * 3.0}; };
  const int runs = compiler_runs();
  EXPECT_EQ(expect_template_matches_eager(fn, {x, w}, 40, "no compiler"), 1);
  EXPECT_EQ(compiler_runs(), runs);
  unsetenv("CXX");
}
