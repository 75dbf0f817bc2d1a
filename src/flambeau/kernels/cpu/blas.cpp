// OpenBLAS (its OpenMP build) runs a call made outside a parallel region on
// omp_get_max_threads() threads, a number that follows set_num_threads (and that
// openblas_set_num_threads changes for the whole process). So each call here lowers it to 1
// for its duration: the result of a call never depends on the thread count.
#include "flambeau/kernels/cpu/blas.h"

#include <cblas.h>
#include <omp.h>

namespace flambeau::kernels {
namespace {

class OneThread {
 public:
  OneThread() : outer_(omp_in_parallel() ? 0 : omp_get_max_threads()) {
    if (outer_ > 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (outer_ > 1) omp_set_num_threads(outer_);
  }

 private:
  int outer_;
};

CBLAS_TRANSPOSE op(bool t) { return t ? CblasTrans : CblasNoTrans; }

}  // namespace

void gemm_1t(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const OneThread one;
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta,
              c, int(ldc));
}

void gemm_1t(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
             const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  const OneThread one;
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta,
              c, int(ldc));
}

}  // namespace flambeau::kernels
