// FlexAttention: block masks (structure, combinators, slicing, cropping), the kernel against a
// float64 reference with materialised scores and mask (values, logsumexp and gradients,
// through autograd), 16-bit inputs, decoding, determinism across runs and thread counts, and
// input errors.
#include "flambeau/nn/flex_attention.h"

#include <tuple>

#include "flambeau/kernels/cpu/simd_gemm_small.h"
#include "test_util.h"

namespace flambeau::testing {
namespace {

namespace fa = nn::attention;
using MaskFn = std::function<bool(int64_t, int64_t, int64_t, int64_t)>;
using ScoreRef = std::function<Tensor(const Tensor&)>;  // on float64 scores [B, H, L, S]

Tensor bool_mask(const MaskFn& m, int64_t B, int64_t H, int64_t L, int64_t S) {
  std::vector<bool> v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < S; ++j) v.push_back(m ? m(b, h, i, j) : true);
  std::vector<uint8_t> u(v.begin(), v.end());
  return ne(from_vector(u, Dims{B, H, L, S}), 0);
}

// softmax(where(mask, mod(q k^T * scale), -inf)) v in float64, rows with no key -> 0.
std::pair<Tensor, Tensor> reference(const Tensor& q, const Tensor& k, const Tensor& v, const MaskFn& mask,
                                    const ScoreRef& mod, int64_t G = 1) {
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
  auto rep = [&](const Tensor& t) {
    if (G == 1) return t;
    Dims ex{t.size(0), t.size(1), G, t.size(2), t.size(3)};
    return t.unsqueeze(2).expand(ex).reshape({t.size(0), t.size(1) * G, t.size(2), t.size(3)});
  };
  Tensor s = mul(matmul(q, rep(k).transpose(-1, -2)), 1.0 / std::sqrt(double(q.size(3))));
  if (mod) s = mod(s);
  const Tensor m = bool_mask(mask, B, H, L, S), any_row = any(m, {-1}, true);
  s = masked_fill(masked_fill(s, logical_not(m), -INFINITY), logical_not(any_row), 0.0);
  const Tensor lse = masked_fill(logsumexp(s, {-1}), logical_not(any_row.squeeze(-1)), -INFINITY);
  const Tensor p = mul(softmax(s, -1), any_row);
  return {matmul(p, rep(v)), lse};
}

struct Case {
  const char* name;
  int64_t B = 1, Hq = 2, Hkv = 2, L = 150, S = 150, E = 16, Ev = 8, block = 64, kv_block = 0;  // 0: = block
  MaskFn mask;                 // reference mask (empty: none)
  fa::MaskModPtr mask_mod;     // the same, for create_block_mask (null: no block mask)
  int64_t mask_B = 0, mask_H = 0;  // block mask dims (0: B / Hq)
  fa::ScoreModPtr score_mod;
  ScoreRef score_ref;
};

Tensor leaf(const Dims& shape, uint64_t seed, double lo = -2, double hi = 2) {
  return random_tensor(shape, kFloat64, Layout::Contiguous, seed, lo, hi).requires_grad_();
}

// Runs the case in float32 and compares output, lse and q/k/v grads (and extra leaves).
void check_case(const Case& c, std::vector<Tensor> extra64 = {}, std::vector<Tensor> extra32 = {}) {
  SCOPED_TRACE(c.name);
  Tensor q = leaf({c.B, c.Hq, c.L, c.E}, 1), k = leaf({c.B, c.Hkv, c.S, c.E}, 2), v = leaf({c.B, c.Hkv, c.S, c.Ev}, 3);
  Tensor q32 = q.detach().to(kFloat32).requires_grad_(), k32 = k.detach().to(kFloat32).requires_grad_(),
         v32 = v.detach().to(kFloat32).requires_grad_();
  std::optional<fa::BlockMask> bm;
  if (c.mask_mod)
    bm = fa::create_block_mask(c.mask_mod, c.mask_B ? c.mask_B : c.B, c.mask_H ? c.mask_H : c.Hq, c.L, c.S, c.block,
                               c.kv_block ? c.kv_block : c.block);
  auto [out, lse] = fa::flex_attention(q32, k32, v32, c.score_mod, bm, {}, c.Hq != c.Hkv, true);
  auto [want, want_lse] = reference(q, k, v, c.mask, c.score_ref, c.Hq / c.Hkv);
  EXPECT_TRUE(all_close(values(out), values(want), 2e-5, 2e-5));
  EXPECT_TRUE(all_close(values(lse), values(want_lse), 2e-5, 2e-5));
  Tensor g = random_tensor(out.sizes(), kFloat64, Layout::Contiguous, 4);
  std::vector<Tensor> in32{q32, k32, v32}, in64{q, k, v};
  for (auto& t : extra32) in32.push_back(t);
  for (auto& t : extra64) in64.push_back(t);
  auto got_g = autograd::grad({out}, in32, {g.to(kFloat32)});
  auto want_g = autograd::grad({want}, in64, {g});
  for (size_t i = 0; i < in32.size(); ++i)
    EXPECT_TRUE(all_close(values(got_g[i]), values(want_g[i]), 1e-4, 1e-4)) << "grad " << i;
}

TEST(FlexAttention, BlockMaskStructure) {
  const fa::BlockMask m = fa::create_block_mask(fa::causal_mask(), 1, 1, 256, 256, 64, 64);
  EXPECT_EQ(values(m.kv_num_blocks), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(values(m.full_kv_num_blocks), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(values(m.kv_indices.select(2, 3)), (std::vector<double>{3, 0, 0, 0}));
  EXPECT_EQ(values(m.full_kv_indices.select(2, 3)), (std::vector<double>{0, 1, 2, 0}));
  EXPECT_EQ(values(m.full_q_num_blocks), (std::vector<double>{3, 2, 1, 0}));
  EXPECT_EQ(values(m.full_q_indices.select(2, 0)), (std::vector<double>{1, 2, 3, 0}));
  EXPECT_DOUBLE_EQ(m.sparsity(), 100.0 * (1 - 10.0 / 16));
  EXPECT_EQ(values(m.to_dense()), (std::vector<double>{1, 0, 0, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 1}));
  // A C++ lambda gives the same structure as the built-in (which classifies in closed form).
  const fa::BlockMask ml = fa::create_block_mask([](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv; }, 1, 1,
                                                 256, 256, 64);
  for (auto [a, b] : {std::pair{&m.kv_indices, &ml.kv_indices}, {&m.full_kv_indices, &ml.full_kv_indices},
                      {&m.kv_num_blocks, &ml.kv_num_blocks}, {&m.q_indices, &ml.q_indices}})
    EXPECT_EQ(values(*a), values(*b));
  // Combinators: causal and a window of 64 -> 2 blocks per row; causal or noop -> all full.
  const auto w = fa::create_block_mask(fa::and_masks(fa::causal_mask(), [](int64_t, int64_t, int64_t q, int64_t kv) {
                                         return q - kv <= 64;
                                       }), 1, 1, 256, 256, 64);
  EXPECT_EQ(values(w.to_dense()), (std::vector<double>{1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 1}));
  EXPECT_EQ(values(w.full_kv_num_blocks), (std::vector<double>{0, 0, 0, 0}));
  const auto o = fa::create_block_mask(fa::or_masks(fa::causal_mask(), fa::noop_mask()), 2, 1, 100, 100, 64);
  EXPECT_EQ(values(o.full_kv_num_blocks), (std::vector<double>{2, 2, 2, 2}));
  EXPECT_DOUBLE_EQ(o.sparsity(), 100.0 * (1 - 8 * 64.0 * 64 / 20000));  // padding counts, as in PyTorch
  // Slicing keeps rank; from_kv_blocks rebuilds the same transposes; adjust crops.
  const auto hm = fa::create_block_mask([](int64_t, int64_t h, int64_t q, int64_t kv) { return h == 0 || q >= kv; }, 1,
                                        3, 256, 256, 64);
  const auto s1 = hm.slice(0, 1, 1, 3);
  EXPECT_EQ(s1.kv_num_blocks.sizes(), (Dims{1, 2, 4}));
  EXPECT_EQ(values(s1.to_dense()), values(hm.to_dense().slice(1, 1, 3)));
  const auto rb = fa::from_kv_blocks(m.kv_num_blocks, m.kv_indices, m.full_kv_num_blocks, m.full_kv_indices, 64, 64);
  EXPECT_EQ(values(rb.q_indices), values(m.q_indices));
  EXPECT_EQ(rb.q_len, 256);
  const auto a = m.adjust(100, 130);
  EXPECT_EQ(a.kv_indices.sizes(), (Dims{1, 1, 2, 3}));
  EXPECT_EQ(values(a.to_dense()), (std::vector<double>{1, 0, 0, 1, 1, 0}));
  EXPECT_THROW(m.adjust(300, 10), ValueError);
  EXPECT_THROW(fa::from_kv_blocks(m.kv_num_blocks, add(m.kv_indices, 7)), IndexError);
  EXPECT_THROW(fa::create_block_mask(fa::causal_mask(), 1, 1, 0, 10), ValueError);
  EXPECT_NE(m.to_string().find("causal_mask"), std::string::npos);
}

TEST(FlexAttention, MasksMatchReference) {
  auto causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv; };
  Case plain{"no mask"};
  check_case(plain);
  Case c{"causal, 150 not a multiple of 64"};
  c.mask = causal, c.mask_mod = fa::causal_mask();
  check_case(c);
  Case w{"sliding window 40, blocks of 32"};
  w.block = 32, w.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv && q - kv <= 40; };
  w.mask_mod = fa::sliding_window_mask(40);
  check_case(w);
  Case p{"prefix-LM 50, Q_LEN 70 != KV_LEN 200"};
  p.L = 70, p.S = 200, p.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv < 50 || q >= kv; };
  p.mask_mod = fa::prefix_lm_mask(50);
  check_case(p);
  // Documents of batch-dependent lengths, with causal.
  std::vector<int64_t> ids;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 150; ++i) ids.push_back(b == 0 ? i / 40 : i / 70);
  const Tensor doc = from_vector(ids, Dims{2, 150});
  Case d{"document + causal, B=2"};
  d.B = 2, d.mask = [ids](int64_t b, int64_t, int64_t q, int64_t kv) {
    return ids[size_t(b * 150 + q)] == ids[size_t(b * 150 + kv)] && q >= kv;
  };
  d.mask_mod = fa::and_masks(fa::document_mask(doc), fa::causal_mask());
  check_case(d);
  // Ids that repeat after other documents (not one run each): the per-element path.
  std::vector<int64_t> ids2;
  for (int64_t i = 0; i < 150; ++i) ids2.push_back((i / 30) % 3);
  Case u{"document ids that come back, no causal"};
  u.mask = [ids2](int64_t, int64_t, int64_t q, int64_t kv) { return ids2[size_t(q)] == ids2[size_t(kv)]; };
  u.mask_mod = fa::document_mask(from_vector(ids2, Dims{150}));
  check_case(u);
  // Per-head mask broadcast over batch (mask B=1, H=2), and a mask with fully masked rows.
  Case h{"head-dependent mask broadcast over batch, GQA 4/2"};
  h.B = 2, h.Hq = 4, h.Hkv = 2, h.mask_B = 1;
  h.mask = [](int64_t, int64_t hh, int64_t q, int64_t kv) { return (q + hh) % 3 != 0 && kv <= q + hh * 10; };
  h.mask_mod = fa::make_mask_mod(h.mask);
  check_case(h);
  Case f{"fused one-pass backward (B * Hkv >= 8), causal, GQA 8/4"};
  f.B = 2, f.Hq = 8, f.Hkv = 4, f.L = 100, f.S = 140, f.block = 32, f.mask_B = 1, f.mask_H = 1;
  f.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q + 40; };
  f.mask_mod = fa::make_mask_mod(f.mask);
  check_case(f);
  Case nb{"blocks (200, 96): q tiles inside a block, kv blocks across 256-key windows"};
  nb.L = 300, nb.S = 700, nb.block = 200, nb.kv_block = 96;
  nb.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= 2 * q + 50 && kv % 11 != 4; };
  nb.mask_mod = fa::make_mask_mod(nb.mask);
  check_case(nb);
  Case e{"empty rows, one head mask broadcast"};
  e.mask_H = 1, e.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return q % 7 != 3 && kv <= q; };
  e.mask_mod = fa::make_mask_mod(e.mask);
  check_case(e);
}

