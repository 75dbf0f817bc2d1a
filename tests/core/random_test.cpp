// Random numbers: Philox4x32-10 known answers (Random123's kat_vectors), streams that do
// not depend on the thread count, Generator state, and each distribution's moments,
// ranges and argument checks.
#include <set>

#include "flambeau/kernels/cpu/simd_random.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

TEST(Random, PhiloxKnownAnswers) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Random, SeedsStreamsAndThreadCounts) {
  const int saved = get_num_threads();
  for (auto make : std::vector<std::function<Tensor(Generator)>>{
           [](Generator g) { return rand({300001}, kFloat32, g); },
           [](Generator g) { return randn({300001}, kFloat64, g); },
           [](Generator g) { return randint(-5, 1000, {100001}, kInt64, g); },
           [](Generator g) { return bernoulli(full({100001}, 0.3), g); },
           [](Generator g) { Tensor t = empty({100001}); return exponential_(t, 2.0, g); },
           [](Generator g) { return randperm(10007, kInt64, g); },
           [](Generator g) { return multinomial(arange(1, 40, 1, kFloat32), 25, false, g); }}) {
    set_num_threads(1);
    Tensor one = make(Generator(1234));
    set_num_threads(2);
    Tensor two = make(Generator(1234));
    EXPECT_TRUE(bitwise_equal(one, two));
    EXPECT_FALSE(bitwise_equal(one, make(Generator(1235))));
  }
  set_num_threads(saved);
  // The default generator: manual_seed replays it.
  manual_seed(7);
  Tensor a = rand({10});
  Tensor b = rand({10});
  manual_seed(7);
  EXPECT_TRUE(bitwise_equal(a, rand({10})));
  EXPECT_FALSE(bitwise_equal(a, b));
}

TEST(Random, GeneratorStateRoundTrip) {
  Generator g(42);
  EXPECT_EQ(g.initial_seed(), 42u);
  rand({100}, kFloat32, g);
  EXPECT_EQ(g.offset(), 25u);  // four float32 uniforms per Philox block
  Tensor state = g.get_state();
  EXPECT_EQ(state.dtype(), kUInt8);
  EXPECT_EQ(state.numel(), 16);
  Tensor x = randn({50}, kFloat32, g);
  g.set_state(state);
  EXPECT_TRUE(bitwise_equal(x, randn({50}, kFloat32, g)));
  Generator copy = g;  // a handle: both advance the same stream
  rand({4}, kFloat32, copy);
  EXPECT_EQ(g.offset(), copy.offset());
  EXPECT_THROW(g.set_state(zeros({15}, kUInt8)), ValueError);
  EXPECT_THROW(g.set_state(zeros({16})), ValueError);
}

double mean_of(const Tensor& t) { return mean(t.to(kFloat64)).item<double>(); }
double std_of(const Tensor& t) { return flambeau::std(t.to(kFloat64)).item<double>(); }

TEST(Random, DistributionsHaveTheirMomentsAndRanges) {
  Generator g(3);
  const int64_t n = 1 << 20;
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    Tensor u = empty({n}, dt);
    uniform_(u, -2, 3, g);
    EXPECT_GE(amin(u).item<double>(), -2);
    EXPECT_LT(amax(u).item<double>(), 3);
    EXPECT_NEAR(mean_of(u), 0.5, 0.01) << dtype_name(dt);
    EXPECT_NEAR(std_of(u), 5 / std::sqrt(12.0), 0.01);
    Tensor z = empty({n}, dt);
    normal_(z, 1.5, 2.0, g);
    EXPECT_NEAR(mean_of(z), 1.5, 0.01) << dtype_name(dt);
    EXPECT_NEAR(std_of(z), 2.0, 0.02);
    Tensor e = empty({n}, dt);
    exponential_(e, 4.0, g);
    EXPECT_GE(amin(e).item<double>(), 0);
    EXPECT_NEAR(mean_of(e), 0.25, 0.005);
  }
  // Non-contiguous targets are filled in place.
  Tensor base = zeros({100, 2});
  Tensor col = base.select(1, 0);
  uniform_(col, 5, 6, g);
  EXPECT_GE(amin(col).item<double>(), 5);
  EXPECT_EQ(amax(base.select(1, 1)).item<double>(), 0);

  Tensor r = randint(-3, 4, {n}, kInt64, g);
  EXPECT_EQ(amin(r).item<int64_t>(), -3);
  EXPECT_EQ(amax(r).item<int64_t>(), 3);
  EXPECT_NEAR(mean_of(r), 0, 0.01);
  Tensor big = randint(0, int64_t(1) << 40, {n}, kInt64, g);
  EXPECT_NEAR(mean_of(big) / double(int64_t(1) << 40), 0.5, 0.01);
  EXPECT_EQ(randint(10, {3, 4}, kInt32, g).dtype(), kInt32);

  Tensor p = full({n}, 0.3);
  EXPECT_NEAR(mean_of(bernoulli(p, g)), 0.3, 0.005);
  EXPECT_EQ(sum(bernoulli(zeros({1000}), g)).item<double>(), 0);
  EXPECT_EQ(sum(bernoulli(ones({1000}), g)).item<double>(), 1000);
  Tensor b = empty({n}, kFloat32);
  bernoulli_(b, 0.8, g);
  EXPECT_NEAR(mean_of(b), 0.8, 0.005);
}

// Kolmogorov-Smirnov statistic of samples against a CDF.
template <class Cdf>
double ks_statistic(const Tensor& samples, const Cdf& cdf) {
  const Tensor sorted = sort(samples.to(kFloat64)).first;
  const double* x = sorted.data<double>();
  const int64_t n = sorted.numel();
  double d = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double f = cdf(x[i]);
    d = std::max({d, f - double(i) / double(n), double(i + 1) / double(n) - f});
  }
  return d;
}

