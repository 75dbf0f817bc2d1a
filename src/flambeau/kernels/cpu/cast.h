// Value conversion between dtypes, with PyTorch's (x86) rules for float -> integer:
// int64 and uint8 go through int64, int32/int16/int8 through int32, out-of-range and NaN
// become the minimum of that intermediate, then narrower types keep the low bits.
#pragma once
#include <cstdint>
#include <type_traits>

#include "flambeau/core/dtype.h"

namespace flambeau::kernels {

template <class T>
inline constexpr bool is_float_like_v =
    std::is_floating_point_v<T> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// float -> integer without UB: the value x86's cvtt* instructions give.
template <class I>
inline I float_to_int(double x) {
  if constexpr (sizeof(I) == 8 || std::is_same_v<I, uint8_t>) {
    int64_t v = (x >= -0x1p63 && x < 0x1p63) ? int64_t(x) : INT64_MIN;
    return I(v);
  } else {
    int32_t v = (x >= -0x1p31 && x < 0x1p31) ? int32_t(x) : INT32_MIN;
    return I(v);
  }
}

template <class D, class S>
inline D cast_value(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (std::is_same_v<D, bool>) {
    if constexpr (is_float_like_v<S>) return float(v) != 0;  // NaN -> true
    else return v != 0;
  } else if constexpr (is_float_like_v<S> && !is_float_like_v<D>) {
    return float_to_int<D>(double(v));
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>) {
    if constexpr (std::is_same_v<S, double>) return D(float(v));
    else return D(float(v));
  } else if constexpr (std::is_same_v<S, Half> || std::is_same_v<S, BFloat16>) {
    return D(float(v));
  } else {
    return static_cast<D>(v);
  }
}

// Converts n elements: src (dtype sdt, stride sstride bytes) -> dst (ddt, dstride bytes).
// A stride of 0 on src broadcasts one value.
void convert(const void* src, DType sdt, int64_t sstride, void* dst, DType ddt, int64_t dstride,
             int64_t n);

}  // namespace flambeau::kernels

#include "flambeau/core/scalar.h"
namespace flambeau::kernels {
// A Scalar converted to T by the same rules as a tensor cast from its own dtype.
template <class T>
inline T scalar_to(const Scalar& s) {
  if (s.is_floating()) return cast_value<T>(s.to_double());
  if (s.is_bool()) return cast_value<T>(s.to_bool());
  return cast_value<T>(s.to_int());
}
}  // namespace flambeau::kernels
