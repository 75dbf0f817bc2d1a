// LAPACK (OpenBLAS's) on one column-major matrix at a time, float or double. Each returns
// LAPACK's info (0: success; > 0: the routine's numerical failure, e.g. a zero pivot).
// Callers run one matrix per thread of their own, so OpenBLAS runs single-threaded here
// and results do not depend on the thread count.
#pragma once
#include <cstdint>

namespace flambeau::kernels::lapack {

// LU with partial pivoting of the n x n matrix a (in place); ipiv: 1-based pivots.
template <class T>
int getrf(int n, T* a, int* ipiv);
// Solves a x = b for nrhs columns of b (in place; a is overwritten by its LU).
template <class T>
int gesv(int n, int nrhs, T* a, int* ipiv, T* b);
// Lower Cholesky factor of the n x n matrix a, in its lower triangle.
template <class T>
int potrf(int n, T* a);
// QR of the m x n matrix a: on return a holds the first `q_cols` columns of Q (m x q_cols,
// lda m; q_cols <= m) and r (min(m, n) or m rows by n, row count r_rows, column-major) R.
template <class T>
int qr(int m, int n, T* a, int q_cols, T* r, int r_rows);
// SVD of the m x n matrix a (destroyed): s (min(m, n)), u (m x ucols), vt (vrows x n) with
// ucols = vrows = min(m, n) (reduced) or m and n (full); u, vt null: singular values only.
template <class T>
int gesdd(int m, int n, T* a, T* s, T* u, T* vt, bool full);
// Eigenvalues (ascending) of the symmetric n x n matrix a, from its lower (or upper)
// triangle; with vectors, a holds the eigenvectors as columns.
template <class T>
int syevd(int n, T* a, T* w, bool vectors, bool lower);

}  // namespace flambeau::kernels::lapack
