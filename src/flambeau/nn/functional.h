// flambeau::nn::functional, as torch.nn.functional: normalisation (fused kernels),
// dropout, linear and the losses. Alias-friendly: `namespace F = flambeau::nn::functional;`.
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "flambeau/core/generator.h"
#include "flambeau/core/tensor.h"
#include "flambeau/nn/attention.h"
#include "flambeau/nn/linear_cross_entropy.h"  // linear_cross_entropy (fused LM head + loss)

namespace flambeau::nn::functional {

using nn::scaled_dot_product_attention;

// ---- normalisation (fused primitives; their composite formulas are the tests' reference) --
// (x - mean) / sqrt(var + eps) * weight + bias over the last normalized_shape.size() dims
// of x (biased variance). weight and bias have shape normalized_shape. One kernel computes
// each row's mean and 1/std (saved for backward); the backward gives dx, dweight and dbias
// in one pass, dweight and dbias summed in an order that does not depend on the thread
// count. float32 and float64 compute natively; float16 and bfloat16 in float32.
Tensor layer_norm(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight = {},
                  const std::optional<Tensor>& bias = {}, double eps = 1e-5);
// x / sqrt(mean(x^2) + eps) * weight over the last normalized_shape.size() dims; eps
// defaults to the machine epsilon of x's dtype (as torch).
Tensor rms_norm(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight = {},
                std::optional<double> eps = {});
// The same two calling their fused kernel's ops themselves (the op hook reports them when
// called outside any op: what compiled training traces, compile/aot.h, so the backward is an
// op): the same bits.
Tensor layer_norm_decomposed(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
                             const std::optional<Tensor>& bias, double eps);
Tensor rms_norm_decomposed(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
                           std::optional<double> eps);
// The fused kernel: {out, mean, rstd} (row statistics [rows] in the compute dtype: float64
// for float64, else float32; rms: mean unused), and its backward from them: the gradients of
// x, weight and bias that are asked for, in that order.
std::vector<Tensor> fused_norm(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
                               const std::optional<Tensor>& bias, double eps, bool rms);
std::vector<Tensor> fused_norm_backward(const Tensor& grad_out, const Tensor& x, const Dims& normalized_shape,
                                        const std::optional<Tensor>& weight, const Tensor& mean, const Tensor& rstd,
                                        bool rms, bool need_input, bool need_weight, bool need_bias);

// ---- dropout, linear ------------------------------------------------------------------------
// Zeroes each element with probability p and scales the others by 1 / (1 - p) while
// training; returns x itself otherwise (or when p == 0). ValueError unless 0 <= p <= 1.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, std::optional<Generator> gen = {});
// x @ weight.T + bias.
Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias = {});

// ---- activations (torch.nn.functional's), written with differentiable ops: autograd
// derives their gradients. inplace = true writes the result into x and returns x (an error
// on a leaf that requires grad, as in torch).
Tensor elu(const Tensor& x, double alpha = 1.0, bool inplace = false);
Tensor selu(const Tensor& x, bool inplace = false);
Tensor celu(const Tensor& x, double alpha = 1.0, bool inplace = false);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01, bool inplace = false);
// weight: one slope, or one per channel (x's dim 1).
Tensor prelu(const Tensor& x, const Tensor& weight);
// training: each negative element's slope drawn from U(lower, upper) (the default
// generator); else the slope (lower + upper) / 2.
Tensor rrelu(const Tensor& x, double lower = 1.0 / 8, double upper = 1.0 / 3, bool training = false,
             bool inplace = false);
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0, bool inplace = false);
Tensor relu6(const Tensor& x, bool inplace = false);
Tensor hardsigmoid(const Tensor& x, bool inplace = false);
Tensor hardswish(const Tensor& x, bool inplace = false);
Tensor mish(const Tensor& x, bool inplace = false);
// a * sigmoid(b), a and b the halves of x along dim.
Tensor glu(const Tensor& x, int64_t dim = -1);
Tensor log_sigmoid(const Tensor& x);  // torch.nn.functional.logsigmoid
Tensor softsign(const Tensor& x);
Tensor softshrink(const Tensor& x, double lambd = 0.5);
Tensor hardshrink(const Tensor& x, double lambd = 0.5);
Tensor tanhshrink(const Tensor& x);
Tensor threshold(const Tensor& x, double threshold, double value, bool inplace = false);
// softmax(-x); no dim: torch's implicit one (0 for 0-, 1- and 3-dim x, else 1).
Tensor softmin(const Tensor& x, std::optional<int64_t> dim = {}, std::optional<DType> dtype = {});

// x / max(||x||_p along dim, eps).
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12);

