// The public op functions of flambeau (namespace flambeau), as in torch.*.
#pragma once
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flambeau/core/generator.h"
#include "flambeau/core/tensor.h"

namespace flambeau {

// ---- factories --------------------------------------------------------------------
Tensor empty(const Dims& shape, DType dtype = kFloat32, Device device = kCPU);
Tensor zeros(const Dims& shape, DType dtype = kFloat32, Device device = kCPU);
Tensor ones(const Dims& shape, DType dtype = kFloat32, Device device = kCPU);
// dtype defaults to the scalar's own: bool, int64 or float32.
Tensor full(const Dims& shape, Scalar value, std::optional<DType> dtype = {}, Device device = kCPU);
// arange: int64 when start, end and step are all integers, else float32.
Tensor arange(Scalar end, std::optional<DType> dtype = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = {});
Tensor linspace(double start, double end, int64_t steps, DType dtype = kFloat32);
Tensor eye(int64_t n, int64_t m = -1, DType dtype = kFloat32);
// y, a result computed row-major from x, laid out as x when x is channels-last (torch's
// pooling, normalisation and resampling ops keep that layout); else y itself.
Tensor in_layout_of(const Tensor& y, const Tensor& x);
// A dense tensor laid out in `format` (not Preserve).
Tensor empty(const Dims& shape, DType dtype, MemoryFormat format);
// t's shape, row-major by default; Preserve (torch's default, Python's here) keeps t's
// strides where t is dense and non-overlapping, else takes suggest_memory_format(t).
Tensor empty_like(const Tensor& t, std::optional<DType> dtype = {}, MemoryFormat format = MemoryFormat::Contiguous);
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = {}, MemoryFormat format = MemoryFormat::Contiguous);
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = {}, MemoryFormat format = MemoryFormat::Contiguous);
Tensor full_like(const Tensor& t, Scalar value, std::optional<DType> dtype = {},
                 MemoryFormat format = MemoryFormat::Contiguous);
// A 0-dim tensor; dtype defaults as in full().
Tensor scalar_tensor(Scalar value, std::optional<DType> dtype = {});
// Copies `values` (row-major) into a new tensor of `shape` (default: 1-D).
template <class T>
Tensor from_vector(const std::vector<T>& values, std::optional<Dims> shape = {});

// ---- joining and splitting ----------------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);

// ---- type promotion -----------------------------------------------------------------
// torch.result_type over tensors (wrapped numbers count as Python scalars).
DType result_type(const std::vector<Tensor>& tensors);
DType result_type(const Tensor& a, const Tensor& b);

// ---- elementwise ----------------------------------------------------------------------
#define FLB_DECL_UNARY(name, kind, ...) \
  Tensor name(const Tensor& t);    \
  Tensor& name##_(Tensor& t);
