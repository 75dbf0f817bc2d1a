// Matrix products: mm, bmm, matmul (PyTorch's broadcasting and 1-D rules), addmm,
// baddbmm, linear, outer, dot. float32/float64 go to OpenBLAS (s/dgemm), bfloat16/float16 to
// kernels::gemm16 (float32 accumulation, rounded once), with transposed operands passed as
// transposes instead of copies; integers use an int64-accumulating loop.
#include <cblas.h>
#include <type_traits>

#include <algorithm>

#include "flambeau/core/op_hook.h"
#include "flambeau/autograd/autocast.h"
#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/kernels/cpu/gemm16.h"

#include "flambeau/core/parallel.h"
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

// How BLAS can read a 2-D view without copying: row-major as is, or as the transpose of a
// row-major matrix; ld is the leading dimension. False: the view needs a copy.
bool blas_view(const Tensor& t, CBLAS_TRANSPOSE* trans, int64_t* ld) {
  const int64_t rows = t.size(0), cols = t.size(1);
  const int64_t s0 = rows == 1 ? std::max<int64_t>(cols, 1) : t.stride(0);
  const int64_t s1 = cols == 1 ? 1 : t.stride(1);
  if (s1 == 1 && s0 >= std::max<int64_t>(cols, 1)) {
    *trans = CblasNoTrans;
    *ld = s0;
    return true;
  }
  const int64_t t0 = rows == 1 ? 1 : t.stride(0), t1 = cols == 1 ? std::max<int64_t>(rows, 1) : t.stride(1);
  if (t0 == 1 && t1 >= std::max<int64_t>(rows, 1)) {
    *trans = CblasTrans;
    *ld = t1;
    return true;
  }
  return false;
}

// out[n, m] = alpha * a[n, k] @ b[k, m] + beta * out for a float dtype (out contiguous);
// operands that BLAS can read as they are (row-major or transposed) are not copied.
template <class T>
void float_gemm(const Tensor& a_in, const Tensor& b_in, Tensor& out, double alpha, double beta) {
  const int64_t n = a_in.size(0), k = a_in.size(1), m = b_in.size(1);
  if (n == 0 || m == 0) return;
  CBLAS_TRANSPOSE ta, tb;
  int64_t lda, ldb;
  const Tensor a = blas_view(a_in, &ta, &lda) ? a_in : a_in.contiguous();
  const Tensor b = blas_view(b_in, &tb, &ldb) ? b_in : b_in.contiguous();
  blas_view(a, &ta, &lda);
  blas_view(b, &tb, &ldb);
  const int64_t ldc = std::max<int64_t>(m, 1);
  const bool at = ta == CblasTrans, bt = tb == CblasTrans;
  if constexpr (std::is_same_v<T, float>)
    kernels::gemm_f32(at, bt, n, m, k, float(alpha), a.data<T>(), lda, b.data<T>(), ldb, float(beta), out.data<T>(), ldc);
  else if constexpr (std::is_same_v<T, double>)
    kernels::gemm_f64(at, bt, n, m, k, alpha, a.data<T>(), lda, b.data<T>(), ldb, beta, out.data<T>(), ldc);
  else
    kernels::gemm16(at, bt, n, m, k, float(alpha), a.data<T>(), lda, b.data<T>(), ldb, float(beta), out.data<T>(), ldc);
}

