// Reductions. A reduction is planned on a contiguous copy-free view where possible as
// [outer, R, inner]: inner == 1 reduces contiguous rows (SIMD), inner > 1 reduces down
// columns. Long rows are cut into pieces of a fixed size and the pieces combined in
// order, so the bits never depend on the thread count (see parallel.h).
#include <cmath>
#include <limits>

#include "flambeau/core/op_hook.h"
#include "flambeau/autograd/autocast.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"
#include "flambeau/ops/reduce.h"

namespace flambeau::ops {
namespace {

std::vector<bool> reduced_mask(const char* op, const Tensor& t, const Dims& dims) {
  std::vector<bool> reduced(size_t(std::max<int64_t>(t.dim(), 1)), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, t.dim(), op);
    FLB_CHECK(!reduced[w] || dims.empty(), ValueError, "[", op, "] dim ", w, " appears multiple times in the list of dims");
    reduced[w] = true;
  }
  return reduced;
}

}  // namespace

int64_t reduced_count(const Tensor& t, const Dims& dims) {
  if (dims.empty()) return t.numel();
  int64_t n = 1;
  for (int64_t d : dims) n *= t.size(d);
  return n;
}

Dims reduced_shape(const char* op, const Tensor& t, const Dims& dims, bool keepdim) {
  const std::vector<bool> reduced = reduced_mask(op, t, dims);
  Dims out;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (!reduced[d]) out.push_back(t.size(d));
    else if (keepdim) out.push_back(1);
  }
  return out;
}

ReducePlan plan_reduction(const char* op, const Tensor& t, const Dims& dims, bool keepdim, DType compute) {
  ReducePlan p;
  const int64_t nd = t.dim();
  const std::vector<bool> reduced = reduced_mask(op, t, dims);
  p.out_shape = reduced_shape(op, t, dims, keepdim);
  Tensor x = t.to(compute).contiguous();
  // Group neighbouring dims of the same kind (size-1 dims belong to either).
  struct Group { int64_t size; bool red; };
  std::vector<Group> groups;
  for (int64_t d = 0; d < nd; ++d) {
    if (x.size(d) == 1) continue;
    if (!groups.empty() && groups.back().red == reduced[d]) groups.back().size *= x.size(d);
    else groups.push_back({x.size(d), bool(reduced[d])});
  }
  int red_groups = 0;
  for (const Group& g : groups) red_groups += g.red;
  p.outer = p.r = p.inner = 1;
  if (red_groups > 1) {
    // Move every reduced dim last: one copy, then contiguous rows.
    Dims order;
    for (int64_t d = 0; d < nd; ++d) if (!reduced[d]) order.push_back(d);
    for (int64_t d = 0; d < nd; ++d) if (reduced[d]) order.push_back(d);
    x = x.permute(order).contiguous();
    for (int64_t d = 0; d < nd; ++d) (reduced[d] ? p.r : p.outer) *= t.size(d);
  } else {
    bool seen_red = false;
    for (const Group& g : groups) {
      if (g.red) { p.r = g.size; seen_red = true; }
      else (seen_red ? p.inner : p.outer) *= g.size;
    }
    if (t.numel() == 0) {  // sizes of 0 hide in the groups above; count them directly
      p.outer = p.r = p.inner = 1;
      for (int64_t d = 0; d < nd; ++d) (reduced[d] ? p.r : p.outer) *= t.size(d);
    }
  }
  p.x = x;
  return p;
}

}  // namespace flambeau::ops