// ---- convolution and padding (nn/convolution.cpp, nn/padding.cpp) ----------------------------
// Inputs [N, C_in, *spatial] or unbatched [C_in, *spatial]; weight [C_out, C_in / groups,
// *kernel] (transposed: [C_in, C_out / groups, *kernel]); stride, padding, dilation and
// output_padding take one value per spatial dim or one for all. padding may also be
// PaddingMode::Valid (none) or PaddingMode::Same (the input's size out; stride 1 only).
enum class PaddingMode { Valid, Same };
// "valid" or "same" as a PaddingMode; ValueError naming op otherwise.
PaddingMode padding_mode_from(const char* op, const std::string& name);
#define FLB_DECLARE_CONV(N)                                                                                      \
  Tensor conv##N##d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = {},           \
                    const Dims& stride = {1}, const Dims& padding = {0}, const Dims& dilation = {1},             \
                    int64_t groups = 1);                                                                         \
  Tensor conv##N##d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias,                \
                    const Dims& stride, PaddingMode padding, const Dims& dilation = {1},                        \
                    int64_t groups = 1);                                                                         \
  Tensor conv_transpose##N##d(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias = {}, \
                              const Dims& stride = {1}, const Dims& padding = {0},                               \
                              const Dims& output_padding = {0}, int64_t groups = 1, const Dims& dilation = {1});
FLB_DECLARE_CONV(1)
FLB_DECLARE_CONV(2)
FLB_DECLARE_CONV(3)
#undef FLB_DECLARE_CONV

// padding: (before, after) pairs from the last dim backwards. mode "constant" (value,
// default 0; negative amounts crop), "reflect" (mirrors without the edge; amounts under the
// dim's size), "replicate" (any amount) or "circular" (amounts up to the dim's size); the
// non-constant modes pad 1-3 trailing dims of an input with 1 or 2 more dims.
Tensor pad(const Tensor& input, const Dims& padding, const std::string& mode = "constant",
           std::optional<double> value = {});

// ---- batch, group, instance and local response norms (nn/batch_norm.cpp) --------------------
// x [N, C, *] normalised per channel over N and *; training: with its own statistics (biased
// variance), and running_mean / running_var (when given) updated in place to (1 - momentum)
// * running + momentum * statistic (unbiased variance); else with the running statistics.
Tensor batch_norm(const Tensor& x, const std::optional<Tensor>& running_mean, const std::optional<Tensor>& running_var,
                  const std::optional<Tensor>& weight = {}, const std::optional<Tensor>& bias = {},
                  bool training = false, double momentum = 0.1, double eps = 1e-5);
// The fused backward of batch_norm: {dx, dweight, dbias}.
std::vector<Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& x, const std::optional<Tensor>& weight,
                                        const Tensor& mean, const Tensor& rstd, bool training);
// Statistics per sample over each of num_groups groups of channels; weight / bias [C].
Tensor group_norm(const Tensor& x, int64_t num_groups, const std::optional<Tensor>& weight = {},
                  const std::optional<Tensor>& bias = {}, double eps = 1e-5);
// Statistics per sample and channel; running statistics (when given) updated with the
// batch's average of them when use_input_stats, else used.
Tensor instance_norm(const Tensor& x, const std::optional<Tensor>& running_mean = {},
                     const std::optional<Tensor>& running_var = {}, const std::optional<Tensor>& weight = {},
                     const std::optional<Tensor>& bias = {}, bool use_input_stats = true, double momentum = 0.1,
                     double eps = 1e-5);
// x / (k + alpha * mean of x^2 over `size` neighbouring channels, zero-padded)^beta.
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75, double k = 1.0);

// ---- pooling (nn/pooling.cpp) ----------------------------------------------------------------
// Inputs [N, C, *spatial] or unbatched [C, *spatial], floating point (float16 / bfloat16
// compute in float32); as torch 2.13, max_pool2d/3d (and max_pool1d_with_indices) also take
// integer inputs and avg_pool*d int64 ones (truncating division); other dtypes raise
// NotImplementedError. kernel_size, stride, padding and dilation take one value per spatial
// dim or one for all; an empty stride means kernel_size. Output size per dim:
// (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1, rounded down, or up with
// ceil_mode (then a last window starting past the input and its left padding is dropped).
// padding is at most half the (dilated) kernel. The indices of max pooling are flat
// positions in each input plane (int64); ties pick the first maximum in window order and
// NaN propagates. Average pooling divides by divisor_override when given, else by the
// window clipped to the padded bounds (count_include_pad) or to the input. Adaptive
// pooling: output bin i of a dim covers [floor(i * in / out), ceil((i + 1) * in / out)).
#define FLB_DECLARE_POOL(N)                                                                                 \
  Tensor max_pool##N##d(const Tensor& input, const Dims& kernel_size, const Dims& stride = {},              \
                        const Dims& padding = {0}, const Dims& dilation = {1}, bool ceil_mode = false);     \
  std::pair<Tensor, Tensor> max_pool##N##d_with_indices(const Tensor& input, const Dims& kernel_size,       \
                                                        const Dims& stride = {}, const Dims& padding = {0}, \
                                                        const Dims& dilation = {1}, bool ceil_mode = false);  \
  Tensor adaptive_avg_pool##N##d(const Tensor& input, const Dims& output_size);                             \
  Tensor adaptive_max_pool##N##d(const Tensor& input, const Dims& output_size);                             \
  std::pair<Tensor, Tensor> adaptive_max_pool##N##d_with_indices(const Tensor& input, const Dims& output_size);
