// View ops: sizes, strides, storage offset and values of view, reshape, permute, transpose,
// expand, slice, select, narrow, squeeze/unsqueeze, flatten/unflatten and as_strided, checked
// against the values PyTorch 2.13 gives for the same calls.
#include <gtest/gtest.h>

#include "test_util.h"

using namespace flambeau;
using flambeau::testing::values;

namespace {

using V = std::vector<int64_t>;
using D = std::vector<double>;

// 0, 1, ..., numel-1 as float32 in `shape`.
Tensor iota(const Dims& shape) { return arange(numel_of(shape)).to(kFloat32).view(shape); }

void expect_geometry(const Tensor& t, const V& sizes, const V& strides, int64_t offset) {
  EXPECT_EQ(t.sizes().vec(), sizes);
  EXPECT_EQ(t.strides().vec(), strides);
  EXPECT_EQ(t.storage_offset(), offset);
}

bool shares(const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); }

}  // namespace

TEST(View, ContiguousAndInferred) {
  Tensor a = iota({12});
  Tensor v = a.view({3, 4});
  expect_geometry(v, {3, 4}, {4, 1}, 0);
  EXPECT_TRUE(shares(a, v));
  EXPECT_EQ(v.data_ptr(), a.data_ptr());
  expect_geometry(a.view({-1, 6}), {2, 6}, {6, 1}, 0);
  expect_geometry(a.view({2, -1, 3}), {2, 2, 3}, {6, 3, 1}, 0);
  expect_geometry(a.view({12, -1}), {12, 1}, {1, 1}, 0);
  EXPECT_EQ(values(a.view({2, -1, 3}).select(1, 1)), (D{3, 4, 5, 9, 10, 11}));
}

TEST(View, InvalidShapes) {
  Tensor a = iota({12});
  EXPECT_THROW(a.view({-1, -1}), ValueError);
  EXPECT_THROW(a.view({5, -1}), ValueError);
  EXPECT_THROW(a.view({5}), ValueError);
  EXPECT_THROW(a.view({13}), ValueError);
  EXPECT_THROW(a.view({-2, 6}), ValueError);
  // 0 elements: -1 is ambiguous
  EXPECT_THROW(empty({0, 3}).view({3, 0, -1}), ValueError);
  EXPECT_THROW(a.reshape({7, -1}), ValueError);
}

