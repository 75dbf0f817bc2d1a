// Advanced indexing (index / index_put_) against a reference that applies PyTorch's rules
// element by element: broadcast index tensors, adjacent indexed dims replaced in place and
// non-adjacent ones moved first, bool masks through nonzero, negative indices wrapping,
// accumulation of repeated indices, broadcast values, and errors that leave self alone.
#include "test_util.h"

namespace flambeau::testing {
namespace {

// Flat position in a tensor of `shape` of the element that broadcasting maps to `c`
// (coordinates in a shape with c.size() >= shape.size() dims, right-aligned).
int64_t broadcast_pos(const Dims& c, const Dims& shape) {
  const size_t off = c.size() - shape.size();
  int64_t p = 0;
  for (size_t d = 0; d < shape.size(); ++d) p = p * shape[d] + (shape[d] == 1 ? 0 : c[off + d]);
  return p;
}

// The result shape of self[indices] and, per result element, the flat position read in
// self; integer indices only (a test turns masks into integers on its own).
struct Ref {
  Dims shape;
  std::vector<int64_t> pos;
};
Ref ref_index(const Dims& self_shape, const IndexList& idx) {
  std::vector<int64_t> dims;
  std::vector<std::vector<double>> iv(idx.size());
  Dims batch;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (!idx[d]) continue;
    dims.push_back(int64_t(d));
    iv[d] = values(*idx[d]);
    const Dims& s = idx[d]->sizes();
    Dims b(std::max(batch.size(), s.size()), 1);
    for (size_t k = 0; k < b.size(); ++k) {
      const int64_t x = k + batch.size() >= b.size() ? batch[k + batch.size() - b.size()] : 1;
      const int64_t y = k + s.size() >= b.size() ? s[k + s.size() - b.size()] : 1;
      b[k] = x == 1 ? y : x;
    }
    batch = b;
  }
  const bool adjacent = dims.back() - dims.front() + 1 == int64_t(dims.size());
  std::vector<int64_t> blocks;  // -1: the broadcast index dims; else a dim of self
  if (!adjacent) blocks.push_back(-1);
  for (int64_t d = 0; d < int64_t(self_shape.size()); ++d) {
    const bool indexed = d < int64_t(idx.size()) && idx[size_t(d)];
    if (!indexed) blocks.push_back(d);
    else if (adjacent && d == dims.front()) blocks.push_back(-1);
  }
  Ref r;
  for (int64_t b : blocks)
    if (b < 0)
      for (int64_t s : batch) r.shape.push_back(s);
    else r.shape.push_back(self_shape[size_t(b)]);
  for (int64_t p = 0; p < numel_of(r.shape); ++p) {
    const Dims rc = coords_of(p, r.shape);
    Dims sc(self_shape.size(), 0), bc;
    size_t k = 0;
    for (int64_t b : blocks) {
      if (b >= 0) sc[size_t(b)] = rc[k++];
      else
        for (size_t j = 0; j < batch.size(); ++j) bc.push_back(rc[k++]);
    }
    for (int64_t d : dims) {
      const int64_t v = int64_t(iv[size_t(d)][size_t(broadcast_pos(bc, idx[size_t(d)]->sizes()))]);
      sc[size_t(d)] = v < 0 ? v + self_shape[size_t(d)] : v;
    }
    r.pos.push_back(flat_of(sc, self_shape));
  }
  return r;
}
// A bool mask over dims [first, first + mask.dim()) as the integer indices of its true
// elements (nonzero), written by hand.
std::vector<Tensor> mask_to_indices(const Tensor& mask) {
  const std::vector<double> mv = values(mask);
  std::vector<std::vector<int64_t>> cols(size_t(mask.dim()));
  for (size_t p = 0; p < mv.size(); ++p)
    if (mv[p] != 0) {
      const Dims c = coords_of(int64_t(p), mask.sizes());
      for (size_t j = 0; j < c.size(); ++j) cols[j].push_back(c[j]);
    }
  std::vector<Tensor> out;
  for (auto& c : cols) out.push_back(from_vector<int64_t>(c));
  return out;
}

const Dims kShape = {5, 6, 7};
Tensor ints(const std::vector<int64_t>& v, const Dims& shape) { return from_vector<int64_t>(v, shape); }

// Index lists exercising each rule; values in range, negatives included.
std::vector<IndexList> index_lists() {
  const std::optional<Tensor> all;
  return {
      {ints({0, 4, -1, 2, 2, -5}, {2, 3})},                                // (2,3,6,7)
      {all, ints({0, 5, -6, 3}, {4}), ints({6}, {1})},                    // adjacent, broadcast: (5,4)
      {ints({1, -2, 0, 4}, {4}), all, ints({0, 6, -7, 3}, {4})},           // non-adjacent: (4,6)
      {all, all, ints({0, 1, 6, -1, 3, 2}, {2, 3})},                      // (5,6,2,3)
      {ints({0, 4}, {2, 1}), ints({5, 0, -1}, {3}).to(kInt32)},            // (2,3,7)
      {all, ints({2, 3}, {2, 1}), all},                                   // (5,2,1,7)
      {ints({3}, {}), all, ints({1, 2}, {2})},                            // 0-dim index: (2,6)
      {ints({1, 2, 3}, {3}), ints({0, 1, 2}, {3}), ints({4, 5, 6}, {3})},  // every dim: (3,)
  };
}

TEST(AdvancedIndex, ResultShapesFollowPyTorch) {
  Tensor x = random_tensor(kShape, kFloat32, Layout::Contiguous, 1);
  const std::vector<Dims> expect = {{2, 3, 6, 7}, {5, 4}, {4, 6}, {5, 6, 2, 3}, {2, 3, 7}, {5, 2, 1, 7}, {2, 6}, {3}};
  const std::vector<IndexList> lists = index_lists();
  for (size_t k = 0; k < lists.size(); ++k) {
    EXPECT_EQ(index(x, lists[k]).sizes(), expect[k]) << "list " << k;
    EXPECT_EQ(ref_index(kShape, lists[k]).shape, expect[k]) << "reference, list " << k;
  }
  Tensor mask = from_vector<bool>({1, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1,
                                   0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0},
                                  Dims{5, 6});
  EXPECT_EQ(index(x, {mask}).sizes(), (Dims{12, 7}));
  EXPECT_EQ(index(x, {std::nullopt, from_vector<bool>(std::vector<bool>(42, true), Dims{6, 7})}).sizes(), (Dims{5, 42}));
  Tensor m5 = from_vector<bool>({false, true, false, true, false});
  EXPECT_EQ(index(x, {m5, std::nullopt, ints({0, 1}, {2})}).sizes(), (Dims{2, 6}));  // non-adjacent mask
  EXPECT_EQ(index(x, {zeros({5}, kBool)}).sizes(), (Dims{0, 6, 7}));
  EXPECT_EQ(index(x, {zeros({0}, kInt64)}).sizes(), (Dims{0, 6, 7}));
}

TEST(AdvancedIndex, ValuesMatchReference) {
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt32, kBFloat16, kBool})
    for (Layout l : kAllLayouts) {
      Tensor x = random_tensor(kShape, dt, l, 2);
      const std::vector<double> xv = values(x);
      const std::vector<IndexList> lists = index_lists();
      for (size_t k = 0; k < lists.size(); ++k) {
        const Ref r = ref_index(kShape, lists[k]);
        Tensor out = index(x, lists[k]);
        ASSERT_EQ(out.dtype(), dt);
        std::vector<double> ref;
        for (int64_t p : r.pos) ref.push_back(xv[size_t(p)]);
        EXPECT_EQ(values(out), ref) << dtype_name(dt) << " " << layout_name(l) << " list " << k;
      }
      // Masks: the same elements as the integer indices of their true elements.
      Tensor m = random_tensor({5, 6}, kBool, Layout::Transposed, 3);
      std::vector<Tensor> mi = mask_to_indices(m);
      EXPECT_EQ(values(index(x, {m})), values(index(x, {mi[0], mi[1]}))) << dtype_name(dt);
      Tensor m2 = random_tensor({6, 7}, kBool, Layout::Strided, 4);
      std::vector<Tensor> m2i = mask_to_indices(m2);
      EXPECT_EQ(values(index(x, {std::nullopt, m2})), values(index(x, {std::nullopt, m2i[0], m2i[1]})));
      const Ref rm = ref_index(kShape, {std::nullopt, m2i[0], m2i[1]});
      std::vector<double> ref;
      for (int64_t p : rm.pos) ref.push_back(xv[size_t(p)]);
      EXPECT_EQ(values(index(x, {std::nullopt, m2})), ref);
    }
  // 0-dim-ish: a 1-D tensor indexed by a 0-dim index gives a 0-dim result.
  Tensor v = from_vector<float>({4, 5, 6});
  Tensor s = index(v, {scalar_tensor(int64_t(-1))});
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), 6);
  // Several threads: 200 x 200 = 40000 results.
  ThreadGuard guard;
  Tensor big = random_tensor({200, 300}, kFloat32, Layout::Transposed, 5);
  Tensor j = random_tensor({200}, kInt64, Layout::Contiguous, 6, -300, 300);
  set_num_threads(1);
  Tensor one = index(big, {std::nullopt, j});
  set_num_threads(2);
  Tensor two = index(big, {std::nullopt, j});
  EXPECT_TRUE(bitwise_equal(one, two));
  const std::vector<double> bv = values(big), jv = values(j), tv = values(two);
  for (size_t p = 0; p < tv.size(); ++p) {
    const double c = jv[p % 200];
    ASSERT_EQ(tv[p], bv[(p / 200) * 300 + size_t(c < 0 ? c + 300 : c)]);
  }
}