TEST(FlexAttention, ScoreModsMatchReference) {
  const int64_t L = 150;
  auto rel = [&](int64_t H) {  // [H, L, L] float64 index tensor q - kv
    std::vector<int64_t> idx;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < L; ++j) idx.push_back(i - j);
    return from_vector(idx, Dims{1, H, L, L});
  };
  Case a{"alibi + causal"};
  const Tensor slopes = from_vector(std::vector<double>{0.5, 0.25});
  a.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv; }, a.mask_mod = fa::causal_mask();
  a.score_mod = fa::alibi(slopes);
  a.score_ref = [&](const Tensor& s) { return sub(s, mul(rel(2), slopes.reshape({1, 2, 1, 1}))); };
  check_case(a);
  Case sc{"tanh softcap 2"};
  sc.score_mod = fa::tanh_softcap(2.0);
  sc.score_ref = [](const Tensor& s) { return mul(tanh(div(s, 2.0)), 2.0); };
  check_case(sc);
  Case lam{"generic C++ lambda, derivative through Dual"};
  lam.score_mod = fa::make_score_mod([](auto s, int64_t, int64_t h, int64_t q, int64_t kv) {
    return s * s * 0.25 + double(h) - 0.01 * double(q - kv);
  });
  lam.score_ref = [&](const Tensor& s) {
    Tensor hh = arange(2).reshape({1, 2, 1, 1}).to(kFloat64);
    return sub(add(mul(mul(s, s), 0.25), hh), mul(rel(1).to(kFloat64), 0.01));
  };
  check_case(lam);
  // Learnable relative bias, table [H, 2N - 1], N = 160 >= L, gradient to the table.
  const int64_t N = 160;
  Tensor table64 = leaf({2, 2 * N - 1}, 9, -1, 1), table32 = table64.detach().to(kFloat32).requires_grad_();
  Case rb{"learnable relative bias + sliding window"};
  rb.mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return q >= kv && q - kv < 60; };
  rb.mask_mod = fa::make_mask_mod(rb.mask), rb.block = 32;
  rb.score_mod = fa::relative_bias(table32);
  rb.score_ref = [&](const Tensor& s) {
    const Tensor idx = add(rel(1).reshape({L, L}), N - 1).reshape({1, L * L}).expand({2, L * L});
    return add(s, gather(table64, 1, idx).reshape({1, 2, L, L}));
  };
  check_case(rb, {table64}, {table32});
}

