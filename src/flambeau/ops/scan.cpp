// Scans along one dim: cumsum, cumprod, cummax/cummin (values and indices), logcumsumexp.
// The dim is moved last and made contiguous; each row is scanned in order by one thread,
// so results do not depend on the thread count. Float scans accumulate in double (as
// PyTorch's CPU kernels do).
#include <cmath>
#include <limits>

#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"
#include "flambeau/ops/reduce.h"

namespace flambeau {
namespace {

// Calls row(in, out, n) for every row of t along `dim` (in: CT values, out: OutT), in
// parallel, and returns the results laid out like t.
template <class CT, class OutT, class Row>
Tensor scan_rows(const char* op, const Tensor& t, int64_t dim, const Row& row) {
  if (t.dim() == 0) return scan_rows<CT, OutT>(op, t.reshape({1}), 0, row).reshape({});
  dim = wrap_dim(dim, t.dim(), op);
  const Tensor x = t.transpose(dim, -1).to(dtype_v<CT>).contiguous();
  Tensor out = empty(x.sizes(), dtype_v<OutT>);
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  const CT* in = x.template data<CT>();
  OutT* o = out.template data<OutT>();
  parallel_for(0, rows, std::max<int64_t>(1, ops::kElemGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) row(in + r * n, o + r * n, n);
  });
  return out.transpose(dim, -1).contiguous();
}

DType cum_dtype(const Tensor& t, std::optional<DType> dtype) {
  return dtype.value_or(is_floating(t.dtype()) ? t.dtype() : kInt64);
}

template <bool kProd>
Tensor cum_op(const char* op, const Tensor& t, int64_t dim, std::optional<DType> dtype) {
  const DType dt = cum_dtype(t, dtype);
  FLB_CHECK(dt != kBool, TypeError, "[", op, "] bool is not a valid accumulation dtype");
  Tensor r;
  ops::visit_compute_type(dt, [&]<class CT>() {
    if constexpr (!std::is_same_v<CT, bool>) {
      using Acc = std::conditional_t<std::is_floating_point_v<CT>, double, CT>;
      r = scan_rows<CT, CT>(op, t, dim, [](const CT* x, CT* y, int64_t n) {
        Acc acc = kProd ? Acc(1) : Acc(0);
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_integral_v<CT>) {  // wraps on overflow, like PyTorch
            using U = std::make_unsigned_t<CT>;
            acc = CT(kProd ? U(acc) * U(x[i]) : U(acc) + U(x[i]));
          } else {
            acc = kProd ? acc * x[i] : acc + x[i];
          }
          y[i] = CT(acc);
        }
      });
    }
  });
  return r.to(dt);
}

// Running max/min with PyTorch's index rule: a NaN, or a value >= (<=) the running one,
// takes over, so ties and repeated NaNs report the latest index.
template <bool kMax>
std::pair<Tensor, Tensor> cum_extreme(const char* op, const Tensor& t, int64_t dim) {
  Tensor values, indices;
  ops::visit_compute_type(t.dtype(), [&]<class CT>() {
    auto takes_over = [](CT x, CT best) {
      const bool better = kMax ? x >= best : x <= best;
      if constexpr (std::is_floating_point_v<CT>) return std::isnan(x) || (!std::isnan(best) && better);
      else return better;
    };
    const Tensor ix = scan_rows<CT, int64_t>(op, t, dim, [&](const CT* x, int64_t* y, int64_t n) {
      int64_t bi = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (takes_over(x[i], x[bi])) bi = i;
        y[i] = bi;
      }
    });
    indices = ix;
    // The values are the inputs gathered at the running indices.
    values = scan_rows<CT, CT>(op, t, dim, [&](const CT* x, CT* y, int64_t n) {
      CT best = x[0];
      for (int64_t i = 0; i < n; ++i) {
        if (takes_over(x[i], best)) best = x[i];
        y[i] = best;
      }
    });
  });
  return {values.to(t.dtype()), indices};
}

}  // namespace

FLB_DIFF_OP(cumsum, (const Tensor& t, int64_t dim, std::optional<DType> dtype), (t, dim, dtype), Tensor) {
  Tensor out = cum_op<false>("cumsum", t, dim, dtype);
  return out;
}
FLB_DIFF_OP(cumprod, (const Tensor& t, int64_t dim, std::optional<DType> dtype), (t, dim, dtype), Tensor) {
  Tensor out = cum_op<true>("cumprod", t, dim, dtype);
  return out;
}
FLB_DIFF_OP(cummax, (const Tensor& t, int64_t dim), (t, dim), std::pair<Tensor, Tensor>) {
  auto r = cum_extreme<true>("cummax", t, dim);
  return r;
}
FLB_DIFF_OP(cummin, (const Tensor& t, int64_t dim), (t, dim), std::pair<Tensor, Tensor>) {
  auto r = cum_extreme<false>("cummin", t, dim);
  return r;
}

void ops::logcumsumexp_row(const double* x, double* y, int64_t n) {
  double acc = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    // log(exp(acc) + exp(x)) without overflow; equal infinities stay as they are.
    const double a = acc, b = x[i];
    const double lo = std::isnan(b) ? b : std::min(a, b), hi = std::isnan(b) ? b : std::max(a, b);
    acc = (lo != hi || std::isfinite(lo)) ? hi + std::log1p(std::exp(lo - hi)) : a;
    y[i] = acc;
  }
}

FLB_DIFF_OP(logcumsumexp, (const Tensor& t, int64_t dim), (t, dim), Tensor) {
  FLB_CHECK(is_floating(t.dtype()), TypeError, "[logcumsumexp] expected a floating point tensor, got ",
            dtype_name(t.dtype()));
  Tensor r = scan_rows<double, double>("logcumsumexp", t, dim, ops::logcumsumexp_row);
  Tensor out = r.to(t.dtype());
  return out;
}

}  // namespace flambeau