FLB_UNARY_OPS(FLB_DECL_UNARY)
#undef FLB_DECL_UNARY
// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& t, const std::string& approximate = "none");
Tensor softplus(const Tensor& t, double beta = 1.0, double threshold = 20.0);

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
// rounding_mode: "" (true division), "floor" or "trunc".
Tensor div(const Tensor& a, const Tensor& b, const std::string& rounding_mode = "");
Tensor& add_(Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor& sub_(Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& div_(Tensor& a, const Tensor& b, const std::string& rounding_mode = "");
#define FLB_DECL_BINARY(name) Tensor name(const Tensor& a, const Tensor& b);
#define FLB_DECL_BINARY_(name) Tensor& name##_(Tensor& a, const Tensor& b);
FLB_BINARY_OPS(FLB_DECL_BINARY)
FLB_BINARY_INPLACE_OPS(FLB_DECL_BINARY_)
#undef FLB_DECL_BINARY_
FLB_COMPARE_OPS(FLB_DECL_BINARY)
FLB_LOGICAL_OPS(FLB_DECL_BINARY)
#undef FLB_DECL_BINARY
Tensor logical_not(const Tensor& t);
Tensor isnan(const Tensor& t);
Tensor isinf(const Tensor& t);
Tensor isfinite(const Tensor& t);

Tensor addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value = 1);
Tensor addcdiv(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value = 1);
Tensor lerp(const Tensor& start, const Tensor& end, const Tensor& weight);
// Bounds may be tensors or numbers; NaN propagates; min > max gives max (as torch).
Tensor clamp(const Tensor& t, std::optional<Tensor> min, std::optional<Tensor> max = {});
Tensor& clamp_(Tensor& t, std::optional<Tensor> min, std::optional<Tensor> max = {});
Tensor& addcmul_(Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value = 1);
Tensor& addcdiv_(Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value = 1);
Tensor& lerp_(Tensor& start, const Tensor& end, const Tensor& weight);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- reductions (dims empty: reduce every dim) ----------------------------------------
// sum/prod of integers and bool give int64; dtype overrides the accumulation/result type.
Tensor sum(const Tensor& t, const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor mean(const Tensor& t, const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor prod(const Tensor& t, const Dims& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor amax(const Tensor& t, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& t, const Dims& dims = {}, bool keepdim = false);
// (values, indices) along one dim; NaN wins, ties give the first index.
std::pair<Tensor, Tensor> max(const Tensor& t, int64_t dim, bool keepdim = false);
std::pair<Tensor, Tensor> min(const Tensor& t, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& t);
Tensor min(const Tensor& t);
Tensor argmax(const Tensor& t, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& t, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor var(const Tensor& t, const Dims& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& t, const Dims& dims = {}, double correction = 1, bool keepdim = false);
// p: 1, 2 or INFINITY.
Tensor norm(const Tensor& t, double p = 2, const Dims& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& t, const Dims& dims, bool keepdim = false);
Tensor any(const Tensor& t, const Dims& dims = {}, bool keepdim = false);
Tensor all(const Tensor& t, const Dims& dims = {}, bool keepdim = false);
Tensor count_nonzero(const Tensor& t, const Dims& dims = {});
Tensor softmax(const Tensor& t, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& t, int64_t dim, std::optional<DType> dtype = {});

// ---- matrix products --------------------------------------------------------------------
// Operands share one dtype. float32/float64 run on OpenBLAS; 16-bit floats accumulate in
// float32; integers in int64.
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.matmul: 1-D operands, batch broadcasting.
Tensor matmul(const Tensor& a, const Tensor& b);
// beta * self + alpha * (a @ b); beta == 0 ignores self.
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta = 1, Scalar alpha = 1);
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta = 1, Scalar alpha = 1);
// x @ weight.T + bias, weight of shape [out_features, in_features].
Tensor linear(const Tensor& x, const Tensor& weight, std::optional<Tensor> bias = {});
Tensor outer(const Tensor& a, const Tensor& b);
Tensor dot(const Tensor& a, const Tensor& b);
// Where bfloat16 products run: "oneDNN (AVX512-BF16)" or the float32 fallback.
const char* bf16_matmul_backend();

// ---- scans along one dim --------------------------------------------------------------
// Integer and bool inputs accumulate in int64 (as torch.cumsum); dtype overrides.
Tensor cumsum(const Tensor& t, int64_t dim, std::optional<DType> dtype = {});
Tensor cumprod(const Tensor& t, int64_t dim, std::optional<DType> dtype = {});
// (values, indices); NaN propagates; ties and repeated NaNs give the latest index.
std::pair<Tensor, Tensor> cummax(const Tensor& t, int64_t dim);
std::pair<Tensor, Tensor> cummin(const Tensor& t, int64_t dim);
Tensor logcumsumexp(const Tensor& t, int64_t dim);

// ---- sorting along one dim ---------------------------------------------------------------
// (values, indices). Always stable (`stable` is accepted for PyTorch's signature); NaN is
// larger than every number.
std::pair<Tensor, Tensor> sort(const Tensor& t, int64_t dim = -1, bool descending = false, bool stable = false);
Tensor argsort(const Tensor& t, int64_t dim = -1, bool descending = false, bool stable = false);
// The k largest (or smallest) along dim, sorted.
std::pair<Tensor, Tensor> topk(const Tensor& t, int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true);
// The k-th smallest (1-based) along dim.
std::pair<Tensor, Tensor> kthvalue(const Tensor& t, int64_t k, int64_t dim = -1, bool keepdim = false);
// Sorted distinct values of all elements (dim: distinct slices along dim, in lexicographic
// order); inverse (shaped like t, or [t.size(dim)]) and counts when asked (undefined tensors
// otherwise). Compared exactly in t's dtype; NaNs are not merged, as in PyTorch.
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& t, bool sorted = true, bool return_inverse = false,
                                          bool return_counts = false, std::optional<int64_t> dim = {});
// unique over runs of equal consecutive elements (dim: of equal consecutive slices along dim).
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& t, bool return_inverse = false,
                                                      bool return_counts = false, std::optional<int64_t> dim = {});
// Insertion points of values in sorted_sequence (1-D, or N-D sharing values' leading dims).
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool right = false);

