// SIMD random-number kernels: Philox4x32-10 on one block per 32-bit lane (the same words
// as philox4x32_10 in core/generator), and the float32 uniform and Box-Muller transforms
// of those words.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "flambeau/kernels/cpu/simd_random.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include "flambeau/core/generator.h"
#include "flambeau/kernels/cpu/simd_common-inl.h"
#include "flambeau/kernels/cpu/simd_random.h"

HWY_BEFORE_NAMESPACE();
namespace flambeau::kernels::HWY_NAMESPACE {

// Words of blocks counter, counter + 1, ... (4 words per block) into out.
void philox_words_impl(uint64_t counter, uint32_t k0, uint32_t k1, uint32_t* out, int64_t blocks) {
  int64_t b = 0;
#if HWY_TARGET != HWY_SCALAR  // one-lane vectors cannot be split into 64-bit halves
  const hn::ScalableTag<uint32_t> du;
  const hn::RepartitionToWide<decltype(du)> dw;
  const int64_t N = int64_t(hn::Lanes(du));
  const auto m0 = hn::Set(du, 0xD2511F53u), m1 = hn::Set(du, 0xCD9E8D57u);
  // lo/hi halves of the 32x32 -> 64 products of every lane.
  auto mul = [&](auto a, auto m, auto& lo, auto& hi) {
    const auto even = hn::MulEven(a, m);
    const auto odd = hn::MulEven(hn::BitCast(du, hn::ShiftRight<32>(hn::BitCast(dw, a))), m);
    lo = hn::OddEven(hn::BitCast(du, hn::ShiftLeft<32>(odd)), hn::BitCast(du, even));
    hi = hn::OddEven(hn::BitCast(du, odd), hn::BitCast(du, hn::ShiftRight<32>(even)));
  };
  for (; b + N <= blocks; b += N) {
    const uint64_t first = counter + uint64_t(b);
    // Counters (lo word, hi word) per lane; the carry into the high word is rare but real.
    HWY_ALIGN uint32_t lo_words[HWY_MAX_BYTES / 4], hi_words[HWY_MAX_BYTES / 4];
    for (int64_t l = 0; l < N; ++l) {
      lo_words[l] = uint32_t(first + uint64_t(l));
      hi_words[l] = uint32_t((first + uint64_t(l)) >> 32);
    }
    auto c0 = hn::Load(du, lo_words), c1 = hn::Load(du, hi_words), c2 = hn::Zero(du), c3 = hn::Zero(du);
    uint32_t key0 = k0, key1 = k1;
    for (int round = 0; round < 10; ++round) {
      hn::Vec<decltype(du)> lo0, hi0, lo1, hi1;
      mul(c0, m0, lo0, hi0);
      mul(c2, m1, lo1, hi1);
      c0 = hn::Xor(hn::Xor(hi1, c1), hn::Set(du, key0));
      c1 = lo1;
      c2 = hn::Xor(hn::Xor(hi0, c3), hn::Set(du, key1));
      c3 = lo0;
      key0 += 0x9E3779B9u;
      key1 += 0xBB67AE85u;
    }
    hn::StoreInterleaved4(c0, c1, c2, c3, du, out + 4 * b);
  }
#endif
  for (; b < blocks; ++b) {
    const uint64_t ctr = counter + uint64_t(b);
    const auto w = philox4x32_10({uint32_t(ctr), uint32_t(ctr >> 32), 0, 0}, {k0, k1});
    for (int l = 0; l < 4; ++l) out[4 * b + l] = w[size_t(l)];
  }
}

// [0, 1) from the top 24 bits of each word.
template <class D, class V>
HWY_INLINE hn::Vec<D> unit(D df, V w) {
  const hn::RebindToSigned<D> di;
  return hn::Mul(hn::ConvertTo(df, hn::BitCast(di, hn::ShiftRight<8>(w))), hn::Set(df, 0x1p-24f));
}

void uniform_f32_impl(const uint32_t* words, float* out, int64_t n, float from, float span, float below) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const int64_t N = int64_t(hn::Lanes(df));
  const auto f = hn::Set(df, from), s = hn::Set(df, span), hi = hn::Set(df, below);
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Min(hn::MulAdd(s, unit(df, hn::LoadU(du, words + i)), f), hi), df, out + i);
  for (; i < n; ++i) out[i] = std::min(from + span * (float(words[i] >> 8) * 0x1p-24f), below);
}

// Pairs of words (2j, 2j + 1) give outputs 2j (cos) and 2j + 1 (sin).
void box_muller_f32_impl(const uint32_t* words, float* out, int64_t n, float mean, float std) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const int64_t N = int64_t(hn::Lanes(df));
  const auto one = hn::Set(df, 1.0f), minus2 = hn::Set(df, -2.0f), two_pi = hn::Set(df, float(2 * M_PI));
  const auto vm = hn::Set(df, mean), vs = hn::Set(df, std);
  auto pair = [&](const uint32_t* w, float* o) {
    hn::Vec<decltype(du)> w0, w1;
    hn::LoadInterleaved2(du, w, w0, w1);
    const auto r = hn::Mul(vs, hn::Sqrt(hn::Mul(minus2, hn::Log(df, hn::Sub(one, unit(df, w0))))));
    const auto theta = hn::Mul(two_pi, unit(df, w1));
    hn::StoreInterleaved2(hn::MulAdd(r, hn::Cos(df, theta), vm), hn::MulAdd(r, hn::Sin(df, theta), vm), df, o);
  };
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) pair(words + i, out + i);
  if (i < n) {  // the tail through padded buffers (words come in pairs: n rounds up)
    HWY_ALIGN uint32_t w[2 * HWY_MAX_BYTES / 4] = {};
    HWY_ALIGN float o[2 * HWY_MAX_BYTES / 4];
    std::memcpy(w, words + i, size_t((n - i + 1) / 2 * 2) * 4);
    pair(w, o);
    std::memcpy(out + i, o, size_t(n - i) * 4);
  }
}

}  // namespace flambeau::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flambeau::kernels {
HWY_EXPORT(philox_words_impl);
HWY_EXPORT(uniform_f32_impl);
HWY_EXPORT(box_muller_f32_impl);
void philox_words(uint64_t counter, std::array<uint32_t, 2> key, uint32_t* out, int64_t blocks) {
  HWY_DYNAMIC_DISPATCH(philox_words_impl)(counter, key[0], key[1], out, blocks);
}
void uniform_f32(const uint32_t* words, float* out, int64_t n, float from, float span, float below) {
  HWY_DYNAMIC_DISPATCH(uniform_f32_impl)(words, out, n, from, span, below);
}
void box_muller_f32(const uint32_t* words, float* out, int64_t n, float mean, float std) {
  HWY_DYNAMIC_DISPATCH(box_muller_f32_impl)(words, out, n, mean, std);
}
}  // namespace flambeau::kernels
#endif
