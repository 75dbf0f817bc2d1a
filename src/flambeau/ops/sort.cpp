// Sorting along one dim: sort (always stable, ascending or descending), argsort, topk,
// kthvalue; unique (over all elements or slices along a dim); searchsorted.
// NaN sorts as larger than every number, as in PyTorch: last ascending, first descending.
// Rows are moved last, made contiguous and sorted independently in parallel.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/radix_sort.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {
using kernels::KeyIndex;
using kernels::radix_key;

// The order sort uses: NaN is larger than every number.
template <class T>
bool nan_last_less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}

template <class CT>
using KeyOf = decltype(radix_key(CT{}));

// Pairs (key, position) of one row; keys inverted for descending order.
template <class CT>
void load_keys(const CT* row, int64_t n, bool descending, KeyIndex<KeyOf<CT>>* out) {
  using K = KeyOf<CT>;
  parallel_for(0, n, ops::kElemGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const K k = radix_key(row[i]);
      out[i] = {descending ? K(~k) : k, uint32_t(i)};
    }
  });
}

// Writes the first m sorted pairs as values (read back from the row) and indices.
template <class CT, class K>
void store_sorted(const KeyIndex<K>* sorted, int64_t m, const CT* row, CT* values, int64_t* indices) {
  parallel_for(0, m, ops::kElemGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      indices[i] = sorted[i].index;
      values[i] = row[sorted[i].index];
    }
  });
}

// The (key, position) order: a total order whose sorted sequence is the stable sort's.
template <class K>
bool before(const KeyIndex<K>& a, const KeyIndex<K>& b) {
  return a.key < b.key || (a.key == b.key && a.index < b.index);
}

// Runs f(row_in, row_values_out, row_indices_out, n, scratch) on every row of t along dim,
// where the output rows have `out_n` elements; returns (values, indices) along dim.
template <class F>
std::pair<Tensor, Tensor> per_row(const char* op, const Tensor& t, int64_t dim, int64_t out_n, const F& f) {
  FLB_CHECK(t.dim() == 0 || t.size(dim) < (int64_t(1) << 32), ValueError, "[", op,
            "] rows of 2^32 elements or more are not supported, got ", shape_str(t.sizes()));
  autograd::NoGradGuard no_grad;  // the callers record the backward of the values
  Tensor values, indices;
  ops::visit_compute_type(t.dtype(), [&]<class CT>() {
    const Tensor x = t.transpose(dim, -1).to(dtype_v<CT>).contiguous();
    Dims shape = x.sizes();
    shape.back() = out_n;
    Tensor v = empty(shape, dtype_v<CT>), ix = empty(shape, kInt64);
    const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
    const CT* in = x.template data<CT>();
    CT* vo = v.template data<CT>();
    int64_t* io = ix.data<int64_t>();
    parallel_for(0, rows, std::max<int64_t>(1, ops::kElemGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      std::vector<KeyIndex<KeyOf<CT>>> scratch(size_t(2 * n));
      for (int64_t r = b; r < e; ++r) f(in + r * n, vo + r * out_n, io + r * out_n, n, scratch.data());
    });
    values = v.to(t.dtype()).transpose(dim, -1).contiguous();
    indices = ix.transpose(dim, -1).contiguous();
  });
  return {values, indices};
}

}  // namespace

FLB_DIFF_OP(sort,
            (const Tensor& t, int64_t dim, bool descending, bool stable),
            (t, dim, descending, stable), std::pair<Tensor, Tensor>) {
  if (t.dim() == 0) return {t.clone(), zeros({}, kInt64)};
  dim = wrap_dim(dim, t.dim(), "sort");
  // Always stable: radix sort (stable by construction), std::stable_sort for short rows.
  auto r = per_row("sort", t, dim, t.size(dim), [&]<class CT, class KI>(const CT* row, CT* vo, int64_t* io, int64_t n, KI* buf) {
    load_keys(row, n, descending, buf);
    KI* sorted = buf;
    if (n <= 256) std::stable_sort(buf, buf + n, [](const KI& a, const KI& b) { return a.key < b.key; });
    else sorted = kernels::radix_sort(buf, buf + n, n);
    store_sorted(sorted, n, row, vo, io);
  });
  // PyTorch names sort(stable=True) (its sort.stable overload) SortBackward1.
  return r;
}

FLB_OP(argsort,
       (const Tensor& t, int64_t dim, bool descending, bool stable),
       (t, dim, descending, stable), Tensor) {
  return sort(t, dim, descending, stable).second;
}

