// torch.nn.functional.pad: constant padding (negative amounts crop) as cat / narrow, and
// reflect, replicate and circular padding as one index_select per padded dim, so the
// gradient comes from those ops (index_select's sums the copies back in order).
#include <cstdint>
#include <string>

#include "flambeau/core/op_hook.h"
#include "flambeau/core/shape.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"

namespace flambeau::nn::functional {
namespace {

// The source index of each output position of one padded dim (before, after: the padding).
Tensor source_indices(const std::string& mode, int64_t size, int64_t before, int64_t after) {
  std::vector<int64_t> idx;
  for (int64_t o = 0; o < size + before + after; ++o) {
    int64_t i = o - before;
    if (mode == "reflect") i = i < 0 ? -i : i >= size ? 2 * (size - 1) - i : i;
    else if (mode == "replicate") i = std::clamp<int64_t>(i, 0, size - 1);
    else i = ((i % size) + size) % size;  // circular
    idx.push_back(i);
  }
  return from_vector(idx);
}

Tensor constant_pad(Tensor x, int64_t dim, int64_t before, int64_t after, double value) {
  if (before < 0) x = x.narrow(dim, -before, x.size(dim) + before);
  if (after < 0) x = x.narrow(dim, 0, x.size(dim) + after);
  auto block = [&](int64_t n) {
    Dims shape = x.sizes();
    shape[size_t(dim)] = n;
    return full(shape, value, x.dtype());
  };
  std::vector<Tensor> parts;
  if (before > 0) parts.push_back(block(before));
  parts.push_back(x);
  if (after > 0) parts.push_back(block(after));
  return parts.size() == 1 ? x : cat(parts, dim);
}

}  // namespace

FLB_OP(pad, (const Tensor& x, const Dims& padding, const std::string& mode, std::optional<double> value),
       (x, padding, mode, value), Tensor) {
  const int64_t pairs = int64_t(padding.size()) / 2;
  FLB_CHECK(padding.size() % 2 == 0, ValueError, "[pad] padding length must be divisible by 2, got ",
            shape_str(padding), " for input of shape ", shape_str(x.sizes()));
  FLB_CHECK(pairs <= x.dim(), ValueError, "[pad] padding length ", padding.size(),
            " is too large for an input of ", x.dim(), " dimensions (shape ", shape_str(x.sizes()), ")");
  FLB_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate" || mode == "circular", ValueError,
            "[pad] unrecognised padding mode '", mode, "' (expected constant, reflect, replicate or circular)");
  if (mode == "constant") {
    Dims out = x.sizes();
    for (int64_t p = 0; p < pairs; ++p) {
      const size_t d = size_t(x.dim() - 1 - p);
      out[d] += padding[size_t(2 * p)] + padding[size_t(2 * p + 1)];
      FLB_CHECK(out[d] >= 0, ValueError, "[pad] the padding ", shape_str(padding), " of an input of shape ",
                shape_str(x.sizes()), " gives a negative size ", out[d], " at dimension ", d);
    }
    Tensor y = x;
    for (int64_t p = 0; p < pairs; ++p)
      y = constant_pad(y, x.dim() - 1 - p, padding[size_t(2 * p)], padding[size_t(2 * p + 1)], value.value_or(0.0));
    return y;
  }
  FLB_CHECK(!value || *value == 0.0, ValueError, "[pad] padding mode '", mode,
            "' doesn't take in value argument");
  FLB_CHECK(x.dim() >= pairs + 1 && x.dim() <= pairs + 2 && pairs >= 1 && pairs <= 3, ValueError, "[pad] ", mode,
            " padding of ", pairs, " dimension(s) expects a ", pairs + 1, "D or ", pairs + 2,
            "D input, got shape ", shape_str(x.sizes()));
  Tensor y = x;
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t d = x.dim() - 1 - p, size = x.size(d);
    const int64_t before = padding[size_t(2 * p)], after = padding[size_t(2 * p + 1)];
    // reflect mirrors without the edge (amounts under the size), circular wraps at most once;
    // replicate repeats the edge any number of times.
    const int64_t limit = mode == "reflect" ? size - 1 : mode == "circular" ? size : INT64_MAX;
    FLB_CHECK(std::max(before, after) <= limit && size + before + after >= 0 && (size > 0 || before + after <= 0),
              ValueError, "[pad] ", mode, " padding (", before, ", ", after, ") at dimension ", d,
              " of input ", shape_str(x.sizes()), " must be ", mode == "reflect" ? "less than" : "at most",
              " the dimension's size ", size);
    y = index_select(y, d, source_indices(mode, size, before, after));
  }
  return y;
}

}  // namespace flambeau::nn::functional
