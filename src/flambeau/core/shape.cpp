// Shape helpers shared by every op.
#include "flambeau/core/shape.h"

#include <algorithm>

#include "flambeau/core/error.h"

namespace flambeau {

int64_t numel_of(const Dims& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Dims contiguous_strides(const Dims& shape) {
  Dims st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

std::string shape_str(const Dims& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1
  FLB_CHECK(dim >= -n && dim < n, IndexError, "[", op, "] dimension out of range (expected to be in range of [",
            -n, ", ", n - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + n : dim;
}

Dims broadcast_shapes(const Dims& a, const Dims& b, const char* op) {
  if (a == b) return a;
  size_t n = std::max(a.size(), b.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    FLB_CHECK(x == y || x == 1 || y == 1, ValueError, "[", op, "] shapes ", shape_str(a), " and ",
              shape_str(b), " cannot be broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

}  // namespace flambeau