TEST(FlexAttention, Float16AndDecode) {
  Tensor q = random_tensor({1, 2, 100, 32}, kFloat32, Layout::Contiguous, 1, -2, 2),
         k = random_tensor({1, 2, 300, 32}, kFloat32, Layout::Contiguous, 2, -2, 2),
         v = random_tensor({1, 2, 300, 16}, kFloat32, Layout::Contiguous, 3, -2, 2);
  const auto bm = fa::create_block_mask(fa::sliding_window_mask(80), 1, 1, 100, 300);
  const Tensor want = fa::flex_attention(q, k, v, nullptr, bm).first;
  for (DType dt : {kBFloat16, kFloat16}) {
    Tensor got = fa::flex_attention(q.to(dt), k.to(dt), v.to(dt), nullptr, bm).first;
    EXPECT_EQ(got.dtype(), dt);
    EXPECT_TRUE(all_close(values(got), values(want), 3e-2, 3e-2)) << dtype_name(dt);
  }
  // Decode: 3 queries at the end of a 3000-long cache (split over chunks), causal offset.
  Tensor qd = random_tensor({1, 4, 3, 32}, kFloat64, Layout::Contiguous, 5, -2, 2),
         kd = random_tensor({1, 2, 3000, 32}, kFloat64, Layout::Contiguous, 6, -2, 2),
         vd = random_tensor({1, 2, 3000, 16}, kFloat64, Layout::Contiguous, 7, -2, 2);
  auto mask = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= 2997 + q && kv % 5 != 0; };
  const auto dm = fa::create_block_mask(mask, 1, 1, 3, 3000, 32);  // 94 blocks: 3 chunks
  auto [out, lse] = fa::flex_attention(qd.to(kFloat32), kd.to(kFloat32), vd.to(kFloat32), nullptr, dm, {}, true, true);
  auto [ref, ref_lse] = reference(qd, kd, vd, mask, nullptr, 2);
  EXPECT_TRUE(all_close(values(out), values(ref), 2e-5, 2e-5));
  EXPECT_TRUE(all_close(values(lse), values(ref_lse), 2e-5, 2e-5));
}

