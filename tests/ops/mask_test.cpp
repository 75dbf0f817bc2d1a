// masked_fill / masked_select / masked_scatter / nonzero against row-major reference loops:
// dtypes, layouts, broadcast masks (and selves), empty and 0-dim tensors, inputs large
// enough for several threads (1 and 2 threads bitwise equal), errors leaving self alone.
#include "test_util.h"

namespace flambeau::testing {
namespace {

// Values of t broadcast to `shape` (right-aligned, as PyTorch), row-major.
std::vector<double> broadcast_values(const Tensor& t, const Dims& shape) {
  const std::vector<double> v = values(t);
  const Dims& ts = t.sizes();
  const size_t off = shape.size() - ts.size();
  std::vector<double> out(size_t(numel_of(shape)));
  for (size_t p = 0; p < out.size(); ++p) {
    const Dims c = coords_of(int64_t(p), shape);
    int64_t q = 0;
    for (size_t d = 0; d < ts.size(); ++d) q = q * ts[d] + (ts[d] == 1 ? 0 : c[off + d]);
    out[p] = v[size_t(q)];
  }
  return out;
}

const Dims kShape = {5, 6, 7};
const DType kDtypes[] = {kFloat32, kFloat64, kInt64, kInt32, kBFloat16, kBool};
const Layout kOwnLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Strided};
const Dims kMaskShapes[] = {{5, 6, 7}, {6, 7}, {5, 1, 7}, {7}, {}};

TEST(MaskFill, MatchesReferenceWithBroadcastMasks) {
  for (DType dt : kDtypes)
    for (Layout sl : kOwnLayouts)
      for (const Dims& ms : kMaskShapes)
        for (Layout ml : kAllLayouts) {
          Tensor self = random_tensor(kShape, dt, sl, 1);
          Tensor mask = random_tensor(ms, kBool, ms.size() >= 2 ? ml : Layout::Contiguous, 2);
          const std::vector<double> sv = values(self), mv = broadcast_values(mask, kShape);
          const double fill = dt == kBool ? 1 : -5;
          std::vector<double> ref = sv;
          for (size_t p = 0; p < ref.size(); ++p)
            if (mv[p] != 0) ref[p] = fill;
          const std::string what = std::string(dtype_name(dt)) + " " + layout_name(sl) + " mask " + shape_str(ms) +
                                   " " + layout_name(ml);
          Tensor out = masked_fill(self, mask, fill);
          ASSERT_EQ(out.dtype(), dt);
          EXPECT_EQ(values(out), ref) << what;
          EXPECT_EQ(values(masked_fill(self, mask, scalar_tensor(fill, kFloat64))), ref) << what;
          EXPECT_EQ(values(self), sv);
          Tensor t = self;
          EXPECT_EQ(masked_fill_(t, mask, fill).data_ptr(), self.data_ptr());
          EXPECT_EQ(values(self), ref) << what;
        }
  // Out of place, self broadcasts against the mask.
  Tensor row = from_vector<float>({1, 2, 3});
  Tensor m = from_vector<bool>({true, false, false, false, false, true}, Dims{2, 3});
  Tensor f = masked_fill(row, m, 0.5);
  EXPECT_EQ(f.sizes(), (Dims{2, 3}));
  EXPECT_EQ(values(f), (std::vector<double>{0.5, 2, 3, 1, 2, 0.5}));
  Tensor z = scalar_tensor(int64_t(3));
  masked_fill_(z, scalar_tensor(true), 8);
  EXPECT_EQ(z.item<int64_t>(), 8);
  EXPECT_EQ(masked_fill(zeros({0, 3}), zeros({3}, kBool), 1.0).sizes(), (Dims{0, 3}));
  // 48000 elements: several threads, same bits.
  ThreadGuard guard;
  Tensor big = random_tensor({200, 240}, kFloat32, Layout::Transposed, 3);
  Tensor bm = random_tensor({200, 240}, kBool, Layout::Strided, 4);
  set_num_threads(1);
  Tensor one = masked_fill(big, bm, -1.0);
  set_num_threads(2);
  Tensor two = masked_fill(big, bm, -1.0);
  EXPECT_TRUE(bitwise_equal(one, two));
  EXPECT_TRUE(bitwise_equal(two, where(bm, full({200, 240}, -1.0, kFloat32), big)));
}

TEST(MaskSelect, RowMajorOrderWithBroadcasting) {
  for (DType dt : kDtypes)
    for (Layout sl : kAllLayouts)
      for (const Dims& ms : kMaskShapes) {
        Tensor self = random_tensor(kShape, dt, sl, 11);
        Tensor mask = random_tensor(ms, kBool, ms.size() >= 2 ? Layout::Transposed : Layout::Contiguous, 12);
        const std::vector<double> sv = values(self), mv = broadcast_values(mask, kShape);
        std::vector<double> ref;
        for (size_t p = 0; p < sv.size(); ++p)
          if (mv[p] != 0) ref.push_back(sv[p]);
        Tensor out = masked_select(self, mask);
        ASSERT_EQ(out.dtype(), dt);
        ASSERT_EQ(out.sizes(), (Dims{int64_t(ref.size())}));
        EXPECT_EQ(values(out), ref) << dtype_name(dt) << " " << layout_name(sl) << " " << shape_str(ms);
      }
  // self broadcasts against a larger mask.
  Tensor row = from_vector<int32_t>({1, 2, 3});
  Tensor m = from_vector<bool>({true, false, true, false, true, true}, Dims{2, 3});
  EXPECT_EQ(values(masked_select(row, m)), (std::vector<double>{1, 3, 2, 3}));
  EXPECT_EQ(masked_select(row, zeros({3}, kBool)).sizes(), (Dims{0}));
  EXPECT_EQ(values(masked_select(scalar_tensor(2.0), scalar_tensor(true))), (std::vector<double>{2}));
  EXPECT_EQ(masked_select(scalar_tensor(2.0), scalar_tensor(false)).sizes(), (Dims{0}));
  EXPECT_EQ(masked_select(zeros({0, 4}), ones({4}, kBool)).sizes(), (Dims{0}));
  // 120000 elements: more than one 65536 piece of the count/compact passes.
  ThreadGuard guard;
  Tensor big = random_tensor({300, 400}, kFloat64, Layout::Strided, 13);
  Tensor bm = random_tensor({300, 400}, kBool, Layout::Transposed, 14);
  set_num_threads(1);
  Tensor one = masked_select(big, bm);
  set_num_threads(2);
  Tensor two = masked_select(big, bm);
  EXPECT_TRUE(bitwise_equal(one, two));
  const std::vector<double> bv = values(big), bmv = values(bm);
  std::vector<double> ref;
  for (size_t p = 0; p < bv.size(); ++p)
    if (bmv[p] != 0) ref.push_back(bv[p]);
  EXPECT_EQ(values(two), ref);
}

TEST(MaskScatter, LeadingSourceElementsInOrder) {
  for (DType dt : kDtypes)
    for (Layout sl : kOwnLayouts)
      for (const Dims& ms : kMaskShapes)
        for (Layout xl : kAllLayouts) {
          Tensor self = random_tensor(kShape, dt, sl, 21);
          Tensor mask = random_tensor(ms, kBool, Layout::Contiguous, 22);
          Tensor src = random_tensor({6, 50}, dt, xl, 23);  // 300 >= any count; the tail is unused
          const std::vector<double> sv = values(self), mv = broadcast_values(mask, kShape), xv = values(src);
          std::vector<double> ref = sv;
          size_t k = 0;
          for (size_t p = 0; p < ref.size(); ++p)
            if (mv[p] != 0) ref[p] = xv[k++];
          const std::string what = std::string(dtype_name(dt)) + " " + layout_name(sl) + " mask " + shape_str(ms) +
                                   " src " + layout_name(xl);
          EXPECT_EQ(values(masked_scatter(self, mask, src)), ref) << what;
          EXPECT_EQ(values(self), sv);
          Tensor t = self;
          EXPECT_EQ(masked_scatter_(t, mask, src).data_ptr(), self.data_ptr());
          EXPECT_EQ(values(self), ref) << what;
        }
  Tensor row = from_vector<float>({1, 2, 3});
  Tensor m = from_vector<bool>({false, true, false, true, true, false}, Dims{2, 3});
  Tensor out = masked_scatter(row, m, from_vector<float>({10, 20, 30, 40}));
  EXPECT_EQ(out.sizes(), (Dims{2, 3}));
  EXPECT_EQ(values(out), (std::vector<double>{1, 10, 3, 20, 30, 3}));
  Tensor s = scalar_tensor(1.5);
  masked_scatter_(s, scalar_tensor(true), from_vector<float>({4, 5}));
  EXPECT_EQ(s.item<double>(), 4);
  Tensor e = ones({2});
  masked_scatter_(e, zeros({2}, kBool), zeros({0}));  // nothing true: an empty source is enough
  EXPECT_EQ(values(e), (std::vector<double>{1, 1}));
  // A source sharing self's storage is read before any write.
  Tensor a = from_vector<float>({1, 2, 3, 4});
  masked_scatter_(a, from_vector<bool>({false, true, true, true}), a);
  EXPECT_EQ(values(a), (std::vector<double>{1, 1, 2, 3}));
  // 120000 elements, several threads.
  ThreadGuard guard;
  Tensor big = random_tensor({300, 400}, kFloat32, Layout::Transposed, 24);
  Tensor bm = random_tensor({300, 400}, kBool, Layout::Contiguous, 25);
  Tensor bs = random_tensor({120000}, kFloat32, Layout::Strided, 26);
  set_num_threads(1);
  Tensor one = masked_scatter(big, bm, bs);
  set_num_threads(2);
  Tensor two = masked_scatter(big, bm, bs);
  EXPECT_TRUE(bitwise_equal(one, two));
  EXPECT_TRUE(bitwise_equal(masked_select(two, bm), bs.narrow(0, 0, masked_select(two, bm).numel()).contiguous()));
  EXPECT_TRUE(bitwise_equal(masked_select(two, logical_not(bm)), masked_select(big, logical_not(bm))));
}

TEST(MaskNonzero, IndicesInRowMajorOrder) {
  for (DType dt : kDtypes)
    for (Layout l : kAllLayouts) {
      Tensor x = random_tensor(kShape, dt, l, 31, -1, 2);  // integers: about a third zeros
      if (is_floating(dt) && l != Layout::Broadcast) set_values(x, random_values(x.numel(), 33, -1, 2, true));
      Tensor nz = nonzero(x);
      const std::vector<double> xv = values(x);
      std::vector<double> ref;
      for (size_t p = 0; p < xv.size(); ++p)
        if (xv[p] != 0)
          for (int64_t c : coords_of(int64_t(p), kShape)) ref.push_back(double(c));
      ASSERT_EQ(nz.dtype(), kInt64);
      ASSERT_EQ(nz.sizes(), (Dims{int64_t(ref.size() / 3), 3}));
      EXPECT_EQ(values(nz), ref) << dtype_name(dt) << " " << layout_name(l);
    }
  EXPECT_EQ(values(nonzero(from_vector<float>({0, NAN, -0.0f, 2, 0}))), (std::vector<double>{1, 3}));
  EXPECT_EQ(nonzero(scalar_tensor(3.0)).sizes(), (Dims{1, 0}));
  EXPECT_EQ(nonzero(scalar_tensor(0.0)).sizes(), (Dims{0, 0}));
  EXPECT_EQ(nonzero(zeros({0, 3})).sizes(), (Dims{0, 2}));
  EXPECT_EQ(nonzero(zeros({4, 3})).sizes(), (Dims{0, 2}));
  ThreadGuard guard;
  Tensor big = random_tensor({300, 400}, kInt32, Layout::Transposed, 32, 0, 2);
  set_num_threads(1);
  Tensor one = nonzero(big);
  set_num_threads(2);
  Tensor two = nonzero(big);
  EXPECT_TRUE(bitwise_equal(one, two));
  const std::vector<double> bv = values(big), tv = values(two);
  size_t k = 0;
  for (size_t p = 0; p < bv.size(); ++p)
    if (bv[p] != 0) {
      ASSERT_EQ(tv[2 * k], double(p / 400));
      ASSERT_EQ(tv[2 * k + 1], double(p % 400));
      ++k;
    }
  EXPECT_EQ(2 * k, tv.size());
}

TEST(MaskErrors, TypesShapesAndUnchangedSelf) {
  Tensor x = random_tensor({3, 4}, kFloat32, Layout::Transposed, 41);
  const Tensor before = x.clone();
  Tensor im = ones({3, 4}, kInt64), fm = ones({3, 4});
  EXPECT_THROW(masked_fill_(x, im, 1.0), TypeError);
  EXPECT_THROW(masked_fill(x, fm, 1.0), TypeError);
  EXPECT_THROW(masked_select(x, im), TypeError);
  EXPECT_THROW(masked_scatter_(x, fm, ones({12})), TypeError);
  EXPECT_THROW(masked_scatter(x, im, ones({12})), TypeError);
  Tensor m = from_vector<bool>({true, false, true, true}, Dims{1, 4});
  EXPECT_THROW(masked_fill_(x, m, ones({2})), ValueError);               // value must be 0-dim
  EXPECT_THROW(masked_fill_(x, ones({2, 3, 4}, kBool), 1.0), ValueError);  // mask larger than self
  EXPECT_THROW(masked_fill_(x, ones({5}, kBool), 1.0), ValueError);
  EXPECT_THROW(masked_select(x, ones({5}, kBool)), ValueError);
  const std::string few = error_of<ValueError>([&] { masked_scatter_(x, m, ones({8})); });  // 9 true, 8 given
  EXPECT_TRUE(contains(few, "[masked_scatter]")) << few;
  EXPECT_TRUE(contains(few, "9")) << few;
  EXPECT_THROW(masked_scatter_(x, m, ones({12}, kFloat64)), TypeError);
  EXPECT_THROW(masked_scatter_(x, ones({2, 3, 4}, kBool), ones({24})), ValueError);
  EXPECT_TRUE(bitwise_equal(x, before));
}

}  // namespace
}  // namespace flambeau::testing