TEST(View, StridesForbidView) {
  Tensor t = iota({3, 4}).t();  // (4, 3) strides (1, 4)
  try {
    t.view({12});
    FAIL() << "view of a transposed tensor as 1-D must fail";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("[view]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(iota({3, 4}).slice(1, 0, 2).view({6}), ValueError);
  // Views that split one dim or add size-1 dims still work (torch's strides).
  Tensor v = t.view({2, 2, 3});
  expect_geometry(v, {2, 2, 3}, {2, 1, 4}, 0);
  EXPECT_EQ(values(v), (D{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  expect_geometry(t.view({4, 3, 1}), {4, 3, 1}, {1, 4, 4}, 0);
  expect_geometry(t.view({1, 4, 3}), {1, 4, 3}, {4, 1, 4}, 0);
  // A step-2 slice whose rows are evenly spaced is viewable as 1-D.
  Tensor s = iota({3, 4}).slice(1, {}, {}, 2);
  expect_geometry(s, {3, 2}, {4, 2}, 0);
  expect_geometry(s.view({6}), {6}, {2}, 0);
  expect_geometry(s.view({3, 2, 1}), {3, 2, 1}, {4, 2, 2}, 0);
  expect_geometry(s.view({3, 1, 2}), {3, 1, 2}, {4, 4, 2}, 0);
}

TEST(View, ReshapeViewsWhenPossibleElseCopies) {
  Tensor a = iota({2, 3, 4});
  Tensor r = a.reshape({6, -1});
  expect_geometry(r, {6, 4}, {4, 1}, 0);
  EXPECT_TRUE(shares(a, r));
  // permuted but still viewable: shares storage
  Tensor q = a.permute({2, 0, 1});
  Tensor qr = q.reshape({4, 6});
  EXPECT_TRUE(shares(q, qr));
  expect_geometry(qr, {4, 6}, {1, 4}, 0);
  EXPECT_EQ(values(qr.select(0, 1)), (D{1, 5, 9, 13, 17, 21}));
  // transposed: needs a copy
  Tensor t = a.transpose(0, 2);  // (4, 3, 2)
  Tensor c = t.reshape({4, 6});
  EXPECT_FALSE(shares(t, c));
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(values(c.select(0, 0)), (D{0, 12, 4, 16, 8, 20}));
  EXPECT_EQ(values(c.select(0, 3)), (D{3, 15, 7, 19, 11, 23}));
  // writing the copy leaves the base alone; writing the view does not
  c.fill_(-1);
  EXPECT_EQ(values(a), values(iota({2, 3, 4})));
  r.select(0, 0).fill_(100);
  EXPECT_EQ(values(a.select(0, 0).select(0, 0)), (D{100, 100, 100, 100}));
}

TEST(View, PermuteTransposeT) {
  Tensor a = iota({2, 3, 4});
  Tensor p = a.permute({2, 0, 1});
  expect_geometry(p, {4, 2, 3}, {1, 12, 4}, 0);
  EXPECT_TRUE(shares(a, p));
  // p[i, j, k] == a[j, k, i]
  EXPECT_EQ(p.select(0, 3).select(0, 1).select(0, 2).item<double>(), 12 + 8 + 3);
  expect_geometry(a.permute({-1, 1, 0}), {4, 3, 2}, {1, 4, 12}, 0);
  EXPECT_THROW(a.permute({0, 1}), ValueError);
  EXPECT_THROW(a.permute({0, 1, 1}), ValueError);
  EXPECT_THROW(a.permute({0, 1, 3}), IndexError);

  expect_geometry(a.transpose(-1, 0), {4, 3, 2}, {1, 4, 12}, 0);
  expect_geometry(a.transpose(1, 1), {2, 3, 4}, {12, 4, 1}, 0);
  EXPECT_THROW(a.transpose(0, 3), IndexError);

  Tensor m = iota({2, 3});
  expect_geometry(m.t(), {3, 2}, {1, 3}, 0);
  EXPECT_EQ(values(m.t()), (D{0, 3, 1, 4, 2, 5}));
  expect_geometry(iota({5}).t(), {5}, {1}, 0);
  EXPECT_THROW(a.t(), ValueError);
}

TEST(View, ExpandAndBroadcastTo) {
  Tensor a = iota({3, 4});
  expect_geometry(a.expand({2, 3, 4}), {2, 3, 4}, {0, 4, 1}, 0);
  Tensor col = a.slice(1, 0, 1);  // (3, 1) strides (4, 1)
  Tensor e = col.expand({2, 3, 4});
  expect_geometry(e, {2, 3, 4}, {0, 4, 0}, 0);
  EXPECT_TRUE(shares(a, e));
  EXPECT_EQ(values(e.select(0, 1).select(0, 2)), (D{8, 8, 8, 8}));
  expect_geometry(col.expand({-1, 5}), {3, 5}, {4, 0}, 0);
  expect_geometry(col.broadcast_to({2, 3, 4}), {2, 3, 4}, {0, 4, 0}, 0);
  EXPECT_THROW(a.expand({3, 5}), ValueError);
  EXPECT_THROW(a.expand({4}), ValueError);
  EXPECT_THROW(a.expand({-1, 3, 4}), ValueError);
  EXPECT_THROW(a.broadcast_to({2, 4}), ValueError);
  // a 0-dim tensor expands to anything
  Tensor z = scalar_tensor(2.5);
  Tensor ze = z.expand({3});
  expect_geometry(ze, {3}, {0}, 0);
  EXPECT_EQ(values(ze), (D{2.5, 2.5, 2.5}));
}

TEST(View, SliceWithStepAndBounds) {
  Tensor y = iota({10});
  Tensor s = y.slice(0, 1, 8, 3);
  expect_geometry(s, {3}, {3}, 1);
  EXPECT_EQ(values(s), (D{1, 4, 7}));
  EXPECT_EQ(values(y.slice(0, -3)), (D{7, 8, 9}));
  EXPECT_EQ(values(y.slice(0, {}, -8)), (D{0, 1}));
  expect_geometry(y.slice(0, -100, 100), {10}, {1}, 0);
  expect_geometry(y.slice(0, 5, 2), {0}, {1}, 5);  // end before start: empty at start
  expect_geometry(y.slice(0, 20), {0}, {1}, 10);   // start clamped to the size
  EXPECT_EQ(values(y.slice(0, {}, {}, 4)), (D{0, 4, 8}));
  EXPECT_EQ(values(y.slice(0, 9, {}, 5)), (D{9}));
  EXPECT_THROW(y.slice(0, 0, 5, 0), ValueError);
  EXPECT_THROW(y.slice(0, 0, 5, -1), ValueError);
  EXPECT_THROW(y.slice(1), IndexError);
  EXPECT_THROW(scalar_tensor(1.0).slice(0), IndexError);

  Tensor m = iota({3, 5});
  Tensor ms = m.slice(1, 1, {}, 2).slice(0, 1);
  expect_geometry(ms, {2, 2}, {5, 2}, 6);
  EXPECT_EQ(values(ms), (D{6, 8, 11, 13}));
  expect_geometry(m.slice(-1, -2), {3, 2}, {5, 1}, 3);
}

TEST(View, SelectAndIndex) {
  Tensor a = iota({3, 4});
  Tensor r = a.select(0, -1);
  expect_geometry(r, {4}, {1}, 8);
  EXPECT_EQ(values(r), (D{8, 9, 10, 11}));
  Tensor c = a.select(1, -4);
  expect_geometry(c, {3}, {4}, 0);
  EXPECT_EQ(values(c), (D{0, 4, 8}));
  EXPECT_EQ(values(a[1]), (D{4, 5, 6, 7}));
  expect_geometry(a[2][3], {}, {}, 11);
  EXPECT_EQ(a[2][3].item<double>(), 11.0);
  EXPECT_THROW(a.select(0, 3), IndexError);
  EXPECT_THROW(a.select(0, -4), IndexError);
  EXPECT_THROW(a.select(1, 4), IndexError);
  EXPECT_THROW(a.select(2, 0), IndexError);
  EXPECT_THROW(a[1][1][0], IndexError);  // 0-dim
  EXPECT_THROW(empty({0, 3}).select(0, 0), IndexError);
}

TEST(View, Narrow) {
  Tensor a = iota({3, 4});
  Tensor n = a.narrow(1, 1, 2);
  expect_geometry(n, {3, 2}, {4, 1}, 1);
  EXPECT_EQ(values(n), (D{1, 2, 5, 6, 9, 10}));
  Tensor m = a.narrow(0, -2, 2);
  expect_geometry(m, {2, 4}, {4, 1}, 4);
  EXPECT_EQ(values(m), (D{4, 5, 6, 7, 8, 9, 10, 11}));
  expect_geometry(a.narrow(1, 4, 0), {3, 0}, {4, 1}, 4);
  EXPECT_THROW(a.narrow(1, 3, 2), IndexError);
  EXPECT_THROW(a.narrow(0, 0, -1), IndexError);
  EXPECT_THROW(a.narrow(0, -4, 1), IndexError);
}

TEST(View, SqueezeUnsqueeze) {
  Tensor b = iota({1, 3, 1, 2});
  expect_geometry(b.squeeze(), {3, 2}, {2, 1}, 0);
  expect_geometry(b.squeeze(0), {3, 1, 2}, {2, 2, 1}, 0);
  expect_geometry(b.squeeze(1), {1, 3, 1, 2}, {6, 2, 2, 1}, 0);
  expect_geometry(b.squeeze(-2), {1, 3, 2}, {6, 2, 1}, 0);
  EXPECT_THROW(b.squeeze(4), IndexError);
  EXPECT_TRUE(shares(b, b.squeeze()));

  Tensor x = iota({2, 3, 4}).permute({2, 0, 1});  // (4, 2, 3) strides (1, 12, 4)
  expect_geometry(x.unsqueeze(0), {1, 4, 2, 3}, {4, 1, 12, 4}, 0);
  expect_geometry(x.unsqueeze(1), {4, 1, 2, 3}, {1, 24, 12, 4}, 0);
  expect_geometry(x.unsqueeze(2), {4, 2, 1, 3}, {1, 12, 12, 4}, 0);
  expect_geometry(x.unsqueeze(-1), {4, 2, 3, 1}, {1, 12, 4, 1}, 0);
  EXPECT_THROW(x.unsqueeze(4), IndexError);
  EXPECT_THROW(x.unsqueeze(-5), IndexError);
  EXPECT_EQ(values(x.unsqueeze(1).squeeze(1)), values(x));
}

TEST(View, FlattenUnflatten) {
  Tensor a = iota({2, 3, 4});
  expect_geometry(a.flatten(), {24}, {1}, 0);
  expect_geometry(a.flatten(1), {2, 12}, {12, 1}, 0);
  expect_geometry(a.flatten(0, 1), {6, 4}, {4, 1}, 0);
  EXPECT_TRUE(shares(a, a.flatten()));
  EXPECT_THROW(a.flatten(2, 1), ValueError);
  EXPECT_THROW(a.flatten(0, 3), IndexError);
  // a transposed tensor flattens through a copy
  Tensor t = a.transpose(0, 2);
  Tensor f = t.flatten(1);
  EXPECT_EQ(f.sizes().vec(), (V{4, 6}));
  EXPECT_FALSE(shares(t, f));
  EXPECT_EQ(values(f.select(0, 1)), (D{1, 13, 5, 17, 9, 21}));
  // 0-dim flattens to (1,)
  Tensor z = scalar_tensor(3.0);
  EXPECT_EQ(z.flatten().sizes().vec(), (V{1}));
  EXPECT_EQ(z.flatten().item<double>(), 3.0);

  Tensor u = a.flatten(1).unflatten(1, {3, -1});
  expect_geometry(u, {2, 3, 4}, {12, 4, 1}, 0);
  expect_geometry(a.unflatten(-1, {2, 2}), {2, 3, 2, 2}, {12, 4, 2, 1}, 0);
  EXPECT_THROW(a.unflatten(1, {2, 2}), ValueError);
  EXPECT_THROW(a.unflatten(1, {}), ValueError);
  Tensor w = iota({2, 3}).slice(1, 1);  // (2, 2) strides (3, 1)
  expect_geometry(w.unflatten(1, {2, 1}), {2, 2, 1}, {3, 1, 1}, 1);
}

TEST(View, AsStrided) {
  Tensor y = iota({10});
  Tensor w = y.as_strided({3, 3}, {1, 1});
  expect_geometry(w, {3, 3}, {1, 1}, 0);
  EXPECT_EQ(values(w), (D{0, 1, 2, 1, 2, 3, 2, 3, 4}));
  EXPECT_TRUE(shares(y, w));
  EXPECT_EQ(values(y.as_strided({2, 2}, {3, 1}, 4)), (D{4, 5, 7, 8}));
  // the default offset is the tensor's own
  EXPECT_EQ(values(y.slice(0, 2).as_strided({2}, {3})), (D{2, 5}));
  EXPECT_EQ(values(y.as_strided({1}, {1}, 9)), (D{9}));
  // bounds are checked against the storage
  EXPECT_THROW(y.as_strided({4, 4}, {3, 1}), ValueError);  // last index 12
  EXPECT_THROW(y.as_strided({2}, {1}, 9), ValueError);      // last index 10
  EXPECT_THROW(y.as_strided({2}, {1}, -1), ValueError);
  EXPECT_THROW(y.as_strided({2, 2}, {1}), ValueError);
  EXPECT_THROW(y.as_strided({2}, {-1}), ValueError);
  // zero elements touch nothing
  expect_geometry(y.as_strided({0, 5}, {100, 100}), {0, 5}, {100, 100}, 0);
}

TEST(View, ContiguousAndClone) {
  Tensor a = iota({3, 4});
  Tensor c = a.contiguous();
  EXPECT_TRUE(shares(a, c));
  Tensor t = a.t();
  EXPECT_FALSE(t.is_contiguous());
  Tensor tc = t.contiguous();
  EXPECT_TRUE(tc.is_contiguous());
  EXPECT_FALSE(shares(t, tc));
  expect_geometry(tc, {4, 3}, {3, 1}, 0);
  EXPECT_EQ(values(tc), values(t));

  Tensor s = a.slice(1, 1, {}, 2);  // offset 1, strides (4, 2)
  Tensor k = s.clone();
  EXPECT_FALSE(shares(s, k));
  expect_geometry(k, {3, 2}, {2, 1}, 0);
  EXPECT_EQ(values(k), (D{1, 3, 5, 7, 9, 11}));
  k.fill_(0);
  EXPECT_EQ(values(s), (D{1, 3, 5, 7, 9, 11}));
  // clone of a contiguous tensor is also a fresh storage
  Tensor ac = a.clone();
  EXPECT_FALSE(shares(a, ac));
  EXPECT_NE(ac.data_ptr(), a.data_ptr());
  EXPECT_EQ(ac.dtype(), kFloat32);
}

TEST(View, WritesThroughViewsReachTheBase) {
  Tensor a = zeros({3, 4});
  a.select(0, 1).fill_(1);
  a.slice(1, {}, {}, 2).select(0, 2).fill_(2);
  a.t().select(0, 3).narrow(0, 0, 1).fill_(5);
  a.view({12}).slice(0, 11).fill_(7);
  EXPECT_EQ(values(a), (D{0, 0, 0, 5, 1, 1, 1, 1, 2, 0, 2, 7}));
  Tensor b = iota({2, 2});
  a.slice(0, 1).slice(1, 1, 3).copy_(b);
  EXPECT_EQ(values(a.slice(0, 1).slice(1, 1, 3)), (D{0, 1, 2, 3}));
  EXPECT_EQ(values(a.select(1, 0)), (D{0, 1, 2}));
}

TEST(View, ZeroDimTensors) {
  Tensor z = scalar_tensor(5.0);
  expect_geometry(z, {}, {}, 0);
  expect_geometry(z.view({1, 1}), {1, 1}, {1, 1}, 0);
  expect_geometry(z.view({-1}), {1}, {1}, 0);
  expect_geometry(z.reshape({}), {}, {}, 0);
  expect_geometry(z.unsqueeze(0), {1}, {1}, 0);
  expect_geometry(z.unsqueeze(-1), {1}, {1}, 0);
  expect_geometry(z.view({1}).squeeze(), {}, {}, 0);
  expect_geometry(z.squeeze(0), {}, {}, 0);
  expect_geometry(z.transpose(0, -1), {}, {}, 0);
  EXPECT_THROW(z.transpose(0, 5), IndexError);
  EXPECT_THROW(z.transpose(1, 0), IndexError);
  expect_geometry(z.t(), {}, {}, 0);
  expect_geometry(z.permute({}), {}, {}, 0);
  EXPECT_EQ(z.view({1, 1}).item<double>(), 5.0);
  EXPECT_THROW(z.view({2}), ValueError);
  EXPECT_THROW(z.unsqueeze(2), IndexError);
  EXPECT_THROW(z.squeeze(1), IndexError);
  EXPECT_EQ(iota({4}).select(0, 2).dim(), 0);
  EXPECT_EQ(iota({1}).view({}).item<double>(), 0.0);
}

TEST(View, ZeroSizeTensors) {
  Tensor e = empty({0, 3});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_TRUE(e.t().is_contiguous());
  expect_geometry(e.reshape({3, 0}), {3, 0}, {1, 1}, 0);
  expect_geometry(e.view({-1}), {0}, {1}, 0);
  expect_geometry(e.view({0, 3, 1}), {0, 3, 1}, {3, 1, 1}, 0);
  expect_geometry(e.t(), {3, 0}, {1, 3}, 0);
  expect_geometry(e.slice(1, 1), {0, 2}, {3, 1}, 1);
  expect_geometry(e.unsqueeze(1), {0, 1, 3}, {3, 3, 1}, 0);
  expect_geometry(e.expand({2, 0, 3}), {2, 0, 3}, {0, 3, 1}, 0);
  expect_geometry(e.flatten(), {0}, {1}, 0);
  EXPECT_TRUE(values(e.t().contiguous()).empty());
  EXPECT_EQ(e.select(1, 2).sizes().vec(), (V{0}));
  EXPECT_EQ(e.clone().sizes().vec(), (V{0, 3}));
}