namespace flambeau {
namespace {

using ops::ReducePlan;
constexpr int64_t kPiece = 1 << 16;  // row piece: fixed, never derived from the thread count

// A reduction: identity, merge of two partial results, a contiguous row, and a column
// accumulator type (double for float sums, for accuracy down long columns).
template <class CT>
struct SumRed {
  using Acc = std::conditional_t<std::is_floating_point_v<CT>, double, CT>;
  static Acc identity() { return Acc(0); }
  static Acc step(Acc a, CT x) {
    if constexpr (std::is_integral_v<CT> && !std::is_same_v<CT, bool>) return CT(std::make_unsigned_t<CT>(a) + std::make_unsigned_t<CT>(x));
    else return a + x;
  }
  static Acc merge(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<CT>) return a + b;
    else return step(a, b);
  }
  static Acc row(const CT* x, int64_t n) {
    if constexpr (std::is_same_v<CT, float>) return kernels::sum_f32(x, n);
    else if constexpr (std::is_same_v<CT, double>) return kernels::sum_f64(x, n);
    else {
      Acc a = identity();
      for (int64_t i = 0; i < n; ++i) a = step(a, x[i]);
      return a;
    }
  }
};

template <class CT>
struct ProdRed {
  using Acc = std::conditional_t<std::is_floating_point_v<CT>, double, CT>;
  static Acc identity() { return Acc(1); }
  static Acc step(Acc a, CT x) {
    if constexpr (std::is_same_v<CT, bool>) return a && x;
    else if constexpr (std::is_integral_v<CT>) return CT(std::make_unsigned_t<CT>(a) * std::make_unsigned_t<CT>(x));
    else return a * x;
  }
  static Acc merge(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<CT>) return a * b;
    else return step(a, b);
  }
  static Acc row(const CT* x, int64_t n) {
    Acc a = identity();
    for (int64_t i = 0; i < n; ++i) a = step(a, x[i]);
    return a;
  }
};

template <class CT, bool kMax>
struct ExtremeRed {
  using Acc = CT;
  static CT identity() {
    if constexpr (std::is_floating_point_v<CT>) return kMax ? -INFINITY : INFINITY;
    else return kMax ? std::numeric_limits<CT>::lowest() : std::numeric_limits<CT>::max();
  }
  static CT step(CT a, CT x) {
    if constexpr (std::is_floating_point_v<CT>) {
      if (std::isnan(a) || std::isnan(x)) return std::isnan(a) ? a : x;
    }
    return kMax ? (x > a ? x : a) : (x < a ? x : a);
  }
  static CT merge(CT a, CT b) { return step(a, b); }
  static CT row(const CT* x, int64_t n) {
    if constexpr (std::is_same_v<CT, float>) return kMax ? kernels::max_f32(x, n) : kernels::min_f32(x, n);
    else if constexpr (std::is_same_v<CT, double>) return kMax ? kernels::max_f64(x, n) : kernels::min_f64(x, n);
    else {
      CT a = identity();
      for (int64_t i = 0; i < n; ++i) a = step(a, x[i]);
      return a;
    }
  }
};

template <class CT, class Red>
void run_reduce(const ReducePlan& p, CT* out) {
  const CT* x = p.x.data<CT>();
  const int64_t R = p.r, K = p.inner;
  if (K == 1) {
    const int64_t pieces = std::max<int64_t>(1, (R + kPiece - 1) / kPiece);
    if (pieces == 1) {
      parallel_for(0, p.outer, std::max<int64_t>(1, ops::kElemGrain / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) out[o] = CT(R ? Red::row(x + o * R, R) : Red::identity());
      });
      return;
    }
    std::vector<typename Red::Acc> partial(size_t(p.outer * pieces));
    parallel_for(0, p.outer * pieces, 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / pieces, q = t % pieces, start = q * kPiece;
        partial[t] = Red::row(x + o * R + start, std::min(kPiece, R - start));
      }
    });
    for (int64_t o = 0; o < p.outer; ++o) {
      typename Red::Acc acc = partial[o * pieces];
      for (int64_t q = 1; q < pieces; ++q) acc = Red::merge(acc, partial[o * pieces + q]);
      out[o] = CT(acc);
    }
    return;
  }
  // Columns: each output column is accumulated down R in order.
  constexpr int64_t kCols = 512;
  const int64_t col_blocks = (K + kCols - 1) / kCols;
  parallel_for(0, p.outer * col_blocks, std::max<int64_t>(1, ops::kElemGrain / std::max<int64_t>(R * kCols, 1)),
               [&](int64_t b, int64_t e) {
    using Acc = typename Red::Acc;
    Acc acc[kCols];
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / col_blocks, c0 = (t % col_blocks) * kCols, n = std::min(kCols, K - c0);
      const CT* base = x + o * R * K + c0;
      for (int64_t c = 0; c < n; ++c) acc[c] = Red::identity();
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < n; ++c) acc[c] = Red::step(acc[c], base[r * K + c]);
      for (int64_t c = 0; c < n; ++c) out[o * K + c0 + c] = CT(acc[c]);
    }
  });
}

