// flambeau::compiler::compile_score_mod: the generated tile loop against the same function run
// eagerly on the tile's tensors (forward bitwise, backward against autograd within float32
// rounding, captured tensors' gradients too), and the functions it refuses, with the reason.
#include <gtest/gtest.h>

#include "flambeau/compile/score_mod.h"
#include "flambeau/flambeau.h"
#include "test_util.h"

using namespace flambeau;
using namespace flambeau::compiler;
namespace fa = flambeau::nn::attention;
using flambeau::testing::all_close;
using flambeau::testing::bitwise_equal;
using flambeau::testing::values;

namespace {

// A tile of 5 rows and 300 columns (more than one 256-column chunk) at (q0, kv0) = (3, 11).
constexpr int64_t kRows = 5, kCols = 300, kLd = kCols + 7, kQ0 = 3, kKv0 = 11, kB = 1, kH = 1;

Tensor seeded(const Dims& shape, uint64_t seed, double scale = 1.0) {
  Generator gen(seed);
  return randn(shape, kFloat32, gen) * scale;
}

std::vector<Tensor> index_inputs(const Tensor& s) {
  return {s, scalar_tensor(kB, kInt64), scalar_tensor(kH, kInt64),
          arange(kQ0, kQ0 + kRows, 1, kInt64).reshape({kRows, 1}), arange(kKv0, kKv0 + kCols, 1, kInt64).reshape({1, kCols})};
}

// The tile's buffer (leading dimension kLd) and back.
std::vector<float> to_buffer(const Tensor& t) {
  std::vector<float> buf(size_t(kRows * kLd), -7.f);
  const Tensor c = t.expand({kRows, kCols}).contiguous();
  for (int64_t r = 0; r < kRows; ++r)
    std::copy(c.data<float>() + r * kCols, c.data<float>() + (r + 1) * kCols, buf.begin() + r * kLd);
  return buf;
}
Tensor from_buffer(const std::vector<float>& buf) {
  Tensor t = empty({kRows, kCols}, kFloat32);
  for (int64_t r = 0; r < kRows; ++r)
    std::copy(buf.begin() + r * kLd, buf.begin() + r * kLd + kCols, t.data<float>() + r * kCols);
  return t;
}

fa::ScoreModPtr compiled(const TensorFn& fn) {
  std::string why;
  fa::ScoreModPtr m = compile_score_mod(fn, &why);
  EXPECT_TRUE(m) << why;
  return m;
}

// forward() on the tile equals the eager function bitwise; backward() equals autograd's
// gradient for the score and the captured tensors `caps` within `tol`.
void check_mod(const TensorFn& fn, std::vector<Tensor> caps = {}, double tol = 2e-6) {
  const fa::ScoreModPtr m = compiled(fn);
  ASSERT_TRUE(m);
  const Tensor s = seeded({kRows, kCols}, 1, 3.0);
  const fa::Tile tile{kB, kH, kQ0, kRows, kKv0, kCols, kLd};
  m->check(2, 2, 64, 512);
  std::vector<float> buf = to_buffer(s);
  m->forward(tile, buf.data());
  const Tensor expected = fn(index_inputs(s))[0].to(kFloat32).expand({kRows, kCols}).contiguous();
  EXPECT_TRUE(bitwise_equal(from_buffer(buf), expected));
  for (int64_t r = 0; r < kRows; ++r) EXPECT_EQ(buf[size_t(r * kLd + kCols)], -7.f);  // nothing past the row

  // Backward: autograd through the eager function.
  const Tensor ds = seeded({kRows, kCols}, 2);
  Tensor sg = s.detach().requires_grad_(true);
  for (Tensor& c : caps) c.set_grad(Tensor());
  fn(index_inputs(sg))[0].expand({kRows, kCols}).backward(ds);
  std::vector<float> raw = to_buffer(s), dsb = to_buffer(ds);
  const std::vector<Tensor> captured = m->captured();
  std::vector<Tensor> acc;
  std::vector<double*> ptrs;
  for (const Tensor& c : captured) {
    acc.push_back(zeros(c.sizes(), kFloat64));
    ptrs.push_back(c.requires_grad() ? acc.back().data<double>() : nullptr);
  }
  m->backward(tile, raw.data(), dsb.data(), ptrs.data());
  const Tensor got = from_buffer(dsb), want = sg.grad().defined() ? sg.grad() : zeros({kRows, kCols});
  EXPECT_TRUE(all_close(values(got), values(want), tol, tol));
  for (const Tensor& c : caps) {
    size_t i = 0;
    while (i < captured.size() && captured[i].impl() != c.impl()) ++i;
    ASSERT_LT(i, captured.size());
    EXPECT_TRUE(all_close(values(acc[i]), values(c.grad()), tol, tol));
  }
}

}  // namespace

