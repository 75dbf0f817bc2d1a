// torch.linalg (linalg.h). The factorizations are primitives: each matrix of the batch is
// copied column-major (the transpose, contiguous), factored by LAPACK on one thread (the
// batch split among flambeau's threads, so results do not depend on the thread count),
// and copied back; their backward nodes hold torch's formulas. Everything else (inv's
// solve aside) is composed of them.
#include "flambeau/ops/linalg.h"

#include <cmath>
#include <limits>
#include <vector>

#include "flambeau/autograd/function.h"
#include "flambeau/autograd/node.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/lapack.h"
#include "flambeau/ops/ops.h"

namespace flambeau::linalg {
namespace lapack = kernels::lapack;
namespace {

void check_matrices(const char* op, const Tensor& A, bool square) {
  FLB_CHECK(A.dim() >= 2, ValueError, "[", op, "] The input tensor A must have at least 2 dimensions, got shape ",
            shape_str(A.sizes()));
  FLB_CHECK(!square || A.size(-1) == A.size(-2), ValueError, "[", op,
            "] A must be batches of square matrices, but they are ", A.size(-2), " by ", A.size(-1), " matrices");
  FLB_CHECK(A.dtype() == kFloat32 || A.dtype() == kFloat64, TypeError, "[", op,
            "] Expected a float32 or float64 tensor as input. Got ", dtype_name(A.dtype()));
}

Dims batch_shape(const Tensor& A) { return Dims(A.sizes().data(), A.sizes().size() - 2); }
int64_t batch_count(const Tensor& A) {
  int64_t b = 1;
  for (int64_t d : batch_shape(A)) b *= d;
  return b;
}
Dims with_matrix(Dims batch, int64_t rows, int64_t cols) {
  batch.push_back(rows), batch.push_back(cols);
  return batch;
}
Tensor mT(const Tensor& t) { return t.transpose(-2, -1); }
// Each matrix column-major: the transpose's rows, contiguous; always a copy (LAPACK writes
// into it), without history.
Tensor column_major(const Tensor& A) {
  const Tensor t = mT(A.detach());
  return t.is_contiguous() ? t.clone() : t.contiguous();
}
Tensor row_major(const Tensor& C) { return mT(C).contiguous(); }

template <class F>
void visit_float(DType dt, const F& f) {
  if (dt == kFloat64) f.template operator()<double>();
  else f.template operator()<float>();
}

// Runs f(i) for every matrix i, and raises LinAlgError for the first whose info is > 0.
template <class F, class Msg>
void for_each_matrix(const char* op, int64_t batch, bool batched, const F& f, const Msg& message) {
  std::vector<int> info(size_t(batch), 0);
  parallel_for(0, batch, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) info[size_t(i)] = f(i);
  });
  for (int64_t i = 0; i < batch; ++i)
    if (info[size_t(i)] > 0)
      throw LinAlgError(detail::str_cat("[", op, "] ", batched ? "(Batch element " + std::to_string(i) + "): " : "",
                                        message(info[size_t(i)])));
}

Tensor zeros_if_undefined(const Tensor& g, const Tensor& like) { return g.defined() ? g : zeros_like(like); }
Tensor grad_at(const std::vector<Tensor>& g, size_t i) { return i < g.size() ? g[i] : Tensor(); }

// X with A X = B for matrices of the same batch shape: B [*, n, k].
Tensor solve_matrices(const char* op, const Tensor& A, const Tensor& B) {
  const int64_t n = A.size(-1), k = B.size(-1), batch = batch_count(A);
  Tensor a = column_major(A), x = column_major(B);
  visit_float(A.dtype(), [&]<class T>() {
    T* pa = a.data<T>();
    T* px = x.data<T>();
    for_each_matrix(op, batch, A.dim() > 2, [&](int64_t i) {
      std::vector<int> ipiv(size_t(std::max<int64_t>(n, 1)));
      return lapack::gesv(int(n), int(k), pa + i * n * n, ipiv.data(), px + i * n * k);
    }, [](int) { return std::string("The solver failed because the input matrix is singular."); });
  });
  return row_major(x);
}

