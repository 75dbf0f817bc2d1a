// Shape ops built from views, index_select, gather, scatter and cat: flips, rolls, triangles,
// tiling, diagonals, meshgrids, Kronecker and block-diagonal products. Each is differentiable
// through the ops it is made of; each is reported to the op hook as one op.
#include <algorithm>
#include <numeric>

#include "flambeau/core/op_hook.h"
#include "flambeau/core/shape.h"
#include "flambeau/ops/ops.h"

namespace flambeau {
namespace {

// dims wrapped to [0, ndim); duplicates are an error naming op.
Dims unique_dims(const Dims& dims, int64_t ndim, const char* op) {
  Dims out;
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, ndim, op);
    FLB_CHECK(std::find(out.begin(), out.end(), w) == out.end(), ValueError, "[", op, "] dim ", d,
              " appears multiple times in the list of dims ", shape_str(dims));
    out.push_back(w);
  }
  return out;
}

Tensor reversed_range(int64_t n) { return arange(Scalar(n - 1), Scalar(int64_t(-1)), Scalar(int64_t(-1)), kInt64); }

// [0, 1, ..., n) shaped to lie along dim `at` of an ndim-dim tensor (sizes 1 elsewhere).
Tensor range_along(int64_t n, int64_t at, int64_t ndim) {
  Dims shape(size_t(ndim), 1);
  shape[size_t(at)] = n;
  return arange(Scalar(n), kInt64).reshape(shape);
}

// t with dims of size 1 prepended to make it ndim-dim.
Tensor with_leading_ones(const Tensor& t, int64_t ndim) {
  Dims shape(size_t(ndim - t.dim()), 1);
  for (int64_t s : t.sizes()) shape.push_back(s);
  return t.reshape(shape);
}

// The lower (tril) or upper (triu) triangle of the last two dims: keep j - i <= k or >= k.
Tensor triangle(const Tensor& t, int64_t k, bool lower, const char* op) {
  FLB_CHECK(t.dim() >= 2, ValueError, "[", op, "] input tensor must have at least 2 dimensions, got shape ",
            shape_str(t.sizes()));
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const Tensor offset = sub(range_along(cols, 1, 2), range_along(rows, 0, 2));  // j - i
  const Tensor keep = lower ? le(offset, Tensor(k)) : ge(offset, Tensor(k));
  return where(keep, t, zeros({}, t.dtype()));
}

// The (row, col) pairs of a triangle of a rows x cols matrix, row-major, as a [2, n] tensor.
Tensor triangle_indices(int64_t rows, int64_t cols, int64_t k, bool lower, DType dtype, const char* op) {
  FLB_CHECK(rows >= 0 && cols >= 0, ValueError, "[", op, "] row and col must be non-negative, got ", rows, " and ",
            cols);
  FLB_CHECK(dtype == kInt64 || dtype == kInt32, TypeError, "[", op, "] dtype must be int64 or int32, got ",
            dtype_name(dtype));
  std::vector<int64_t> r, c;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (lower ? j - i <= k : j - i >= k) r.push_back(i), c.push_back(j);
  Tensor out = empty({2, int64_t(r.size())}, kInt64);
  std::copy(r.begin(), r.end(), out.data<int64_t>());
  std::copy(c.begin(), c.end(), out.data<int64_t>() + r.size());
  return out.to(dtype);
}

}  // namespace

FLB_OP(flip, (const Tensor& t, const Dims& dims), (t, dims), Tensor) {
  Tensor out = t;
  for (int64_t d : unique_dims(dims, t.dim(), "flip")) out = index_select(out, d, reversed_range(t.size(d)));
  return dims.empty() ? t.clone() : out;
}

FLB_OP(fliplr, (const Tensor& t), (t), Tensor) {
  FLB_CHECK(t.dim() >= 2, ValueError, "[fliplr] Input must be >= 2-d, got shape ", shape_str(t.sizes()));
  return flip(t, {1});
}

FLB_OP(flipud, (const Tensor& t), (t), Tensor) {
  FLB_CHECK(t.dim() >= 1, ValueError, "[flipud] Input must be >= 1-d, got shape ", shape_str(t.sizes()));
  return flip(t, {0});
}

