// sort / argsort against a stable reference per row: every dim, layouts, dtypes with many
// ties, NaN placement as in PyTorch, descending order keeping ties stable.
#include "test_util.h"

namespace flambeau::testing {
namespace {

TEST(Sort, MatchesStableReferenceAlongEveryDim) {
  const Dims shape = {4, 37, 6};
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt32, kInt64, kUInt8})
    for (int64_t dim : {0, 1, 2, -1})
      for (bool descending : {false, true})
        for (Layout layout : {Layout::Contiguous, Layout::Transposed, Layout::Strided}) {
          Tensor x = random_tensor(shape, dt, layout, 5, 0, 6);  // few distinct values: many ties
          auto [v, i] = sort(x, dim, descending);
          ASSERT_EQ(i.dtype(), kInt64);
          ASSERT_EQ(v.dtype(), dt);
          const int64_t d = dim < 0 ? dim + 3 : dim;
          const Dims st = contiguous_strides(shape);
          std::vector<double> xv = values(x), vv = values(v), iv = values(i);
          for (size_t s = 0; s < xv.size(); ++s) {
            if ((int64_t(s) / st[d]) % shape[d] != 0) continue;
            std::vector<int64_t> order(size_t(shape[d]));
            std::iota(order.begin(), order.end(), 0);
            auto key = [&](int64_t k) { return xv[s + size_t(k * st[d])]; };
            std::stable_sort(order.begin(), order.end(),
                             [&](int64_t a, int64_t b) { return descending ? key(b) < key(a) : key(a) < key(b); });
            for (int64_t k = 0; k < shape[d]; ++k) {
              const size_t at = s + size_t(k * st[d]);
              ASSERT_EQ(iv[at], double(order[size_t(k)])) << dtype_name(dt) << " dim " << dim << " desc " << descending;
              ASSERT_EQ(vv[at], key(order[size_t(k)]));
            }
          }
          EXPECT_TRUE(bitwise_equal(argsort(x, dim, descending), i));
        }
}

TEST(Sort, NaNPlacementAndEdgeCases) {
  Tensor x = from_vector<float>({3, NAN, -1, INFINITY, NAN, 2});
  auto [a, ai] = sort(x);
  std::vector<double> av = values(a);
  EXPECT_EQ(std::vector<double>(av.begin(), av.begin() + 4), (std::vector<double>{-1, 2, 3, INFINITY}));
  EXPECT_TRUE(std::isnan(av[4]) && std::isnan(av[5]));
  EXPECT_EQ(values(ai), (std::vector<double>{2, 5, 0, 3, 1, 4}));
  auto [dv, di] = sort(x, 0, true);
  EXPECT_TRUE(std::isnan(values(dv)[0]));
  EXPECT_EQ(values(di), (std::vector<double>{1, 4, 3, 0, 5, 2}));
  EXPECT_EQ(sort(scalar_tensor(2.0)).first.item<double>(), 2.0);
  EXPECT_EQ(sort(zeros({0, 3}), 0).first.sizes(), (Dims{0, 3}));
  EXPECT_THROW(sort(ones({2}), 1), IndexError);
  const int saved = get_num_threads();
  Tensor big = random_tensor({500, 300}, kFloat32, Layout::Contiguous, 9);
  set_num_threads(1);
  Tensor one = argsort(big, 1);
  set_num_threads(2);
  EXPECT_TRUE(bitwise_equal(one, argsort(big, 1)));
  set_num_threads(saved);
}

}  // namespace
}  // namespace flambeau::testing
