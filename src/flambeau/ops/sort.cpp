// Sorting along one dim: sort (stable on request, ascending or descending) and argsort.
// NaN sorts as larger than every number, as in PyTorch: last ascending, first descending.
// Rows are moved last, made contiguous and sorted independently in parallel.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "flambeau/core/parallel.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"

namespace flambeau {

std::pair<Tensor, Tensor> sort(const Tensor& t, int64_t dim, bool descending, bool /*stable*/) {
  if (t.dim() == 0) return {t.clone(), zeros({}, kInt64)};
  dim = wrap_dim(dim, t.dim(), "sort");
  Tensor values, indices;
  ops::visit_compute_type(t.dtype(), [&]<class CT>() {
    const Tensor x = t.transpose(dim, -1).to(dtype_v<CT>).contiguous();
    Tensor v = empty(x.sizes(), dtype_v<CT>), ix = empty(x.sizes(), kInt64);
    const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
    const CT* in = x.template data<CT>();
    CT* vo = v.template data<CT>();
    int64_t* io = ix.data<int64_t>();
    // a before b: NaN is the largest value; equal keys keep their order (stable).
    auto less = [](CT a, CT b) {
      if constexpr (std::is_floating_point_v<CT>) {
        if (std::isnan(a)) return false;
        if (std::isnan(b)) return true;
      }
      return a < b;
    };
    parallel_for(0, rows, std::max<int64_t>(1, ops::kElemGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const CT* row = in + r * n;
        int64_t* order = io + r * n;
        std::iota(order, order + n, 0);
        auto cmp = [&](int64_t i, int64_t j) { return descending ? less(row[j], row[i]) : less(row[i], row[j]); };
        // Always stable: the result does not depend on the library's unstable algorithm.
        std::stable_sort(order, order + n, cmp);
        for (int64_t i = 0; i < n; ++i) vo[r * n + i] = row[order[i]];
      }
    });
    values = v.to(t.dtype()).transpose(dim, -1).contiguous();
    indices = ix.transpose(dim, -1).contiguous();
  });
  return {values, indices};
}

Tensor argsort(const Tensor& t, int64_t dim, bool descending, bool stable) {
  return sort(t, dim, descending, stable).second;
}

}  // namespace flambeau
