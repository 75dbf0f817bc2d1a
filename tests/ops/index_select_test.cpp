// index_select / index_add / index_copy / index_fill, take, one_hot, embedding and its dense
// backward against reference loops: every dim, layouts, dtypes, int32 indices, empty and
// 0-dim tensors, ordered sums identical on 1 and 2 threads, errors that leave self alone.
#include "test_util.h"

namespace flambeau::testing {
namespace {


const Dims kShape = {5, 6, 7};
const Layout kOwnLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Strided};

TEST(IndexSelect, MatchesReferenceAlongEveryDim) {
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt32, kBFloat16, kBool})
    for (int64_t dim : {0, 1, 2, -1})
      for (Layout sl : kAllLayouts)
        for (DType it : {kInt64, kInt32}) {
          const int64_t d = dim < 0 ? dim + 3 : dim;
          Tensor self = random_tensor(kShape, dt, sl, 1);
          Tensor idx = random_tensor({9}, it, Layout::Strided, 2, 0, double(kShape[size_t(d)]));  // repeats
          Tensor out = index_select(self, dim, idx);
          Dims oshape = kShape;
          oshape[size_t(d)] = 9;
          ASSERT_EQ(out.sizes(), oshape);
          ASSERT_EQ(out.dtype(), dt);
          const std::vector<double> sv = values(self), iv = values(idx);
          std::vector<double> ref(size_t(numel_of(oshape)));
          for (size_t p = 0; p < ref.size(); ++p) {
            Dims c = coords_of(int64_t(p), oshape);
            c[size_t(d)] = int64_t(iv[size_t(c[size_t(d)])]);
            ref[p] = sv[size_t(flat_of(c, kShape))];
          }
          EXPECT_EQ(values(out), ref) << dtype_name(dt) << " dim " << dim << " " << layout_name(sl);
        }
  Tensor v = from_vector<float>({1, 2, 3, 4, 5, 6}, Dims{2, 3});
  EXPECT_EQ(values(index_select(v, 1, scalar_tensor(int64_t(2)))), (std::vector<double>{3, 6}));
  EXPECT_EQ(index_select(v, 1, scalar_tensor(int64_t(2))).sizes(), (Dims{2, 1}));
  EXPECT_EQ(index_select(v, 0, zeros({0}, kInt64)).sizes(), (Dims{0, 3}));
  // A 0-dim self gives a 0-dim result, for a 0-dim or a one-element index (as PyTorch).
  Tensor s = scalar_tensor(2.5);
  EXPECT_EQ(index_select(s, 0, scalar_tensor(int64_t(0))).dim(), 0);
  Tensor s1 = index_select(s, -1, from_vector<int64_t>({0}));
  EXPECT_EQ(s1.dim(), 0);
  EXPECT_EQ(s1.item<double>(), 2.5);
  EXPECT_THROW(index_select(s, 0, from_vector<int64_t>({0, 0})), ValueError);
  // Large: 5000 x 20 gathered rows on 1 and 2 threads.
  ThreadGuard guard;
  Tensor big = random_tensor({300, 20}, kFloat32, Layout::Transposed, 3);
  Tensor bi = random_tensor({5000}, kInt64, Layout::Contiguous, 4, 0, 300);
  set_num_threads(1);
  Tensor one = index_select(big, 0, bi);
  set_num_threads(2);
  EXPECT_TRUE(bitwise_equal(one, index_select(big, 0, bi)));
  EXPECT_TRUE(bitwise_equal(one, embedding(big, bi)));
}

