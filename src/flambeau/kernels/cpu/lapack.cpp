// LAPACK's Fortran entry points (with the hidden lengths of their character arguments)
// behind the typed wrappers of lapack.h; workspaces are sized by LAPACK's own queries.
#include "flambeau/kernels/cpu/lapack.h"

#include <algorithm>
#include <cstddef>
#include <vector>

extern "C" {
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgesv_(const int* n, const int* nrhs, float* a, const int* lda, int* ipiv, float* b, const int* ldb, int* info);
void dgesv_(const int* n, const int* nrhs, double* a, const int* lda, int* ipiv, double* b, const int* ldb, int* info);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work, const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work, const int* lwork,
             int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau, float* work,
             const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau, double* work,
             const int* lwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s, float* u, const int* ldu,
             float* vt, const int* ldvt, float* work, const int* lwork, int* iwork, int* info, size_t);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s, double* u,
             const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork, int* iwork, int* info, size_t);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info, size_t, size_t);
}

namespace flambeau::kernels::lapack {
namespace {
template <class T>
constexpr bool is_double = sizeof(T) == 8;
}  // namespace

template <class T>
int getrf(int n, T* a, int* ipiv) {
  int info = 0;
  if constexpr (is_double<T>) dgetrf_(&n, &n, a, &n, ipiv, &info);
  else sgetrf_(&n, &n, a, &n, ipiv, &info);
  return info;
}

template <class T>
int gesv(int n, int nrhs, T* a, int* ipiv, T* b) {
  int info = 0;
  const int ld = std::max(1, n);
  if constexpr (is_double<T>) dgesv_(&n, &nrhs, a, &ld, ipiv, b, &ld, &info);
  else sgesv_(&n, &nrhs, a, &ld, ipiv, b, &ld, &info);
  return info;
}

template <class T>
int potrf(int n, T* a) {
  int info = 0;
  const int ld = std::max(1, n);
  if constexpr (is_double<T>) dpotrf_("L", &n, a, &ld, &info, 1);
  else spotrf_("L", &n, a, &ld, &info, 1);
  return info;
}

template <class T>
int qr(int m, int n, T* a, int q_cols, T* r, int r_rows) {
  const int k = std::min(m, n), lda = std::max(1, m);
  std::vector<T> tau(size_t(std::max(1, k)));
  int info = 0, lwork = -1;
  T query = 0;
  auto geqrf = [&](T* work, const int* lw) {
    if constexpr (is_double<T>) dgeqrf_(&m, &n, a, &lda, tau.data(), work, lw, &info);
    else sgeqrf_(&m, &n, a, &lda, tau.data(), work, lw, &info);
  };
  geqrf(&query, &lwork);
  std::vector<T> work(size_t(std::max<T>(query, 1)));
  lwork = int(work.size());
  geqrf(work.data(), &lwork);
  if (info) return info;
  // R: the upper triangle of a's first n columns, r_rows rows of it (zeros below the diagonal).
  if (r)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < r_rows; ++i) r[size_t(j) * size_t(r_rows) + size_t(i)] = i <= j && i < m ? a[size_t(j) * size_t(lda) + size_t(i)] : T(0);
  if (q_cols == 0) return 0;
  auto orgqr = [&](T* w, const int* lw) {
    if constexpr (is_double<T>) dorgqr_(&m, &q_cols, &k, a, &lda, tau.data(), w, lw, &info);
    else sorgqr_(&m, &q_cols, &k, a, &lda, tau.data(), w, lw, &info);
  };
  lwork = -1;
  orgqr(&query, &lwork);
  work.assign(size_t(std::max<T>(query, 1)), T(0));
  lwork = int(work.size());
  orgqr(work.data(), &lwork);
  return info;
}

template <class T>
int gesdd(int m, int n, T* a, T* s, T* u, T* vt, bool full) {
  const char job = !u ? 'N' : full ? 'A' : 'S';
  const int k = std::min(m, n), lda = std::max(1, m), ldu = std::max(1, m), ldvt = std::max(1, full ? n : k);
  std::vector<int> iwork(size_t(8 * std::max(1, k)));
  T dummy = 0;
  int info = 0, lwork = -1;
  T query = 0;
  auto call = [&](T* w, const int* lw) {
    if constexpr (is_double<T>)
      dgesdd_(&job, &m, &n, a, &lda, s, u ? u : &dummy, &ldu, vt ? vt : &dummy, &ldvt, w, lw, iwork.data(), &info, 1);
    else
      sgesdd_(&job, &m, &n, a, &lda, s, u ? u : &dummy, &ldu, vt ? vt : &dummy, &ldvt, w, lw, iwork.data(), &info, 1);
  };
  call(&query, &lwork);
  std::vector<T> work(size_t(std::max<T>(query, 1)));
  lwork = int(work.size());
  call(work.data(), &lwork);
  return info;
}

template <class T>
int syevd(int n, T* a, T* w, bool vectors, bool lower) {
  const char job = vectors ? 'V' : 'N', uplo = lower ? 'L' : 'U';
  const int lda = std::max(1, n);
  int info = 0, lwork = -1, liwork = -1, iquery = 0;
  T query = 0;
  auto call = [&](T* wk, const int* lw, int* iw, const int* liw) {
    if constexpr (is_double<T>) dsyevd_(&job, &uplo, &n, a, &lda, w, wk, lw, iw, liw, &info, 1, 1);
    else ssyevd_(&job, &uplo, &n, a, &lda, w, wk, lw, iw, liw, &info, 1, 1);
  };
  call(&query, &lwork, &iquery, &liwork);
  std::vector<T> work(size_t(std::max<T>(query, 1)));
  std::vector<int> iwork(size_t(std::max(iquery, 1)));
  lwork = int(work.size()), liwork = int(iwork.size());
  call(work.data(), &lwork, iwork.data(), &liwork);
  return info;
}

#define FLB_LAPACK_INSTANTIATE(T)                           \
  template int getrf<T>(int, T*, int*);                     \
  template int gesv<T>(int, int, T*, int*, T*);             \
  template int potrf<T>(int, T*);                           \
  template int qr<T>(int, int, T*, int, T*, int);           \
  template int gesdd<T>(int, int, T*, T*, T*, T*, bool);    \
  template int syevd<T>(int, T*, T*, bool, bool);
FLB_LAPACK_INSTANTIATE(float)
FLB_LAPACK_INSTANTIATE(double)
#undef FLB_LAPACK_INSTANTIATE

}  // namespace flambeau::kernels::lapack
