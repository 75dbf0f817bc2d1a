// max_unpool1d/2d/3d: the partial inverse of max_pool*d, a primitive with torch's checks,
// messages and grad_fn names. The output is zeros with each input value written at its index
// in its plane; the backward gathers the output gradient at the indices. As in torch, the
// 1-d form runs the 2-d primitive on [..., L, 1] views (its grad_fn is SqueezeBackward1).
#include <algorithm>
#include <string>

#include "flambeau/autograd/function.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/core/parallel.h"
#include "flambeau/core/shape.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

// An int[n] argument as n values: n of them, or one for all; empty gives *if_empty when set.
Dims per_dim(const char* op, const char* what, const Dims& v, int64_t n, const Dims* if_empty = nullptr) {
  if (v.empty() && if_empty) return *if_empty;
  if (int64_t(v.size()) == n) return v;
  FLB_CHECK(v.size() == 1, ValueError, "[", op, "] ", what, " must either be ", if_empty ? "omitted, " : "",
            "a single int, or a tuple of ", n, " ints, got ", what, "=", shape_str(v));
  return Dims(size_t(n), v[0]);
}

// "4x4": the spatial sizes of an output plane.
std::string volume_str(const Dims& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

// The spatial output sizes of an unpooling of n dims: torch's _unpool_output_size. The
// default is (in - 1) * stride + kernel - 2 * padding per dim; a given output_size (n sizes,
// or n + 2 whose first two are dropped) must be within stride of it, exclusive.
Dims unpooled_sizes(const char* op, int64_t n, const Tensor& x, const Dims& kernel_size, const Dims& stride,
                    const Dims& padding, const Dims& output_size) {
  const Dims k = per_dim(op, "kernel_size", kernel_size, n), s = per_dim(op, "stride", stride, n, &k),
             p = per_dim(op, "padding", padding, n);
  if (n == 3)  // torch checks the stride of the 3-d form only
    for (int64_t v : s)
      FLB_CHECK(v > 0, ValueError, "[", op, "] strides should be greater than zero, but got stride: ", shape_str(s));
  Dims out(static_cast<size_t>(n), 0);
  for (size_t d = 0; d < size_t(n); ++d) out[d] = (x.size(x.dim() - n + int64_t(d)) - 1) * s[d] + k[d] - 2 * p[d];
  if (!output_size.empty()) {
    Dims o = output_size;
    if (int64_t(o.size()) == n + 2) o = Dims(o.data() + 2, size_t(n));
    FLB_CHECK(int64_t(o.size()) == n, ValueError, "[", op, "] output_size should be a sequence containing ", n,
              " or ", n + 2, " elements, but it has a length of '", output_size.size(), "'");
    for (size_t d = 0; d < size_t(n); ++d) {
      const int64_t lo = out[d] - s[d], hi = out[d] + s[d];
      FLB_CHECK(lo < o[d] && o[d] < hi, ValueError, "[", op, "] invalid output_size ", shape_str(output_size),
                " (dim ", d, " must be between ", lo, " and ", hi, ")");
    }
    out = o;
  }
  for (size_t d = 0; d < size_t(n); ++d)
    FLB_CHECK(out[d] >= 0, ValueError, "[", op,
              "] max_unpooling: output_size must contain non-negative spatial dimensions, but got output_size[", d,
              "]=", out[d]);
  return out;
}

// y = zeros of x's leading dims + `spatial`, y[plane, idx[plane, j]] = x[plane, j] (a repeated
// index keeps the last value), recorded as `node`; idx is checked first (nothing is written on error).
Tensor unpool_primitive(const char* op, const char* node, const Tensor& x, const Tensor& idx, const Dims& spatial) {
  const int64_t n = int64_t(spatial.size()), lead = x.dim() - n;
  Dims out_shape(x.sizes().data(), size_t(lead));
  const int64_t planes = numel_of(out_shape);
  for (int64_t v : spatial) out_shape.push_back(v);
  const int64_t in_volume = numel_of(Dims(x.sizes().data() + lead, size_t(n))), out_volume = numel_of(spatial);
  const Tensor ic = idx.contiguous();
  Tensor y;
  {
    autograd::NoGradGuard no_grad;
    const int64_t* ip = ic.data<int64_t>();
    for (int64_t i = 0; i < planes * in_volume; ++i)
      FLB_CHECK(ip[i] >= 0 && ip[i] < out_volume, IndexError, "[", op, "] found an invalid max index: ", ip[i],
                " (output volumes are of size ", volume_str(spatial), ")");
    const Tensor xc = x.contiguous();
    y = zeros(out_shape, x.dtype());
    visit_dtype(x.dtype(), [&]<class T>() {
      const T* xp = xc.data<T>();
      T* yp = y.data<T>();
      parallel_for(0, planes, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, in_volume)),
                   [&](int64_t p0, int64_t p1) {
                     for (int64_t p = p0; p < p1; ++p)
                       for (int64_t j = p * in_volume; j < (p + 1) * in_volume; ++j)
                         yp[p * out_volume + ip[j]] = xp[j];
                   });
    });
  }
  autograd::record(node, {&y}, {&x}, {ic},
                   [shape = Dims(x.sizes()), planes, in_volume, out_volume](const std::vector<Tensor>& grads,
                                                                            const std::vector<Tensor>& saved) {
                     const Tensor g = grads[0].reshape({planes, out_volume});
                     return std::vector<Tensor>{gather(g, 1, saved[0].reshape({planes, in_volume})).reshape(shape)};
                   });
  return y;
}

