// softmax and log_softmax along one dim: rows made contiguous in the compute type, then
// one SIMD pass per row (max, exp and sum, scale), rows split among threads.
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/simd.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/elementwise.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

Tensor softmax_impl(const char* op, const Tensor& t, int64_t dim, std::optional<DType> dtype, bool log) {
  const Tensor x = dtype ? t.to(*dtype) : t;
  FLB_CHECK(is_floating(x.dtype()), TypeError, "[", op, "] not implemented for '", dtype_name(x.dtype()),
            "': expected a floating point tensor");
  if (x.dim() == 0) return softmax_impl(op, x.reshape({1}), 0, {}, log).reshape({});
  dim = wrap_dim(dim, x.dim(), op);
  const bool last = dim == x.dim() - 1;
  const DType ct = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  const Tensor in = (last ? x : x.transpose(dim, -1)).to(ct).contiguous();
  Tensor out = empty(in.sizes(), ct);
  const int64_t n = in.size(-1), rows = n ? in.numel() / n : 0;
  const int64_t grain = std::max<int64_t>(1, ops::kElemGrain / std::max<int64_t>(n, 1));
  parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      if (ct == kFloat64) kernels::softmax_row_f64(in.data<double>() + r * n, out.data<double>() + r * n, n, log);
      else kernels::softmax_row_f32(in.data<float>() + r * n, out.data<float>() + r * n, n, log);
    }
  });
  Tensor result = out.to(x.dtype());
  return last ? result : result.transpose(dim, -1).contiguous();
}

}  // namespace

FLB_DIFF_OP(softmax, (const Tensor& t, int64_t dim, std::optional<DType> dtype), (t, dim, dtype), Tensor) {
  Tensor out;
  out = softmax_impl("softmax", t, dim, dtype, false);
  return out;
}
FLB_DIFF_OP(log_softmax, (const Tensor& t, int64_t dim, std::optional<DType> dtype), (t, dim, dtype), Tensor) {
  Tensor out;
  out = softmax_impl("log_softmax", t, dim, dtype, true);
  return out;
}
Tensor Tensor::softmax(int64_t dim) const { return flambeau::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return flambeau::log_softmax(*this, dim); }

}  // namespace flambeau