// The LU's determinant, its sign and log |det| of each matrix.
std::tuple<Tensor, Tensor, Tensor> lu_det(const Tensor& A) {
  const int64_t n = A.size(-1), batch = batch_count(A);
  Tensor a = column_major(A);
  const Dims bs = batch_shape(A);
  Tensor det = empty(bs, A.dtype()), sign = empty(bs, A.dtype()), logabs = empty(bs, A.dtype());
  visit_float(A.dtype(), [&]<class T>() {
    T* pa = a.data<T>();
    T *pd = det.data<T>(), *ps = sign.data<T>(), *pl = logabs.data<T>();
    parallel_for(0, batch, 1, [&](int64_t b, int64_t e) {
      std::vector<int> ipiv(size_t(std::max<int64_t>(n, 1)));
      for (int64_t i = b; i < e; ++i) {
        T* m = pa + i * n * n;
        lapack::getrf(int(n), m, ipiv.data());  // info > 0: a zero pivot, det 0
        T parity = 1, d = 1, s = 1, l = 0;  // det = parity * prod(u_jj)
        for (int64_t j = 0; j < n; ++j) {
          const T u = m[j * n + j];
          if (ipiv[size_t(j)] != j + 1) parity = -parity;
          d *= u;
          s *= u > 0 ? 1 : u < 0 ? -1 : 0;
          l += std::log(std::abs(u));
        }
        pd[i] = parity * d;
        s *= parity;
        ps[i] = s, pl[i] = l;
      }
    });
  });
  return {det, sign, logabs};
}

Tensor eye_like(int64_t n, const Tensor& A) { return eye(n, n, A.dtype()); }

// tril(M, -1) + tril(M, -1)^T + diag(M): M's lower triangle mirrored.
Tensor copy_lower_to_upper(const Tensor& M) {
  const Tensor low = tril(M, -1);
  return add(add(low, mT(low)), diag_embed(diagonal(M, 0, -2, -1)));
}

// X R^-T (R square, upper triangular).
Tensor times_inverse_transpose(const Tensor& X, const Tensor& R) { return mT(solve_matrices("qr_backward", R, mT(X))); }

// The QR backward for m >= n (Q m x n, R n x n).
Tensor qr_backward_tall(const Tensor& gQ, const Tensor& gR, const Tensor& Q, const Tensor& R) {
  const Tensor M = sub(matmul(R, mT(gR)), matmul(mT(gQ), Q));
  return times_inverse_transpose(add(gQ, matmul(Q, copy_lower_to_upper(M))), R);
}

}  // namespace

FLB_OP_NAMED("linalg_det", det, (const Tensor& A), (A), Tensor) {
  check_matrices("linalg.det", A, true);
  Tensor d = std::get<0>(lu_det(A));
  autograd::record("LinalgDetBackward0", {&d}, {&A}, {A, d}, [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    // d det / dA = det A^-T (A invertible).
    const Tensor scale = mul(g[0], s[1]).unsqueeze(-1).unsqueeze(-1);
    return std::vector<Tensor>{mul(scale, mT(inv(s[0])))};
  });
  return d;
}

FLB_OP_NAMED("linalg_slogdet", slogdet, (const Tensor& A), (A), std::tuple<Tensor, Tensor>) {
  check_matrices("linalg.slogdet", A, true);
  auto [d, sign, logabs] = lu_det(A);
  autograd::record("LinalgSlogdetBackward0", {&sign, &logabs}, {&A}, {A},
                   [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
                     const Tensor gl = grad_at(g, 1);
                     if (!gl.defined()) return std::vector<Tensor>{zeros_like(s[0])};
                     return std::vector<Tensor>{mul(gl.unsqueeze(-1).unsqueeze(-1), mT(inv(s[0])))};
                   });
  return {sign, logabs};
}

FLB_OP_NAMED("linalg_inv", inv, (const Tensor& A), (A), Tensor) {
  check_matrices("linalg.inv", A, true);
  const int64_t n = A.size(-1);
  Tensor x;
  try {
    x = solve_matrices("linalg.inv", A, eye_like(n, A).expand(A.sizes()));
  } catch (const LinAlgError& e) {
    // torch's wording for inv: the zero diagonal element of U.
    std::string m = e.what();
    throw LinAlgError(m.replace(m.find("The solver failed"), std::string::npos,
                                "The inversion could not be completed because the input matrix is singular."));
  }
  autograd::record("LinalgInvExBackward0", {&x}, {&A}, {x}, [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    const Tensor t = mT(s[0]);
    return std::vector<Tensor>{neg(matmul(matmul(t, g[0]), t))};
  });
  return x;
}