TEST(AdvancedIndexPut, AssignAndAccumulateMatchReference) {
  const std::optional<Tensor> all;
  // Lists whose positions are distinct (assignment order cannot matter) ...
  const std::vector<IndexList> distinct = {
      {ints({0, 4, -2}, {3})},
      {all, ints({0, 5, 3, 1}, {4}), ints({6, -7, 2, 2}, {4})},
      {ints({1, -1}, {2, 1}), all, ints({0, 6, 3}, {3})},
      {all, all, ints({0, 1, 6, 3}, {2, 2})},
  };
  // ... and one with many repeats, for accumulate.
  const std::vector<IndexList> repeated = {
      {ints({0, 1, 0, 0, -5, 1}, {6}), all, ints({2, 2, 2, -5, 2, 0}, {6})},
      {all, ints({3, 3, 3, -3, 0, 3, 3, 0}, {2, 4})},
  };
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt32, kBFloat16})
    for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Strided})
      for (bool accumulate : {false, true})
        for (const IndexList& idx : accumulate ? repeated : distinct)
          for (int vals_kind = 0; vals_kind < 3; ++vals_kind) {  // full shape, trailing dims, a number
            const Ref r = ref_index(kShape, idx);
            Tensor x = random_tensor(kShape, dt, l, 7);
            set_values(x, random_values(x.numel(), 8, -9, 9, true));  // whole numbers: exact sums
            Dims vshape = vals_kind == 0 ? r.shape : Dims{r.shape.back()};
            Tensor v = random_tensor(vshape, dt, Layout::Transposed, 9);
            set_values(v, random_values(v.numel(), 10, -9, 9, true));
            const Tensor values_arg = vals_kind == 2 ? Tensor(3) : v;
            const std::vector<double> vv = vals_kind == 2 ? std::vector<double>{3} : values(v);
            std::vector<double> ref = values(x);
            const Dims vs = vals_kind == 2 ? Dims{} : vshape;
            for (size_t p = 0; p < r.pos.size(); ++p) {
              const double val = vv[size_t(broadcast_pos(coords_of(int64_t(p), r.shape), vs))];
              double& t = ref[size_t(r.pos[p])];
              t = accumulate ? t + val : val;
            }
            const std::string what = std::string(dtype_name(dt)) + " " + layout_name(l) + " acc " +
                                     std::to_string(accumulate) + " values " + std::to_string(vals_kind);
            Tensor out = index_put(x, idx, values_arg, accumulate);
            EXPECT_EQ(values(out), ref) << what;
            Tensor t = x;
            EXPECT_EQ(index_put_(t, idx, values_arg, accumulate).data_ptr(), x.data_ptr());
            EXPECT_EQ(values(x), ref) << what;
          }
  // A mask with a number, and a mask with one value per true element.
  Tensor x = from_vector<float>({1, -2, 3, -4, 5, -6}, Dims{2, 3});
  Tensor neg = lt(x, 0);
  EXPECT_EQ(values(index_put(x, {neg}, 0.0)), (std::vector<double>{1, 0, 3, 0, 5, 0}));
  EXPECT_EQ(values(index_put(x, {neg}, from_vector<float>({7, 8, 9}))), (std::vector<double>{1, 7, 3, 8, 5, 9}));
  EXPECT_EQ(values(index_put(x, {neg}, from_vector<float>({1, 1, 1}), true)), (std::vector<double>{1, -1, 3, -3, 5, -5}));
  EXPECT_EQ(values(index_put(x, {std::nullopt, from_vector<bool>({true, false, true})}, from_vector<float>({10, 20}))),
            (std::vector<double>{10, -2, 20, 10, 5, 20}));  // values (2,) broadcast over the (2, 2) result
  EXPECT_EQ(values(index_put(x, {zeros({2, 3}, kBool)}, 9.0)), values(x));
}