// ---- shape ops (ops/shape.cpp; differentiable through the ops they are made of) -------
Tensor flip(const Tensor& t, const Dims& dims);
Tensor fliplr(const Tensor& t);  // flip dim 1
Tensor flipud(const Tensor& t);  // flip dim 0
// dims empty: roll the flattened tensor (one shift).
Tensor roll(const Tensor& t, const Dims& shifts, const Dims& dims = {});
Tensor rot90(const Tensor& t, int64_t k = 1, const Dims& dims = {0, 1});
// Zero outside the triangle of the last two dims: column - row <= diagonal (tril), >= (triu).
Tensor tril(const Tensor& t, int64_t diagonal = 0);
Tensor triu(const Tensor& t, int64_t diagonal = 0);
// [2, n]: the rows and columns of the triangle's elements, row-major.
Tensor tril_indices(int64_t row, int64_t col, int64_t offset = 0, DType dtype = kInt64);
Tensor triu_indices(int64_t row, int64_t col, int64_t offset = 0, DType dtype = kInt64);
Tensor repeat(const Tensor& t, const Dims& repeats);  // Tensor.repeat: repeats.size() >= dim
Tensor tile(const Tensor& t, const Dims& dims);        // dims padded with leading 1s
// repeats: one count (0- or 1-element) or one per element along dim; no dim: flattened.
Tensor repeat_interleave(const Tensor& t, const Tensor& repeats, std::optional<int64_t> dim = {});
Tensor movedim(const Tensor& t, const Dims& source, const Dims& destination);
Tensor moveaxis(const Tensor& t, const Dims& source, const Dims& destination);
Tensor swapaxes(const Tensor& t, int64_t axis0, int64_t axis1);
Tensor swapdims(const Tensor& t, int64_t dim0, int64_t dim1);
std::vector<Tensor> unbind(const Tensor& t, int64_t dim = 0);  // views
Tensor narrow_copy(const Tensor& t, int64_t dim, int64_t start, int64_t length);
// A view: dims dim1 and dim2 removed, their diagonal (shifted by offset) appended last.
Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
// The last dim of t on the diagonals of new dims dim1, dim2 (size n + |offset|), zeros elsewhere.
Tensor diag_embed(const Tensor& t, int64_t offset = 0, int64_t dim1 = -2, int64_t dim2 = -1);
Tensor diag(const Tensor& t, int64_t diagonal = 0);  // vector -> matrix, matrix -> its diagonal (a copy)
Tensor trace(const Tensor& t);
// dim: gather along dim after broadcasting the other dims; none: on the flattened tensors.
Tensor take_along_dim(const Tensor& t, const Tensor& indices, std::optional<int64_t> dim = {});
// indexing "ij" (matrix) or "xy" (Cartesian: first two dims swapped); expanded views.
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "ij");
Tensor cartesian_prod(const std::vector<Tensor>& tensors);
Tensor kron(const Tensor& a, const Tensor& b);
Tensor block_diag(const std::vector<Tensor>& tensors);
// The bucket of each input value among sorted 1-D boundaries (searchsorted(boundaries, input)).
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32 = false, bool right = false);