FLB_OP(roll, (const Tensor& t, const Dims& shifts, const Dims& dims), (t, shifts, dims), Tensor) {
  FLB_CHECK(!shifts.empty(), ValueError, "[roll] `shifts` required");
  if (dims.empty()) {
    FLB_CHECK(shifts.size() == 1, ValueError, "[roll] shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims: 0");
    return roll(t.flatten(), shifts, {0}).reshape(t.sizes());
  }
  FLB_CHECK(shifts.size() == dims.size(), ValueError, "[roll] shifts and dimensions must align. shifts: ",
            shifts.size(), ", dims: ", dims.size());
  Tensor out = t;
  bool moved = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], t.dim(), "roll"), n = t.size(d);
    const int64_t s = n == 0 ? 0 : ((shifts[i] % n) + n) % n;
    if (s != 0) out = cat({out.narrow(d, n - s, s), out.narrow(d, 0, n - s)}, d), moved = true;
  }
  return moved ? out : t.clone();
}

FLB_OP(rot90, (const Tensor& t, int64_t k, const Dims& dims), (t, k, dims), Tensor) {
  FLB_CHECK(dims.size() == 2, ValueError, "[rot90] expected total rotation dims == 2, but got dims = ", dims.size());
  FLB_CHECK(t.dim() >= 2, ValueError, "[rot90] expected total dims >= 2, but got shape ", shape_str(t.sizes()));
  const Dims d = unique_dims(dims, t.dim(), "rot90");
  switch (((k % 4) + 4) % 4) {
    case 1: return flip(t, {d[1]}).transpose(d[0], d[1]);
    case 2: return flip(t, d);
    case 3: return flip(t, {d[0]}).transpose(d[0], d[1]);
    default: return t.clone();
  }
}

FLB_OP(tril, (const Tensor& t, int64_t diagonal), (t, diagonal), Tensor) { return triangle(t, diagonal, true, "tril"); }
FLB_OP(triu, (const Tensor& t, int64_t diagonal), (t, diagonal), Tensor) { return triangle(t, diagonal, false, "triu"); }

FLB_OP(tril_indices, (int64_t row, int64_t col, int64_t offset, DType dtype), (row, col, offset, dtype), Tensor) {
  return triangle_indices(row, col, offset, true, dtype, "tril_indices");
}
FLB_OP(triu_indices, (int64_t row, int64_t col, int64_t offset, DType dtype), (row, col, offset, dtype), Tensor) {
  return triangle_indices(row, col, offset, false, dtype, "triu_indices");
}

FLB_OP(repeat, (const Tensor& t, const Dims& repeats), (t, repeats), Tensor) {
  FLB_CHECK(int64_t(repeats.size()) >= t.dim(), ValueError,
            "[repeat] Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor "
            "(repeats ", shape_str(repeats), ", shape ", shape_str(t.sizes()), ")");
  for (int64_t r : repeats)
    FLB_CHECK(r >= 0, ValueError, "[repeat] Trying to create tensor with negative dimension ", r, ": repeats ",
              shape_str(repeats));
  const Tensor x = with_leading_ones(t, int64_t(repeats.size()));
  // [1, s0, 1, s1, ...] expanded to [r0, s0, r1, s1, ...], then merged pairwise.
  Dims paired, expanded, out;
  for (size_t i = 0; i < repeats.size(); ++i) {
    paired.push_back(1), paired.push_back(x.size(int64_t(i)));
    expanded.push_back(repeats[i]), expanded.push_back(x.size(int64_t(i)));
    out.push_back(repeats[i] * x.size(int64_t(i)));
  }
  return x.reshape(paired).expand(expanded).contiguous().reshape(out);
}

FLB_OP(tile, (const Tensor& t, const Dims& dims), (t, dims), Tensor) {
  Dims reps(size_t(std::max<int64_t>(0, t.dim() - int64_t(dims.size()))), 1);
  for (int64_t r : dims) reps.push_back(r);
  return repeat(t, reps);
}