FLB_DIFF_OP(topk,
            (const Tensor& t, int64_t k, int64_t dim, bool largest, bool sorted),
            (t, k, dim, largest, sorted), std::pair<Tensor, Tensor>) {
  const int64_t d = wrap_dim(dim, t.dim(), "topk");
  const int64_t n = t.dim() ? t.size(d) : 1;
  FLB_CHECK(k >= 0 && k <= n, IndexError, "[topk] k (", k, ") is out of range for dimension ", d, " with size ", n);
  if (t.dim() == 0) return {t.clone(), zeros({}, kInt64)};
  (void)sorted;  // the k results always come sorted
  // One pass keeps candidates that beat the current k-th best (keys inverted for largest,
  // so smaller is better; a later equal key loses, as in a stable sort); the buffer is cut
  // back to the best k whenever it fills. The k found are sorted by (key, position).
  auto r = per_row("topk", t, d, k, [&]<class CT, class KI>(const CT* row, CT* vo, int64_t* io, int64_t len, KI* buf) {
    using K = decltype(KI::key);
    if (k == 0) return;
    const int64_t cap = std::min(len, std::max<int64_t>(4 * k, 1024));
    int64_t count = 0;
    K threshold = K(~K(0));
    CT bar{};  // the value of the current k-th best
    bool full = false;
    // A cheap test in the value domain that lets through every element that might beat
    // `bar` (NaN included); blocks where nothing passes are skipped whole.
    auto may_enter = [&](CT x) { return largest ? !(x <= bar) : !(x >= bar); };
    for (int64_t i = 0; i < len; ++i) {
      if (full) {
        for (; i + 16 <= len; i += 16) {
          bool any = false;
          for (int64_t j = 0; j < 16; ++j) any |= may_enter(row[i + j]);
          if (any) break;
        }
        if (i == len) break;
      }
      const K key = largest ? K(~radix_key(row[i])) : radix_key(row[i]);
      if (full && key >= threshold) continue;
      buf[count++] = {key, uint32_t(i)};
      if (count == cap && i + 1 < len) {
        std::nth_element(buf, buf + (k - 1), buf + count, before<K>);
        count = k;
        threshold = buf[k - 1].key;
        bar = row[buf[k - 1].index];
        full = true;
      }
    }
    if (k < count) std::nth_element(buf, buf + k, buf + count, before<K>);
    std::sort(buf, buf + k, before<K>);
    store_sorted(buf, k, row, vo, io);
  });
  return r;
}

FLB_DIFF_OP(kthvalue,
            (const Tensor& t, int64_t k, int64_t dim, bool keepdim),
            (t, k, dim, keepdim), std::pair<Tensor, Tensor>) {
  const int64_t d = wrap_dim(dim, t.dim(), "kthvalue");
  const int64_t n = t.dim() ? t.size(d) : 1;
  FLB_CHECK(k >= 1 && k <= n, IndexError, "[kthvalue] selected number k (", k, ") out of range for dimension ", d,
            " with size ", n);
  if (t.dim() == 0) return {t.clone(), zeros({}, kInt64)};
  auto [kv, ki] = per_row("kthvalue", t, d, 1, [&]<class CT, class KI>(const CT* row, CT* vo, int64_t* io, int64_t len, KI* buf) {
    load_keys(row, len, false, buf);
    std::nth_element(buf, buf + (k - 1), buf + len, before<decltype(KI::key)>);
    store_sorted(buf + (k - 1), 1, row, vo, io);
  });
  if (!keepdim) kv = kv.squeeze(d), ki = ki.squeeze(d);
  return {kv, ki};
}

// Sorted, then unique_consecutive: values compared exactly in their own dtype. With dim,
// the slices along dim are sorted lexicographically (stable sorts from the last element
// to the first) and equal slices merged.
FLB_OP(unique,
       (const Tensor& t, bool sorted, bool return_inverse, bool return_counts, std::optional<int64_t> dim),
       (t, sorted, return_inverse, return_counts, dim), std::tuple<Tensor, Tensor, Tensor>) {
  (void)sorted;  // results always come sorted, as PyTorch's CPU unique does
  const int64_t d = dim ? wrap_dim(*dim, std::max<int64_t>(t.dim(), 1), "unique") : 0;
  FLB_CHECK(!dim || t.dim() > 0, IndexError, "[unique] dim ", *dim, " of a 0-dim tensor");
  const Tensor x = dim ? movedim(t, {d}, {0}) : t.reshape({-1});
  const int64_t n = x.size(0);
  Tensor order;
  if (!dim) {
    order = sort(x, 0, false, true).second;
  } else if (n > 0) {
    FLB_CHECK(x.numel() > 0, ValueError, "[unique] cannot take unique slices along dim ", d,
              " of a tensor of shape ", shape_str(t.sizes()), " whose other dims are empty");
    const Tensor rows = x.reshape({n, -1});
    order = arange(n);
    for (int64_t c = rows.size(1) - 1; c >= 0; --c)
      order = index_select(order, 0, argsort(index_select(rows.select(1, c), 0, order), 0, false, true));
  }
  if (!order.defined()) order = zeros({0}, kInt64);
  const Tensor sorted_x = index_select(x, 0, order);
  auto [values, inverse_sorted, counts] = unique_consecutive(sorted_x, return_inverse, return_counts,
                                                              dim ? std::optional<int64_t>(0) : std::nullopt);
  if (dim) values = movedim(values, {0}, {d});
  Tensor inverse;
  if (return_inverse) {
    inverse = n == 0 ? zeros({0}, kInt64) : index_select(inverse_sorted.reshape({-1}), 0, argsort(order, 0));
    if (!dim) inverse = inverse.reshape(t.sizes());
  }
  return {values, inverse, counts};
}