// Reduces t into a tensor of dtype out_dt, computing in the compute type of `compute`.
template <template <class> class Red>
Tensor reduce(const char* op, const Tensor& t, const Dims& dims, bool keepdim, DType compute, DType out_dt) {
  Tensor result;
  ops::visit_compute_type(compute, [&]<class CT>() {
    ReducePlan p = ops::plan_reduction(op, t, dims, keepdim, dtype_v<CT>);
    Tensor acc = empty(p.out_shape, dtype_v<CT>);
    run_reduce<CT, Red<CT>>(p, acc.data<CT>());
    result = acc.to(out_dt);
  });
  return result;
}

template <class CT>
using MaxRed = ExtremeRed<CT, true>;
template <class CT>
using MinRed = ExtremeRed<CT, false>;

DType sum_dtype(const Tensor& t, std::optional<DType> dtype) {
  return dtype.value_or(is_floating(t.dtype()) ? t.dtype() : kInt64);
}

// (values, indices) of max/min along one dim.
template <bool kMax>
std::pair<Tensor, Tensor> arg_extreme(const char* op, const Tensor& t, int64_t dim, bool keepdim) {
  dim = wrap_dim(dim, t.dim(), op);
  FLB_CHECK(t.dim() == 0 || t.size(dim) > 0, IndexError, "[", op, "] expected reduction dim ", dim,
            " to have non-zero size (shape ", shape_str(t.sizes()), ")");
  Tensor values, indices;
  ops::visit_compute_type(t.dtype(), [&]<class CT>() {
    ReducePlan p = ops::plan_reduction(op, t, t.dim() ? Dims{dim} : Dims{}, keepdim, dtype_v<CT>);
    Tensor v = empty(p.out_shape, dtype_v<CT>);
    indices = empty(p.out_shape, kInt64);
    const CT* x = p.x.data<CT>();
    CT* vo = v.data<CT>();
    int64_t* io = indices.data<int64_t>();
    auto better = [](CT cand, CT best) {
      if constexpr (std::is_floating_point_v<CT>) {
        if (std::isnan(best)) return false;
        if (std::isnan(cand)) return true;
      }
      return kMax ? cand > best : cand < best;
    };
    const int64_t R = p.r, K = p.inner;
    parallel_for(0, p.outer * K, std::max<int64_t>(1, ops::kElemGrain / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
      for (int64_t t2 = b; t2 < e; ++t2) {
        const int64_t o = t2 / K, k = t2 % K;
        const CT* base = x + o * R * K + k;
        CT best = base[0];
        int64_t bi = 0;
        for (int64_t r = 1; r < R; ++r)
          if (better(base[r * K], best)) best = base[r * K], bi = r;
        vo[t2] = best;
        io[t2] = bi;
      }
    });
    values = v.to(t.dtype());
  });
  return {values, indices};
}

}  // namespace

FLB_DIFF_OP(sum,
            (const Tensor& t, const Dims& dims, bool keepdim, std::optional<DType> dtype),
            (t, dims, keepdim, dtype), Tensor) {
  const DType dt = sum_dtype(t, dtype);
  Tensor out = reduce<SumRed>("sum", t, dims, keepdim, dt, dt);
  return out;
}

FLB_DIFF_OP_AUTOCAST(fp32, prod,
                     (const Tensor& t, const Dims& dims, bool keepdim, std::optional<DType> dtype),
                     (t, dims, keepdim, dtype), Tensor) {
  const DType dt = sum_dtype(t, dtype);
  Tensor out = reduce<ProdRed>("prod", t, dims, keepdim, dt, dt);
  return out;
}