FLB_OP(repeat_interleave, (const Tensor& t, const Tensor& repeats, std::optional<int64_t> dim), (t, repeats, dim),
       Tensor) {
  FLB_CHECK(repeats.dim() <= 1 && !repeats.is_floating_point() && repeats.dtype() != kBool, ValueError,
            "[repeat_interleave] repeats must be an integer number or a 0-dim or 1-dim integer tensor, got ",
            dtype_name(repeats.dtype()), " of shape ", shape_str(repeats.sizes()));
  const Tensor x = dim ? t : t.flatten();
  const int64_t d = dim ? wrap_dim(*dim, t.dim(), "repeat_interleave") : 0;
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  const Tensor counts = repeats.to(kInt64).contiguous();
  FLB_CHECK(counts.numel() == 1 || counts.numel() == n, ValueError,
            "[repeat_interleave] repeats must have the same size as input along dim: repeats ",
            shape_str(repeats.sizes()), ", input ", shape_str(t.sizes()), ", dim ", d);
  std::vector<int64_t> index;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = counts.data<int64_t>()[counts.numel() == 1 ? 0 : i];
    FLB_CHECK(r >= 0, ValueError, "[repeat_interleave] repeats can not be negative, got ", r);
    index.insert(index.end(), size_t(r), i);
  }
  Tensor idx = empty({int64_t(index.size())}, kInt64);
  std::copy(index.begin(), index.end(), idx.data<int64_t>());
  return index_select(x.dim() == 0 ? x.reshape({1}) : x, d, idx);
}

FLB_OP(movedim, (const Tensor& t, const Dims& source, const Dims& destination), (t, source, destination), Tensor) {
  FLB_CHECK(source.size() == destination.size(), ValueError,
            "[movedim] Invalid source or destination dims: source ", shape_str(source), " and destination ",
            shape_str(destination), " dims must have same number of elements");
  const Dims src = unique_dims(source, t.dim(), "movedim"), dst = unique_dims(destination, t.dim(), "movedim");
  Dims order(size_t(t.dim()), -1);
  for (size_t i = 0; i < src.size(); ++i) order[size_t(dst[i])] = src[i];
  int64_t next = 0;  // the other dims keep their order in the free places
  for (auto& o : order) {
    if (o != -1) continue;
    while (std::find(src.begin(), src.end(), next) != src.end()) ++next;
    o = next++;
  }
  return t.permute(order);
}

FLB_OP(moveaxis, (const Tensor& t, const Dims& source, const Dims& destination), (t, source, destination), Tensor) {
  return movedim(t, source, destination);
}

FLB_OP(swapaxes, (const Tensor& t, int64_t axis0, int64_t axis1), (t, axis0, axis1), Tensor) {
  return t.transpose(axis0, axis1);
}

FLB_OP(swapdims, (const Tensor& t, int64_t dim0, int64_t dim1), (t, dim0, dim1), Tensor) {
  return t.transpose(dim0, dim1);
}

FLB_OP(unbind, (const Tensor& t, int64_t dim), (t, dim), std::vector<Tensor>) {
  FLB_CHECK(t.dim() > 0, ValueError, "[unbind] Dimension specified as ", dim, " but tensor has no dimensions");
  const int64_t d = wrap_dim(dim, t.dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < t.size(d); ++i) out.push_back(t.select(d, i));
  return out;
}

FLB_OP(narrow_copy, (const Tensor& t, int64_t dim, int64_t start, int64_t length), (t, dim, start, length), Tensor) {
  return t.narrow(dim, start, length).clone();
}

FLB_OP(diagonal, (const Tensor& t, int64_t offset, int64_t dim1, int64_t dim2), (t, offset, dim1, dim2), Tensor) {
  FLB_CHECK(t.dim() >= 2, ValueError, "[diagonal] input must have at least 2 dimensions, got shape ",
            shape_str(t.sizes()));
  const int64_t d1 = wrap_dim(dim1, t.dim(), "diagonal"), d2 = wrap_dim(dim2, t.dim(), "diagonal");
  FLB_CHECK(d1 != d2, ValueError, "[diagonal] dimensions cannot be identical ", dim1, ", ", dim2);
  const int64_t n = std::max<int64_t>(
      0, offset >= 0 ? std::min(t.size(d1), t.size(d2) - offset) : std::min(t.size(d1) + offset, t.size(d2)));
  const int64_t start = n == 0 ? 0 : offset >= 0 ? offset * t.stride(d2) : -offset * t.stride(d1);
  Dims sizes, strides;
  for (int64_t i = 0; i < t.dim(); ++i)
    if (i != d1 && i != d2) sizes.push_back(t.size(i)), strides.push_back(t.stride(i));
  sizes.push_back(n), strides.push_back(t.stride(d1) + t.stride(d2));
  return t.as_strided(sizes, strides, t.storage_offset() + start);
}