TEST(FlexAttention, BackwardIsBitwiseDeterministic) {
  ThreadGuard guard;
  Tensor table = random_tensor({4, 599}, kFloat32, Layout::Contiguous, 8, -1, 1).requires_grad_();
  const auto bm = fa::create_block_mask(fa::sliding_window_mask(100), 1, 4, 200, 200, 64, 64);
  std::vector<std::vector<double>> runs;
  for (int threads : {1, 2, 2}) {
    set_num_threads(threads);
    Tensor q = random_tensor({2, 4, 200, 32}, kFloat32, Layout::Contiguous, 1).requires_grad_(),
           k = random_tensor({2, 2, 200, 32}, kFloat32, Layout::Contiguous, 2).requires_grad_(),
           v = random_tensor({2, 2, 200, 32}, kFloat32, Layout::Contiguous, 3).requires_grad_();
    table.set_grad(Tensor());
    Tensor o = fa::flex_attention(q, k, v, fa::relative_bias(table), bm, {}, true).first;
    sum(mul(o, o)).backward();
    runs.push_back(values(o));
    for (const Tensor* t : std::vector<const Tensor*>{&q, &k, &v, &table}) runs.push_back(values(t->grad()));
  }
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(runs[i], runs[i + 5]) << "1 vs 2 threads, tensor " << i;
    EXPECT_EQ(runs[i + 5], runs[i + 10]) << "run twice, tensor " << i;
  }
  // The one-pass backward (8 batch x kv-head pairs, no captured gradient).
  runs.clear();
  for (int threads : {1, 2, 2}) {
    set_num_threads(threads);
    Tensor q = random_tensor({2, 4, 200, 32}, kFloat32, Layout::Contiguous, 1).requires_grad_();
    Tensor o = fa::flex_attention(q, q, q, fa::tanh_softcap(5.0), fa::create_block_mask(fa::causal_mask(), 1, 1, 200, 200, 64)).first;
    sum(mul(o, o)).backward();
    runs.push_back(values(q.grad()));
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[1], runs[2]);
}

