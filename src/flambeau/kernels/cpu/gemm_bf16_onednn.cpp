// bf16 GEMM through oneDNN's matmul (built when CMake finds oneDNN; no_onednn.cpp
// otherwise). oneDNN keeps its own cache of primitives, so repeated shapes are cheap.
// Builds against oneDNN 2.x (Debian 12) and 3.x (Debian 13), whose primitive APIs differ.
#include <dnnl.hpp>

#include "flambeau/kernels/cpu/gemm_bf16.h"

namespace flambeau::kernels {

bool onednn_built() { return true; }

bool bf16_gemm_onednn(const BFloat16* a, int64_t a_row, int64_t a_col, const BFloat16* b, int64_t b_row,
                      int64_t b_col, float* c, int64_t m, int64_t k, int64_t n) {
  using dnnl::memory;
  if (m <= 0 || n <= 0 || k <= 0) return false;  // oneDNN 2.6 dies with SIGFPE on empty problems (AMX)
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  try {
    const memory::desc ad({m, k}, memory::data_type::bf16, memory::dims{a_row, a_col});
    const memory::desc bd({k, n}, memory::data_type::bf16, memory::dims{b_row, b_col});
    const memory::desc cd({m, n}, memory::data_type::f32, memory::dims{n, 1});
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::matmul::primitive_desc pd(engine, ad, bd, cd);
#else
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), engine);
#endif
    dnnl::stream stream(engine);
    memory am(ad, engine, const_cast<BFloat16*>(a)), bm(bd, engine, const_cast<BFloat16*>(b)), cm(cd, engine, c);
    dnnl::matmul(pd).execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;  // no implementation here: the caller takes another path
  }
}

}  // namespace flambeau::kernels