FLB_OP_NAMED("linalg_solve", solve, (const Tensor& A, const Tensor& B, bool left), (A, B, left), Tensor) {
  check_matrices("linalg.solve", A, true);
  FLB_CHECK(B.dtype() == A.dtype(), TypeError, "[linalg.solve] Expected A and B to have the same dtype, but found A of type ",
            dtype_name(A.dtype()), " and B of type ", dtype_name(B.dtype()), " instead");
  const int64_t n = A.size(-1);
  // B is a vector when it has one dim, or A's batch dims plus n (torch's rule).
  const bool vector = B.dim() == 1 || (B.dim() == A.dim() - 1 && Dims(B.sizes().data(), B.sizes().size()) ==
                                                                     Dims(A.sizes().data(), A.sizes().size() - 1));
  Tensor b = vector ? B.unsqueeze(-1) : B;
  FLB_CHECK(b.dim() >= 2 && b.size(left ? -2 : -1) == n, ValueError, "[linalg.solve] Incompatible shapes of A and B for the equation ",
            left ? "AX = B" : "XA = B", " (", shape_str(A.sizes()), " and ", shape_str(B.sizes()), ")");
  Tensor a = left ? A : mT(A);
  if (!left) b = mT(b);
  const Dims batch = broadcast_shapes(batch_shape(a), batch_shape(b), "linalg.solve");
  const Tensor ae = a.expand(with_matrix(batch, n, n)), be = b.expand(with_matrix(batch, n, b.size(-1)));
  Tensor x = solve_matrices("linalg.solve", ae, be);
  autograd::record("LinalgSolveExBackward0", {&x}, {&ae, &be}, {ae, x},
                   [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
                     const Tensor gb = solve_matrices("linalg.solve backward", mT(s[0]), g[0]);
                     return std::vector<Tensor>{neg(matmul(gb, mT(s[1]))), gb};
                   });
  if (!left) x = mT(x);
  return vector ? x.squeeze(-1) : x;
}

FLB_OP_NAMED("linalg_cholesky", cholesky, (const Tensor& A, bool upper), (A, upper), Tensor) {
  check_matrices("linalg.cholesky", A, true);
  const int64_t n = A.size(-1);
  Tensor a = column_major(A);
  visit_float(A.dtype(), [&]<class T>() {
    T* p = a.data<T>();
    for_each_matrix("linalg.cholesky", batch_count(A), A.dim() > 2, [&](int64_t i) { return lapack::potrf(int(n), p + i * n * n); },
                    [](int k) {
                      return "The factorization could not be completed because the input is not positive-definite (the "
                             "leading minor of order " + std::to_string(k) + " is not positive-definite).";
                    });
  });
  Tensor L = tril(row_major(a));  // LAPACK leaves the upper triangle as it was
  autograd::record("LinalgCholeskyExBackward0", {&L}, {&A}, {L}, [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    // gA = L^-T phi(L^T gL) L^-1, symmetrized; phi: the lower triangle, its diagonal halved.
    const Tensor& l = s[0];
    const Tensor p = matmul(mT(l), g[0]);
    const Tensor phi = sub(tril(p), mul(diag_embed(diagonal(p, 0, -2, -1)), 0.5));
    const Tensor left = solve_matrices("linalg.cholesky backward", mT(l), phi);                     // L^-T phi
    const Tensor ga = mT(solve_matrices("linalg.cholesky backward", mT(l), mT(left)));             // ... L^-1
    return std::vector<Tensor>{mul(add(ga, mT(ga)), 0.5)};
  });
  return upper ? mT(L) : L;
}

