// gather / scatter / scatter_add / scatter_reduce against reference loops over row-major
// coordinates: every dim, layouts, dtypes, empty and 0-dim tensors, repeated indices (last
// wins, ordered sums identical on 1 and 2 threads), PyTorch's scatter_reduce rules, errors.
#include <cstring>

#include "test_util.h"

namespace flambeau::testing {
namespace {

// a + b as the dtype computes it (one rounding per add; bool: or).
double add_as(DType dt, double a, double b) {
  if (dt == kFloat32) return float(float(a) + float(b));
  if (dt == kBFloat16) return float(BFloat16(float(a) + float(b)));
  if (dt == kBool) return (a != 0 || b != 0) ? 1 : 0;
  return a + b;
}

const Dims kShape = {4, 7, 5};
const DType kDtypes[] = {kFloat32, kFloat64, kInt64, kInt32, kBFloat16, kBool};
const Layout kOwnLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Strided};  // writable

TEST(IndexGather, MatchesReferenceAlongEveryDim) {
  for (DType dt : kDtypes)
    for (int64_t dim : {0, 1, 2, -1, -3})
      for (Layout sl : kAllLayouts)
        for (Layout il : kOwnLayouts) {
          const int64_t d = dim < 0 ? dim + 3 : dim;
          Dims ishape = kShape;
          ishape[size_t(d)] = 9;                        // larger than self along dim: allowed
          ishape[size_t((d + 1) % 3)] -= 1;             // smaller elsewhere: allowed
          Tensor self = random_tensor(kShape, dt, sl, 11);
          Tensor idx = random_tensor(ishape, kInt64, il, 12, 0, double(kShape[size_t(d)]));
          Tensor out = gather(self, dim, idx);
          ASSERT_EQ(out.dtype(), dt);
          ASSERT_EQ(out.sizes(), ishape);
          const std::vector<double> sv = values(self), iv = values(idx);
          std::vector<double> ref(iv.size());
          for (size_t p = 0; p < iv.size(); ++p) {
            Dims c = coords_of(int64_t(p), ishape);
            c[size_t(d)] = int64_t(iv[p]);
            ref[p] = sv[size_t(flat_of(c, kShape))];
          }
          EXPECT_EQ(values(out), ref) << dtype_name(dt) << " dim " << dim << " " << layout_name(sl) << " "
                                      << layout_name(il);
        }
}

TEST(IndexGather, ZeroDimEmptyAndLarge) {
  Tensor s = scalar_tensor(4.5);
  Tensor g0 = gather(s, 0, scalar_tensor(int64_t(0)));
  EXPECT_EQ(g0.dim(), 0);
  EXPECT_EQ(g0.item<double>(), 4.5);
  Tensor g2 = gather(s, -1, from_vector<int64_t>({0, 0}));
  EXPECT_EQ(g2.sizes(), (Dims{2}));
  EXPECT_EQ(values(g2), (std::vector<double>{4.5, 4.5}));
  EXPECT_EQ(gather(ones({3, 4}), 1, zeros({3, 0}, kInt64)).sizes(), (Dims{3, 0}));
  EXPECT_EQ(gather(zeros({0, 4}), 0, zeros({0, 4}, kInt64)).sizes(), (Dims{0, 4}));
  // 300 x 150 = 45000 outputs: several threads; results equal the reference on 1 and 2.
  ThreadGuard guard;
  Tensor self = random_tensor({300, 200}, kFloat32, Layout::Transposed, 3);
  Tensor idx = random_tensor({300, 150}, kInt64, Layout::Contiguous, 4, 0, 200);
  set_num_threads(1);
  Tensor one = gather(self, 1, idx);
  set_num_threads(2);
  Tensor two = gather(self, 1, idx);
  EXPECT_TRUE(bitwise_equal(one, two));
  const std::vector<double> sv = values(self), iv = values(idx), ov = values(two);
  for (size_t p = 0; p < iv.size(); ++p) ASSERT_EQ(ov[p], sv[(p / 150) * 200 + size_t(iv[p])]);
}

TEST(IndexScatter, AssignAndAddMatchReference) {
  for (DType dt : kDtypes)
    for (int64_t dim : {0, 1, 2, -2})
      for (Layout sl : kOwnLayouts)
        for (Layout xl : kAllLayouts) {
          const int64_t d = dim < 0 ? dim + 3 : dim;
          Dims ishape = kShape, xshape;
          ishape[size_t(d)] = 6;  // many repeats: 6 indices into 4..7 slots
          ishape[size_t((d + 2) % 3)] -= 1;
          for (int64_t s : ishape) xshape.push_back(s + 1);  // src may be larger than index
          Tensor self = random_tensor(kShape, dt, sl, 21);
          Tensor idx = random_tensor(ishape, kInt64, xl == Layout::Broadcast ? Layout::Contiguous : xl, 22, 0,
                                     double(kShape[size_t(d)]));
          Tensor src = random_tensor(xshape, dt, xl, 23);
          const std::vector<double> sv = values(self), iv = values(idx), xv = values(src);
          std::vector<double> ref_set = sv, ref_add = sv, ref_val = sv;
          for (size_t p = 0; p < iv.size(); ++p) {  // row-major: index order along every line
            Dims c = coords_of(int64_t(p), ishape);
            const double x = xv[size_t(flat_of(c, xshape))];
            c[size_t(d)] = int64_t(iv[p]);
            const size_t t = size_t(flat_of(c, kShape));
            ref_set[t] = x;
            ref_add[t] = add_as(dt, ref_add[t], x);
            ref_val[t] = 1;
          }
          const std::string what = std::string(dtype_name(dt)) + " dim " + std::to_string(dim) + " " +
                                   layout_name(sl) + " " + layout_name(xl);
          Tensor a = scatter(self, dim, idx, src), b = scatter_add(self, dim, idx, src);
          ASSERT_EQ(a.dtype(), dt);
          EXPECT_EQ(values(a), ref_set) << what;
          EXPECT_EQ(values(b), ref_add) << what;
          EXPECT_EQ(values(scatter(self, dim, idx, 1)), ref_val) << what;
          EXPECT_EQ(values(self), sv) << "out-of-place ops leave self alone";
          Tensor t = self;  // in place on the strided / transposed tensor itself
          Tensor& r = scatter_add_(t, dim, idx, src);
          EXPECT_EQ(r.data_ptr(), self.data_ptr());
          EXPECT_EQ(self.strides(), t.strides());
          EXPECT_EQ(values(self), ref_add) << what;
          scatter_(self, dim, idx, src);
          EXPECT_EQ(values(self), ref_set) << what;
        }
}

TEST(IndexScatter, RepeatedIndicesLastWinsAndOrderedSums) {
  Tensor x = zeros({5});
  scatter_(x, 0, from_vector<int64_t>({1, 1, 1, 3, 3}), from_vector<float>({10, 20, 30, 40, 50}));
  EXPECT_EQ(values(x), (std::vector<double>{0, 30, 0, 50, 0}));
  Tensor y = zeros({2, 3}, kInt64);
  scatter_(y, 1, from_vector<int64_t>({2, 2, 0, 0, 0, 1}, Dims{2, 3}), from_vector<int64_t>({1, 2, 3, 4, 5, 6}, Dims{2, 3}));
  EXPECT_EQ(values(y), (std::vector<double>{3, 0, 2, 5, 6, 0}));
  // 0-dim self, index and src are one-element vectors.
  Tensor z = scalar_tensor(1.0);
  scatter_add_(z, 0, scalar_tensor(int64_t(0)), scalar_tensor(2.5));
  EXPECT_EQ(z.dim(), 0);
  EXPECT_EQ(z.item<double>(), 3.5);
  EXPECT_EQ(values(scatter(ones({2, 2}), 0, zeros({0, 2}, kInt64), 5.0)), (std::vector<double>{1, 1, 1, 1}));

  // Many repeats over 131072 index positions: threads split lines, each line in index order.
  ThreadGuard guard;
  for (int64_t dim : {0, 1}) {
    const Dims self_shape = dim == 0 ? Dims{8, 256} : Dims{256, 8};
    const Dims ishape = dim == 0 ? Dims{512, 256} : Dims{256, 512};
    Tensor self = random_tensor(self_shape, kFloat32, Layout::Contiguous, 31);
    Tensor idx = random_tensor(ishape, kInt64, Layout::Transposed, 32, 0, 8);
    Tensor src = random_tensor(ishape, kFloat32, Layout::Strided, 33, -100, 100);
    set_num_threads(1);
    Tensor add1 = scatter_add(self, dim, idx, src), set1 = scatter(self, dim, idx, src);
    set_num_threads(2);
    Tensor add2 = scatter_add(self, dim, idx, src), set2 = scatter(self, dim, idx, src);
    EXPECT_TRUE(bitwise_equal(add1, add2));
    EXPECT_TRUE(bitwise_equal(set1, set2));
    std::vector<float> ref_add, ref_set;
    for (double v : values(self)) ref_add.push_back(float(v)), ref_set.push_back(float(v));
    const std::vector<double> iv = values(idx), xv = values(src);
    for (size_t p = 0; p < iv.size(); ++p) {
      Dims c = coords_of(int64_t(p), ishape);
      c[size_t(dim)] = int64_t(iv[p]);
      const size_t t = size_t(flat_of(c, self_shape));
      ref_add[t] += float(xv[p]);
      ref_set[t] = float(xv[p]);
    }
    Tensor ra = from_vector<float>(ref_add, self_shape), rs = from_vector<float>(ref_set, self_shape);
    EXPECT_TRUE(bitwise_equal(add2, ra)) << "dim " << dim;
    EXPECT_TRUE(bitwise_equal(set2, rs)) << "dim " << dim;
  }
}

// Reference scatter_reduce: per target, the src values landing there (row-major order).
double reduce_ref(DType dt, const std::string& red, bool include_self, double self, const std::vector<double>& xs) {
  if (xs.empty()) return self;
  std::vector<double> all = xs;
  if (include_self) all.insert(all.begin(), self);
  double acc = all[0];
  bool nan = std::isnan(acc);
  for (size_t k = 1; k < all.size(); ++k) {
    const double x = all[k];
    nan = nan || std::isnan(x);
    if (red == "sum" || red == "mean") acc += x;
    if (red == "prod") acc *= x;
    if (red == "amax") acc = std::max(acc, x);
    if (red == "amin") acc = std::min(acc, x);
  }
  if ((red == "amax" || red == "amin") && nan) return NAN;
  if (red == "mean") {
    const double n = double(all.size());
    return is_floating(dt) ? acc / n : std::floor(acc / n);
  }
  return acc;
}

TEST(IndexScatterReduce, MatchesPyTorchSemantics) {
  for (DType dt : {kFloat32, kFloat64, kInt64, kInt32, kBFloat16})
    for (const char* red : {"sum", "prod", "mean", "amax", "amin"})
      for (bool include_self : {true, false})
        for (int64_t dim : {0, 2, -2})
          for (Layout sl : kOwnLayouts) {
            const std::string r = red;
            const int64_t d = dim < 0 ? dim + 3 : dim;
            Dims ishape = kShape;
            ishape[size_t(d)] = 5;
            ishape[size_t((d + 1) % 3)] -= 2;  // some targets get nothing: self stays
            const bool p = r == "prod";
            // Whole numbers: sums and products are exact in every dtype (bfloat16 included).
            Tensor self = random_tensor(kShape, dt, sl, 41), src = random_tensor(ishape, dt, sl, 43);
            set_values(self, random_values(self.numel(), 44, p ? -2 : -9, p ? 3 : 9, true));
            std::vector<double> xs = random_values(src.numel(), 45, p ? -2 : -9, p ? 3 : 9, true);
            if (is_floating(dt) && (r == "amax" || r == "amin")) xs[3] = NAN;  // NaN propagates
            set_values(src, xs);
            Tensor idx = random_tensor(ishape, kInt64, Layout::Contiguous, 42, 0, double(kShape[size_t(d)]));
            const std::vector<double> sv = values(self), iv = values(idx), xv = values(src);
            std::vector<std::vector<double>> lists(sv.size());
            for (size_t q = 0; q < iv.size(); ++q) {
              Dims c = coords_of(int64_t(q), ishape);
              c[size_t(d)] = int64_t(iv[q]);
              lists[size_t(flat_of(c, kShape))].push_back(xv[q]);
            }
            std::vector<double> ref(sv.size());
            for (size_t t = 0; t < sv.size(); ++t) ref[t] = reduce_ref(dt, r, include_self, sv[t], lists[t]);
            Tensor out = scatter_reduce(self, dim, idx, src, r, include_self);
            ASSERT_EQ(out.dtype(), dt);
            const double tol = dt == kBFloat16 ? 2e-2 : rtol_for(dt) * 4;
            EXPECT_TRUE(all_close(values(out), ref, tol, tol))
                << dtype_name(dt) << " " << r << " include_self " << include_self << " dim " << dim << " "
                << layout_name(sl);
            Tensor inplace = self.clone();
            scatter_reduce_(inplace, dim, idx, src, r, include_self);
            EXPECT_TRUE(bitwise_equal(inplace, out));
          }
}

TEST(IndexScatterReduce, ExplicitCases) {
  Tensor idx = from_vector<int64_t>({0, 0, 1, 2});
  Tensor si = from_vector<int64_t>({0, 10, -7});
  Tensor xi = from_vector<int64_t>({-3, -4, -1, 2});
  // Integer mean is floor division by the count (self counted when included).
  EXPECT_EQ(values(scatter_reduce(si, 0, idx, xi, "mean", true)), (std::vector<double>{-3, 4, -3}));
  EXPECT_EQ(values(scatter_reduce(si, 0, idx, xi, "mean", false)), (std::vector<double>{-4, -1, 2}));
  EXPECT_EQ(values(scatter_reduce(si, 0, idx, xi, "sum", false)), (std::vector<double>{-7, -1, 2}));
  EXPECT_EQ(values(scatter_reduce(si, 0, idx, xi, "prod", false)), (std::vector<double>{12, -1, 2}));
  EXPECT_EQ(values(scatter_reduce(si, 0, idx, xi, "amax", false)), (std::vector<double>{-3, -1, 2}));
  EXPECT_EQ(values(scatter_reduce(si, 0, idx, xi, "amin", true)), (std::vector<double>{-4, -1, -7}));
  // include_self=false only touches targets; the untouched one keeps its value.
  Tensor sf = from_vector<float>({5, 6, 7, 8});
  Tensor xf = from_vector<float>({1, NAN, 2, 4});
  EXPECT_TRUE(all_close(values(scatter_reduce(sf, 0, idx, xf, "mean", false)), {NAN, 2, 4, 8}, 0, 0));
  std::vector<double> mx = values(scatter_reduce(sf, 0, from_vector<int64_t>({0, 0, 2, 2}), xf, "amax", true));
  EXPECT_TRUE(std::isnan(mx[0]) && mx[1] == 6 && mx[2] == 7 && mx[3] == 8) << mx[0];  // max(5,1,NaN), max(7,2,4)
  std::vector<double> mn = values(scatter_reduce(from_vector<float>({NAN, 1}), 0, from_vector<int64_t>({0, 1}),
                                                 from_vector<float>({-1, -2}), "amin", true));
  EXPECT_TRUE(std::isnan(mn[0]) && mn[1] == -2);  // NaN in self propagates too
  EXPECT_EQ(values(scatter_reduce(sf, 0, from_vector<int64_t>({1, 1}), from_vector<float>({-1, -2}), "amax", false)),
            (std::vector<double>{5, -1, 7, 8}));
  EXPECT_EQ(values(scatter_reduce(sf, 0, from_vector<int64_t>({1, 1}), from_vector<float>({3, 4}), "amin", false)),
            (std::vector<double>{5, 3, 7, 8}));
  EXPECT_THROW(scatter_reduce(sf, 0, idx, xf, "max"), ValueError);
}

TEST(IndexScatter, ErrorsLeaveTargetUnchanged) {
  Tensor x = random_tensor({3, 5}, kFloat32, Layout::Transposed, 51);
  const Tensor before = x.clone();
  Tensor bad = from_vector<int64_t>({0, 1, 7, 2, 9, 0}, Dims{3, 2});
  Tensor neg = from_vector<int64_t>({0, -1}, Dims{1, 2});
  Tensor src = ones({3, 2});
  EXPECT_EQ(error_of<IndexError>([&] { gather(x, 1, bad); }), "[gather] index 7 is out of bounds for dimension 1 with size 5");
  EXPECT_EQ(error_of<IndexError>([&] { gather(x, -1, neg); }),
            "[gather] index -1 is out of bounds for dimension 1 with size 5");
  EXPECT_EQ(error_of<IndexError>([&] { scatter_(x, 1, bad, src); }),
            "[scatter] index 7 is out of bounds for dimension 1 with size 5");
  EXPECT_EQ(error_of<IndexError>([&] { scatter_(x, 1, bad, 2.0); }),
            "[scatter] index 7 is out of bounds for dimension 1 with size 5");
  EXPECT_EQ(error_of<IndexError>([&] { scatter_add_(x, 1, bad, src); }),
            "[scatter_add] index 7 is out of bounds for dimension 1 with size 5");
  EXPECT_TRUE(contains(error_of<IndexError>([&] { scatter_reduce_(x, 1, bad, src, "amax", false); }),
                       "index 7 is out of bounds for dimension 1 with size 5"));
  EXPECT_TRUE(contains(error_of<IndexError>([&] { scatter_(x, 1, neg, ones({1, 2})); }), "index -1 is out of bounds"));
  EXPECT_TRUE(contains(error_of<IndexError>([&] { scatter_add_(x, 0, from_vector<int64_t>({3}, Dims{1, 1}), src); }),
                       "index 3 is out of bounds for dimension 0 with size 3"));
  // Index dtype, shapes, src dtype.
  Tensor fidx = from_vector<float>({0, 1}, Dims{1, 2});
  EXPECT_THROW(gather(x, 1, fidx), TypeError);
  EXPECT_THROW(scatter_(x, 1, fidx, ones({1, 2})), TypeError);
  EXPECT_THROW(scatter_add_(x, 1, neg.to(kInt32), ones({1, 2})), TypeError);
  EXPECT_THROW(gather(x, 1, zeros({3}, kInt64)), ValueError);                 // dims differ
  EXPECT_THROW(gather(x, 1, zeros({4, 2}, kInt64)), ValueError);              // larger than self off dim
  EXPECT_THROW(scatter_(x, 1, zeros({3, 3}, kInt64), ones({3, 2})), ValueError);  // larger than src
  EXPECT_THROW(scatter_(x, 1, zeros({3, 2}, kInt64), ones({3, 2}, kFloat64)), TypeError);
  EXPECT_THROW(scatter_add_(x, 1, zeros({3, 2}, kInt64), 1.0), TypeError);
  EXPECT_THROW(scatter_reduce_(x, 1, zeros({3, 2}, kInt64), 1.0, "sum"), TypeError);
  EXPECT_THROW(gather(x, 2, zeros({3, 2}, kInt64)), IndexError);  // dim out of range
  EXPECT_TRUE(bitwise_equal(x, before));
}

}  // namespace
}  // namespace flambeau::testing