TEST(Random, KolmogorovSmirnovOnOneMillionSamples) {
  const int64_t n = 1 << 20;
  const double critical = 1.95 / std::sqrt(double(n));  // alpha = 0.001
  Generator g(21);
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor u = empty({n}, dt), z = empty({n}, dt), e = empty({n}, dt);
    uniform_(u, -1, 3, g);
    normal_(z, 0.5, 2, g);
    exponential_(e, 1.5, g);
    EXPECT_LT(ks_statistic(u, [](double x) { return std::clamp((x + 1) / 4, 0.0, 1.0); }), critical) << dtype_name(dt);
    EXPECT_LT(ks_statistic(z, [](double x) { return 0.5 * std::erfc(-(x - 0.5) / (2 * std::sqrt(2.0))); }), critical)
        << dtype_name(dt);
    EXPECT_LT(ks_statistic(e, [](double x) { return x < 0 ? 0.0 : -std::expm1(-1.5 * x); }), critical) << dtype_name(dt);
  }
  // The statistic does see a wrong distribution.
  Tensor wrong = empty({n});
  normal_(wrong, 0.52, 2, g);
  EXPECT_GT(ks_statistic(wrong, [](double x) { return 0.5 * std::erfc(-(x - 0.5) / (2 * std::sqrt(2.0))); }), critical);
}

// The SIMD Philox gives the scalar function's words, across a carry into the counter's
// high word too.
TEST(Random, SimdPhiloxMatchesScalar) {
  for (uint64_t counter : {uint64_t(0), uint64_t(0xfffffff0u), uint64_t(123456789012345)}) {
    std::vector<uint32_t> words(4 * 37);
    kernels::philox_words(counter, {0xdeadbeef, 0x12345678}, words.data(), 37);
    for (int64_t b = 0; b < 37; ++b) {
      const uint64_t c = counter + uint64_t(b);
      const auto w = philox4x32_10({uint32_t(c), uint32_t(c >> 32), 0, 0}, {0xdeadbeef, 0x12345678});
      for (int l = 0; l < 4; ++l) ASSERT_EQ(words[size_t(4 * b + l)], w[size_t(l)]) << counter << " block " << b;
    }
  }
}

TEST(Random, RandpermAndMultinomial) {
  Generator g(11);
  for (int64_t n : {0, 1, 2, 1000}) {
    std::vector<double> v = values(randperm(n, kInt64, g));
    std::sort(v.begin(), v.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[size_t(i)], double(i));
  }
  // With replacement: frequencies follow the probabilities; zero-probability classes never appear.
  Tensor probs = from_vector<float>({0.1f, 0, 0.6f, 0.3f});
  std::vector<double> s = values(multinomial(probs, 200000, true, g));
  std::vector<double> counts(4, 0);
  for (double x : s) counts[size_t(x)] += 1;
  EXPECT_EQ(counts[1], 0);
  EXPECT_NEAR(counts[0] / 200000, 0.1, 0.005);
  EXPECT_NEAR(counts[2] / 200000, 0.6, 0.005);
  // Without replacement: distinct indices, zero-probability classes excluded, 2-D rows.
  Tensor rows = from_vector<float>({1, 0, 1, 1, 5, 5, 0, 1}, Dims{2, 4});
  for (int rep = 0; rep < 50; ++rep) {
    Tensor m = multinomial(rows, 3, false, g);
    ASSERT_EQ(m.sizes(), (Dims{2, 3}));
    std::vector<double> mv = values(m);
    std::set<double> r0(mv.begin(), mv.begin() + 3), r1(mv.begin() + 3, mv.end());
    EXPECT_EQ(r0, (std::set<double>{0, 2, 3}));
    EXPECT_EQ(r1, (std::set<double>{0, 1, 3}));
  }
  // The first draw without replacement follows the probabilities.
  std::vector<double> first(4, 0);
  for (int rep = 0; rep < 20000; ++rep) first[size_t(multinomial(probs, 1, false, g).item<int64_t>())] += 1;
  EXPECT_NEAR(first[2] / 20000, 0.6, 0.015);
}

TEST(Random, BadArguments) {
  Tensor t = empty({4});
  EXPECT_THROW(uniform_(t, 2, 1), ValueError);
  EXPECT_THROW(normal_(t, 0, -1), ValueError);
  EXPECT_THROW(exponential_(t, 0), ValueError);
  EXPECT_THROW(bernoulli_(t, 1.5), ValueError);
  EXPECT_THROW(bernoulli(from_vector<float>({0.5f, -0.1f})), ValueError);
  EXPECT_THROW(randint(5, 5, {3}), ValueError);
  EXPECT_THROW(randperm(-1), ValueError);
  Tensor i = arange(4);
  EXPECT_THROW(uniform_(i), TypeError);
  EXPECT_THROW(multinomial(from_vector<float>({1, -1}), 1), ValueError);
  EXPECT_THROW(multinomial(zeros({3}), 1), ValueError);
  EXPECT_THROW(multinomial(from_vector<float>({1, 0, 1}), 3, false), ValueError);
  EXPECT_THROW(multinomial(ones({2, 2, 2}), 1), ValueError);
  EXPECT_THROW(multinomial(from_vector<float>({NAN, 1}), 1), ValueError);
  EXPECT_THROW(multinomial(ones({3}), 0), ValueError);
  // Refused arguments leave the tensor and the generator untouched.
  Generator g(5);
  Tensor z = zeros({4});
  EXPECT_THROW(normal_(z, 0, -1, g), ValueError);
  EXPECT_EQ(g.offset(), 0u);
  EXPECT_EQ(values(z), std::vector<double>(4, 0.0));
}

}  // namespace
}  // namespace flambeau::testing