FLB_OP_NAMED("linalg_qr", qr, (const Tensor& A, const std::string& mode), (A, mode), std::tuple<Tensor, Tensor>) {
  check_matrices("linalg.qr", A, false);
  FLB_CHECK(mode == "reduced" || mode == "complete" || mode == "r", ValueError,
            "[linalg.qr] qr received unrecognized mode '", mode, "' but expected one of 'reduced' (default), 'r', or 'complete'");
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), batch = batch_count(A);
  const int64_t q_cols = mode == "r" ? 0 : mode == "complete" ? m : k, r_rows = mode == "complete" ? m : k;
  const int64_t cols = std::max(n, q_cols);
  // a: each matrix's columns, room for q_cols of Q.
  Tensor a = zeros(with_matrix(batch_shape(A), cols, m), A.dtype());
  a.narrow(-2, 0, n).copy_(mT(A.detach()));
  Tensor r = empty(with_matrix(batch_shape(A), n, r_rows), A.dtype());
  visit_float(A.dtype(), [&]<class T>() {
    T *pa = a.data<T>(), *pr = r.data<T>();
    for_each_matrix("linalg.qr", batch, A.dim() > 2, [&](int64_t i) {
      return lapack::qr(int(m), int(n), pa + i * cols * m, int(q_cols), pr + i * n * r_rows, int(r_rows));
    }, [](int) { return std::string("LAPACK's QR failed"); });
  });
  Tensor R = row_major(r);
  Tensor Q = q_cols ? row_major(a.narrow(-2, 0, q_cols)) : empty({0}, A.dtype());
  const bool differentiable = mode != "r" && (mode == "reduced" || m <= n);
  autograd::record("LinalgQrBackward0", {&Q, &R}, {&A}, {A, Q, R}, [differentiable, m, n](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    FLB_CHECK(differentiable, NotImplementedError,
              "[linalg.qr] The derivative of linalg.qr depends on Q, which is not computed when mode='r', and is not "
              "defined when mode='complete' and nrows > ncols");
    const Tensor& q = s[1];
    const Tensor& R = s[2];
    const Tensor gQ = zeros_if_undefined(grad_at(g, 0), q), gR = zeros_if_undefined(grad_at(g, 1), R);
    if (m >= n) return std::vector<Tensor>{qr_backward_tall(gQ, gR, q, R)};
    // Wide: A = [X | Y] with X = Q R1 (square), Y = Q R2.
    const Tensor R1 = R.narrow(-1, 0, m), gR1 = gR.narrow(-1, 0, m), gR2 = gR.narrow(-1, m, n - m);
    const Tensor Y = s[0].narrow(-1, m, n - m);
    const Tensor gX = qr_backward_tall(add(gQ, matmul(Y, mT(gR2))), gR1, q, R1);
    return std::vector<Tensor>{cat({gX, matmul(q, gR2)}, -1)};
  });
  return {Q, R};
}

namespace {
// U [*, m, k], S [*, k], Vh [*, k, n] (full: U [*, m, m], Vh [*, n, n]); no U, Vh: S only.
std::tuple<Tensor, Tensor, Tensor> svd_impl(const Tensor& A, bool full, bool vectors) {
  const int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n), batch = batch_count(A);
  const int64_t ucols = full ? m : k, vrows = full ? n : k;
  const Dims bs = batch_shape(A);
  Tensor a = column_major(A), s = empty(with_matrix(bs, 1, k), A.dtype());
  Tensor u = vectors ? empty(with_matrix(bs, ucols, m), A.dtype()) : Tensor();
  Tensor vt = vectors ? empty(with_matrix(bs, n, vrows), A.dtype()) : Tensor();
  visit_float(A.dtype(), [&]<class T>() {
    T *pa = a.data<T>(), *ps = s.data<T>();
    T *pu = vectors ? u.data<T>() : nullptr, *pv = vectors ? vt.data<T>() : nullptr;
    for_each_matrix("linalg.svd", batch, A.dim() > 2, [&](int64_t i) {
      if (m == 0 || n == 0) return 0;
      return lapack::gesdd(int(m), int(n), pa + i * m * n, ps + i * k, pu ? pu + i * m * ucols : nullptr,
                           pv ? pv + i * vrows * n : nullptr, full);
    }, [](int) { return std::string("The algorithm failed to converge because the input matrix is ill-conditioned or has "
                                    "too many repeated singular values"); });
  });
  Tensor S = s.squeeze(-2);
  if (!vectors) return {Tensor(), S, Tensor()};
  if (m == 0 || n == 0) {  // LAPACK is not called: the identity's columns
    u = mT(eye(m, ucols, A.dtype()).expand(with_matrix(bs, m, ucols))).contiguous();
    vt = mT(eye(vrows, n, A.dtype()).expand(with_matrix(bs, vrows, n))).contiguous();
  }
  return {row_major(u), S, row_major(vt)};
}

