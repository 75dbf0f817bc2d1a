// The 16-bit GEMM paths (Note [16-bit GEMM paths]): each path this CPU has, against a
// float64 product of the same 16-bit inputs, on sizes that cross the micro-tile (12 x 32) and
// k-block (2048) edges, every transposition, alpha/beta, 16-bit and float32 outputs; the same
// bits with 1 and 2 threads and inside a parallel region. Paths the CPU lacks are skipped.
#include <cstring>

#include "flambeau/core/cpu_info.h"
#include "flambeau/kernels/cpu/gemm16.h"
#include "flambeau/kernels/cpu/gemm16_internal.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

using kernels::gemm16_widened;

enum class Path { kDispatch, kWidened, kAvx512Bf16 };

const char* path_name(Path p) { return p == Path::kDispatch ? "gemm16" : p == Path::kWidened ? "widened" : "avx512bf16"; }

// Runs one path; false when this CPU lacks it.
template <class T, class Out>
bool run(Path p, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const T* a, int64_t lda, const T* b,
         int64_t ldb, float beta, Out* c, int64_t ldc) {
  switch (p) {
    case Path::kDispatch: kernels::gemm16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); return true;
    case Path::kWidened: gemm16_widened(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc); return true;
    case Path::kAvx512Bf16:
      if constexpr (std::is_same_v<T, BFloat16>) {
        if (!cpu_info().avx512_bf16 || !cpu_info().has_avx512_core()) return false;
        kernels::gemm_bf16_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return true;
      }
      return false;
  }
  return false;
}

template <class T>
std::vector<T> random16(int64_t n, uint64_t seed) {
  std::vector<T> v;
  for (double x : random_values(n, seed, -2, 2, false)) v.push_back(T(float(x)));
  return v;
}

// Checks one problem on one path: |c - ref| <= bound, with bound from float32 accumulation
// (k * 2^-23 * sum |a||b|, generous for two roundings per pair) plus the output's rounding.
template <class T, class Out>
void check_case(Path p, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, float beta, uint64_t seed) {
  const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
  const std::vector<T> a = random16<T>((ta ? k : m) * lda, seed), b = random16<T>((tb ? n : k) * ldb, seed + 1);
  std::vector<Out> c(size_t(m * ldc));
  const std::vector<T> c0 = random16<T>(m * ldc, seed + 2);
  for (size_t i = 0; i < c.size(); ++i) c[i] = Out(float(c0[i]));
  const std::vector<Out> before = c;
  if (!run(p, ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc))
    GTEST_SKIP() << path_name(p) << " does not run this dtype on this CPU (" << cpu_isa_string(cpu_info()) << ")";
  const double out_eps = std::is_same_v<Out, float> ? 0x1p-24 : std::is_same_v<Out, Half> ? 0x1p-11 : 0x1p-8;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = size_t(i * ldc + j);
      if (j >= n) {  // outside the product: untouched
        ASSERT_EQ(std::memcmp(&c[at], &before[at], sizeof(Out)), 0) << "wrote past column " << n;
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double x = float(ta ? a[size_t(q * lda + i)] : a[size_t(i * lda + q)]);
        const double y = float(tb ? b[size_t(j * ldb + q)] : b[size_t(q * ldb + j)]);
        ref += x * y, mag += std::abs(x * y);
      }
      const double old = float(before[at]);
      const double want = alpha * ref + (beta != 0 ? beta * old : 0);
      const double bound = std::abs(alpha) * (double(k + 2) * 0x1p-23 * mag) +
                           out_eps * (std::abs(want) + std::abs(alpha) * mag * double(k) * 0x1p-23) + 1e-30;
      ASSERT_LE(std::abs(double(float(c[at])) - want), bound + std::abs(beta * old) * 0x1p-23)
          << path_name(p) << " ta=" << ta << " tb=" << tb << " " << m << "x" << n << "x" << k << " at (" << i << ", "
          << j << ")";
    }
}

