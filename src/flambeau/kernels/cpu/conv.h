// Convolution kernels on raw pointers: im2col / col2im around the project's GEMM, for 1, 2
// and 3 spatial dims (all read as D, H, W with size-1 dims in front). Three products cover
// convolution and its transpose: forward (y = w * x), backward_input (x-space from y-space,
// the transposed convolution) and backward_weight. Note [Deterministic convolution] in
// conv.cpp says why results do not depend on the thread count.
#pragma once
#include <array>
#include <cstdint>

namespace flambeau::kernels {

// One convolution as the forward product sees it: x [N, C_in, D, H, W] -> y [N, C_out, OD, OH,
// OW], weight [C_out, C_in / groups, KD, KH, KW] (contiguous). x and y may have any strides
// (x_strides / y_strides: N, C, D, H, W); pad is the padding before each dim (the padding
// after is implied by the output size).
struct ConvGeometry {
  int64_t batch = 0, groups = 1, in_channels = 0, out_channels = 0;
  std::array<int64_t, 3> in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, pad{0, 0, 0},
      dilation{1, 1, 1};
  // x and y (and their gradients) stored channels-last: N, D, H, W, C. Only the oneDNN
  // products and conv_backward_weight_channels_last take such a geometry.
  bool channels_last = false;
  // With channels_last and one group: the weight stored C_out, KD, KH, KW, C_in.
  bool weight_channels_last = false;
  int64_t in_volume() const { return in[0] * in[1] * in[2]; }
  int64_t out_volume() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_volume() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// x, y contiguous in N, C, D, H, W order (the caller makes them so).
// y = conv(x, w) (+ bias[c_out] when bias is given).
void conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y);
void conv_forward(const ConvGeometry& g, const double* x, const double* w, const double* bias, double* y);
// gx = the x-space result of gy (shape of y) through w: the gradient of conv_forward with
// respect to x, and the transposed convolution's forward. gx is overwritten.
void conv_backward_input(const ConvGeometry& g, const float* gy, const float* w, float* gx);
void conv_backward_input(const ConvGeometry& g, const double* gy, const double* w, double* gx);
// gw = sum over the batch of gy (y-space) times x (x-space) unfolded: the gradient of
// conv_forward with respect to w. gw is overwritten.
void conv_backward_weight(const ConvGeometry& g, const float* x, const float* gy, float* gw);
void conv_backward_weight(const ConvGeometry& g, const double* x, const double* gy, double* gw);

// The same products through oneDNN (float32; conv_onednn.cpp): false, with nothing
// written, when oneDNN is not built in or has no implementation for the problem.
bool onednn_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias, float* y);
bool onednn_conv_backward_input(const ConvGeometry& g, const float* gy, const float* w, float* gx);
// gw = the weight gradient of g's batch, computed in the calling thread alone.
bool onednn_conv_backward_weight_1t(const ConvGeometry& g, const float* x, const float* gy, float* gw);
// The weight gradient of a channels-last geometry: oneDNN's in the fixed batch blocks of
// conv_backward_weight (so bits do not depend on the thread count); false when oneDNN has
// no direct kernel for it (gw then holds garbage).
bool conv_backward_weight_channels_last(const ConvGeometry& g, const float* x, const float* gy, float* gw);

// One image's patches (F.unfold): cols[channels * kernel_volume, out_volume] from
// x[channels, D, H, W] (cols overwritten); fold_image adds cols folded back into x (F.fold,
// x not zeroed here). Channels split over threads; each is folded in a fixed order.
void unfold_image(const ConvGeometry& g, const float* x, int64_t channels, float* cols);
void unfold_image(const ConvGeometry& g, const double* x, int64_t channels, double* cols);
void fold_image(const ConvGeometry& g, const float* cols, int64_t channels, float* x);
void fold_image(const ConvGeometry& g, const double* cols, int64_t channels, double* x);

}  // namespace flambeau::kernels
