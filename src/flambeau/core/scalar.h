// Scalar: a Python-like number (bool, integer or float) passed to ops. A Scalar is a
// "weak" type in promotion: int tensor + 2.5 -> float32, float16 tensor + 2.5 -> float16.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "flambeau/core/dtype.h"

namespace flambeau {

class Scalar {
 public:
  enum class Kind : uint8_t { Bool, Int, Float };
  Scalar() : kind_(Kind::Int), i_(0) {}
  Scalar(bool v) : kind_(Kind::Bool), i_(v) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Scalar(T v) : kind_(Kind::Int), i_(int64_t(v)) {}
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Scalar(T v) : kind_(Kind::Float), d_(double(v)) {}
  Scalar(Half v) : kind_(Kind::Float), d_(float(v)) {}
  Scalar(BFloat16 v) : kind_(Kind::Float), d_(float(v)) {}

  Kind kind() const { return kind_; }
  bool is_floating() const { return kind_ == Kind::Float; }
  bool is_integral() const { return kind_ == Kind::Int; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  // The dtype this value has as a tensor: bool, int64 or float64.
  DType dtype() const {
    return kind_ == Kind::Float ? DType::Float64 : kind_ == Kind::Int ? DType::Int64 : DType::Bool;
  }
  double to_double() const { return kind_ == Kind::Float ? d_ : double(i_); }
  int64_t to_int() const { return kind_ == Kind::Float ? double_to_int(d_) : i_; }
  bool to_bool() const { return kind_ == Kind::Float ? d_ != 0 : i_ != 0; }
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_bool();
    else if constexpr (std::is_integral_v<T>) return T(to_int());
    else return T(to_double());
  }
  std::string str() const;

 private:
  // NaN and out-of-range values give INT64_MIN, as x86 does, instead of undefined behaviour.
  static int64_t double_to_int(double d) { return d >= -0x1p63 && d < 0x1p63 ? int64_t(d) : INT64_MIN; }
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

}  // namespace flambeau