FLB_DIFF_OP(mean,
            (const Tensor& t, const Dims& dims, bool keepdim, std::optional<DType> dtype),
            (t, dims, keepdim, dtype), Tensor) {
  const DType dt = dtype.value_or(t.dtype());
  FLB_CHECK(is_floating(dt), TypeError, "[mean] could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: ",
            dtype_name(dt));
  const int64_t n = ops::reduced_count(t, dims);
  Tensor out;
  Tensor s = reduce<SumRed>("mean", t, dims, keepdim, dt, is_reduced_float(dt) ? kFloat32 : dt);
  out = div(s, double(n)).to(dt);
  return out;
}

namespace {
// max-like reductions have no identity: refuse empty reductions.
void check_extreme_dims(const char* op, const Tensor& t, const Dims& dims) {
  FLB_CHECK(t.numel() > 0 || !dims.empty(), ValueError, "[", op, "] expected reduction dim to be specified for input.numel() == 0");
  for (int64_t d : dims)
    FLB_CHECK(t.dim() == 0 || t.size(wrap_dim(d, t.dim(), op)) > 0, IndexError, "[", op, "] expected reduction dim ", d,
              " to have non-zero size (shape ", shape_str(t.sizes()), ")");
}
}  // namespace

FLB_DIFF_OP(amax, (const Tensor& t, const Dims& dims, bool keepdim), (t, dims, keepdim), Tensor) {
  check_extreme_dims("amax", t, dims);
  Tensor out = reduce<MaxRed>("amax", t, dims, keepdim, t.dtype(), t.dtype());
  return out;
}

FLB_DIFF_OP(amin, (const Tensor& t, const Dims& dims, bool keepdim), (t, dims, keepdim), Tensor) {
  check_extreme_dims("amin", t, dims);
  Tensor out = reduce<MinRed>("amin", t, dims, keepdim, t.dtype(), t.dtype());
  return out;
}

FLB_DIFF_OP(max, (const Tensor& t, int64_t dim, bool keepdim), (t, dim, keepdim), std::pair<Tensor, Tensor>) {
  auto r = arg_extreme<true>("max", t, dim, keepdim);
  return r;
}
FLB_DIFF_OP(min, (const Tensor& t, int64_t dim, bool keepdim), (t, dim, keepdim), std::pair<Tensor, Tensor>) {
  auto r = arg_extreme<false>("min", t, dim, keepdim);
  return r;
}
FLB_DIFF_OP(max, (const Tensor& t), (t), Tensor) {
  check_extreme_dims("max", t, {});
  Tensor out = reduce<MaxRed>("max", t, {}, false, t.dtype(), t.dtype());
  return out;
}
FLB_DIFF_OP(min, (const Tensor& t), (t), Tensor) {
  check_extreme_dims("min", t, {});
  Tensor out = reduce<MinRed>("min", t, {}, false, t.dtype(), t.dtype());
  return out;
}

FLB_OP(argmax, (const Tensor& t, std::optional<int64_t> dim, bool keepdim), (t, dim, keepdim), Tensor) {
  if (dim) return arg_extreme<true>("argmax", t, *dim, keepdim).second;
  FLB_CHECK(t.numel() > 0, ValueError, "[argmax] expected reduction dim to be specified for input.numel() == 0");
  Tensor r = arg_extreme<true>("argmax", t.reshape({-1}), 0, false).second;
  return keepdim ? r.reshape(Dims(size_t(t.dim()), 1)) : r;
}

FLB_OP(argmin, (const Tensor& t, std::optional<int64_t> dim, bool keepdim), (t, dim, keepdim), Tensor) {
  if (dim) return arg_extreme<false>("argmin", t, *dim, keepdim).second;
  FLB_CHECK(t.numel() > 0, ValueError, "[argmin] expected reduction dim to be specified for input.numel() == 0");
  Tensor r = arg_extreme<false>("argmin", t.reshape({-1}), 0, false).second;
  return keepdim ? r.reshape(Dims(size_t(t.dim()), 1)) : r;
}

FLB_OP(any, (const Tensor& t, const Dims& dims, bool keepdim), (t, dims, keepdim), Tensor) {
  Tensor r = reduce<MaxRed>("any", ne(t, 0), dims, keepdim, kBool, kBool);
  return t.dtype() == kUInt8 ? r.to(kUInt8) : r;
}

