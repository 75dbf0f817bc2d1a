// Distances and normalisation (torch.nn.functional's normalize, cosine_similarity,
// pairwise_distance and torch.cdist), composed of differentiable ops with torch's formulas.
#include "flambeau/core/op_hook.h"
#include "flambeau/core/shape.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace nn::functional {

FLB_OP(normalize, (const Tensor& x, double p, int64_t dim, double eps), (x, p, dim, eps), Tensor) {
  const Tensor n = norm(x, p, {wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "normalize")}, true);
  return div(x, clamp(n, Tensor(eps)));
}

}  // namespace nn::functional

FLB_OP(cosine_similarity, (const Tensor& x1, const Tensor& x2, int64_t dim, double eps), (x1, x2, dim, eps), Tensor) {
  const Dims shape = broadcast_shapes(x1.sizes(), x2.sizes(), "cosine_similarity");
  const Tensor a = x1.expand(shape), b = x2.expand(shape);
  const Dims d = {wrap_dim(dim, int64_t(shape.size()), "cosine_similarity")};
  const Tensor na = clamp(norm(a, 2, d, true), Tensor(eps)), nb = clamp(norm(b, 2, d, true), Tensor(eps));
  return sum(mul(div(a, na), div(b, nb)), d);
}

FLB_OP(pairwise_distance, (const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim),
       (x1, x2, p, eps, keepdim), Tensor) {
  const int64_t last = std::max(x1.dim(), x2.dim()) - 1;
  FLB_CHECK(last >= 0, ValueError, "[pairwise_distance] expected inputs of at least 1 dimension, got shapes ",
            shape_str(x1.sizes()), " and ", shape_str(x2.sizes()));
  return norm(add(sub(x1, x2), Tensor(eps)), p, {last}, keepdim);
}

FLB_OP(cdist, (const Tensor& x1, const Tensor& x2, double p), (x1, x2, p), Tensor) {
  FLB_CHECK(x1.dim() >= 2 && x2.dim() >= 2, ValueError, "[cdist] only supports at least 2D tensors, got shapes ",
            shape_str(x1.sizes()), " and ", shape_str(x2.sizes()));
  FLB_CHECK(x1.size(-1) == x2.size(-1), ValueError,
            "[cdist] X1 and X2 must have the same number of columns. X1: ", x1.size(-1), " X2: ", x2.size(-1),
            " (shapes ", shape_str(x1.sizes()), " and ", shape_str(x2.sizes()), ")");
  FLB_CHECK(p >= 0, ValueError, "[cdist] only supports non-negative p values, got ", p);
  // [..., P, 1, M] - [..., 1, R, M], reduced over M: the distance of every pair of rows.
  return norm(sub(x1.unsqueeze(-2), x2.unsqueeze(-3)), p, {-1}, false);
}

}  // namespace flambeau
