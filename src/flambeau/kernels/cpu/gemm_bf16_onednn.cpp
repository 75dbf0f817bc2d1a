// bf16 GEMM through oneDNN's matmul (built when CMake finds oneDNN; no_onednn.cpp
// otherwise). oneDNN keeps its own cache of primitives, so repeated shapes are cheap.
#include <dnnl.hpp>

#include "flambeau/kernels/cpu/gemm_bf16.h"

namespace flambeau::kernels {

bool bf16_gemm_native() {
  static const bool native = __builtin_cpu_supports("avx512bf16");
  return native;
}

bool bf16_gemm_onednn(const BFloat16* a, int64_t a_row, int64_t a_col, const BFloat16* b, int64_t b_row,
                      int64_t b_col, float* c, int64_t m, int64_t k, int64_t n) {
  using dnnl::memory;
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  try {
    const memory::desc ad({m, k}, memory::data_type::bf16, memory::dims{a_row, a_col});
    const memory::desc bd({k, n}, memory::data_type::bf16, memory::dims{b_row, b_col});
    const memory::desc cd({m, n}, memory::data_type::f32, memory::dims{n, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), engine);
    dnnl::stream stream(engine);
    memory am(ad, engine, const_cast<BFloat16*>(a)), bm(bd, engine, const_cast<BFloat16*>(b)), cm(cd, engine, c);
    dnnl::matmul(pd).execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
    stream.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;  // no implementation here (e.g. no bf16 support): the caller falls back
  }
}

}  // namespace flambeau::kernels
