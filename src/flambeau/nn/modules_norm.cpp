// The normalisation layers of modules.h beyond LayerNorm / RMSNorm: BatchNorm*, InstanceNorm*,
// GroupNorm and LocalResponseNorm, with torch's buffers, input checks and forward rules.
#include "flambeau/autograd/node.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/modules.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn {
namespace {

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

// Registers weight / bias (affine) and the running statistics (track) on m.
void register_norm_tensors(Module& m, int64_t c, bool affine, bool with_bias, bool track, DType dtype, Tensor& weight,
                           Tensor& bias, Tensor& running_mean, Tensor& running_var, Tensor& batches) {
  weight = m.register_parameter("weight", affine ? ones({c}, dtype) : Tensor());
  bias = m.register_parameter("bias", affine && with_bias ? zeros({c}, dtype) : Tensor());
  running_mean = m.register_buffer("running_mean", track ? zeros({c}, dtype) : Tensor());
  running_var = m.register_buffer("running_var", track ? ones({c}, dtype) : Tensor());
  batches = m.register_buffer("num_batches_tracked", track ? zeros({}, kInt64) : Tensor());
}

void check_features(const char* what, int64_t n) {
  FLB_CHECK(n >= 0, ValueError, "[", what, "] num_features must be >= 0, got ", n);
}

}  // namespace

BatchNorm::BatchNorm(int64_t d, int64_t c, double eps_, std::optional<double> momentum_, bool affine_, bool track,
                     DType dtype, bool with_bias)
    : Module("BatchNorm" + std::to_string(d) + "d"), dims(d), num_features(c), eps(eps_), momentum(momentum_),
      affine(affine_), track_running_stats(track) {
  FLB_CHECK(d >= 1 && d <= 3, ValueError, "[BatchNorm] dims must be 1, 2 or 3, got ", d);
  check_features(type_name().c_str(), c);
  register_norm_tensors(*this, c, affine, with_bias, track, dtype, weight, bias, running_mean, running_var,
                        num_batches_tracked);
}

Tensor BatchNorm::forward(const Tensor& x) {
  const bool ok = dims == 1 ? x.dim() == 2 || x.dim() == 3 : x.dim() == dims + 2;
  FLB_CHECK(ok, ValueError, "[", type_name(), "] expected ", dims == 1 ? "2D or 3D" : std::to_string(dims + 2) + "D",
            " input (got ", x.dim(), "D input of shape ", shape_str(x.sizes()), ")");
  double factor = momentum.value_or(0.0);
  if (is_training() && track_running_stats) {
    autograd::NoGradGuard no_grad;
    num_batches_tracked.add_(Tensor(int64_t(1)));
    if (!momentum) factor = 1.0 / double(num_batches_tracked.item<int64_t>());
  }
  const bool use_batch = is_training() || !running_mean.defined();
  const bool pass_running = !is_training() || track_running_stats;
  return functional::batch_norm(x, pass_running ? opt(running_mean) : std::nullopt,
                                pass_running ? opt(running_var) : std::nullopt, opt(weight), opt(bias), use_batch,
                                factor, eps);
}

InstanceNorm::InstanceNorm(int64_t d, int64_t c, double eps_, double momentum_, bool affine_, bool track,
                           DType dtype, bool with_bias)
    : Module("InstanceNorm" + std::to_string(d) + "d"), dims(d), num_features(c), eps(eps_), momentum(momentum_),
      affine(affine_), track_running_stats(track) {
  FLB_CHECK(d >= 1 && d <= 3, ValueError, "[InstanceNorm] dims must be 1, 2 or 3, got ", d);
  check_features(type_name().c_str(), c);
  register_norm_tensors(*this, c, affine, with_bias, track, dtype, weight, bias, running_mean, running_var,
                        num_batches_tracked);
}

Tensor InstanceNorm::forward(const Tensor& x) {
  FLB_CHECK(x.dim() == dims + 1 || x.dim() == dims + 2, ValueError, "[", type_name(), "] expected ", dims + 1,
            "D (unbatched) or ", dims + 2, "D (batched) input, got shape ", shape_str(x.sizes()));
  const bool unbatched = x.dim() == dims + 1;
  const int64_t features = x.size(unbatched ? 0 : 1);
  FLB_CHECK(!affine || features == num_features, ValueError, "[", type_name(), "] expected input's size at dim=",
            unbatched ? 0 : 1, " to match num_features (", num_features, "), but got: ", features,
            " (input shape ", shape_str(x.sizes()), ")");
  const Tensor xb = unbatched ? x.unsqueeze(0) : x;
  const Tensor y = functional::instance_norm(xb, opt(running_mean), opt(running_var), opt(weight), opt(bias),
                                             is_training() || !track_running_stats, momentum, eps);
  return unbatched ? y.squeeze(0) : y;
}

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps_, bool affine_, DType dtype, bool with_bias)
    : Module("GroupNorm"), num_groups(groups), num_channels(channels), eps(eps_), affine(affine_) {
  FLB_CHECK(groups > 0 && channels >= 0 && channels % groups == 0, ValueError,
            "[GroupNorm] num_channels must be divisible by num_groups, got num_channels=", channels,
            " and num_groups=", groups);
  weight = register_parameter("weight", affine ? ones({channels}, dtype) : Tensor());
  bias = register_parameter("bias", affine && with_bias ? zeros({channels}, dtype) : Tensor());
}

Tensor GroupNorm::forward(const Tensor& x) {
  return functional::group_norm(x, num_groups, opt(weight), opt(bias), eps);
}

Tensor LocalResponseNorm::forward(const Tensor& x) { return functional::local_response_norm(x, size, alpha, beta, k); }

}  // namespace flambeau::nn
