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

namespace flambeau::testing {
namespace {

TEST(Sort, TopkKthvalueUniqueSearchsorted) {
  Tensor x = from_vector<float>({5, 1, 4, 1, 3, 9, 2, 6}, Dims{2, 4});
  auto [tv, ti] = topk(x, 2, 1);
  EXPECT_EQ(values(tv), (std::vector<double>{5, 4, 9, 6}));
  EXPECT_EQ(values(ti), (std::vector<double>{0, 2, 1, 3}));
  EXPECT_THROW(topk(x, 3, 0, false), IndexError);  // k larger than dim 0 (size 2)
  EXPECT_THROW(topk(x, 5, 1), IndexError);
  auto [lv, li] = topk(x, 1, 0, false);
  EXPECT_EQ(values(lv), (std::vector<double>{3, 1, 2, 1}));
  EXPECT_EQ(values(li), (std::vector<double>{1, 0, 1, 0}));
  auto [kv, ki] = kthvalue(x, 2, 1);
  EXPECT_EQ(values(kv), (std::vector<double>{1, 3}));  // rows sorted: 1 1 4 5 / 2 3 6 9
  EXPECT_EQ(values(ki), (std::vector<double>{3, 0}));  // stable: the second 1 is at index 3
  EXPECT_EQ(kthvalue(x, 2, 1, true).first.sizes(), (Dims{2, 1}));
  EXPECT_THROW(kthvalue(x, 0, 1), IndexError);

  auto [u, inv, cnt] = unique(from_vector<int64_t>({3, 1, 3, 2, 1, 3}, Dims{2, 3}), true, true, true);
  EXPECT_EQ(values(u), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(inv.sizes(), (Dims{2, 3}));
  EXPECT_EQ(values(inv), (std::vector<double>{2, 0, 2, 1, 0, 2}));
  EXPECT_EQ(values(cnt), (std::vector<double>{2, 1, 3}));
  auto [un, in2, c2] = unique(from_vector<float>({NAN, 1, NAN}));
  EXPECT_EQ(un.numel(), 3);  // NaNs are not merged
  EXPECT_FALSE(in2.defined());
  EXPECT_FALSE(c2.defined());

  Tensor seq = from_vector<float>({1, 3, 5, 7, 9});
  Tensor q = from_vector<float>({3, 6, 9, 0, 10, NAN});
  EXPECT_EQ(values(searchsorted(seq, q)), (std::vector<double>{1, 3, 4, 0, 5, 5}));
  EXPECT_EQ(values(searchsorted(seq, q, true)), (std::vector<double>{2, 3, 5, 0, 5, 5}));
  Tensor seq2 = from_vector<float>({1, 3, 5, 2, 4, 6}, Dims{2, 3});
  EXPECT_EQ(values(searchsorted(seq2, from_vector<float>({3, 3}, Dims{2, 1}))), (std::vector<double>{1, 1}));
  EXPECT_THROW(searchsorted(seq2, from_vector<float>({3, 3, 3}, Dims{3, 1})), ValueError);
}

// Rows long enough for the radix path (> 256), and one row long enough to be split among
// threads: values and indices must equal a stable comparison sort, with 1 and 2 threads.
TEST(Sort, LongRowsMatchStableSortWithAnyThreadCount) {
  const int saved = get_num_threads();
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt16, kBFloat16})
    for (int64_t n : {int64_t(300), int64_t(200000)})
      for (bool descending : {false, true}) {
        Tensor x = random_tensor({n}, dt, Layout::Contiguous, 11, -50, 50);
        if (is_floating(dt)) {  // NaNs, signed zeros and infinities among many ties
          Tensor v = x.narrow(0, 0, 6);
          set_values(v, {NAN, -0.0, 0.0, INFINITY, -INFINITY, NAN});
        }
        std::vector<double> xv = values(x);
        std::vector<int64_t> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        auto less = [](double a, double b) { return !std::isnan(a) && (std::isnan(b) || a < b); };
        std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return descending ? less(xv[size_t(b)], xv[size_t(a)]) : less(xv[size_t(a)], xv[size_t(b)]);
        });
        set_num_threads(1);
        auto [v1, i1] = sort(x, 0, descending);
        set_num_threads(2);
        auto [v2, i2] = sort(x, 0, descending);
        ASSERT_TRUE(bitwise_equal(v1, v2) && bitwise_equal(i1, i2)) << dtype_name(dt) << " n " << n;
        std::vector<double> iv = values(i1);
        for (int64_t k = 0; k < n; ++k) ASSERT_EQ(iv[size_t(k)], double(order[size_t(k)])) << dtype_name(dt) << " at " << k;
        if (is_floating(dt)) {  // signed zeros come back as they were
          const std::vector<double> vv = values(v1);
          for (int64_t k = 0; k < n; ++k)
            if (vv[size_t(k)] == 0) ASSERT_EQ(std::signbit(vv[size_t(k)]), std::signbit(xv[size_t(order[size_t(k)])]));
        }
      }
  set_num_threads(saved);
}

TEST(Sort, TopkAndKthvalueAgreeWithSortOnLongRows) {
  Tensor x = random_tensor({3, 5000}, kFloat32, Layout::Transposed, 4, -20, 20);  // many ties
  Tensor with_nan = where(gt(random_tensor({3, 5000}, kFloat32, Layout::Contiguous, 5, 0, 1), 0.995), NAN, x);
  for (const Tensor& y : {x, with_nan})
    for (bool largest : {true, false})
      for (int64_t k : {1, 50, 600}) {
        auto [sv, si] = sort(y, 1, largest);
        auto [tv, ti] = topk(y, k, 1, largest);
        ASSERT_TRUE(bitwise_equal(ti, si.narrow(1, 0, k).contiguous())) << "largest " << largest << " k " << k;
        ASSERT_TRUE(bitwise_equal(tv, sv.narrow(1, 0, k).contiguous()));
      }
  for (bool largest : {true, false}) {
    auto [sv, si] = sort(x, 1, largest);
    auto [tv, ti] = topk(x, 50, 1, largest);
    EXPECT_TRUE(bitwise_equal(tv, sv.narrow(1, 0, 50).contiguous()));
    EXPECT_TRUE(bitwise_equal(ti, si.narrow(1, 0, 50).contiguous()));
  }
  auto [sv, si] = sort(x, 1);
  auto [kv, ki] = kthvalue(x, 777, 1);
  EXPECT_TRUE(bitwise_equal(kv, sv.select(1, 776).contiguous()));
  EXPECT_TRUE(bitwise_equal(ki, si.select(1, 776).contiguous()));
  EXPECT_EQ(topk(x, 0, 1).first.sizes(), (Dims{3, 0}));
}

}  // namespace
}  // namespace flambeau::testing
