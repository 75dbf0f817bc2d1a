// float32 GEMM through oneDNN's sgemm (built when CMake finds oneDNN; no_onednn.cpp
// otherwise): Note [float32 GEMM] in blas.cpp says when it is taken.
#include <dnnl.h>

#include "flambeau/kernels/cpu/blas.h"

namespace flambeau::kernels {

bool sgemm_onednn_1t(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0 || k <= 0) return false;  // oneDNN 2.6 may die with SIGFPE on empty problems
  return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) == dnnl_success;
}

}  // namespace flambeau::kernels
