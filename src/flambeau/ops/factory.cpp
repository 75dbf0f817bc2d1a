// Tensor factories: empty, zeros, ones, full, arange, linspace, eye, the *_like forms,
// scalar_tensor and from_vector.
#include <cmath>

#include "flambeau/core/op_hook.h"
#include "flambeau/kernels/cpu/cast.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {
DType scalar_default_dtype(const Scalar& s) {
  return s.is_floating() ? kDefaultFloat : s.dtype();
}
}  // namespace

FLB_OP(empty, (const Dims& shape, DType dtype, Device device), (shape, dtype, device), Tensor) {
  check_device_available(device, "empty");
  return make_tensor(Storage::allocate(checked_nbytes(shape, itemsize(dtype), "empty"), device), dtype, shape);
}

Tensor empty(const Dims& shape, DType dtype, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return empty(shape, dtype);
  return make_tensor(Storage::allocate(checked_nbytes(shape, itemsize(dtype), "empty"), kCPU), dtype, shape,
                     memory_format_strides(shape, format, "empty"));
}

FLB_OP(zeros,
       (const Dims& shape, DType dtype, Device device),
       (shape, dtype, device), Tensor) { return empty(shape, dtype, device).fill_(0); }
FLB_OP(ones,
       (const Dims& shape, DType dtype, Device device),
       (shape, dtype, device), Tensor) { return empty(shape, dtype, device).fill_(1); }

FLB_OP(full,
       (const Dims& shape, Scalar value, std::optional<DType> dtype, Device device),
       (shape, value, dtype, device), Tensor) {
  return empty(shape, dtype.value_or(scalar_default_dtype(value)), device).fill_(value);
}

FLB_OP(scalar_tensor, (Scalar value, std::optional<DType> dtype), (value, dtype), Tensor) {
  Tensor t = make_tensor(Storage::allocate(itemsize(dtype.value_or(scalar_default_dtype(value))), kCPU),
                         dtype.value_or(scalar_default_dtype(value)), {});
  visit_dtype(t.dtype(), [&]<class T>() { *static_cast<T*>(t.data_ptr()) = kernels::scalar_to<T>(value); });
  return t;
}


FLB_OP(arange, (Scalar end, std::optional<DType> dtype), (end, dtype), Tensor) { return arange(0, end, 1, dtype); }

FLB_OP(arange,
       (Scalar start, Scalar end, Scalar step, std::optional<DType> dtype),
       (start, end, step, dtype), Tensor) {
  const bool any_float = start.is_floating() || end.is_floating() || step.is_floating();
  const DType dt = dtype.value_or(any_float ? kDefaultFloat : kInt64);
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  FLB_CHECK(st != 0, ValueError, "[arange] step must be nonzero");
  FLB_CHECK(std::isfinite(s) && std::isfinite(e), ValueError, "[arange] unsupported range: ", s, " -> ", e);
  FLB_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), ValueError,
            "[arange] upper bound and lower bound inconsistent with step sign");
  int64_t n;
  if (!any_float) {  // ceil((b - a) / c) in 128 bits: the difference of two int64 may not fit
    const __int128 a = start.to_int(), b = end.to_int(), c = step.to_int();
    const __int128 len = c > 0 ? (b - a + c - 1) / c : (a - b - c - 1) / -c;
    FLB_CHECK(len <= INT64_MAX, ValueError, "[arange] the range ", s, " -> ", e, " with step ", st,
              " has more than 2^63 - 1 elements");
    n = int64_t(len);
  } else {
    const double len = std::ceil((e - s) / st);
    FLB_CHECK(len < 0x1p63, ValueError, "[arange] the range ", s, " -> ", e, " with step ", st,
              " has more than 2^63 - 1 elements");
    n = int64_t(len);
  }
  Tensor t = empty({n}, dt);
  visit_dtype(dt, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      if (is_floating(dt) || any_float) p[i] = kernels::cast_value<T>(s + double(i) * st);
      else p[i] = kernels::cast_value<T>(start.to_int() + i * step.to_int());
    }
  });
  return t;
}

FLB_OP(linspace, (double start, double end, int64_t steps, DType dtype), (start, end, steps, dtype), Tensor) {
  FLB_CHECK(steps >= 0, ValueError, "[linspace] number of steps must be non-negative, got ", steps);
  Tensor t = empty({steps}, dtype);
  visit_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    if (steps == 1) {  // as in PyTorch: start, not end
      p[0] = kernels::cast_value<T>(start);
      return;
    }
    // Integer dtypes take the ends in that dtype first, as PyTorch does.
    const double a = is_floating(dtype) ? start : double(kernels::cast_value<T>(start));
    const double b = is_floating(dtype) ? end : double(kernels::cast_value<T>(end));
    const double step = (b - a) / double(steps - 1);
    // Both ends exact: the first half counts up from start, the second down from end.
    for (int64_t i = 0; i < steps; ++i)
      p[i] = kernels::cast_value<T>(i < steps / 2 ? a + step * double(i) : b - step * double(steps - 1 - i));
  });
  return t;
}

FLB_OP(eye, (int64_t n, int64_t m, DType dtype), (n, m, dtype), Tensor) {
  if (m < 0) m = n;
  FLB_CHECK(n >= 0, ValueError, "[eye] n must be greater or equal to 0, got ", n);
  Tensor t = zeros({n, m}, dtype);
  visit_dtype(dtype, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < std::min(n, m); ++i) p[i * m + i] = kernels::cast_value<T>(true);
  });
  return t;
}

FLB_OP(empty_like, (const Tensor& t, std::optional<DType> dtype, MemoryFormat format), (t, dtype, format), Tensor) {
  const DType dt = dtype.value_or(t.dtype());
  if (format == MemoryFormat::Preserve) {
    if (t.numel() == 0 || (!t.is_contiguous() && is_non_overlapping_and_dense(t)))  // torch: empty ones too
      return make_tensor(Storage::allocate(checked_nbytes(t.sizes(), itemsize(dt), "empty_like"), t.device()), dt,
                         t.sizes(), t.strides());
    format = suggest_memory_format(t);
  }
  return format == MemoryFormat::Contiguous ? empty(t.sizes(), dt, t.device()) : empty(t.sizes(), dt, format);
}
FLB_OP(zeros_like,
       (const Tensor& t, std::optional<DType> dtype, MemoryFormat format),
       (t, dtype, format), Tensor) { return empty_like(t, dtype, format).fill_(0); }
FLB_OP(ones_like,
       (const Tensor& t, std::optional<DType> dtype, MemoryFormat format),
       (t, dtype, format), Tensor) { return empty_like(t, dtype, format).fill_(1); }
FLB_OP(full_like, (const Tensor& t, Scalar value, std::optional<DType> dtype, MemoryFormat format),
       (t, value, dtype, format), Tensor) {
  return empty_like(t, dtype, format).fill_(value);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, std::optional<Dims> shape) {
  Dims s = shape.value_or(Dims{int64_t(values.size())});
  FLB_CHECK(numel_of(s) == int64_t(values.size()), ValueError, "[from_vector] shape ", shape_str(s),
            " does not hold ", values.size(), " values");
  Tensor t = empty(s, dtype_v<T>);
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
#define FLB_INSTANTIATE(e, T, s) template Tensor from_vector<T>(const std::vector<T>&, std::optional<Dims>);
FLB_FORALL_DTYPES(FLB_INSTANTIATE)
#undef FLB_INSTANTIATE

}  // namespace flambeau
