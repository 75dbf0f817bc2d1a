// Helpers shared by the GoogleTest suites: tensors with given values in several memory
// layouts, and reading any tensor back as doubles in logical (row-major) order.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "flambeau/flambeau.h"

namespace flambeau::testing {

enum class Layout { Contiguous, Transposed, Strided, Broadcast };
inline const Layout kAllLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Strided, Layout::Broadcast};
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Strided: return "strided";
    case Layout::Broadcast: return "broadcast";
  }
  return "?";
}

// The values of t in row-major logical order, as doubles.
inline std::vector<double> values(const Tensor& t) {
  Tensor d = t.to(kFloat64).contiguous();
  const double* p = d.numel() ? d.data<double>() : nullptr;
  return std::vector<double>(p, p + d.numel());
}

// Writes `vals` (row-major) into t, whatever its layout, through copy_.
inline void set_values(Tensor& t, const std::vector<double>& vals) {
  t.copy_(from_vector<double>(vals, t.sizes()));
}

// Random doubles in [lo, hi); integral dtypes get whole numbers.
inline std::vector<double> random_values(int64_t n, uint64_t seed, double lo, double hi, bool integral) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = integral ? std::floor(u(gen)) : u(gen);
  return v;
}

// A tensor of `shape` and dtype with random values, laid out as asked:
// Transposed: every dim's stride reversed; Strided: last dim sliced with step 2;
// Broadcast: the leading dim has stride 0 (all its rows equal).
inline Tensor random_tensor(const Dims& shape, DType dt, Layout layout, uint64_t seed, double lo = -3,
                            double hi = 3) {
  const bool integral = !is_floating(dt);
  if (dt == kBool) lo = 0, hi = 2;
  Tensor t;
  if (layout == Layout::Transposed && shape.size() >= 2) {
    Dims r;
    for (size_t i = shape.size(); i-- > 0;) r.push_back(shape[i]);
    Dims perm;
    for (size_t i = shape.size(); i-- > 0;) perm.push_back(int64_t(i));
    t = empty(r, dt).permute(perm);
  } else if (layout == Layout::Strided && !shape.empty()) {
    Dims s = shape;
    s.back() = 2 * s.back();
    t = empty(s, dt).slice(-1, {}, {}, 2);
  } else if (layout == Layout::Broadcast && !shape.empty()) {
    Dims s = shape;
    s[0] = 1;
    Tensor base = empty(s, dt);
    set_values(base, random_values(base.numel(), seed, lo, hi, integral));
    return base.expand(shape);
  } else {
    t = empty(shape, dt);
  }
  set_values(t, random_values(t.numel(), seed, lo, hi, integral));
  return t;
}

// |a - b| <= atol + rtol * |b| elementwise, NaN matching NaN and infinities matching exactly.
inline ::testing::AssertionResult all_close(const std::vector<double>& a, const std::vector<double>& b,
                                            double rtol, double atol) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = a[i], y = b[i];
    if (std::isnan(x) || std::isnan(y)) {
      if (std::isnan(x) && std::isnan(y)) continue;
      return ::testing::AssertionFailure() << "at " << i << ": " << x << " vs expected " << y;
    }
    if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
      return ::testing::AssertionFailure() << "at " << i << ": " << x << " vs expected " << y;
    }
    if (std::fabs(x - y) > atol + rtol * std::fabs(y))
      return ::testing::AssertionFailure() << "at " << i << ": " << x << " vs expected " << y
                                           << " (diff " << std::fabs(x - y) << ")";
  }
  return ::testing::AssertionSuccess();
}

// Tolerances by dtype for results of float math against a double reference.
inline double rtol_for(DType dt) {
  switch (dt) {
    case kFloat64: return 1e-12;
    case kFloat32: return 2e-6;
    case kBFloat16: return 1e-2;
    case kFloat16: return 2e-3;
    default: return 0;
  }
}

// Runs f and returns the message of the ErrT it throws ("" if it does not throw).
template <class ErrT, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ErrT& e) {
    return e.what();
  }
  return "";
}
inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Exact bitwise equality of two tensors' contents (same dtype and shape).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor x = a.contiguous(), y = b.contiguous();
  return x.numel() == 0 || std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

// Row-major coordinates of flat position p in `shape`, and back.
inline Dims coords_of(int64_t p, const Dims& shape) {
  Dims c(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) c[d] = p % shape[d], p /= shape[d];
  return c;
}
inline int64_t flat_of(const Dims& c, const Dims& shape) {
  int64_t p = 0;
  for (size_t d = 0; d < shape.size(); ++d) p = p * shape[d] + c[d];
  return p;
}

// Restores the thread count when a test that changes it ends.
struct ThreadGuard {
  int saved = get_num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

}  // namespace flambeau::testing