// Integer products: int64 accumulation (wrapping), rows in parallel.
void int_gemm(const Tensor& a_in, const Tensor& b_in, Tensor& out, int64_t alpha, int64_t beta) {
  const Tensor a = a_in.to(kInt64).contiguous(), b = b_in.to(kInt64).contiguous();
  Tensor acc = out.to(kInt64).contiguous();
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  const uint64_t* pa = reinterpret_cast<const uint64_t*>(a.data<int64_t>());
  const uint64_t* pb = reinterpret_cast<const uint64_t*>(b.data<int64_t>());
  uint64_t* pc = reinterpret_cast<uint64_t*>(acc.data<int64_t>());
  parallel_for(0, n, std::max<int64_t>(1, 4096 / std::max<int64_t>(k * m, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<uint64_t> row(static_cast<size_t>(m));
    for (int64_t i = r0; i < r1; ++i) {
      std::fill(row.begin(), row.end(), 0);
      for (int64_t p = 0; p < k; ++p)
        for (int64_t j = 0; j < m; ++j) row[size_t(j)] += pa[i * k + p] * pb[p * m + j];
      for (int64_t j = 0; j < m; ++j) pc[i * m + j] = uint64_t(alpha) * row[size_t(j)] + (beta ? uint64_t(beta) * pc[i * m + j] : 0);
    }
  });
  out.copy_(acc);
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  FLB_CHECK(a.dtype() == b.dtype(), TypeError, "[", op, "] expected both operands to have the same dtype, but got: ",
            dtype_name(a.dtype()), " != ", dtype_name(b.dtype()));
}

// out = alpha * a @ b + beta * out for 2-D a, b (shapes checked by the caller).
void gemm(const Tensor& a, const Tensor& b, Tensor& out, Scalar alpha, Scalar beta) {
  const DType dt = a.dtype();
  if (dt == kFloat32) return float_gemm<float>(a, b, out, alpha.to_double(), beta.to_double());
  if (dt == kFloat64) return float_gemm<double>(a, b, out, alpha.to_double(), beta.to_double());
  if (dt == kBFloat16) return float_gemm<BFloat16>(a, b, out, alpha.to_double(), beta.to_double());
  if (dt == kFloat16) return float_gemm<Half>(a, b, out, alpha.to_double(), beta.to_double());
  FLB_CHECK(dt != kBool, TypeError, "[mm] not implemented for 'bool'");
  int_gemm(a, b, out, alpha.to_int(), beta.to_int());
}

void check_mm(const char* op, const Tensor& a, const Tensor& b) {
  FLB_CHECK(a.dim() == 2 && b.dim() == 2, ValueError, "[", op, "] expected 2-D tensors, got ", a.dim(), "-D and ",
            b.dim(), "-D");
  check_same_dtype(op, a, b);
  FLB_CHECK(a.size(1) == b.size(0), ValueError, "[", op, "] mat1 and mat2 shapes cannot be multiplied (", a.size(0),
            "x", a.size(1), " and ", b.size(0), "x", b.size(1), ")");
}

}  // namespace

const char* bf16_matmul_backend() { return kernels::gemm16_backend(true); }

FLB_DIFF_OP_AUTOCAST(lower, mm, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  check_mm("mm", a, b);
  Tensor out = empty({a.size(0), b.size(1)}, a.dtype());
  if (a.size(1) == 0) out.fill_(0);
  else gemm(a, b, out, 1, 0);
  return out;
}

FLB_DIFF_OP_AUTOCAST(lower, addmm,
                     (const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha),
                     (self, a, b, beta, alpha), Tensor) {
  check_mm("addmm", a, b);
  check_same_dtype("addmm", self, a);
  const Dims shape{a.size(0), b.size(1)};
  FLB_CHECK(broadcast_shapes(self.sizes(), shape, "addmm") == shape, ValueError, "[addmm] self of shape ",
            shape_str(self.sizes()), " cannot be broadcast to ", shape_str(shape));
  Tensor out = empty(shape, a.dtype());
  // beta == 0 ignores self entirely (NaN in self does not leak), as in BLAS and PyTorch.
  if (beta.to_double() != 0) out.copy_(self);
  else out.fill_(0);
  if (a.size(1) == 0) {
    if (beta.to_double() != 0) mul_(out, beta);
  } else {
    gemm(a, b, out, alpha, beta.to_double() != 0 ? beta : Scalar(0));
  }
  return out;
}

FLB_DIFF_OP_AUTOCAST(lower, bmm, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  FLB_CHECK(a.dim() == 3 && b.dim() == 3, ValueError, "[bmm] expected 3-D tensors, got ", a.dim(), "-D and ", b.dim(), "-D");
  check_same_dtype("bmm", a, b);
  FLB_CHECK(a.size(0) == b.size(0) && a.size(2) == b.size(1), ValueError, "[bmm] batch1 ", shape_str(a.sizes()),
            " and batch2 ", shape_str(b.sizes()), " cannot be multiplied");
  Tensor out = zeros({a.size(0), a.size(1), b.size(2)}, a.dtype());
  for (int64_t i = 0; a.size(2) > 0 && i < a.size(0); ++i) {
    Tensor o = out.select(0, i);
    gemm(a.select(0, i), b.select(0, i), o, 1, 0);
  }
  return out;
}

FLB_OP(baddbmm,
       (const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha),
       (self, a, b, beta, alpha), Tensor) {
  FLB_AUTOCAST(lower, baddbmm, self, a, b, beta, alpha);
  Tensor prod = bmm(a, b);
  check_same_dtype("baddbmm", self, a);
  FLB_CHECK(broadcast_shapes(self.sizes(), prod.sizes(), "baddbmm") == prod.sizes(), ValueError, "[baddbmm] self of shape ",
            shape_str(self.sizes()), " cannot be broadcast to ", shape_str(prod.sizes()));
  if (alpha.to_double() != 1) prod = mul(prod, alpha);
  return beta.to_double() == 0 ? prod : add(prod, self, beta).to(a.dtype());
}