// Townsend's SVD backward on the reduced factors (U m x k, S k, Vh k x n).
Tensor svd_backward(const Tensor& gU, const Tensor& gS, const Tensor& gVh, const Tensor& U, const Tensor& S, const Tensor& Vh) {
  const int64_t m = U.size(-2), n = Vh.size(-1), k = S.size(-1);
  const Tensor V = mT(Vh);
  Tensor inner = gS.defined() ? diag_embed(gS) : zeros(with_matrix(batch_shape(U), k, k), U.dtype());
  if (!gU.defined() && !gVh.defined()) return matmul(matmul(U, inner), Vh);
  const Tensor s2 = mul(S, S);
  // F_ij = 1 / (s_j^2 - s_i^2), 0 on the diagonal.
  const Tensor diff = sub(s2.unsqueeze(-2), s2.unsqueeze(-1));
  const Tensor F = where(eye(k, k, kBool), zeros({}, U.dtype()), reciprocal(diff));
  const Tensor Smat = diag_embed(S), Sinv = diag_embed(reciprocal(S));
  Tensor extra;
  if (gU.defined()) {
    const Tensor J = mul(F, matmul(mT(U), gU));
    inner = add(inner, matmul(add(J, mT(J)), Smat));  // F antisymmetric: F o (X - X^T) = J + J^T
    if (m > k) extra = matmul(matmul(sub(gU, matmul(U, matmul(mT(U), gU))), Sinv), Vh);
  }
  if (gVh.defined()) {
    const Tensor gV = mT(gVh);
    const Tensor K = mul(F, matmul(mT(V), gV));
    inner = add(inner, matmul(Smat, add(K, mT(K))));
    if (n > k) {
      const Tensor e = matmul(matmul(U, Sinv), mT(sub(gV, matmul(V, matmul(mT(V), gV)))));
      extra = extra.defined() ? add(extra, e) : e;
    }
  }
  const Tensor ga = matmul(matmul(U, inner), Vh);
  return extra.defined() ? add(ga, extra) : ga;
}
}  // namespace

FLB_OP_NAMED("linalg_svd", svd, (const Tensor& A, bool full_matrices), (A, full_matrices), std::tuple<Tensor, Tensor, Tensor>) {
  check_matrices("linalg.svd", A, false);
  auto [U, S, Vh] = svd_impl(A, full_matrices, true);
  const int64_t k = S.size(-1);
  autograd::record("LinalgSvdBackward0", {&U, &S, &Vh}, {&A}, {U, S, Vh}, [k](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    // full_matrices: only the first k columns of U (rows of Vh) depend on A smoothly.
    auto narrow_u = [k](const Tensor& t) { return t.defined() ? t.narrow(-1, 0, k) : t; };
    auto narrow_v = [k](const Tensor& t) { return t.defined() ? t.narrow(-2, 0, k) : t; };
    return std::vector<Tensor>{svd_backward(narrow_u(grad_at(g, 0)), grad_at(g, 1), narrow_v(grad_at(g, 2)),
                                            narrow_u(s[0]), s[1], narrow_v(s[2]))};
  });
  return {U, S, Vh};
}

FLB_OP_NAMED("linalg_svdvals", svdvals, (const Tensor& A), (A), Tensor) {
  check_matrices("linalg.svdvals", A, false);
  const bool grad = autograd::needs_grad(A);
  auto [U, S, Vh] = svd_impl(A, false, grad);
  autograd::record("LinalgSvdBackward0", {&S}, {&A}, {U, Vh}, [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    return std::vector<Tensor>{matmul(mul(s[0], g[0].unsqueeze(-2)), s[1])};
  });
  return S;
}

namespace {
std::tuple<Tensor, Tensor> eigh_impl(const char* op, const Tensor& A, const std::string& UPLO, bool vectors) {
  check_matrices(op, A, true);
  FLB_CHECK(UPLO == "L" || UPLO == "U" || UPLO == "l" || UPLO == "u", ValueError, "[", op,
            "] Expected UPLO argument to be 'L' or 'U', but got ", UPLO);
  const int64_t n = A.size(-1);
  Tensor a = column_major(A), w = empty(with_matrix(batch_shape(A), 1, n), A.dtype());
  const bool lower = UPLO == "L" || UPLO == "l";
  visit_float(A.dtype(), [&]<class T>() {
    T *pa = a.data<T>(), *pw = w.data<T>();
    for_each_matrix(op, batch_count(A), A.dim() > 2, [&](int64_t i) {
      return n ? lapack::syevd(int(n), pa + i * n * n, pw + i * n, vectors, lower) : 0;
    }, [](int) { return std::string("The algorithm failed to converge because the input matrix is ill-conditioned or has "
                                    "too many repeated eigenvalues"); });
  });
  return {w.squeeze(-2), vectors ? row_major(a) : Tensor()};
}
}  // namespace