FLB_OP(all, (const Tensor& t, const Dims& dims, bool keepdim), (t, dims, keepdim), Tensor) {
  Tensor r = reduce<MinRed>("all", ne(t, 0), dims, keepdim, kBool, kBool);
  return t.dtype() == kUInt8 ? r.to(kUInt8) : r;
}

FLB_OP(count_nonzero, (const Tensor& t, const Dims& dims), (t, dims), Tensor) {
  return reduce<SumRed>("count_nonzero", ne(t, 0), dims, false, kInt64, kInt64);
}

// ---- composites -----------------------------------------------------------------------
namespace {
// Float inputs computed in float32 when they are 16-bit; integer inputs refused.
Tensor float_input(const char* op, const Tensor& t) {
  FLB_CHECK(is_floating(t.dtype()), TypeError, "[", op, "] expected a floating point tensor, got ", dtype_name(t.dtype()));
  return is_reduced_float(t.dtype()) ? t.to(kFloat32) : t;
}
}  // namespace

// var, std, norm and logsumexp are computed from other ops (below autograd) and get one
// node each, with PyTorch's name and a closed-form derivative (op_derivatives.cpp).
FLB_DIFF_OP(var,
            (const Tensor& t, const Dims& dims, double correction, bool keepdim),
            (t, dims, correction, keepdim), Tensor) {
  const Tensor x = float_input("var", t);
  const double denom = std::max(0.0, double(ops::reduced_count(t, dims)) - correction);
  const Tensor d = sub(x, mean(x, dims, true));
  return div(sum(mul(d, d), dims, keepdim), denom).to(t.dtype());
}

FLB_DIFF_OP(std,
            (const Tensor& t, const Dims& dims, double correction, bool keepdim),
            (t, dims, correction, keepdim), Tensor) {
  const Tensor x = float_input("std", t);
  return sqrt(var(x, dims, correction, keepdim)).to(t.dtype());
}

FLB_DIFF_OP(norm, (const Tensor& t, double p, const Dims& dims, bool keepdim), (t, p, dims, keepdim), Tensor) {
  const Tensor x = float_input("norm", t);
  Tensor r;
  if (p == 2) r = sqrt(sum(mul(x, x), dims, keepdim));
  else if (p == 1) r = sum(abs(x), dims, keepdim);
  else if (std::isinf(p)) r = p > 0 ? amax(abs(x), dims, keepdim) : amin(abs(x), dims, keepdim);
  else if (p == 0) r = sum(ne(x, 0).to(x.dtype()), dims, keepdim);
  else r = pow(sum(pow(abs(x), p), dims, keepdim), 1.0 / p);
  r = r.to(t.dtype());
  return r;
}

FLB_DIFF_OP(logsumexp, (const Tensor& t, const Dims& dims, bool keepdim), (t, dims, keepdim), Tensor) {
  const Tensor x = is_floating(t.dtype()) ? float_input("logsumexp", t) : t.to(kDefaultFloat);
  Tensor r;
  if (x.numel() == 0) {
    r = log(sum(exp(x), dims, keepdim));
  } else {
    Tensor m = amax(x, dims, true);
    m = where(isinf(m), zeros_like(m), m);
    r = add(log(sum(exp(sub(x, m)), dims, true)), m);
    if (!keepdim) r = r.reshape(ops::reduced_shape("logsumexp", t, dims, false));
  }
  if (is_floating(t.dtype())) r = r.to(t.dtype());
  return r;
}

Tensor Tensor::sum(const Dims& d, bool k) const { return flambeau::sum(*this, d, k); }
Tensor Tensor::mean(const Dims& d, bool k) const { return flambeau::mean(*this, d, k); }
Tensor Tensor::prod(const Dims& d, bool k) const { return flambeau::prod(*this, d, k); }
Tensor Tensor::amax(const Dims& d, bool k) const { return flambeau::amax(*this, d, k); }
Tensor Tensor::amin(const Dims& d, bool k) const { return flambeau::amin(*this, d, k); }
Tensor Tensor::argmax(std::optional<int64_t> d, bool k) const { return flambeau::argmax(*this, d, k); }
Tensor Tensor::argmin(std::optional<int64_t> d, bool k) const { return flambeau::argmin(*this, d, k); }

}  // namespace flambeau