TEST(IndexAdd, AddCopyFillMatchReference) {
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt32, kBFloat16})
    for (int64_t dim : {0, 1, 2, -2})
      for (Layout sl : kOwnLayouts)
        for (Layout xl : kAllLayouts) {
          const int64_t d = dim < 0 ? dim + 3 : dim;
          const int64_t n = kShape[size_t(d)];
          Dims xshape = kShape;
          xshape[size_t(d)] = 8;
          Tensor self = random_tensor(kShape, dt, sl, 11), src = random_tensor(xshape, dt, xl, 12);
          set_values(src, random_values(src.numel(), 13, -8, 8, true));  // whole numbers: exact sums
          Tensor idx = random_tensor({8}, kInt64, Layout::Contiguous, 14, 0, double(n));  // repeats
          std::vector<int64_t> perm(static_cast<size_t>(n), 0);                             // no repeats
          for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = (i * 3 + 1) % n;
          Tensor pidx = from_vector<int64_t>(perm).to(kInt32);
          Tensor psrc = src.narrow(d, 0, n);
          Tensor fidx = from_vector<int64_t>({-1, 0, 2 - n, -1});  // negatives wrap; repeats fine
          const std::vector<double> sv = values(self), xv = values(src), iv = values(idx), pv = values(psrc);
          std::vector<double> ref_add = sv, ref_copy = sv, ref_fill = sv;
          const Dims pshape = psrc.sizes();
          for (size_t p = 0; p < xv.size(); ++p) {
            Dims c = coords_of(int64_t(p), xshape);
            c[size_t(d)] = int64_t(iv[size_t(c[size_t(d)])]);
            const size_t t = size_t(flat_of(c, kShape));
            ref_add[t] = dt == kBFloat16 ? double(float(BFloat16(float(ref_add[t] + 2 * xv[p])))) : ref_add[t] + 2 * xv[p];
            if (dt == kFloat32) ref_add[t] = double(float(ref_add[t]));
          }
          for (size_t p = 0; p < pv.size(); ++p) {
            Dims c = coords_of(int64_t(p), pshape);
            c[size_t(d)] = perm[size_t(c[size_t(d)])];
            ref_copy[size_t(flat_of(c, kShape))] = pv[p];
          }
          for (size_t p = 0; p < sv.size(); ++p) {
            const int64_t k = coords_of(int64_t(p), kShape)[size_t(d)];
            if (k == n - 1 || k == 0 || k == 2) ref_fill[p] = -2;
          }
          const std::string what = std::string(dtype_name(dt)) + " dim " + std::to_string(dim) + " " +
                                   layout_name(sl) + " " + layout_name(xl);
          EXPECT_EQ(values(index_add(self, dim, idx, src, 2)), ref_add) << what;
          EXPECT_EQ(values(index_copy(self, dim, pidx, psrc)), ref_copy) << what;
          EXPECT_EQ(values(index_fill(self, dim, fidx, -2)), ref_fill) << what;
          EXPECT_EQ(values(self), sv);
          Tensor t = self;
          EXPECT_EQ(index_add_(t, dim, idx.to(kInt32), src, 2).data_ptr(), self.data_ptr());
          EXPECT_EQ(values(self), ref_add) << what;
        }
  // 0-dim self and source; the alpha of index_add_ scales the source.
  Tensor z = scalar_tensor(1.0f);
  index_add_(z, 0, scalar_tensor(int64_t(0)), scalar_tensor(3.0f), -1);
  EXPECT_EQ(z.dim(), 0);
  EXPECT_EQ(z.item<double>(), -2);
  index_fill_(z, 0, from_vector<int64_t>({-1}), scalar_tensor(7.0));
  EXPECT_EQ(z.item<double>(), 7);
  Tensor e = ones({2, 3});
  index_add_(e, 1, zeros({0}, kInt64), zeros({2, 0}));
  index_copy_(e, 0, zeros({0}, kInt64), zeros({0, 3}));
  EXPECT_EQ(values(e), std::vector<double>(6, 1.0));
  Tensor b = zeros({3}, kBool);
  index_fill_(b, 0, from_vector<int64_t>({1}), true);
  EXPECT_EQ(values(b), (std::vector<double>{0, 1, 0}));
}

TEST(IndexAdd, OrderedSumsAreThreadIndependent) {
  ThreadGuard guard;
  for (int64_t dim : {0, 1}) {
    const Dims self_shape = dim == 0 ? Dims{8, 300} : Dims{300, 8};
    const Dims xshape = dim == 0 ? Dims{2000, 300} : Dims{300, 2000};
    Tensor self = random_tensor(self_shape, kFloat32, Layout::Transposed, 21);
    Tensor src = random_tensor(xshape, kFloat32, Layout::Strided, 22, -100, 100);
    Tensor idx = random_tensor({2000}, kInt64, Layout::Contiguous, 23, 0, 8);
    set_num_threads(1);
    Tensor one = index_add(self, dim, idx, src);
    set_num_threads(2);
    Tensor two = index_add(self, dim, idx, src);
    EXPECT_TRUE(bitwise_equal(one, two)) << "dim " << dim;
    std::vector<float> ref;
    for (double v : values(self)) ref.push_back(float(v));
    const std::vector<double> xv = values(src), iv = values(idx);
    for (size_t p = 0; p < xv.size(); ++p) {  // in index order for every target
      Dims c = coords_of(int64_t(p), xshape);
      c[size_t(dim)] = int64_t(iv[size_t(c[size_t(dim)])]);
      ref[size_t(flat_of(c, self_shape))] += float(xv[p]);
    }
    EXPECT_TRUE(bitwise_equal(two, from_vector<float>(ref, self_shape))) << "dim " << dim;
  }
}