FLB_OP(diag_embed, (const Tensor& t, int64_t offset, int64_t dim1, int64_t dim2), (t, offset, dim1, dim2), Tensor) {
  FLB_CHECK(t.dim() >= 1, ValueError, "[diag_embed] input must have at least 1 dimension, got shape ",
            shape_str(t.sizes()));
  const int64_t out_dim = t.dim() + 1;
  const int64_t d1 = wrap_dim(dim1, out_dim, "diag_embed"), d2 = wrap_dim(dim2, out_dim, "diag_embed");
  FLB_CHECK(d1 != d2, ValueError, "[diag_embed] diagonal dimensions cannot be identical ", dim1, ", ", dim2);
  const int64_t n = t.size(-1), m = n + std::abs(offset);
  // Scatter the last dim into a flattened [m, m] at (i, i + offset) or (i - offset, i).
  const Tensor i = arange(Scalar(n), kInt64);
  const Tensor flat_index = offset >= 0 ? add(mul(i, Tensor(m)), add(i, Tensor(offset)))
                                        : add(mul(sub(i, Tensor(offset)), Tensor(m)), i);
  Dims flat_shape = t.sizes();
  flat_shape.back() = m * m;
  const Tensor flat = scatter(zeros(flat_shape, t.dtype()), -1, flat_index.expand(t.sizes()).contiguous(), t);
  // The two new dims sit last: (.., rows, cols); move them to d1 and d2 (d1 the rows).
  return movedim(flat.unflatten(-1, {m, m}), {out_dim - 2, out_dim - 1}, {d1, d2});
}

FLB_OP(diag, (const Tensor& t, int64_t diagonal_), (t, diagonal_), Tensor) {
  FLB_CHECK(t.dim() == 1 || t.dim() == 2, ValueError, "[diag] matrix or a vector expected, got shape ",
            shape_str(t.sizes()));
  return t.dim() == 1 ? diag_embed(t, diagonal_, 0, 1) : diagonal(t, diagonal_, 0, 1).clone();
}

FLB_OP(trace, (const Tensor& t), (t), Tensor) {
  FLB_CHECK(t.dim() == 2, ValueError, "[trace] expected a matrix, but got tensor with shape ", shape_str(t.sizes()));
  return sum(diagonal(t, 0, 0, 1));
}

FLB_OP(take_along_dim, (const Tensor& t, const Tensor& indices, std::optional<int64_t> dim), (t, indices, dim),
       Tensor) {
  if (!dim) return gather(t.flatten(), 0, indices.flatten());
  FLB_CHECK(t.dim() == indices.dim(), ValueError,
            "[take_along_dim] input and indices should have the same number of dimensions, but got shapes ",
            shape_str(t.sizes()), " and ", shape_str(indices.sizes()));
  const int64_t d = wrap_dim(*dim, t.dim(), "take_along_dim");
  // Broadcast every dim but d.
  Dims ts = t.sizes(), is = indices.sizes();
  ts[size_t(d)] = 1, is[size_t(d)] = 1;
  Dims common = broadcast_shapes(ts, is, "take_along_dim");
  Dims t_shape = common, i_shape = common;
  t_shape[size_t(d)] = t.size(d), i_shape[size_t(d)] = indices.size(d);
  return gather(t.expand(t_shape), d, indices.expand(i_shape));
}