template <class T, class Out>
void check_path(Path p) {
  uint64_t seed = 1;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {13, 33, 3}, {12, 32, 384}, {37, 70, 385},
                         {25, 95, 800}, {200, 40, 17}, {5, 300, 64}, {13, 33, 2 * 2048 + 3}})
    for (int t = 0; t < 4; ++t) {
      check_case<T, Out>(p, t & 1, t & 2, m, n, k, 1.f, 0.f, seed++);
      if (::testing::Test::IsSkipped()) return;
    }
  check_case<T, Out>(p, false, true, 29, 45, 100, 0.5f, 2.f, seed++);
  check_case<T, Out>(p, true, false, 29, 45, 100, -1.5f, 1.f, seed++);
}

class Gemm16 : public ::testing::TestWithParam<Path> {};

TEST_P(Gemm16, Bf16ToFloat) { check_path<BFloat16, float>(GetParam()); }
TEST_P(Gemm16, Bf16ToBf16) { check_path<BFloat16, BFloat16>(GetParam()); }
TEST_P(Gemm16, HalfToFloat) { check_path<Half, float>(GetParam()); }
TEST_P(Gemm16, HalfToHalf) { check_path<Half, Half>(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Paths, Gemm16, ::testing::Values(Path::kDispatch, Path::kWidened, Path::kAvx512Bf16),
                         [](const auto& info) { return std::string(path_name(info.param)); });

// The AMX path needs an AMX CPU and Linux's permission; say so instead of passing silently.
TEST(Gemm16Paths, AmxNeedsAmx) {
  if (!cpu_info().can_amx_bf16()) GTEST_SKIP() << "AMX-BF16 not available on this CPU (" << cpu_info().model << ")";
  EXPECT_STREQ(kernels::gemm16_backend(true), "oneDNN AMX-BF16");
  check_path<BFloat16, float>(Path::kDispatch);
}

TEST(Gemm16Paths, BackendFollowsCpu) {
  const CpuInfo& c = cpu_info();
  const std::string bf16 = kernels::gemm16_backend(true);
  if (!c.avx512_bf16) EXPECT_NE(bf16.find("float32"), std::string::npos) << bf16;
  if (c.avx512_bf16 && c.has_avx512_core() && !c.can_amx_bf16()) EXPECT_EQ(bf16, "flambeau AVX512-BF16");
  EXPECT_EQ(kernels::gemm16_native(true), bf16.find("float32") == std::string::npos);
  EXPECT_FALSE(kernels::gemm16_native(false));
}

TEST(Gemm16Paths, SameBitsAnyThreadCountAndInsideParallelRegion) {
  const int64_t m = 150, n = 130, k = 900;
  const std::vector<BFloat16> a = random16<BFloat16>(m * k, 7), b = random16<BFloat16>(k * n, 8);
  auto product = [&] {
    std::vector<float> c(size_t(m * n));
    kernels::gemm16(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
    return c;
  };
  const int saved = get_num_threads();
  set_num_threads(1);
  const std::vector<float> one = product();
  set_num_threads(2);
  const std::vector<float> two = product();
  std::vector<float> inside;
  parallel_for(0, 2, 1, [&](int64_t b0, int64_t) {
    if (b0 == 0) inside = product();
  });
  set_num_threads(saved);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * 4), 0);
  EXPECT_EQ(std::memcmp(one.data(), inside.data(), one.size() * 4), 0);
}

TEST(Gemm16Paths, EmptyProblems) {
  std::vector<BFloat16> c(6, BFloat16(2.f));
  const BFloat16 one(1.f);
  kernels::gemm16(false, false, 2, 3, 0, 1.f, &one, 1, &one, 3, 0.5f, c.data(), 3);  // k = 0: c = beta * c
  for (const BFloat16 v : c) EXPECT_EQ(float(v), 1.f);
  kernels::gemm16(false, false, 0, 3, 4, 1.f, &one, 4, &one, 3, 0.f, c.data(), 3);  // m = 0: nothing
  kernels::gemm16(false, false, 2, 0, 4, 1.f, &one, 4, &one, 1, 0.f, c.data(), 3);  // n = 0: nothing
  for (const BFloat16 v : c) EXPECT_EQ(float(v), 1.f);
}

}  // namespace
}  // namespace flambeau::testing