// ---- einsum and tensordot (ops/einsum.cpp) ---------------------------------------------
// torch's equations: "ij,jk->ik", implicit outputs, "...", repeated labels (diagonals),
// broadcasting. Contracted pairwise on bmm, cheapest pair first, or in the order of path
// (opt_einsum's: pairs of positions in the list of operands left, the result appended).
Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors, const std::optional<Dims>& path = {});
// Sums a's dims_a against b's dims_b; the result's dims: a's others, then b's others.
Tensor tensordot(const Tensor& a, const Tensor& b, const Dims& dims_a, const Dims& dims_b);
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims = 2);  // a's last `dims` with b's first

// ---- math (ops/math.cpp; distances in nn/distance.cpp) --------------------------------
Tensor isposinf(const Tensor& t);
Tensor isneginf(const Tensor& t);
// NaN -> nan (0), +inf -> posinf, -inf -> neginf (default: the dtype's largest finite values).
Tensor nan_to_num(const Tensor& t, std::optional<double> nan = {}, std::optional<double> posinf = {},
                  std::optional<double> neginf = {});
Tensor logaddexp(const Tensor& a, const Tensor& b);   // log(exp(a) + exp(b))
Tensor logaddexp2(const Tensor& a, const Tensor& b);  // log2(2^a + 2^b)
// Occurrences of each value of a 1-D non-negative integer tensor (or their summed weights).
Tensor bincount(const Tensor& t, const std::optional<Tensor>& weights = {}, int64_t minlength = 0);
// bins equal-width bins over [min, max] (min == max: the data's range); values outside ignored.
Tensor histc(const Tensor& t, int64_t bins = 100, Scalar min = 0, Scalar max = 0);
// Cosine of the angle between x1 and x2 along dim (each norm clamped to eps); broadcasts.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
// ||x1 - x2 + eps||_p over the last dim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6, bool keepdim = false);
// [..., P, M] x [..., R, M] -> [..., P, R]: the p-norm distance of every pair of rows.
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2.0);
// aten's convolution, which nn.functional's conv*d and conv_transpose*d call: input
// [N, C, *spatial] with 1-3 spatial dims (nn/functional.h says the rest).
Tensor convolution(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias, const Dims& stride,
                   const Dims& padding, const Dims& dilation, bool transposed, const Dims& output_padding,
                   int64_t groups);

