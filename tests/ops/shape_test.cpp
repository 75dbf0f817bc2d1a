// The shape ops of ops/shape.cpp against reference loops (every layout and dtype: they move
// data only, so results are bitwise) and the activations of nn/activation.cpp against their
// formulas; errors name the op.
#include <cfloat>
#include <cmath>

#include "flambeau/nn/functional.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

const Dims kShape = {3, 4, 5};

// out[c] = x[source(c)] for every coordinate c of out's shape.
template <class Source>
std::vector<double> gathered(const Tensor& x, const Dims& out_shape, Source source) {
  const std::vector<double> xv = values(x);
  std::vector<double> ref(size_t(numel_of(out_shape)));
  for (size_t p = 0; p < ref.size(); ++p) ref[p] = xv[size_t(flat_of(source(coords_of(int64_t(p), out_shape)), x.sizes()))];
  return ref;
}

TEST(ShapeOps, FlipRollTrilMatchReferenceLoops) {
  for (DType dt : {kFloat32, kFloat64, kInt64, kBFloat16, kBool})
    for (Layout l : kAllLayouts) {
      const Tensor x = random_tensor(kShape, dt, l, 3);
      EXPECT_EQ(values(flip(x, {0, -1})), gathered(x, kShape, [](Dims c) {
                  c[0] = 2 - c[0], c[2] = 4 - c[2];
                  return c;
                })) << layout_name(l);
      EXPECT_EQ(values(roll(x, {1, -7}, {0, 2})), gathered(x, kShape, [](Dims c) {
                  c[0] = (c[0] + 2) % 3, c[2] = (c[2] + 7) % 5;
                  return c;
                }));
      std::vector<double> tri = values(x);
      for (size_t p = 0; p < tri.size(); ++p) {
        const Dims c = coords_of(int64_t(p), kShape);
        if (c[2] - c[1] > 1) tri[p] = 0;
      }
      EXPECT_EQ(values(tril(x, 1)), tri);
      EXPECT_EQ(tril(x, 1).dtype(), dt);
    }
}

TEST(ShapeOps, RepeatTileDiagonalMatchReferenceLoops) {
  const Tensor x = random_tensor(kShape, kFloat32, Layout::Transposed, 4);
  EXPECT_EQ(repeat(x, {2, 1, 2, 1}).sizes(), (Dims{2, 3, 8, 5}));
  EXPECT_EQ(values(repeat(x, {2, 1, 2, 1})), gathered(x, {2, 3, 8, 5}, [](const Dims& c) {
              return Dims{c[1], c[2] % 4, c[3]};
            }));
  EXPECT_TRUE(bitwise_equal(tile(x, {2}), repeat(x, {1, 1, 2})));
  const Tensor d = diagonal(x, 1, 1, 2);  // a view: [3, 4] of x[i, j, j + 1]
  EXPECT_EQ(d.sizes(), (Dims{3, 4}));
  EXPECT_EQ(values(d), gathered(x, {3, 4}, [](const Dims& c) { return Dims{c[0], c[1], c[1] + 1}; }));
  EXPECT_EQ(d.data_ptr(), static_cast<char*>(x.data_ptr()) + x.stride(2) * 4);
  const Tensor e = diag_embed(d, -1);  // [3, 5, 5], d on the sub-diagonal
  std::vector<double> ref(75, 0.0);
  const std::vector<double> dv = values(d);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) ref[size_t(i * 25 + (j + 1) * 5 + j)] = dv[size_t(i * 4 + j)];
  EXPECT_EQ(values(e), ref);
  const std::vector<double> m = values(x.select(0, 1));
  EXPECT_EQ(values(trace(x.select(0, 1))), (std::vector<double>{((m[0] + m[6]) + m[12]) + m[18]}));
  EXPECT_EQ(values(tril_indices(3, 3)), (std::vector<double>{0, 1, 1, 2, 2, 2, 0, 0, 1, 0, 1, 2}));
  EXPECT_EQ(values(repeat_interleave(from_vector<float>({1, 2, 3}, Dims{3}), from_vector<int64_t>({2, 0, 1}, Dims{3}))),
            (std::vector<double>{1, 1, 3}));
  EXPECT_EQ(movedim(x, {0}, {2}).sizes(), (Dims{4, 5, 3}));
  EXPECT_EQ(values(kron(from_vector<float>({1, 2}, Dims{2}), from_vector<float>({1, 10, 100}, Dims{3}))),
            (std::vector<double>{1, 10, 100, 2, 20, 200}));
}

