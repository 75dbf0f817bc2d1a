// reduce_buffers on bfloat16 / float16 (the SIMD path: widen, combine, round once) against
// the scalar rule, bit for bit, over random values plus NaN, infinities and signed zeros,
// at lengths around the block size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "flambeau/distributed/backend.h"

using namespace flambeau;
using namespace flambeau::distributed;

namespace {

float scalar(RedOpType op, float x, float y) {
  switch (op) {
    case RedOpType::SUM: return x + y;
    case RedOpType::PRODUCT: return x * y;
    case RedOpType::MIN: return std::isnan(x) ? x : (std::isnan(y) ? y : (y < x ? y : x));
    default: return std::isnan(x) ? x : (std::isnan(y) ? y : (y > x ? y : x));
  }
}

template <class T>
void check(DType dtype) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 100);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 65504.0f, 1e-6f};
  for (size_t n : {size_t(0), size_t(1), size_t(2047), size_t(2048), size_t(5000)}) {
    std::vector<T> a(n), b(n), out(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = T(i % 13 == 0 ? specials[i % 7] : normal(rng));
      b[i] = T(i % 11 == 0 ? specials[(i / 11) % 7] : normal(rng));
    }
    for (RedOpType op : {RedOpType::SUM, RedOpType::PRODUCT, RedOpType::MIN, RedOpType::MAX}) {
      reduce_buffers(out.data(), a.data(), b.data(), n, dtype, op);
      for (size_t i = 0; i < n; ++i) {
        T want = T(scalar(op, float(a[i]), float(b[i])));
        if (std::isnan(float(want))) {
          EXPECT_TRUE(std::isnan(float(out[i]))) << red_op_name(op) << " at " << i;
        } else {
          EXPECT_EQ(std::memcmp(&out[i], &want, sizeof(T)), 0)
              << red_op_name(op) << " at " << i << ": " << float(a[i]) << ", " << float(b[i]) << " -> "
              << float(out[i]) << ", want " << float(want);
        }
      }
    }
  }
}

}  // namespace

TEST(ReduceBuffers, BFloat16MatchesTheScalarRuleBitwise) { check<BFloat16>(kBFloat16); }
TEST(ReduceBuffers, Float16MatchesTheScalarRuleBitwise) { check<Half>(kFloat16); }