FLB_OP_NAMED("linalg_eigh", eigh, (const Tensor& A, const std::string& UPLO), (A, UPLO), std::tuple<Tensor, Tensor>) {
  auto [L, V] = eigh_impl("linalg.eigh", A, UPLO, true);
  autograd::record("LinalgEighBackward0", {&L, &V}, {&A}, {L, V}, [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    const Tensor& l = s[0];
    const Tensor& v = s[1];
    const int64_t n = l.size(-1);
    Tensor inner = grad_at(g, 0).defined() ? diag_embed(grad_at(g, 0)) : zeros_like(v);
    if (grad_at(g, 1).defined()) {
      // (V^T gV) / E, E_ij = l_j - l_i, zero on the diagonal.
      const Tensor E = sub(l.unsqueeze(-2), l.unsqueeze(-1));
      const Tensor F = where(eye(n, n, kBool), zeros({}, v.dtype()), reciprocal(E));
      inner = add(inner, mul(F, matmul(mT(v), grad_at(g, 1))));
    }
    const Tensor ga = matmul(matmul(v, inner), mT(v));
    return std::vector<Tensor>{mul(add(ga, mT(ga)), 0.5)};  // symmetric, as torch's
  });
  return {L, V};
}

FLB_OP_NAMED("linalg_eigvalsh", eigvalsh, (const Tensor& A, const std::string& UPLO), (A, UPLO), Tensor) {
  const bool grad = autograd::needs_grad(A);
  auto [L, V] = eigh_impl("linalg.eigvalsh", A, UPLO, grad);
  autograd::record("LinalgEighBackward0", {&L}, {&A}, {V}, [](const std::vector<Tensor>& g, const std::vector<Tensor>& s) {
    return std::vector<Tensor>{matmul(mul(s[0], g[0].unsqueeze(-2)), mT(s[0]))};
  });
  return L;
}

namespace {
// eps of A's dtype times max(m, n): the default relative cutoff of small singular values.
double default_rtol(const Tensor& A) {
  const double eps = A.dtype() == kFloat64 ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
  return eps * double(std::max(A.size(-2), A.size(-1)));
}

// right diag(1/s) left^T from A = left diag(s) right^T (the SVD's U, S, V or eigh's V, L, V),
// with 0 for |s| <= max(atol, rtol * max |s|).
Tensor pseudo_inverse(const Tensor& left, const Tensor& s, const Tensor& right, double atol, double rtol) {
  const Tensor largest = s.size(-1) ? amax(abs(s), {-1}) : zeros(Dims(s.sizes().data(), s.sizes().size() - 1), s.dtype());
  const Tensor cutoff = maximum(mul(largest, rtol), Tensor(atol)).unsqueeze(-1);
  const Tensor inv_s = where(gt(abs(s), cutoff), reciprocal(s), zeros({}, s.dtype()));
  return matmul(mul(right, inv_s.unsqueeze(-2)), mT(left));
}
}  // namespace

FLB_OP_NAMED("linalg_pinv", pinv, (const Tensor& A, std::optional<double> atol, std::optional<double> rtol, bool hermitian),
             (A, atol, rtol, hermitian), Tensor) {
  check_matrices("linalg.pinv", A, false);
  const double r = rtol ? *rtol : atol ? 0.0 : default_rtol(A), a = atol.value_or(0.0);
  // hermitian: by eigh, unless a gradient is wanted: torch's is the general one (A not
  // assumed symmetric), which the SVD path gives.
  if (hermitian && !autograd::needs_grad(A)) {
    auto [L, V] = eigh(A, "L");
    return pseudo_inverse(V, L, V, a, r);
  }
  auto [U, S, Vh] = svd(A, false);
  return pseudo_inverse(U, S, mT(Vh), a, r);
}