FLB_OP(unique_consecutive, (const Tensor& t, bool return_inverse, bool return_counts, std::optional<int64_t> dim),
       (t, return_inverse, return_counts, dim), std::tuple<Tensor, Tensor, Tensor>) {
  // Slices along dim (no dim: elements of the flattened input), compared exactly in their own
  // dtype: one is kept where it differs from the one before (NaN differs from everything).
  const int64_t d = dim ? wrap_dim(*dim, t.dim(), "unique_consecutive") : 0;
  const Tensor x = dim ? movedim(t, {d}, {0}) : t.reshape({-1});
  const int64_t n = x.size(0);
  if (n == 0) return {dim ? t.clone() : x.clone(), return_inverse ? zeros(dim ? Dims{0} : t.sizes(), kInt64) : Tensor(),
                      return_counts ? zeros({0}, kInt64) : Tensor()};
  const Tensor rows = x.reshape({n, -1});
  const Tensor changed = rows.size(1) == 0 ? zeros({n - 1}, kBool)
                                           : any(ne(rows.narrow(0, 1, n - 1), rows.narrow(0, 0, n - 1)), {1});
  const Tensor keep = cat({ones({1}, kBool), changed}, 0);
  const Tensor firsts = nonzero(keep).reshape({-1});
  Tensor values = index_select(dim ? t : x, d, firsts), inverse, counts;
  if (return_inverse) {
    inverse = sub(cumsum(keep, 0), Tensor(int64_t(1)));
    if (!dim) inverse = inverse.reshape(t.sizes());
  }
  if (return_counts) counts = sub(cat({firsts.narrow(0, 1, firsts.numel() - 1), full({1}, Scalar(n), kInt64)}, 0), firsts);
  return {values, inverse, counts};
}

FLB_OP(searchsorted,
       (const Tensor& sorted_sequence, const Tensor& values, bool right),
       (sorted_sequence, values, right), Tensor) {
  const Tensor& seq = sorted_sequence;
  FLB_CHECK(seq.dim() >= 1, ValueError, "[searchsorted] the sorted sequence must have at least one dimension");
  const bool one_d = seq.dim() == 1;
  if (!one_d) {
    FLB_CHECK(values.dim() == seq.dim(), ValueError, "[searchsorted] boundaries ", shape_str(seq.sizes()), " and input ",
              shape_str(values.sizes()), " must have the same number of dims when the boundaries are N-D");
    for (int64_t d = 0; d + 1 < seq.dim(); ++d)
      FLB_CHECK(seq.size(d) == values.size(d), ValueError, "[searchsorted] boundaries ", shape_str(seq.sizes()),
                " and input ", shape_str(values.sizes()), " must agree on all but the last dimension");
  }
  const Tensor s = seq.to(kFloat64).contiguous(), v = values.to(kFloat64).contiguous();
  const int64_t n = s.size(-1), m = values.dim() ? values.size(-1) : 1;
  Tensor out = empty(values.sizes(), kInt64);
  const double* sp = s.data<double>();
  const double* vp = v.data<double>();
  int64_t* o = out.data<int64_t>();
  const int64_t total = v.numel();
  parallel_for(0, total, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double* row = one_d ? sp : sp + (i / m) * n;
      const double x = vp[i];
      o[i] = right ? std::upper_bound(row, row + n, x, [](double a, double c) { return nan_last_less(a, c); }) - row
                   : std::lower_bound(row, row + n, x, [](double a, double c) { return nan_last_less(a, c); }) - row;
    }
  });
  return out;
}

}  // namespace flambeau