TEST(AdvancedIndexPut, AccumulateIsThreadIndependent) {
  ThreadGuard guard;
  Tensor i = random_tensor({50000}, kInt64, Layout::Contiguous, 11, 0, 16);
  Tensor j = random_tensor({50000}, kInt64, Layout::Strided, 12, -16, 16);
  Tensor v = random_tensor({50000}, kFloat32, Layout::Contiguous, 13, -100, 100);
  Tensor base = random_tensor({16, 16}, kFloat32, Layout::Transposed, 14);
  set_num_threads(1);
  Tensor one = index_put(base, {i, j}, v, true);
  set_num_threads(2);
  Tensor two = index_put(base, {i, j}, v, true);
  EXPECT_TRUE(bitwise_equal(one, two));
  std::vector<double> ref = values(base);
  const std::vector<double> iv = values(i), jv = values(j), vv = values(v);
  for (size_t p = 0; p < iv.size(); ++p) ref[size_t(iv[p]) * 16 + size_t(jv[p] < 0 ? jv[p] + 16 : jv[p])] += vv[p];
  EXPECT_TRUE(all_close(values(two), ref, 1e-4, 1e-3));
  // Integers: exact whatever the order.
  Tensor ci = zeros({16}, kInt64);
  index_put_(ci, {i}, ones({50000}, kInt64), true);
  std::vector<double> counts(16, 0);
  for (double k : iv) counts[size_t(k)] += 1;
  EXPECT_EQ(values(ci), counts);
}