// ---- indexing ---------------------------------------------------------------------------
// Every index is checked before anything is written: "[gather] index 7 is out of bounds
// for dimension 1 with size 5". Index tensors are int64 (index_select, index_add/copy/fill,
// embedding and advanced indexing also take int32). Where an op takes `src` or `value`, a
// number may be passed (scalar source). In-place forms end in `_` and return self.
Tensor index_select(const Tensor& self, int64_t dim, const Tensor& index);
// out[i][j][k] = self[i][index[i][j][k]][k] for dim == 1 (and likewise for other dims).
Tensor gather(const Tensor& self, int64_t dim, const Tensor& index);
// self[i][index[i][j][k]][k] = src[i][j][k] for dim == 1. Along dim, updates apply in
// index order (the last of repeated indices wins; sums are ordered: deterministic).
Tensor scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// reduce: "sum", "prod", "mean", "amax" or "amin"; include_self=false leaves self's old
// values out of the reduction wherever src lands.
Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self = true);
Tensor& scatter_reduce_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        const std::string& reduce, bool include_self = true);
// self.select(dim, index[i]) += alpha * source.select(dim, i), in order of i.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1);
Tensor& index_add_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1);
Tensor index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
Tensor& index_copy_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
// value: a number or 0-dim tensor; negative indices count from the end.
Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value);
Tensor& index_fill_(Tensor& self, int64_t dim, const Tensor& index, const Tensor& value);
// mask: bool, broadcasting to self (in-place) or with self (out-of-place).
Tensor masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, const Tensor& value);
// The elements where mask is true, in row-major order, as a 1-D tensor.
Tensor masked_select(const Tensor& self, const Tensor& mask);
// Copies source's leading elements, in order, to where mask is true.
Tensor masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source);
Tensor& masked_scatter_(Tensor& self, const Tensor& mask, const Tensor& source);
// Indices [n, ndim] of the nonzero elements, in row-major order.
Tensor nonzero(const Tensor& t);
// Elements of self as if flattened (row-major); negative indices count from the end.
Tensor take(const Tensor& self, const Tensor& index);
// int64 [..., num_classes]; num_classes -1: max(t) + 1.
Tensor one_hot(const Tensor& t, int64_t num_classes = -1);
// weight[indices]: shape indices.shape + [embedding_dim]. padding_idx only matters for the
// backward.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = {});
// The dense gradient [num_weights, D] of embedding: row r sums, in token order, the rows of
// grad_output whose index is r (reduced floats accumulate in float32); the padding_idx row
// stays zero; scale_grad_by_freq divides each row by its token count.
Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                std::optional<int64_t> padding_idx = {}, bool scale_grad_by_freq = false);
// Advanced indexing, as self[i0, i1, ...] in PyTorch: one entry per leading dim (nullopt
// for a full slice ':'), each an integer tensor (negative counts from the end) or a bool
// mask covering as many dims as it has. The index tensors broadcast together; their shape
// replaces the indexed dims when those are adjacent, else it comes first.
using IndexList = std::vector<std::optional<Tensor>>;
Tensor index(const Tensor& self, const IndexList& indices);
// self[indices] = values (values broadcast to the indexing result; += when accumulate,
// summing repeated indices deterministically).
Tensor& index_put_(Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate = false);
Tensor index_put(const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate = false);

// ---- random sampling (gen: the default generator when not given) ----------------------
Tensor& uniform_(Tensor& t, double from = 0, double to = 1, std::optional<Generator> gen = {});
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, std::optional<Generator> gen = {});
Tensor& exponential_(Tensor& t, double lambd = 1, std::optional<Generator> gen = {});
Tensor& bernoulli_(Tensor& t, double p = 0.5, std::optional<Generator> gen = {});
// One draw per element with that element's probability; same shape and dtype as p.
Tensor bernoulli(const Tensor& p, std::optional<Generator> gen = {});
Tensor rand(const Dims& shape, DType dtype = kFloat32, std::optional<Generator> gen = {});
Tensor randn(const Dims& shape, DType dtype = kFloat32, std::optional<Generator> gen = {});
// Uniform integers in [low, high).
Tensor randint(int64_t low, int64_t high, const Dims& shape, DType dtype = kInt64, std::optional<Generator> gen = {});
Tensor randint(int64_t high, const Dims& shape, DType dtype = kInt64, std::optional<Generator> gen = {});
Tensor randperm(int64_t n, DType dtype = kInt64, std::optional<Generator> gen = {});
// Indices drawn from each row of probs (1-D or 2-D, non-negative, any positive sum).
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false,
                   std::optional<Generator> gen = {});

// ---- operators --------------------------------------------------------------------------
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator%(const Tensor& a, const Tensor& b) { return remainder(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
inline Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
inline Tensor operator!(const Tensor& a) { return logical_not(a); }
inline Tensor& operator+=(Tensor& a, const Tensor& b) { return add_(a, b); }
inline Tensor& operator-=(Tensor& a, const Tensor& b) { return sub_(a, b); }
inline Tensor& operator*=(Tensor& a, const Tensor& b) { return mul_(a, b); }
inline Tensor& operator/=(Tensor& a, const Tensor& b) { return div_(a, b); }

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace flambeau