TEST(FlexAttention, TileKernels) {
  // Sizes cross the SIMD widths and the 6-row / 2-vector register blocks.
  for (int64_t n : {1, 7, 8, 17, 33, 256}) {
    std::vector<float> x(static_cast<size_t>(n));
    double want = 0;
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = i == 3 ? -INFINITY : -float(i % 50) * 0.37f - (i == 5 ? 90.f : 0.f);
    std::vector<float> y = x;
    const float got = kernels::exp_shift_sum_fast_f32(y.data(), n, 0.5f);
    for (int64_t i = 0; i < n; ++i) {
      const float arg = x[size_t(i)] - 0.5f;  // the kernel subtracts in float
      const double e = arg < -87 ? 0.0 : std::exp(double(arg));
      want += e;
      EXPECT_NEAR(y[size_t(i)], e, 4e-7 * e + 1e-30) << n << " " << i;
    }
    EXPECT_NEAR(got, want, 1e-6 * want);
  }
  std::vector<float> nan{NAN, -1.f};
  kernels::exp_shift_sum_fast_f32(nan.data(), 2, 0.f);
  EXPECT_TRUE(std::isnan(nan[0]));
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{13, 37, 19}, {6, 16, 64}, {1, 64, 256}, {7, 5, 3}}) {
    const std::vector<double> a = random_values(m * k, 1, -1, 1, false), b = random_values(k * n, 2, -1, 1, false);
    std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), c(size_t(m * n), 1.f), ct(size_t(m * n), 1.f);
    kernels::gemm_small_f32(m, n, k, 0.5f, af.data(), k, 1, bf.data(), n, 1.f, c.data(), n);
    std::vector<float> at(size_t(k * m));  // A given transposed: strides (1, m)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t e = 0; e < k; ++e) at[size_t(e * m + i)] = af[size_t(i * k + e)];
    kernels::gemm_small_f32(m, n, k, 0.5f, at.data(), 1, m, bf.data(), n, 0.f, ct.data(), n);
    std::vector<float> bt(size_t(n * k)), dots(size_t(m * n));
    for (int64_t e = 0; e < k; ++e)
      for (int64_t j = 0; j < n; ++j) bt[size_t(j * k + e)] = bf[size_t(e * n + j)];
    kernels::dot_rows_f32(m, n, k, 0.5f, af.data(), k, bt.data(), k, dots.data(), n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t e = 0; e < k; ++e) s += a[size_t(i * k + e)] * b[size_t(e * n + j)];
        EXPECT_NEAR(c[size_t(i * n + j)], 0.5 * s + 1, 1e-5);
        EXPECT_NEAR(ct[size_t(i * n + j)], 0.5 * s, 1e-5);
        EXPECT_NEAR(dots[size_t(i * n + j)], 0.5 * s, 1e-5);
      }
  }
}