FLB_OP(meshgrid, (const std::vector<Tensor>& tensors, const std::string& indexing), (tensors, indexing),
       std::vector<Tensor>) {
  FLB_CHECK(!tensors.empty(), ValueError, "[meshgrid] expects a non-empty TensorList");
  FLB_CHECK(indexing == "ij" || indexing == "xy", ValueError,
            "[meshgrid] indexing must be one of \"xy\" or \"ij\", but received: ", indexing);
  Dims shape;
  for (const Tensor& t : tensors) {
    FLB_CHECK(t.dim() <= 1, ValueError, "[meshgrid] Expected 0D or 1D tensor in the tensor list but got shape ",
              shape_str(t.sizes()));
    FLB_CHECK(t.dtype() == tensors[0].dtype(), TypeError, "[meshgrid] expects all tensors to have the same dtype");
    shape.push_back(t.numel());
  }
  const bool swap = indexing == "xy" && tensors.size() >= 2;  // the first two dims swapped
  if (swap) std::swap(shape[0], shape[1]);
  std::vector<Tensor> out;
  const int64_t k = int64_t(tensors.size());
  for (int64_t i = 0; i < k; ++i) {
    const int64_t at = swap && i < 2 ? 1 - i : i;
    Dims along(size_t(k), 1);
    along[size_t(at)] = tensors[size_t(i)].numel();
    out.push_back(tensors[size_t(i)].reshape(along).expand(shape));
  }
  return out;
}

FLB_OP(cartesian_prod, (const std::vector<Tensor>& tensors), (tensors), Tensor) {
  for (const Tensor& t : tensors)
    FLB_CHECK(t.dim() == 1, ValueError, "[cartesian_prod] Expect a 1D vector, but got shape ", shape_str(t.sizes()));
  if (tensors.size() == 1) return tensors[0].clone();
  std::vector<Tensor> columns;
  for (const Tensor& g : meshgrid(tensors, "ij")) columns.push_back(g.flatten());
  return stack(columns, 1);
}

FLB_OP(kron, (const Tensor& a, const Tensor& b), (a, b), Tensor) {
  const int64_t n = std::max(a.dim(), b.dim());
  const Tensor x = with_leading_ones(a, n), y = with_leading_ones(b, n);
  Dims xs, ys, out;
  for (int64_t i = 0; i < n; ++i) {
    xs.push_back(x.size(i)), xs.push_back(1);
    ys.push_back(1), ys.push_back(y.size(i));
    out.push_back(x.size(i) * y.size(i));
  }
  return mul(x.reshape(xs), y.reshape(ys)).reshape(out);
}

FLB_OP(block_diag, (const std::vector<Tensor>& tensors), (tensors), Tensor) {
  std::vector<Tensor> blocks;
  int64_t cols = 0;
  for (const Tensor& t : tensors) {
    FLB_CHECK(t.dim() <= 2, ValueError, "[block_diag] Input tensors must have 2 or fewer dimensions. Input ",
              blocks.size(), " has ", t.dim(), " dimensions (shape ", shape_str(t.sizes()), ")");
    blocks.push_back(t.dim() == 2 ? t : t.reshape({1, t.numel()}));
    cols += blocks.back().size(1);
  }
  if (blocks.empty()) return empty({1, 0});
  const DType dtype = result_type(tensors);
  std::vector<Tensor> rows;
  int64_t before = 0;
  for (const Tensor& b : blocks) {
    const int64_t r = b.size(0), c = b.size(1);
    rows.push_back(cat({zeros({r, before}, dtype), b.to(dtype), zeros({r, cols - before - c}, dtype)}, 1));
    before += c;
  }
  return cat(rows, 0);
}

FLB_OP(bucketize, (const Tensor& input, const Tensor& boundaries, bool out_int32, bool right),
       (input, boundaries, out_int32, right), Tensor) {
  FLB_CHECK(boundaries.dim() == 1, ValueError, "[bucketize] boundaries tensor must be 1 dimension, but got shape ",
            shape_str(boundaries.sizes()));
  const Tensor out = searchsorted(boundaries, input.dim() == 0 ? input.reshape({1}) : input, right);
  return (input.dim() == 0 ? out.reshape({}) : out).to(out_int32 ? kInt32 : kInt64);
}

}  // namespace flambeau
