// Special functions in double precision (float32 inputs are computed here and rounded once):
// lgamma, digamma, trigamma, erfinv and the modified Bessel functions I0 and I1. Edge values
// follow PyTorch: digamma(+-0) = -+inf, digamma at negative integers and -inf is NaN,
// erfinv(+-1) = +-inf and NaN outside [-1, 1].
#pragma once

#include <cmath>
#include <limits>

namespace flambeau::kernels::special {

inline constexpr double kPi = 3.14159265358979323846;

// glibc's re-entrant lgamma: std::lgamma writes the global signgam.
inline double log_gamma(double x) {
  int sign;
  return ::lgamma_r(x, &sign);
}

// Sum of B_2k / (2k x^2k) for k = 1..7 (Bernoulli numbers), the tail of the asymptotic series
// of digamma; its terms shrink by at least 1/x^2 <= 1/100 for x >= 10.
inline double digamma_tail(double x) {
  static constexpr double b2k_over_2k[] = {1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760,
                                           1.0 / 12};
  const double r = 1 / (x * x);
  double s = 0;
  for (int k = 6; k >= 0; --k) s = s * r + b2k_over_2k[k];
  return s * r;
}

// psi(x) = d/dx log Gamma(x): reflection below 0, recurrence up to x >= 10, then
// log(x) - 1/(2x) - sum B_2k / (2k x^2k).
inline double digamma(double x) {
  if (std::isnan(x)) return x;
  if (x == 0) return std::copysign(std::numeric_limits<double>::infinity(), -x);
  if (x < 0) {
    if (x == std::trunc(x)) return std::numeric_limits<double>::quiet_NaN();  // poles, and -inf
    // psi(x) = psi(1 - x) - pi / tan(pi x); the reduction keeps tan's argument small.
    const double r = x - 2 * std::round(x / 2);
    return digamma(1 - x) - kPi / std::tan(kPi * r);
  }
  if (std::isinf(x)) return x;
  double shift = 0;
  for (; x < 10; x += 1) shift += 1 / x;
  return std::log(x) - 0.5 / x - digamma_tail(x) - shift;
}

// psi'(x): reflection psi'(x) + psi'(1 - x) = pi^2 / sin^2(pi x), recurrence up to x >= 10, then
// 1/x + 1/(2x^2) + sum B_2k / x^(2k+1).
inline double trigamma(double x) {
  if (std::isnan(x)) return x;
  if (x <= 0 && x == std::trunc(x)) return std::numeric_limits<double>::infinity();
  if (x < 0) {
    const double r = x - 2 * std::round(x / 2), s = std::sin(kPi * r);
    return kPi * kPi / (s * s) - trigamma(1 - x);
  }
  if (std::isinf(x)) return 0;
  static constexpr double b2k[] = {1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6};
  double shift = 0;
  for (; x < 10; x += 1) shift += 1 / (x * x);
  const double r = 1 / (x * x);
  double s = 0;
  for (int k = 6; k >= 0; --k) s = s * r + b2k[k];
  return shift + 1 / x + 0.5 * r + s * r / x;
}

// erf^-1: a closed-form first guess (relative error below 2e-3), then three Halley steps on
// erf(y) = x, or on erfc(y) = 1 - |x| near +-1 where 1 - |x| is exact and erf(y) - x would cancel.
inline double erfinv(double x) {
  if (std::isnan(x) || std::fabs(x) > 1) return std::numeric_limits<double>::quiet_NaN();
  if (std::fabs(x) == 1) return std::copysign(std::numeric_limits<double>::infinity(), x);
  if (x == 0) return x;
  const double a = std::fabs(x), l = std::log((1 - a) * (1 + a)), c = 2 / (kPi * 0.147) + l / 2;
  double y = std::sqrt(std::sqrt(c * c - l / 0.147) - c);
  const double k = 2 / std::sqrt(kPi);
  for (int i = 0; i < 3; ++i) {
    // f(y) = erf(y) - a, f' = k exp(-y^2), f'' = -2 y f': Halley's step is f / (f' + y f).
    const double f = a < 0.5 ? std::erf(y) - a : (1 - a) - std::erfc(y);
    y -= f / (k * std::exp(-y * y) + y * f);
  }
  return std::copysign(y, x);
}

// I_nu(x) for nu = 0 or 1, x >= 0: the power series sum (x/2)^(2j+nu) / (j! (j+nu)!) (positive
// terms, no cancellation) up to x = 30; above, e^x / sqrt(2 pi x) sum_j (-1)^j a_j(nu) / x^j
// with a_j = prod_i (4 nu^2 - (2i-1)^2) / (j! 8^j), whose terms keep shrinking for j < 2x.
inline double bessel_i(int nu, double x) {
  if (x <= 30) {
    const double q = x * x / 4;
    double term = nu ? x / 2 : 1, sum = term;
    for (int j = 1; term > sum * 1e-17; ++j) {
      term *= q / (double(j) * (j + nu));
      sum += term;
    }
    return sum;
  }
  if (std::isinf(x)) return x;
  const double mu = 4.0 * nu * nu;
  double term = 1, sum = 1;
  for (int j = 1; j < 40; ++j) {
    term *= -(mu - (2.0 * j - 1) * (2.0 * j - 1)) / (8.0 * j * x);
    sum += term;
    if (std::fabs(term) < 1e-17 * sum) break;
  }
  // e^(x/2) twice: e^x alone overflows below 709.8, I0 only above 713.9.
  const double h = std::exp(x / 2);
  return h * (h / std::sqrt(2 * kPi * x)) * sum;
}

inline double i0(double x) { return std::isnan(x) ? x : bessel_i(0, std::fabs(x)); }
inline double i1(double x) { return std::isnan(x) ? x : std::copysign(bessel_i(1, std::fabs(x)), x); }

}  // namespace flambeau::kernels::special