FLB_DECLARE_POOL(1)
FLB_DECLARE_POOL(2)
FLB_DECLARE_POOL(3)
#undef FLB_DECLARE_POOL
Tensor avg_pool1d(const Tensor& input, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool2d(const Tensor& input, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = {});
Tensor avg_pool3d(const Tensor& input, const Dims& kernel_size, const Dims& stride = {}, const Dims& padding = {0},
                  bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = {});
// Power-average pooling (composite, Note [lp_pool] in pooling.cpp): per window
// (sum of x^norm_type)^(1 / norm_type), no padding; norm_type inf: the max of |x|. A zero
// sum has a zero gradient.
#define FLB_DECLARE_LP_POOL(N)                                                                              \
  Tensor lp_pool##N##d(const Tensor& input, Scalar norm_type, const Dims& kernel_size, const Dims& stride = {}, \
                       bool ceil_mode = false);
FLB_DECLARE_LP_POOL(1)
FLB_DECLARE_LP_POOL(2)
FLB_DECLARE_LP_POOL(3)
#undef FLB_DECLARE_LP_POOL
// The partial inverse of max_pool*d (nn/unpooling.cpp): zeros of [N, C, *output] with each input
// value at its index (a flat position in its output plane, as max_pool's indices; int64, of
// input's shape). The output sizes are (in - 1) * stride + kernel - 2 * padding, or
// output_size (n sizes, or n + 2 whose first two are ignored), each less than stride from
// those; empty: the default. A repeated index keeps the last value written.
#define FLB_DECLARE_MAX_UNPOOL(N)                                                                          \
  Tensor max_unpool##N##d(const Tensor& input, const Tensor& indices, const Dims& kernel_size,             \
                          const Dims& stride = {}, const Dims& padding = {0}, const Dims& output_size = {});
FLB_DECLARE_MAX_UNPOOL(1)
FLB_DECLARE_MAX_UNPOOL(2)
FLB_DECLARE_MAX_UNPOOL(3)
#undef FLB_DECLARE_MAX_UNPOOL

// ---- resampling (nn/resample.cpp) -------------------------------------------------------------
// torch.nn.functional.interpolate on [N, C, *spatial] (1-3 spatial dims). Exactly one of size
// (one value per spatial dim) and scale_factor (one per spatial dim; the output size is
// floor(in * scale)) is given. mode: "nearest", "nearest-exact", "linear" (3-d input),
// "bilinear" / "bicubic" (4-d), "trilinear" (5-d) or "area" (adaptive_avg_pool). A given
// scale_factor maps output to input indices with 1 / scale_factor, as torch does, unless
// recompute_scale_factor (then in / out). align_corners only with the interpolating modes
// (default False). Bicubic uses A = -0.75 with clamped border reads. antialias=True raises
// NotImplementedError. float16 / bfloat16 compute in float32.
Tensor interpolate(const Tensor& input, const std::optional<Dims>& size = {},
                   const std::optional<std::vector<double>>& scale_factor = {}, const std::string& mode = "nearest",
                   std::optional<bool> align_corners = {}, std::optional<bool> recompute_scale_factor = {},
                   bool antialias = false);
// [*, C * r^2, H, W] -> [*, C, H * r, W * r] and back (reshape, permute, reshape).
Tensor pixel_shuffle(const Tensor& input, int64_t upscale_factor);
Tensor pixel_unshuffle(const Tensor& input, int64_t downscale_factor);
// Sliding blocks of [N, C, H, W] (or [C, H, W]) as columns [N, C * kh * kw, L] (L blocks),
// and fold, its adjoint: columns summed back into [N, C, *output_size]. kernel_size,
// dilation, padding and stride take one value or two.
Tensor unfold(const Tensor& input, const Dims& kernel_size, const Dims& dilation = {1}, const Dims& padding = {0},
              const Dims& stride = {1});
Tensor fold(const Tensor& input, const Dims& output_size, const Dims& kernel_size, const Dims& dilation = {1},
            const Dims& padding = {0}, const Dims& stride = {1});

// ---- losses ----------------------------------------------------------------------------------
// reduction: "mean", "sum" or "none" (anything else is a ValueError). The class dim of
// input is 1 ([N, C], [N, C, d1, ...]) or 0 for a single sample [C].

// target: class indices (integer, shape input's without the class dim; ignore_index marks
// entries that count for nothing) or class probabilities (floating, input's shape).
// weight: [C] per-class weights. label_smoothing in [0, 1] mixes the target with the
// uniform distribution. "mean" over class indices divides by the total weight of the
// counted targets (as torch).
Tensor cross_entropy(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = {},
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0.0);
// -input[n, target[n]] * weight[target[n]] from log-probabilities (class indices only).
Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight = {},
                int64_t ignore_index = -100, const std::string& reduction = "mean");
// (input - target)^2 and |input - target|; target broadcasts to input.
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// -[pos_weight * t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x))] * weight, computed
// stably from the logits x. target has input's shape; weight broadcasts to it; pos_weight
// broadcasts along the last (class) dim.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight = {},
                                        const std::string& reduction = "mean",
                                        const std::optional<Tensor>& pos_weight = {});

}  // namespace flambeau::nn::functional