TEST(IndexAdd, SourceAliasingSelfReadsTheOldValues) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, Dims{3, 2});
  Tensor idx = from_vector<int64_t>({2, 0, 1});
  const Tensor expect_add = index_add(x, 0, idx, x.clone()), expect_copy = index_copy(x, 0, idx, x.clone());
  Tensor a = x.clone();
  index_add_(a, 0, idx, a);
  EXPECT_EQ(values(a), values(expect_add));
  Tensor c = x.clone();
  index_copy_(c, 0, idx, c);
  EXPECT_EQ(values(c), (std::vector<double>{3, 4, 5, 6, 1, 2}));
  EXPECT_EQ(values(c), values(expect_copy));
  Tensor s = from_vector<float>({1, 2, 3});
  scatter_(s, 0, idx, s);
  EXPECT_EQ(values(s), (std::vector<double>{2, 3, 1}));
  Tensor sa = from_vector<float>({1, 2, 3});
  scatter_add_(sa, 0, idx, sa);
  EXPECT_EQ(values(sa), (std::vector<double>{3, 5, 4}));
  Tensor sr = from_vector<float>({1, 2, 3});  // include_self=false first resets the targets
  scatter_reduce_(sr, 0, idx, sr, "amax", false);
  EXPECT_EQ(values(sr), (std::vector<double>{2, 3, 1}));
}

TEST(IndexAdd, ErrorsLeaveSelfUnchanged) {
  Tensor x = random_tensor({3, 5}, kFloat32, Layout::Strided, 31);
  const Tensor before = x.clone();
  Tensor src = ones({3, 2});
  Tensor bad = from_vector<int64_t>({1, 7});
  const std::string msg = " index 7 is out of bounds for dimension 1 with size 5";
  EXPECT_EQ(error_of<IndexError>([&] { index_select(x, 1, bad); }), "[index_select]" + msg);
  EXPECT_EQ(error_of<IndexError>([&] { index_add_(x, 1, bad, src); }), "[index_add]" + msg);
  EXPECT_EQ(error_of<IndexError>([&] { index_copy_(x, 1, bad.to(kInt32), src); }), "[index_copy]" + msg);
  EXPECT_EQ(error_of<IndexError>([&] { index_fill_(x, 1, bad, 1.0); }), "[index_fill]" + msg);
  EXPECT_EQ(error_of<IndexError>([&] { index_fill_(x, -1, from_vector<int64_t>({-6}), 1.0); }),
            "[index_fill] index -6 is out of bounds for dimension 1 with size 5");
  Tensor neg = from_vector<int64_t>({0, -1});
  EXPECT_EQ(error_of<IndexError>([&] { index_select(x, 1, neg); }),
            "[index_select] index -1 is out of bounds for dimension 1 with size 5");
  EXPECT_TRUE(contains(error_of<IndexError>([&] { index_add_(x, 1, neg, src); }), "index -1 is out of bounds"));
  EXPECT_TRUE(contains(error_of<IndexError>([&] { index_copy_(x, 1, neg, src); }), "index -1 is out of bounds"));
  EXPECT_THROW(index_select(x, 1, from_vector<float>({0, 1})), TypeError);
  EXPECT_THROW(index_add_(x, 1, from_vector<float>({0, 1}), src), TypeError);
  EXPECT_THROW(index_select(x, 1, zeros({1, 2}, kInt64)), ValueError);  // index must be 0-D or 1-D
  EXPECT_THROW(index_add_(x, 1, from_vector<int64_t>({0, 1, 2}), src), ValueError);
  EXPECT_THROW(index_add_(x, 1, from_vector<int64_t>({0, 1}), ones({2, 2})), ValueError);
  EXPECT_THROW(index_copy_(x, 1, from_vector<int64_t>({0, 1}), ones({3, 2}, kFloat64)), TypeError);
  EXPECT_THROW(index_fill_(x, 1, from_vector<int64_t>({0}), ones({2})), ValueError);
  EXPECT_THROW(index_select(x, 2, from_vector<int64_t>({0})), IndexError);
  EXPECT_TRUE(bitwise_equal(x, before));
}