FLB_DIFF_OP(dot, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  FLB_CHECK(a.dim() == 1 && b.dim() == 1, ValueError, "[dot] 1D tensors expected, but got ", a.dim(), "D and ", b.dim(), "D tensors");
  check_same_dtype("dot", a, b);
  FLB_CHECK(a.size(0) == b.size(0), ValueError, "[dot] inconsistent tensor size, expected tensor [", a.size(0),
            "] and src [", b.size(0), "] to have the same number of elements, but got ", a.size(0), " and ", b.size(0),
            " elements respectively");
  // Through the deterministic reduction (not BLAS sdot, whose split depends on threads).
  const DType acc = is_reduced_float(a.dtype()) ? kFloat32 : a.dtype();
  Tensor out;
  out = sum(mul(a.to(acc), b.to(acc)), {}, false, acc).to(a.dtype());
  return out;
}

FLB_OP(outer, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  FLB_CHECK(a.dim() == 1 && b.dim() == 1, ValueError, "[outer] expected 1-D tensors, got ", a.dim(), "-D and ", b.dim(), "-D");
  return mul(a.unsqueeze(1), b.unsqueeze(0));
}

FLB_OP(matmul, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  FLB_AUTOCAST(lower, matmul, a, b);
  FLB_CHECK(a.dim() >= 1 && b.dim() >= 1, ValueError, "[matmul] both arguments need at least 1 dimension, got ",
            a.dim(), "-D and ", b.dim(), "-D");
  if (a.dim() == 1 && b.dim() == 1) return dot(a, b);
  if (a.dim() == 2 && b.dim() == 2) return mm(a, b);
  if (a.dim() == 1 && b.dim() == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (a.dim() == 2 && b.dim() == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  const int64_t k = a.size(-1);
  if (b.dim() <= 2) {
    // Fold a's batch dims into rows: one large GEMM (rows counted, not -1: k may be 0).
    const Tensor b2 = b.dim() == 1 ? b.unsqueeze(1) : b;
    Dims shape(a.sizes().begin(), a.sizes().size() - 1);
    if (b.dim() == 2) shape.push_back(b.size(1));
    FLB_CHECK(k == b2.size(0), ValueError, "[matmul] shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
              " cannot be multiplied");
    return mm(a.reshape({numel_of(Dims(a.sizes().begin(), a.sizes().size() - 1)), k}), b2).reshape(shape);
  }
  // Batched: 1-D operands gain a dim that is removed again; batch dims broadcast.
  const Tensor a3 = a.dim() == 1 ? a.unsqueeze(0) : a, b3 = b;
  FLB_CHECK(a3.size(-1) == b3.size(-2), ValueError, "[matmul] shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
            " cannot be multiplied");
  const Dims ab(a3.sizes().begin(), a3.sizes().size() - 2), bb(b3.sizes().begin(), b3.sizes().size() - 2);
  const Dims batch = broadcast_shapes(ab, bb, "matmul");
  const int64_t n = a3.size(-2), m = b3.size(-1), nb = numel_of(batch);
  Dims ae = batch, be = batch, out_shape = batch;
  ae.push_back(n), ae.push_back(k), be.push_back(k), be.push_back(m);
  Tensor r = bmm(a3.expand(ae).reshape({nb, n, k}), b3.expand(be).reshape({nb, k, m}));
  out_shape.push_back(n), out_shape.push_back(m);
  r = r.reshape(out_shape);
  return a.dim() == 1 ? r.squeeze(-2) : r;
}

FLB_OP(linear, (const Tensor& x, const Tensor& weight, std::optional<Tensor> bias), (x, weight, bias), Tensor) {
  FLB_AUTOCAST(lower, linear, x, weight, bias);
  FLB_CHECK(weight.dim() == 2, ValueError, "[linear] weight must be 2-D, got shape ", shape_str(weight.sizes()));
  FLB_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), ValueError, "[linear] input of shape ", shape_str(x.sizes()),
            " cannot be multiplied by weight of shape ", shape_str(weight.sizes()));
  if (x.dim() == 2) return bias ? addmm(*bias, x, weight.t()) : mm(x, weight.t());  // no views around it
  Dims shape(x.sizes().begin(), x.sizes().size() - 1);
  shape.push_back(weight.size(0));
  const Tensor x2 = x.reshape({numel_of(Dims(x.sizes().begin(), x.sizes().size() - 1)), x.size(-1)});
  const Tensor y = bias ? addmm(*bias, x2, weight.t()) : mm(x2, weight.t());
  return y.reshape(shape);
}

}  // namespace flambeau
