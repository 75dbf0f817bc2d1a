// Joining and splitting: cat (promotion, skipped 1-D empties, error text), stack, split and
// chunk, with expected shapes and values from PyTorch 2.13.
#include <gtest/gtest.h>

#include "test_util.h"

using namespace flambeau;
using flambeau::testing::values;
using flambeau::testing::error_of;
using flambeau::testing::contains;

namespace {
using V = std::vector<int64_t>;
using D = std::vector<double>;


std::vector<V> shapes(const std::vector<Tensor>& ts) {
  std::vector<V> out;
  for (const Tensor& t : ts) out.push_back(t.sizes().vec());
  return out;
}
}  // namespace

TEST(Join, CatValuesAndDims) {
  Tensor a = arange(6).view({2, 3}), b = arange(6, 9).view({1, 3});
  Tensor c = cat({a, b});
  EXPECT_EQ(c.sizes().vec(), (V{3, 3}));
  EXPECT_EQ(c.dtype(), kInt64);
  EXPECT_EQ(values(c), (D{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_NE(c.storage(), a.storage());
  // along the last dim, with a transposed input
  Tensor t = cat({arange(6).view({2, 3}).t(), arange(3).view({3, 1})}, 1);
  EXPECT_EQ(t.sizes().vec(), (V{3, 3}));
  EXPECT_EQ(values(t), (D{0, 3, 0, 1, 4, 1, 2, 5, 2}));
  EXPECT_EQ(values(cat({a, a}, -1)), (D{0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}));
  // a strided (step-2) input and a broadcast (stride 0) input
  Tensor s = arange(10).slice(0, {}, {}, 2);
  Tensor e = scalar_tensor(7).expand({3});
  EXPECT_EQ(values(cat({s, e})), (D{0, 2, 4, 6, 8, 7, 7, 7}));
  // 0-size in the cat dim
  EXPECT_EQ(cat({zeros({0, 3}), ones({2, 3})}).sizes().vec(), (V{2, 3}));
  EXPECT_EQ(values(cat({ones({2, 0}), ones({2, 1})}, 1)), (D{1, 1}));
  // a single tensor is copied
  Tensor one = cat({a});
  EXPECT_NE(one.storage(), a.storage());
  EXPECT_EQ(values(one), values(a));
}

TEST(Join, CatPromotes) {
  Tensor c = cat({from_vector<int32_t>({1, 2}), from_vector<Half>({Half(1.5f)})});
  EXPECT_EQ(c.dtype(), kFloat16);
  EXPECT_EQ(values(c), (D{1, 2, 1.5}));
  Tensor u = cat({from_vector<bool>({true}), from_vector<uint8_t>({3})});
  EXPECT_EQ(u.dtype(), kUInt8);
  EXPECT_EQ(values(u), (D{1, 3}));
  EXPECT_EQ(cat({from_vector<int8_t>({-1}), from_vector<uint8_t>({200})}).dtype(), kInt16);
  EXPECT_EQ(values(cat({from_vector<int8_t>({-1}), from_vector<uint8_t>({200})})), (D{-1, 200}));
  EXPECT_EQ(cat({zeros({1}, kBFloat16), zeros({1}, kFloat16)}).dtype(), kFloat32);
  // a skipped empty tensor still takes part in promotion (torch gives float64)
  Tensor p = cat({empty({0}, kFloat64), arange(2)});
  EXPECT_EQ(p.dtype(), kFloat64);
  EXPECT_EQ(values(p), (D{0, 1}));
}

TEST(Join, CatSkipsOneDimEmpty) {
  Tensor m = arange(6).view({2, 3});
  Tensor c = cat({empty({0}, kInt64), m, empty({0}, kInt64), m}, 0);
  EXPECT_EQ(c.sizes().vec(), (V{4, 3}));
  EXPECT_EQ(values(c.select(0, 2)), (D{0, 1, 2}));
  EXPECT_EQ(cat({m, empty({0})}, 1).sizes().vec(), (V{2, 3}));
  Tensor all_empty = cat({empty({0}), empty({0})});
  EXPECT_EQ(all_empty.sizes().vec(), (V{0}));
  // a 2-D empty tensor is not skipped: its other sizes must match
  EXPECT_THROW(cat({zeros({0, 2}), m}), ValueError);
}

TEST(Join, CatErrors) {
  EXPECT_THROW(cat({}), ValueError);
  EXPECT_THROW(cat({scalar_tensor(1.0), scalar_tensor(2.0)}), ValueError);
  EXPECT_THROW(cat({zeros({2, 2}), zeros({2})}), ValueError);
  EXPECT_THROW(cat({zeros({2, 2}), zeros({2, 2})}, 2), IndexError);
  const std::string msg = error_of<ValueError>([] { cat({zeros({2, 2}), zeros({3, 3})}, 1); });
  EXPECT_TRUE(contains(msg, "[cat]")) << msg;
  EXPECT_TRUE(contains(msg, "Sizes of tensors must match except in dimension 1") ||
              contains(msg, "sizes of tensors must match except in dimension 1"))
      << msg;
  EXPECT_TRUE(contains(msg, "expected size 2 but got size 3 for tensor number 1")) << msg;
  EXPECT_TRUE(contains(msg, "(2, 2)") && contains(msg, "(3, 3)")) << msg;
  // the tensor number counts every tensor in the list, skipped empties included (as torch)
  const std::string m2 = error_of<ValueError>([] { cat({empty({0}), zeros({2, 2}), zeros({3, 3})}, 0); });
  EXPECT_TRUE(contains(m2, "expected size 2 but got size 3 for tensor number 2")) << m2;
}

TEST(Join, Stack) {
  Tensor x = arange(6).view({2, 3});
  Tensor y = x.add(10);
  Tensor s0 = stack({x, y});
  EXPECT_EQ(s0.sizes().vec(), (V{2, 2, 3}));
  EXPECT_EQ(values(s0), (D{0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15}));
  Tensor s1 = stack({x, y}, 1);
  EXPECT_EQ(s1.sizes().vec(), (V{2, 2, 3}));
  EXPECT_EQ(values(s1), (D{0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15}));
  Tensor sl = stack({x, y}, -1);
  EXPECT_EQ(sl.sizes().vec(), (V{2, 3, 2}));
  EXPECT_EQ(values(sl), (D{0, 10, 1, 11, 2, 12, 3, 13, 4, 14, 5, 15}));
  Tensor sc = stack({scalar_tensor(1.0), scalar_tensor(2.0)});
  EXPECT_EQ(sc.sizes().vec(), (V{2}));
  EXPECT_EQ(values(sc), (D{1, 2}));
  Tensor se = stack({empty({0}), empty({0}), empty({0})});
  EXPECT_EQ(se.sizes().vec(), (V{3, 0}));
  EXPECT_EQ(stack({x.to(kInt32), x.to(kFloat64)}).dtype(), kFloat64);
  EXPECT_THROW(stack({x, arange(3)}), ValueError);
  EXPECT_THROW(stack({x, x}, 3), IndexError);
  EXPECT_THROW(stack({}), ValueError);
}

TEST(Join, SplitBySize) {
  Tensor a = arange(7);
  std::vector<Tensor> p = split(a, 3);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(values(p[0]), (D{0, 1, 2}));
  EXPECT_EQ(values(p[1]), (D{3, 4, 5}));
  EXPECT_EQ(values(p[2]), (D{6}));
  EXPECT_EQ(p[1].storage(), a.storage());  // views
  EXPECT_EQ(p[1].storage_offset(), 3);
  EXPECT_EQ(split(a, 7).size(), 1u);
  EXPECT_EQ(split(a, 100).size(), 1u);
  Tensor m = arange(10).view({2, 5});
  std::vector<Tensor> q = split(m, 2, 1);
  EXPECT_EQ(shapes(q), (std::vector<V>{{2, 2}, {2, 2}, {2, 1}}));
  EXPECT_EQ(values(q[2]), (D{4, 9}));
  EXPECT_EQ(values(split(m, 1, -2)[1]), (D{5, 6, 7, 8, 9}));
  // a 0-size dim gives one empty piece
  EXPECT_EQ(shapes(split(empty({0, 2}), 3)), (std::vector<V>{{0, 2}}));
  EXPECT_EQ(shapes(split(empty({0, 2}), 0)), (std::vector<V>{{0, 2}}));
  EXPECT_THROW(split(a, 0), ValueError);
  EXPECT_THROW(split(a, -1), ValueError);
  EXPECT_THROW(split(scalar_tensor(1.0), 1), ValueError);
  EXPECT_THROW(split(a, 1, 1), IndexError);
}

TEST(Join, SplitWithSizes) {
  Tensor m = arange(10).view({2, 5});
  std::vector<Tensor> p = split(m, std::vector<int64_t>{1, 0, 4}, 1);
  EXPECT_EQ(shapes(p), (std::vector<V>{{2, 1}, {2, 0}, {2, 4}}));
  EXPECT_EQ(values(p[0]), (D{0, 5}));
  EXPECT_EQ(values(p[2]), (D{1, 2, 3, 4, 6, 7, 8, 9}));
  EXPECT_EQ(p[2].storage_offset(), 1);
  const std::string msg = error_of<ValueError>([] { split(arange(5), std::vector<int64_t>{2, 2}); });
  EXPECT_TRUE(contains(msg, "[split]")) << msg;
  EXPECT_TRUE(contains(msg, "split_sizes to sum exactly to 5")) << msg;
  EXPECT_THROW(split(arange(5), std::vector<int64_t>{2, 4}), ValueError);
  EXPECT_THROW(split(arange(5), std::vector<int64_t>{6, -1}), ValueError);
}

TEST(Join, Chunk) {
  auto vals = [](const std::vector<Tensor>& ts) {
    std::vector<D> out;
    for (const Tensor& t : ts) out.push_back(values(t));
    return out;
  };
  EXPECT_EQ(vals(chunk(arange(6), 4)), (std::vector<D>{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(vals(chunk(arange(5), 3)), (std::vector<D>{{0, 1}, {2, 3}, {4}}));
  EXPECT_EQ(vals(chunk(arange(5), 10)), (std::vector<D>{{0}, {1}, {2}, {3}, {4}}));
  EXPECT_EQ(vals(chunk(arange(6), 1)), (std::vector<D>{{0, 1, 2, 3, 4, 5}}));
  std::vector<Tensor> c = chunk(arange(12).view({3, 4}), 2, 1);
  EXPECT_EQ(shapes(c), (std::vector<V>{{3, 2}, {3, 2}}));
  EXPECT_EQ(values(c[1]), (D{2, 3, 6, 7, 10, 11}));
  // torch: chunking a 0-size dim gives `chunks` empty pieces
  EXPECT_EQ(shapes(chunk(empty({0}), 3)), (std::vector<V>{{0}, {0}, {0}}));
  EXPECT_EQ(shapes(chunk(empty({2, 0}), 2, 1)), (std::vector<V>{{2, 0}, {2, 0}}));
  EXPECT_THROW(chunk(arange(5), 0), ValueError);
  EXPECT_THROW(chunk(scalar_tensor(1.0), 2), ValueError);
}