FLB_OP_NAMED("linalg_lstsq", lstsq, (const Tensor& A, const Tensor& B, std::optional<double> rcond, std::optional<std::string> driver),
             (A, B, rcond, driver), std::tuple<Tensor, Tensor, Tensor, Tensor>) {
  check_matrices("linalg.lstsq", A, false);
  const std::string drv = driver.value_or("gelsy");
  FLB_CHECK(drv == "gelsy" || drv == "gelsd" || drv == "gelss" || drv == "gels", ValueError,
            "[linalg.lstsq] parameter `driver` should be one of (gels, gelsy, gelsd, gelss), got ", drv);
  FLB_CHECK(B.dtype() == A.dtype(), TypeError, "[linalg.lstsq] Expected A and B to have the same dtype, got ",
            dtype_name(A.dtype()), " and ", dtype_name(B.dtype()));
  const int64_t m = A.size(-2), n = A.size(-1);
  const bool vector = B.dim() == A.dim() - 1;
  const Tensor b = vector ? B.unsqueeze(-1) : B;
  FLB_CHECK(b.dim() >= 2 && b.size(-2) == m, ValueError, "[linalg.lstsq] input.size(-2) should match other.size(-2), got shapes ",
            shape_str(A.sizes()), " and ", shape_str(B.sizes()));
  const double rc = rcond && *rcond > 0 ? *rcond : default_rtol(A);
  auto [U, Sv, Vh] = svd(A, false);  // one SVD: the solution (through its backward), rank and singular values
  Tensor x = matmul(pseudo_inverse(U, Sv, mT(Vh), 0.0, rc), b);
  const Tensor S = Sv.detach();
  const Tensor rank = S.size(-1) ? sum(gt(S, mul(amax(S, {-1}, true), rc)), {-1}).to(kInt64)
                                 : zeros(batch_shape(A), kInt64);
  const bool full_rank = rank.numel() == 0 || all(eq(rank, std::min(m, n))).item<bool>();
  Tensor residuals = empty({0}, A.dtype());
  if (drv != "gelsy" && m > n && full_rank) {
    const Tensor r = sub(matmul(A, x), b);
    residuals = sum(mul(r, r), {-2});  // a vector b keeps its column: shape (*, 1), as torch
  }
  if (vector) x = x.squeeze(-1);
  return {x, residuals, drv == "gels" ? empty({0}, kInt64) : rank,
          drv == "gelsd" || drv == "gelss" ? S : empty({0}, A.dtype())};
}

FLB_OP_NAMED("linalg_vector_norm", vector_norm,
             (const Tensor& x, double ord, const std::optional<Dims>& dim, bool keepdim, std::optional<DType> dtype),
             (x, ord, dim, keepdim, dtype), Tensor) {
  FLB_CHECK(is_floating(x.dtype()), TypeError, "[linalg.vector_norm] Expected a floating point tensor as input. Got ",
            dtype_name(x.dtype()));
  const Tensor t = dtype ? x.to(*dtype) : x;
  const Dims dims = dim.value_or(Dims{});
  if (std::isinf(ord)) {
    FLB_CHECK(t.numel() > 0 || !dims.empty(), ValueError, "[linalg.vector_norm] cannot compute the ", ord,
              " norm on an empty tensor because the operation does not have an identity");
    return ord > 0 ? amax(abs(t), dims, keepdim) : amin(abs(t), dims, keepdim);
  }
  return norm(t, ord, dims, keepdim);
}

namespace {
// The matrix dims of A moved last (torch's dim argument), and back for keepdim.
Tensor matrix_dims_last(const Tensor& A, const Dims& dim) {
  FLB_CHECK(dim.size() == 2, ValueError, "[linalg.matrix_norm] dim must be a 2-tuple. Got ", shape_str(dim));
  const int64_t d0 = wrap_dim(dim[0], A.dim(), "linalg.matrix_norm"), d1 = wrap_dim(dim[1], A.dim(), "linalg.matrix_norm");
  FLB_CHECK(d0 != d1, ValueError, "[linalg.matrix_norm] dims must be different. Got (", dim[0], ", ", dim[1], ")");
  return movedim(A, Dims{d0, d1}, Dims{-2, -1});
}
Tensor restore_dims(Tensor r, const Tensor& A, const Dims& dim, bool keepdim) {
  if (!keepdim) return r;
  const int64_t d0 = wrap_dim(dim[0], A.dim(), "linalg.matrix_norm"), d1 = wrap_dim(dim[1], A.dim(), "linalg.matrix_norm");
  r = r.unsqueeze(-1).unsqueeze(-1);
  return movedim(r, Dims{-2, -1}, Dims{d0, d1});
}
}  // namespace

