// dtype names, sizes and the promotion lattice (same results as torch.promote_types).
#include "flambeau/core/dtype.h"

#include <ostream>

namespace flambeau {

const char* dtype_name(DType t) {
  switch (t) {
#define FLB_CASE(e, T, s) \
  case DType::e:          \
    return s;
    FLB_FORALL_DTYPES(FLB_CASE)
#undef FLB_CASE
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << "flambeau." << dtype_name(t); }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_floating(a) || is_floating(b)) {
    if (!is_floating(a)) return b;
    if (!is_floating(b)) return a;
    if (is_reduced_float(a) && is_reduced_float(b)) return DType::Float32;  // f16 + bf16
    return a > b ? a : b;
  }
  // both integral: uint8 with a signed type needs a signed type that holds 0..255
  if (a == DType::UInt8 || b == DType::UInt8) {
    DType s = a == DType::UInt8 ? b : a;
    return s == DType::Int8 ? DType::Int16 : s;
  }
  return a > b ? a : b;
}

}  // namespace flambeau