TEST(AdvancedIndex, ErrorsLeaveSelfUnchanged) {
  Tensor x = random_tensor({3, 5}, kFloat32, Layout::Transposed, 21);
  const Tensor before = x.clone();
  const std::optional<Tensor> all;
  Tensor bad = from_vector<int64_t>({1, 7, 9});
  EXPECT_EQ(error_of<IndexError>([&] { index(x, {all, bad}); }), "[index] index 7 is out of bounds for dimension 1 with size 5");
  EXPECT_EQ(error_of<IndexError>([&] { index_put_(x, {all, bad}, 1.0); }),
            "[index_put] index 7 is out of bounds for dimension 1 with size 5");
  EXPECT_EQ(error_of<IndexError>([&] { index_put_(x, {from_vector<int64_t>({0}), from_vector<int64_t>({-6})}, 1.0, true); }),
            "[index_put] index -6 is out of bounds for dimension 1 with size 5");
  EXPECT_TRUE(contains(error_of<IndexError>([&] { index(x, {from_vector<int64_t>({-4})}); }),
                       "index -4 is out of bounds for dimension 0 with size 3"));
  EXPECT_EQ(values(index(x, {from_vector<int64_t>({-3})})), values(x.select(0, 0)));  // -3 wraps to 0
  EXPECT_THROW(index(x, {from_vector<float>({0})}), TypeError);
  EXPECT_THROW(index_put_(x, {from_vector<float>({0})}, 1.0), TypeError);
  EXPECT_THROW(index(x, {ones({3, 4}, kBool)}), IndexError);   // mask shape does not match
  EXPECT_THROW(index(x, {all, all, from_vector<int64_t>({0})}), IndexError);  // too many indices
  EXPECT_THROW(index(x, {from_vector<int64_t>({0, 1}), from_vector<int64_t>({0, 1, 2})}), ValueError);
  EXPECT_THROW(index(x, {all}), ValueError);
  EXPECT_THROW(index_put_(x, {from_vector<int64_t>({0, 1})}, ones({3, 5})), ValueError);  // values vs (2, 5)
  EXPECT_THROW(index_put_(x, {from_vector<int64_t>({0, 1})}, ones({2, 5}, kFloat64)), TypeError);
  EXPECT_THROW(index_put_(x, {from_vector<int64_t>({0, 1}), from_vector<int64_t>({0, 1, 2})}, 1.0), ValueError);
  EXPECT_TRUE(bitwise_equal(x, before));
}

}  // namespace
}  // namespace flambeau::testing
