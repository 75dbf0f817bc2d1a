// nn::init: torch.nn.init's initialisers and their formulas (gain, fans, the inverse-CDF
// truncated normal). Each runs under no_grad.
#include "flambeau/nn/init.h"

#include <algorithm>
#include <cmath>

#include "flambeau/autograd/node.h"
#include "flambeau/core/parallel.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::init {
namespace {

int64_t fan_of(const Tensor& t, const std::string& mode, const char* op) {
  FLB_CHECK(mode == "fan_in" || mode == "fan_out", ValueError, "[", op, "] mode ", mode,
            " not supported, please use one of fan_in, fan_out");
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  return mode == "fan_in" ? fan_in : fan_out;
}

// The inverse of erf on (-1, 1): M. Giles' single-precision approximation ("Approximating
// the erfinv function", GPU Computing Gems, 2011), refined by two Newton steps on erf.
double erfinv(double y) {
  if (std::abs(y) >= 1) return std::copysign(INFINITY, y);
  double w = -std::log((1 - y) * (1 + y)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = c + p * w;
  } else {
    w = std::sqrt(w) - 3;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      p = c + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (M_2_SQRTPI * std::exp(-x * x));
  return x;
}

}  // namespace

double calculate_gain(const std::string& nonlinearity, std::optional<double> param) {
  for (const char* linear : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                             "conv_transpose3d", "sigmoid"})
    if (nonlinearity == linear) return 1;
  if (nonlinearity == "tanh") return 5.0 / 3;
  if (nonlinearity == "relu") return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu") {
    const double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  if (nonlinearity == "selu") return 3.0 / 4;
  FLB_CHECK(false, ValueError, "[calculate_gain] unsupported nonlinearity ", nonlinearity);
  return 0;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t) {
  FLB_CHECK(t.dim() >= 2, ValueError,
            "[calculate_fan_in_and_fan_out] fan in and fan out can not be computed for a tensor with fewer than 2 "
            "dimensions, got shape ",
            shape_str(t.sizes()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& uniform_(Tensor& t, double a, double b, std::optional<Generator> gen) {
  autograd::NoGradGuard no_grad;
  return flambeau::uniform_(t, a, b, gen);
}

Tensor& normal_(Tensor& t, double mean, double std, std::optional<Generator> gen) {
  autograd::NoGradGuard no_grad;
  return flambeau::normal_(t, mean, std, gen);
}

Tensor& constant_(Tensor& t, Scalar value) {
  autograd::NoGradGuard no_grad;
  return t.fill_(value);
}
Tensor& zeros_(Tensor& t) { return init::constant_(t, 0); }
Tensor& ones_(Tensor& t) { return init::constant_(t, 1); }

Tensor& xavier_uniform_(Tensor& t, double gain, std::optional<Generator> gen) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (t.numel() == 0) return t;
  const double a = gain * std::sqrt(6.0 / double(fan_in + fan_out));
  return init::uniform_(t, -a, a, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, std::optional<Generator> gen) {
  const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t);
  if (t.numel() == 0) return t;
  return init::normal_(t, 0, gain * std::sqrt(2.0 / double(fan_in + fan_out)), gen);
}

Tensor& kaiming_uniform_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity,
                         std::optional<Generator> gen) {
  const int64_t fan = fan_of(t, mode, "kaiming_uniform_");
  const double gain = calculate_gain(nonlinearity, a);
  if (t.numel() == 0) return t;
  const double bound = std::sqrt(3.0) * gain / std::sqrt(double(fan));
  return init::uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, const std::string& mode, const std::string& nonlinearity,
                        std::optional<Generator> gen) {
  const int64_t fan = fan_of(t, mode, "kaiming_normal_");
  const double gain = calculate_gain(nonlinearity, a);
  if (t.numel() == 0) return t;
  return init::normal_(t, 0, gain / std::sqrt(double(fan)), gen);
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, std::optional<Generator> gen) {
  FLB_CHECK(std > 0 && a <= b, ValueError, "[trunc_normal_] expected std > 0 and a <= b, got std=", std, ", a=", a,
            ", b=", b);
  auto cdf = [](double x) { return (1 + std::erf(x / std::sqrt(2.0))) / 2; };
  const double lo = cdf((a - mean) / std), hi = cdf((b - mean) / std);
  autograd::NoGradGuard no_grad;
  Tensor u = empty(t.sizes(), kFloat64);
  flambeau::uniform_(u, 2 * lo - 1, 2 * hi - 1, gen);
  double* p = u.data<double>();
  parallel_for(0, u.numel(), 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) p[i] = std::clamp(erfinv(p[i]) * std * std::sqrt(2.0) + mean, a, b);
  });
  return t.copy_(u);
}

}  // namespace flambeau::nn::init