TEST(FlexAttention, ModsSeeInPlaceUpdates) {
  // A score_mod built once over a table sees the optimizer's in-place updates (also of a
  // float64 table, which the mod keeps as a float32 copy).
  const Tensor q = random_tensor({1, 2, 20, 8}, kFloat32, Layout::Contiguous, 1);
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor table = zeros({2, 39}, dt);
    const auto mod = fa::relative_bias(table);
    const Tensor before = fa::flex_attention(q, q, q, mod).first;
    table.fill_(0.0);
    table.select(1, 19).fill_(5.0);  // bias the diagonal
    const Tensor after = fa::flex_attention(q, q, q, mod).first;
    const Tensor want = fa::flex_attention(q, q, q, fa::relative_bias(table)).first;
    EXPECT_EQ(values(after), values(want)) << dtype_name(dt);
    EXPECT_FALSE(all_close(values(after), values(before), 1e-3, 1e-3)) << dtype_name(dt);
  }
}

TEST(FlexAttention, BadInputs) {
  const Tensor q = zeros({1, 2, 8, 4}), k = zeros({1, 2, 8, 4}), v = zeros({1, 2, 8, 4});
  EXPECT_THROW(fa::flex_attention(q.squeeze(0), k, v, nullptr), ValueError);
  EXPECT_THROW(fa::flex_attention(q, k.to(kFloat64), v, nullptr), TypeError);
  EXPECT_THROW(fa::flex_attention(q.to(kFloat64), k.to(kFloat64), v.to(kFloat64), nullptr), TypeError);
  EXPECT_THROW(fa::flex_attention(q, zeros({1, 2, 8, 5}), v, nullptr), ValueError);
  EXPECT_THROW(fa::flex_attention(zeros({1, 4, 8, 4}), k, v, nullptr), ValueError);  // GQA needs the flag
  EXPECT_THROW(fa::flex_attention(zeros({1, 3, 8, 4}), k, v, nullptr, {}, {}, true), ValueError);
  try {
    fa::flex_attention(q, k, v, nullptr, fa::create_block_mask(fa::causal_mask(), 1, 1, 16, 16));
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("_adjust(8, 8)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(fa::flex_attention(q, k, v, nullptr, fa::create_block_mask(fa::causal_mask(), 1, 1, 4, 8)), ValueError);
  EXPECT_THROW(fa::flex_attention(q, k, v, nullptr, fa::create_block_mask(fa::causal_mask(), 3, 1, 8, 8)), ValueError);
  EXPECT_THROW(fa::flex_attention(q, k, v, fa::alibi(zeros({3}))), ValueError);
  EXPECT_THROW(fa::flex_attention(q, k, v, fa::relative_bias(zeros({2, 9}))), ValueError);  // N = 5 < 8
  EXPECT_THROW(fa::create_block_mask(fa::document_mask(zeros({4}, kInt64)), 1, 1, 8, 8), ValueError);
}

}  // namespace
}  // namespace flambeau::testing