TEST(IndexTake, FlatIndicesWithNegatives) {
  for (DType dt : {kFloat32, kInt64, kBFloat16, kBool})
    for (Layout sl : kAllLayouts) {
      Tensor self = random_tensor({5, 6}, dt, sl, 41);
      Tensor idx = random_tensor({3, 4}, kInt64, Layout::Transposed, 42, -30, 30);
      Tensor out = take(self, idx);
      ASSERT_EQ(out.sizes(), (Dims{3, 4}));
      const std::vector<double> sv = values(self), iv = values(idx);
      std::vector<double> ref;
      for (double i : iv) ref.push_back(sv[size_t(i < 0 ? i + 30 : i)]);
      EXPECT_EQ(values(out), ref) << dtype_name(dt) << " " << layout_name(sl);
    }
  Tensor s = scalar_tensor(int64_t(9));
  EXPECT_EQ(take(s, from_vector<int64_t>({0, -1, 0})).sizes(), (Dims{3}));
  EXPECT_EQ(values(take(s, from_vector<int64_t>({0, -1, 0}))), (std::vector<double>{9, 9, 9}));
  Tensor t0 = take(arange(6), scalar_tensor(int64_t(-2)));
  EXPECT_EQ(t0.dim(), 0);
  EXPECT_EQ(t0.item<int64_t>(), 4);
  EXPECT_EQ(take(zeros({0}), zeros({2, 0}, kInt64)).sizes(), (Dims{2, 0}));
  Tensor big = random_tensor({200, 300}, kFloat64, Layout::Transposed, 43);
  Tensor bi = random_tensor({50000}, kInt64, Layout::Contiguous, 44, -60000, 60000);
  const std::vector<double> bv = values(big), biv = values(bi), bo = values(take(big, bi));
  for (size_t k = 0; k < biv.size(); ++k) ASSERT_EQ(bo[k], bv[size_t(biv[k] < 0 ? biv[k] + 60000 : biv[k])]);
  Tensor x = arange(30).reshape({5, 6});
  EXPECT_EQ(error_of<IndexError>([&] { take(x, from_vector<int64_t>({3, 30})); }),
            "[take] index 30 is out of bounds for dimension 0 with size 30");
  EXPECT_TRUE(contains(error_of<IndexError>([&] { take(x, from_vector<int64_t>({-31})); }), "index -31 is out of bounds"));
  EXPECT_THROW(take(x, from_vector<float>({1})), TypeError);
}

