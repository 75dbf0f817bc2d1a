// flambeau::nn::init, as torch.nn.init: in-place initialisers that record no gradient
// (they may be applied to parameters that require grad). Random ones draw from `gen`
// (the default generator when not given).
#pragma once
#include <optional>
#include <string>
#include <utility>

#include "flambeau/core/generator.h"
#include "flambeau/core/tensor.h"

namespace flambeau::nn::init {

// The recommended gain for a nonlinearity: linear, conv*, sigmoid 1; tanh 5/3; relu
// sqrt(2); leaky_relu sqrt(2 / (1 + slope^2)) (param: slope, 0.01 by default); selu 3/4.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = {});
// (fan_in, fan_out) of a weight [out, in, *receptive field]; ValueError below 2 dims.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t);

Tensor& uniform_(Tensor& t, double a = 0, double b = 1, std::optional<Generator> gen = {});
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, std::optional<Generator> gen = {});
Tensor& constant_(Tensor& t, Scalar value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);
// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)); N(0, gain^2 * 2 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1, std::optional<Generator> gen = {});
Tensor& xavier_normal_(Tensor& t, double gain = 1, std::optional<Generator> gen = {});
// std = calculate_gain(nonlinearity, a) / sqrt(fan), fan by mode ("fan_in" or "fan_out");
// uniform draws from U(-sqrt(3) std, sqrt(3) std). Zero-element tensors are left alone.
Tensor& kaiming_uniform_(Tensor& t, double a = 0, const std::string& mode = "fan_in",
                         const std::string& nonlinearity = "leaky_relu", std::optional<Generator> gen = {});
Tensor& kaiming_normal_(Tensor& t, double a = 0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu", std::optional<Generator> gen = {});
// N(mean, std^2) restricted to [a, b], by the inverse CDF (as torch).
Tensor& trunc_normal_(Tensor& t, double mean = 0, double std = 1, double a = -2, double b = 2,
                      std::optional<Generator> gen = {});

}  // namespace flambeau::nn::init
