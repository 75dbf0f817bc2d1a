// OpenBLAS (its OpenMP build) and oneDNN run a call on omp_get_max_threads() threads, a
// number that follows set_num_threads (and that openblas_set_num_threads changes for the
// whole process). So each call here lowers it to 1 for its duration, and flambeau's threads
// split the product themselves.
#include "flambeau/kernels/cpu/blas.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "flambeau/core/parallel.h"
#include "flambeau/kernels/cpu/gemm_bf16.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::kernels {
namespace {

// Inside a parallel region too: oneDNN cuts its work by omp_get_max_threads() there as well
// (the setting is the calling task's own).
class OneThread {
 public:
  OneThread() : outer_(omp_get_max_threads()) {
    if (outer_ > 1) omp_set_num_threads(1);
  }
  ~OneThread() {
    if (outer_ > 1) omp_set_num_threads(outer_);
  }

 private:
  int outer_;
};

CBLAS_TRANSPOSE op(bool t) { return t ? CblasTrans : CblasNoTrans; }

// Note [Deterministic GEMM]: BLAS runs single-threaded on tiles of C whose shape depends
// only on the problem size and the machine's processor count (one row tile per processor,
// or column tiles when C is short and wide), never on set_num_threads; flambeau's threads
// take the tiles. Every element is then computed by the same single-threaded code path
// whatever the thread count, so results are bitwise stable. Few tiles matter: each BLAS
// call packs its own copy of the shared operand.
template <class T>
void gemm_tiled(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta != T(0) ? beta * c[i * ldc + j] : T(0);
    return;
  }
  // A matrix-vector product (one row or column of C, gemv_1t) is split along the vector
  // and goes parallel from a smaller size: it streams its matrix (memory-bound), with no
  // packing to repeat per tile.
  const bool vector = m == 1 || n == 1;
  const bool by_rows = vector ? n == 1 : m >= 64 || n < 512;
  static const int64_t procs = std::clamp<int64_t>(omp_get_num_procs(), 1, 64);
  const int64_t extent = by_rows ? m : n;
  const int64_t tile = std::max<int64_t>(vector ? 64 : 128, (extent + procs - 1) / procs);
  const int64_t tiles = (extent + tile - 1) / tile;
  const int64_t work = m * n * k;
  const bool parallel = work >= (vector ? int64_t(1) << 16 : int64_t(1) << 22);
  parallel_for(0, tiles, parallel ? 1 : tiles, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t lo = t * tile, len = std::min(tile, extent - lo);
      const T* pa = by_rows ? a + (ta ? lo : lo * lda) : a;
      const T* pb = by_rows ? b : b + (tb ? lo * ldb : lo);
      gemm_1t(ta, tb, by_rows ? len : m, by_rows ? n : len, k, alpha, pa, lda, pb, ldb, beta,
              by_rows ? c + lo * ldc : c + lo, ldc);
    }
  });
}

}  // namespace

// A product with one row or one column of C is a matrix-vector product: sgemv streams the
// matrix once, where sgemm would first pack it (most of a decode step's time). C's elements
// are zeroed first when beta is 0 (BLAS may scale, and so keep, a NaN there).
bool gemv_1t(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m != 1 && n != 1) return false;
  const int64_t len = m == 1 ? n : m, inc_c = m == 1 ? 1 : ldc;
  if (beta == 0.f)
    for (int64_t i = 0; i < len; ++i) c[i * inc_c] = 0.f;
  if (m == 1) {  // c[1, n] = a[1, k] op(b): op(b)^T times a's row
    const int64_t inc_a = ta ? lda : 1;
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, int(tb ? n : k), int(tb ? k : n), alpha, b, int(ldb),
                a, int(inc_a), beta, c, int(inc_c));
  } else {  // c[m, 1] = op(a)[m, k] b[k, 1]
    const int64_t inc_b = tb ? 1 : ldb;
    cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, int(ta ? k : m), int(ta ? m : k), alpha, a, int(lda),
                b, int(inc_b), beta, c, int(inc_c));
  }
  return true;
}

bool onednn_f32() {
  static const bool on = [] {
    const char* e = std::getenv("FLAMBEAU_ONEDNN_F32");
    return onednn_built() && !(e && std::string(e) == "0");
  }();
  return on;
}

// Note [float32 GEMM]: where oneDNN is built in, float32 GEMMs (not matrix-vector products,
// which stay on sgemv) run oneDNN's sgemm, single-threaded on Note [Deterministic GEMM]'s
// tiles like OpenBLAS's: on the AMD EPYC (Zen 5) machine of docs/PERFORMANCE.md it ran 171-230
// GFLOP/s per core where OpenBLAS 0.3.21 ran 82-110, on every shape measured.
void gemm_1t(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const OneThread one;
  const profiler::Scope scope("sgemm", profiler::EventKind::Kernel);
  if (k > 0 && gemv_1t(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  if (onednn_f32() && sgemm_onednn_1t(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)) return;
  cblas_sgemm(CblasRowMajor, op(trans_a), op(trans_b), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta,
              c, int(ldc));
}

void gemm_1t(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
             const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  const OneThread one;
  const profiler::Scope scope("dgemm", profiler::EventKind::Kernel);
  cblas_dgemm(CblasRowMajor, op(trans_a), op(trans_b), int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta,
              c, int(ldc));
}

void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_tiled(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_f64(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
              int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  gemm_tiled(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace flambeau::kernels