TEST(ScoreMod, SoftcapAndTranscendentalsAreEagersBits) {
  check_mod([](const std::vector<Tensor>& a) { return std::vector<Tensor>{tanh(a[0] / 30.0) * 30.0}; });
  check_mod([](const std::vector<Tensor>& a) {
    const Tensor& s = a[0];
    return std::vector<Tensor>{s * sigmoid(s) + exp(-abs(s)) + rsqrt(s * s + 1) - log(abs(s) + 1) +
                               maximum(s, scalar_tensor(0.5, kFloat32)) - minimum(sqrt(abs(s)), s) + relu(s) / 3 +
                               reciprocal(s * s + 2)};
  }, {}, 1e-5);
}

TEST(ScoreMod, IndexArithmeticCastsAndWhere) {
  check_mod([](const std::vector<Tensor>& a) {  // causal where, int -> float promotion and casts
    const Tensor d = a[3] - a[4];
    return std::vector<Tensor>{where(ge(a[3], a[4]), a[0] + d * 0.5, a[0] - 1.5) + d.to(kFloat32) / 7 +
                               remainder(d, 3).to(kFloat64) * 0.25};
  });
  check_mod([](const std::vector<Tensor>& a) {  // a float comparison and a float64 chain, cast back
    return std::vector<Tensor>{where(gt(a[0], 1.0), a[0].to(kFloat64) * 2.0, a[0].to(kFloat64)).to(kFloat32)};
  });
}

TEST(ScoreMod, CapturedTensorsReadByIndexGetGradients) {
  Tensor slopes = seeded({2}, 3).requires_grad_(true);
  Tensor table = seeded({2, 2 * 512 - 1}, 4).requires_grad_(true);
  Tensor bias = seeded({}, 5).requires_grad_(true);  // one value, read whole
  check_mod([&](const std::vector<Tensor>& a) {  // ALiBi with learnable slopes
    return std::vector<Tensor>{a[0] + index(slopes, {a[2]}) * (a[4] - a[3])};
  }, {slopes}, 2e-4);
  check_mod([&](const std::vector<Tensor>& a) {  // relative position bias
    return std::vector<Tensor>{a[0] + index(table, {a[2], a[3] - a[4] + 511}) + bias};
  }, {table, bias}, 2e-5);
  check_mod([&](const std::vector<Tensor>& a) {  // a transcendental of a per-head value, computed once
    return std::vector<Tensor>{a[0] * exp(index(slopes, {a[2]})) + index(slopes.detach(), {a[1] - 1})};
  }, {slopes}, 2e-4);
}

TEST(ScoreMod, AnIndexOutOfBoundsRaisesNegativeOnesCountFromTheEnd) {
  Tensor small = seeded({4}, 6);
  const fa::ScoreModPtr m = compiled([&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{a[0] + index(small, {a[4] - a[3]})};
  });
  ASSERT_TRUE(m);
  std::vector<float> buf(size_t(kRows * kLd));
  const std::string msg = flambeau::testing::error_of<IndexError>(
      [&] { m->forward(fa::Tile{kB, kH, kQ0, kRows, kKv0, kCols, kLd}, buf.data()); });
  EXPECT_NE(msg.find("out of bounds"), std::string::npos) << msg;
  // Negative indices count from the end, as eager's.
  m->forward(fa::Tile{0, 0, 2, 1, 0, 1, 1}, buf.data());
}

TEST(ScoreMod, UnsupportedFunctionsGiveTheReason) {
  auto why = [](const TensorFn& fn) {
    std::string w;
    EXPECT_FALSE(compile_score_mod(fn, &w));
    return w;
  };
  EXPECT_NE(why([](const std::vector<Tensor>& a) {
              return std::vector<Tensor>{a[0] - a[0].sum({-1}, true)};
            }).find("'sum'"), std::string::npos);
  EXPECT_NE(why([](const std::vector<Tensor>& a) {
              return std::vector<Tensor>{a[0] + a[3].sum().item<double>()};
            }).find("item"), std::string::npos);
  EXPECT_NE(why([](const std::vector<Tensor>& a) { return std::vector<Tensor>{sin(a[0])}; }).find("derivative"),
            std::string::npos);
  Tensor t32 = arange(0, 8, 1, kInt32);
  EXPECT_NE(why([&](const std::vector<Tensor>& a) {
              return std::vector<Tensor>{a[0] + index(t32, {a[4]})};
            }).find("int32"), std::string::npos);
  Tensor mat = seeded({4, 1}, 7);
  EXPECT_NE(why([&](const std::vector<Tensor>& a) { return std::vector<Tensor>{a[0] + index(mat, {a[2]})}; })
                .find("fewer indices"),
            std::string::npos);
}
