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

// Note [Size overflow]
// Sizes come from users (fl.zeros(2**62)) and from views (expand to 2**62), so every
// product that makes a new shape, stride or byte count goes through mul_size / add_size
// where the shape is made (factories, view ops, allocation). Code that walks a tensor
// already made may then multiply sizes freely: numel, and numel * itemsize of a storage,
// fit in int64.
int64_t mul_size(int64_t a, int64_t b, const char* op) {
  int64_t r;
  FLB_CHECK(!__builtin_mul_overflow(a, b, &r), ValueError, "[", op, "] size calculation overflowed: ", a, " * ", b,
            " does not fit in int64");
  return r;
}

int64_t add_size(int64_t a, int64_t b, const char* op) {
  int64_t r;
  FLB_CHECK(!__builtin_add_overflow(a, b, &r), ValueError, "[", op, "] size calculation overflowed: ", a, " + ", b,
            " does not fit in int64");
  return r;
}

int64_t checked_numel(const Dims& shape, const char* op) {
  // The product skips zeros (max(s, 1)) so that contiguous_strides of the shape fits too.
  int64_t n = 1;
  bool overflow = false, empty = false;
  for (int64_t s : shape) {
    FLB_CHECK(s >= 0, ValueError, "[", op, "] trying to create tensor with negative dimension ", s, ": ",
              shape_str(shape));
    overflow |= __builtin_mul_overflow(n, s == 0 ? 1 : s, &n);
    empty |= s == 0;
  }
  FLB_CHECK(!overflow, ValueError, "[", op, "] storage size calculation overflowed with sizes ", shape_str(shape));
  return empty ? 0 : n;
}

size_t checked_nbytes(const Dims& shape, size_t itemsize, const char* op) {
  int64_t bytes;
  FLB_CHECK(!__builtin_mul_overflow(checked_numel(shape, op), int64_t(itemsize), &bytes), ValueError, "[", op,
            "] storage size calculation overflowed with sizes ", shape_str(shape), " and element size ", itemsize);
  return size_t(bytes);
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

std::pair<int64_t, int64_t> slice_bounds(int64_t n, std::optional<int64_t> start, std::optional<int64_t> end) {
  auto clamp = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  const int64_t b = start ? clamp(*start) : 0, e = end ? clamp(*end) : n;
  return {b, std::max(e, b)};
}

}  // namespace flambeau