FLB_OP_NAMED("linalg_matrix_norm", matrix_norm,
             (const Tensor& A, const std::string& ord, const Dims& dim, bool keepdim, std::optional<DType> dtype),
             (A, ord, dim, keepdim, dtype), Tensor) {
  FLB_CHECK(A.dim() >= 2, ValueError, "[linalg.matrix_norm] The input tensor A must have at least 2 dimensions, got shape ",
            shape_str(A.sizes()));
  FLB_CHECK(ord == "fro" || ord == "nuc", ValueError, "[linalg.matrix_norm] Order ", ord,
            " not supported (expected 'fro', 'nuc' or a number)");
  const Tensor t = dtype ? A.to(*dtype) : A;
  if (ord == "fro") return vector_norm(t, 2, dim, keepdim);
  return restore_dims(sum(svdvals(matrix_dims_last(t, dim)), {-1}), t, dim, keepdim);
}

FLB_OP_NAMED("linalg_matrix_norm", matrix_norm,
             (const Tensor& A, double ord, const Dims& dim, bool keepdim, std::optional<DType> dtype),
             (A, ord, dim, keepdim, dtype), Tensor) {
  FLB_CHECK(A.dim() >= 2, ValueError, "[linalg.matrix_norm] The input tensor A must have at least 2 dimensions, got shape ",
            shape_str(A.sizes()));
  FLB_CHECK(std::abs(ord) == 1 || std::abs(ord) == 2 || std::isinf(ord), ValueError, "[linalg.matrix_norm] Order ", ord,
            " not supported (expected +-1, +-2 or +-inf)");
  const Tensor t = matrix_dims_last(dtype ? A.to(*dtype) : A, dim);
  Tensor r;
  if (std::abs(ord) == 2) {
    const Tensor s = svdvals(t);
    r = ord > 0 ? amax(s, {-1}) : amin(s, {-1});
  } else {
    // inf: the largest row sum of |A|; 1: the largest column sum.
    const Tensor sums = sum(abs(t), {std::isinf(ord) ? -1 : -2});
    r = ord > 0 ? amax(sums, {-1}) : amin(sums, {-1});
  }
  return restore_dims(r, A, dim, keepdim);
}

FLB_OP_NAMED("linalg_norm", norm,
             (const Tensor& A, std::optional<double> ord, const std::optional<Dims>& dim, bool keepdim, std::optional<DType> dtype),
             (A, ord, dim, keepdim, dtype), Tensor) {
  const size_t nd = dim ? dim->size() : size_t(A.dim());
  FLB_CHECK(!ord || dim || A.dim() == 1 || A.dim() == 2, ValueError,
            "[linalg.norm] If dim is not specified but ord is, the input must be 1D or 2D. Got ", A.dim(), "D");
  FLB_CHECK(!dim || nd == 1 || nd == 2, ValueError, "[linalg.norm] dim must have one or two entries, got ", shape_str(*dim));
  if (!ord) return nd == 2 && dim ? matrix_norm(A, "fro", *dim, keepdim, dtype) : vector_norm(A, 2, dim, keepdim, dtype);
  if (nd == 2) return matrix_norm(A, *ord, dim ? *dim : Dims{-2, -1}, keepdim, dtype);
  return vector_norm(A, *ord, dim, keepdim, dtype);
}

FLB_OP_NAMED("linalg_norm", norm,
             (const Tensor& A, const std::string& ord, const std::optional<Dims>& dim, bool keepdim, std::optional<DType> dtype),
             (A, ord, dim, keepdim, dtype), Tensor) {
  FLB_CHECK((dim && dim->size() == 2) || (!dim && A.dim() == 2), ValueError, "[linalg.norm] ord '", ord,
            "' is a matrix norm: it needs a 2-D input or two dims");
  return matrix_norm(A, ord, dim ? *dim : Dims{-2, -1}, keepdim, dtype);
}

}  // namespace flambeau::linalg