Tensor max_unpool(const char* op, int64_t n, const Tensor& x, const Tensor& indices, const Dims& kernel_size,
                  const Dims& stride, const Dims& padding, const Dims& output_size) {
  FLB_CHECK(x.is_floating_point(), NotImplementedError, "[", op, "] not implemented for ", dtype_name(x.dtype()),
            " input (expected floating point)");
  FLB_CHECK(x.dim() == n + 1 || x.dim() == n + 2, ValueError, "[", op, "] expected a ", n + 1, "D or ", n + 2,
            "D (batch mode) tensor for input, got input of shape ", shape_str(x.sizes()));
  FLB_CHECK(indices.dtype() == kInt64, TypeError, "[", op, "] elements in indices should be type int64 but got: ",
            dtype_name(indices.dtype()));
  FLB_CHECK(indices.sizes() == x.sizes(), ValueError, "[", op,
            "] expected shape of indices to be same as that of the input tensor ", shape_str(x.sizes()),
            " but got indices tensor with shape: ", shape_str(indices.sizes()));
  for (int64_t i = x.dim() == n + 2 ? 1 : 0; i < x.dim(); ++i)
    FLB_CHECK(x.size(i) > 0, ValueError, "[", op,
              "] expected input to have non-zero size for non-batch dimensions, but input has shape ",
              shape_str(x.sizes()), " with dimension ", i, " being empty");
  Dims spatial = unpooled_sizes(op, n, x, kernel_size, stride, padding, output_size);
  if (n == 1) {
    spatial.push_back(1);
    return unpool_primitive(op, "MaxUnpool2DBackward0", x.unsqueeze(-1), indices.unsqueeze(-1), spatial).squeeze(-1);
  }
  return unpool_primitive(op, n == 2 ? "MaxUnpool2DBackward0" : "MaxUnpool3DBackward0", x, indices, spatial);
}

}  // namespace

#define FLB_MAX_UNPOOL(N)                                                                                     \
  FLB_OP(max_unpool##N##d,                                                                                   \
         (const Tensor& input, const Tensor& indices, const Dims& kernel_size, const Dims& stride,            \
          const Dims& padding, const Dims& output_size),                                                      \
         (input, indices, kernel_size, stride, padding, output_size), Tensor) {                               \
    return max_unpool("max_unpool" #N "d", N, input, indices, kernel_size, stride, padding, output_size);    \
  }
FLB_MAX_UNPOOL(1)
FLB_MAX_UNPOOL(2)
FLB_MAX_UNPOOL(3)
#undef FLB_MAX_UNPOOL

}  // namespace flambeau::nn::functional