TEST(IndexOneHot, ClassesAndErrors) {
  Tensor t = from_vector<int64_t>({0, 2, 1, 0}, Dims{2, 2});
  Tensor h = one_hot(t);
  EXPECT_EQ(h.dtype(), kInt64);
  EXPECT_EQ(h.sizes(), (Dims{2, 2, 3}));
  EXPECT_EQ(values(h), (std::vector<double>{1, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0, 0}));
  Tensor h5 = one_hot(t.t(), 5);  // transposed input: rows follow its logical order
  EXPECT_EQ(h5.sizes(), (Dims{2, 2, 5}));
  const std::vector<double> tv = values(t.t()), hv = values(h5);
  for (size_t k = 0; k < hv.size(); ++k) ASSERT_EQ(hv[k], double(int64_t(k % 5) == int64_t(tv[k / 5])));
  EXPECT_EQ(values(one_hot(scalar_tensor(int64_t(2)))), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(one_hot(zeros({0}, kInt64), 4).sizes(), (Dims{0, 4}));
  EXPECT_THROW(one_hot(zeros({0}, kInt64)), ValueError);
  EXPECT_THROW(one_hot(from_vector<int64_t>({-1, 0})), ValueError);
  EXPECT_THROW(one_hot(from_vector<int64_t>({3}), 3), ValueError);
  EXPECT_THROW(one_hot(from_vector<int32_t>({1})), TypeError);
}

TEST(IndexEmbedding, ForwardMatchesRowGather) {
  for (DType dt : {kFloat32, kBFloat16, kInt64})
    for (Layout wl : kAllLayouts)
      for (DType it : {kInt64, kInt32}) {
        Tensor w = random_tensor({10, 6}, dt, wl, 51);
        Tensor idx = random_tensor({3, 4}, it, Layout::Transposed, 52, 0, 10);
        Tensor out = embedding(w, idx, 0);
        ASSERT_EQ(out.sizes(), (Dims{3, 4, 6}));
        const std::vector<double> wv = values(w), iv = values(idx), ov = values(out);
        for (size_t k = 0; k < ov.size(); ++k) ASSERT_EQ(ov[k], wv[size_t(iv[k / 6]) * 6 + k % 6]) << layout_name(wl);
      }
  Tensor w = arange(12).reshape({4, 3});
  EXPECT_EQ(values(embedding(w, scalar_tensor(int64_t(2)))), (std::vector<double>{6, 7, 8}));
  EXPECT_EQ(embedding(w, zeros({0}, kInt64)).sizes(), (Dims{0, 3}));
  EXPECT_EQ(error_of<IndexError>([&] { embedding(w, from_vector<int64_t>({0, 4})); }),
            "[embedding] index 4 is out of bounds for dimension 0 with size 4");
  EXPECT_TRUE(contains(error_of<IndexError>([&] { embedding(w, from_vector<int64_t>({-1})); }), "index -1 is out"));
  EXPECT_THROW(embedding(w, from_vector<float>({0})), TypeError);
  EXPECT_THROW(embedding(w.reshape({12}), from_vector<int64_t>({0})), ValueError);
  EXPECT_THROW(embedding(w, from_vector<int64_t>({0}), 4), ValueError);
}

TEST(IndexEmbedding, DenseBackwardOrderedAndThreadIndependent) {
  ThreadGuard guard;
  for (DType dt : {kFloat32, kBFloat16, kFloat64})
    for (std::optional<int64_t> pad : {std::optional<int64_t>{}, std::optional<int64_t>{3}, std::optional<int64_t>{-1}})
      for (bool freq : {false, true}) {
        const int64_t nw = 10, D = 64;
        Tensor idx = random_tensor({30, 100}, kInt64, Layout::Transposed, 61, 0, double(nw));  // 300 per row
        Tensor g = random_tensor({30, 100, D}, dt, Layout::Strided, 62, -10, 10);
        set_num_threads(1);
        Tensor one = embedding_dense_backward(g, idx.to(kInt32), nw, pad, freq);
        set_num_threads(2);
        Tensor two = embedding_dense_backward(g, idx, nw, pad, freq);
        ASSERT_EQ(two.dtype(), dt);
        ASSERT_EQ(two.sizes(), (Dims{nw, D}));
        EXPECT_TRUE(bitwise_equal(one, two));
        // Reference: float32 (float64) sums in token order, then the row scale, then the dtype.
        const std::vector<double> iv = values(idx), gv = values(g);
        std::vector<double> acc(size_t(nw * D), 0), count(size_t(nw), 0);
        for (size_t t = 0; t < iv.size(); ++t) {
          const size_t r = size_t(iv[t]);
          count[r] += 1;
          for (int64_t j = 0; j < D; ++j) {
            double& a = acc[r * D + size_t(j)];
            a = dt == kFloat64 ? a + gv[t * D + size_t(j)] : double(float(a) + float(gv[t * D + size_t(j)]));
          }
        }
        const int64_t p = pad ? (*pad < 0 ? *pad + nw : *pad) : -1;
        for (size_t k = 0; k < acc.size(); ++k) {
          if (int64_t(k) / D == p) acc[k] = 0;
          else if (freq && count[k / D] > 0) acc[k] /= count[k / D];
        }
        Tensor ref = from_vector<double>(acc, Dims{nw, D}).to(dt == kFloat64 ? kFloat64 : kFloat32).to(dt);
        const double tol = dt == kFloat64 ? 1e-12 : 1e-6;  // freq: a float divide, maybe rounded twice
        EXPECT_TRUE(all_close(values(two), values(ref), freq ? tol : 0, 0))
            << dtype_name(dt) << " pad " << p << " freq " << freq;
      }
  Tensor g = ones({2, 3});
  EXPECT_EQ(error_of<IndexError>([&] { embedding_dense_backward(g, from_vector<int64_t>({0, 5}), 5); }),
            "[embedding_backward] index 5 is out of bounds for dimension 0 with size 5");
  EXPECT_THROW(embedding_dense_backward(g, from_vector<int64_t>({0, -1}), 5), IndexError);
  EXPECT_THROW(embedding_dense_backward(g, from_vector<int64_t>({0, 1, 2}), 5), ValueError);
  EXPECT_THROW(embedding_dense_backward(ones({2, 3}, kInt64), from_vector<int64_t>({0, 1}), 5), TypeError);
  EXPECT_EQ(values(embedding_dense_backward(g, from_vector<int64_t>({1, 1}), 3, {}, true)),
            (std::vector<double>{0, 0, 0, 1, 1, 1, 0, 0, 0}));
}

}  // namespace
}  // namespace flambeau::testing
