// Stand-in for gemm_bf16_onednn.cpp, sgemm_onednn.cpp and conv_onednn.cpp when flambeau is
// built without oneDNN: the AMX path is never taken (Note [16-bit GEMM paths] in gemm16.cpp),
// nor oneDNN's sgemm (Note [float32 GEMM] in blas.cpp) or convolutions (Note [oneDNN
// convolutions] in conv.cpp).
#include "flambeau/kernels/cpu/blas.h"
#include "flambeau/kernels/cpu/conv.h"
#include "flambeau/kernels/cpu/gemm_bf16.h"

namespace flambeau::kernels {

bool onednn_built() { return false; }

bool bf16_gemm_onednn(const BFloat16*, int64_t, int64_t, const BFloat16*, int64_t, int64_t, float*, int64_t, int64_t,
                      int64_t) {
  return false;
}

bool sgemm_onednn_1t(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                     float, float*, int64_t) {
  return false;
}
bool onednn_conv_forward(const ConvGeometry&, const float*, const float*, const float*, float*) { return false; }
bool onednn_conv_backward_input(const ConvGeometry&, const float*, const float*, float*) { return false; }
bool onednn_conv_backward_weight_1t(const ConvGeometry&, const float*, const float*, float*) { return false; }

}  // namespace flambeau::kernels
