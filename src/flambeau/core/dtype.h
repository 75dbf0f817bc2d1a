// Element types, their C++ storage types, and PyTorch's type-promotion rules.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

#include "flambeau/core/error.h"
#include "flambeau/core/half.h"

namespace flambeau {

// X(enum name, C++ type, printed name)
#define FLB_FORALL_DTYPES(X)      \
  X(Bool, bool, "bool")           \
  X(UInt8, uint8_t, "uint8")      \
  X(Int8, int8_t, "int8")         \
  X(Int16, int16_t, "int16")      \
  X(Int32, int32_t, "int32")      \
  X(Int64, int64_t, "int64")      \
  X(Float16, Half, "float16")     \
  X(BFloat16, BFloat16, "bfloat16") \
  X(Float32, float, "float32")    \
  X(Float64, double, "float64")

enum class DType : uint8_t {
#define FLB_ENUM(e, T, s) e,
  FLB_FORALL_DTYPES(FLB_ENUM)
#undef FLB_ENUM
};
inline constexpr int kNumDTypes = 10;

// Short aliases in the style of torch::kFloat32.
inline constexpr DType kBool = DType::Bool, kUInt8 = DType::UInt8, kInt8 = DType::Int8,
                       kInt16 = DType::Int16, kInt32 = DType::Int32, kInt64 = DType::Int64,
                       kFloat16 = DType::Float16, kBFloat16 = DType::BFloat16,
                       kFloat32 = DType::Float32, kFloat64 = DType::Float64;

template <class T>
struct dtype_of;
#define FLB_DTYPE_OF(e, T, s) \
  template <>                 \
  struct dtype_of<T> {        \
    static constexpr DType value = DType::e; \
  };
FLB_FORALL_DTYPES(FLB_DTYPE_OF)
#undef FLB_DTYPE_OF
template <class T>
inline constexpr DType dtype_v = dtype_of<T>::value;

const char* dtype_name(DType t);  // "float32"
inline size_t itemsize(DType t) {
  constexpr size_t sizes[] = {
#define FLB_SIZE(e, T, s) sizeof(T),
      FLB_FORALL_DTYPES(FLB_SIZE)
#undef FLB_SIZE
  };
  return sizes[size_t(t)];
}
inline bool is_floating(DType t) { return t >= DType::Float16; }
inline bool is_integral(DType t, bool include_bool) {
  return t == DType::Bool ? include_bool : t < DType::Float16;
}
inline bool is_reduced_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// Prints "flambeau.float32".
std::ostream& operator<<(std::ostream& os, DType t);

// The result type of combining two tensors of these types (torch.promote_types).
DType promote_types(DType a, DType b);
// The default floating type (float32), used for int -> float promotion.
inline constexpr DType kDefaultFloat = DType::Float32;

// Calls f.template operator()<T>() with T the C++ type of `t`.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
#define FLB_CASE(e, T, s) \
  case DType::e:          \
    return f.template operator()<T>();
    FLB_FORALL_DTYPES(FLB_CASE)
#undef FLB_CASE
  }
  throw Error("[dtype] invalid dtype");
}

}  // namespace flambeau