TEST(ShapeOps, BadInputNamesTheOp) {
  const Tensor x = zeros(kShape);
  EXPECT_TRUE(contains(error_of<ValueError>([&] { flip(x, {1, -2}); }), "[flip] dim -2 appears multiple times"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { repeat(x, {2, 2}); }), "(3, 4, 5)"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { trace(x); }), "[trace]"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { diagonal(x, 0, 2, -1); }), "[diagonal] dimensions cannot be identical"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { block_diag({x}); }), "[block_diag]"));
}

TEST(Activations, MatchTheirFormulas) {
  namespace F = nn::functional;
  const Tensor x = random_tensor({40}, kFloat64, Layout::Strided, 5, -5, 5);
  const std::vector<double> xv = values(x);
  auto each = [&](auto f) {
    std::vector<double> r;
    for (double v : xv) r.push_back(f(v));
    return r;
  };
  EXPECT_TRUE(all_close(values(F::elu(x, 0.5)), each([](double v) { return v > 0 ? v : 0.5 * std::expm1(v); }), 1e-15, 0));
  EXPECT_TRUE(all_close(values(F::hardswish(x)),
                        each([](double v) { return v * std::min(std::max(v + 3, 0.0), 6.0) / 6; }), 1e-15, 0));
  EXPECT_TRUE(all_close(values(F::mish(x)), each([](double v) { return v * std::tanh(std::log1p(std::exp(v))); }),
                        1e-14, 1e-300));
  EXPECT_TRUE(all_close(values(F::log_sigmoid(x)), each([](double v) { return -std::log1p(std::exp(-v)); }), 1e-14, 0));
  EXPECT_TRUE(all_close(values(F::softshrink(x, 1.0)),
                        each([](double v) { return v > 1 ? v - 1 : v < -1 ? v + 1 : 0.0; }), 0, 0));
  Tensor y = x.clone();
  EXPECT_TRUE(bitwise_equal(F::leaky_relu(y, 0.1, true), F::leaky_relu(x, 0.1)));
  EXPECT_TRUE(bitwise_equal(y, F::leaky_relu(x, 0.1)));  // written in place
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::glu(zeros({3, 5})); }), "[glu] Halving dimension must be even"));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { F::hardtanh(x, 1, -1); }), "[hardtanh]"));
}

TEST(MathOps, SpecialValuesAndCounts) {
  const double inf = INFINITY, nan = NAN;
  const Tensor x = from_vector<double>({inf, -inf, nan, -0.0, 2.5}, Dims{5});
  EXPECT_EQ(values(nan_to_num(x, 1.0, 2.0, -3.0)), (std::vector<double>{2.0, -3.0, 1.0, -0.0, 2.5}));
  EXPECT_EQ(values(nan_to_num(x.to(kFloat32)))[0], double(FLT_MAX));
  EXPECT_EQ(values(isposinf(x)), (std::vector<double>{1, 0, 0, 0, 0}));
  const Tensor a = from_vector<double>({inf, -inf, 0.0, 1000.0}, Dims{4});
  const Tensor b = from_vector<double>({inf, -inf, 0.0, 1000.0}, Dims{4});
  EXPECT_EQ(values(logaddexp(a, b)), (std::vector<double>{inf, -inf, std::log(2.0), 1000.0 + std::log(2.0)}));
  EXPECT_EQ(values(logaddexp2(a, b)), (std::vector<double>{inf, -inf, 1.0, 1001.0}));
  EXPECT_EQ(values(bincount(from_vector<int64_t>({3, 0, 3}, Dims{3}))), (std::vector<double>{1, 0, 0, 2}));
  EXPECT_EQ(values(histc(from_vector<float>({0, 1, 2, 3, 9}, Dims{5}), 3, 0, 3)), (std::vector<double>{1, 1, 2}));
  EXPECT_TRUE(contains(error_of<ValueError>([&] { bincount(from_vector<int64_t>({-1}, Dims{1})); }), "[bincount]"));
}

}  // namespace
}  // namespace flambeau::testing
