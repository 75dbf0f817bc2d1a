// The derivative of each op defined with FLB_DIFF_OP (flambeau's derivatives.yaml): from
// the op's arguments and outputs, which backward node to record, under PyTorch's name,
// with which formula (record_* in derivatives_*.cpp). Ops run their bodies below
// autograd, so a derivative sees the arguments as the user passed them: dims are wrapped
// here, as the op wrapped them.
#include "flambeau/autograd/derivatives.h"
#include "flambeau/ops/ops.h"
#include "flambeau/ops/reduce.h"

namespace flambeau::autograd::derivative {
namespace {
// The dim of a per-dim op on t (0 for a 0-dim t).
int64_t dim_of(const Tensor& t, int64_t dim, const char* op) { return t.dim() ? wrap_dim(dim, t.dim(), op) : 0; }

// Values picked along a dim at `indices` (max/min/sort/topk/kthvalue/cummax); a 0-dim
// input passes its gradient through.
void pick(const char* node, const Tensor& t, int64_t dim, const char* op, std::pair<Tensor, Tensor>& out,
          bool keepdim) {
  if (t.dim() == 0) return record_identity(node, t, out.first);
  record_pick(node, t, wrap_dim(dim, t.dim(), op), out.second, keepdim, out.first);
}
}  // namespace

// ---- reductions -------------------------------------------------------------------------
void sum(Tensor& out, const Tensor& t, const Dims& dims, bool, std::optional<DType>) {
  record_sum(dims.empty() ? "SumBackward0" : "SumBackward1", t, dims, 1.0, out);
}
void prod(Tensor& out, const Tensor& t, const Dims& dims, bool, std::optional<DType>) { record_prod(t, dims, out); }
void mean(Tensor& out, const Tensor& t, const Dims& dims, bool, std::optional<DType>) {
  const double n = double(ops::reduced_count(t, dims));
  record_sum(dims.empty() ? "MeanBackward0" : "MeanBackward1", t, dims, 1.0 / n, out);
}
void amax(Tensor& out, const Tensor& t, const Dims& dims, bool) { record_extreme("AmaxBackward0", t, dims, out); }
void amin(Tensor& out, const Tensor& t, const Dims& dims, bool) { record_extreme("AminBackward0", t, dims, out); }
void max(Tensor& out, const Tensor& t) { record_extreme("MaxBackward1", t, {}, out); }
void min(Tensor& out, const Tensor& t) { record_extreme("MinBackward1", t, {}, out); }
void max(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim, bool keepdim) {
  record_pick("MaxBackward0", t, dim_of(t, dim, "max"), out.second, keepdim, out.first);
}
void min(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim, bool keepdim) {
  record_pick("MinBackward0", t, dim_of(t, dim, "min"), out.second, keepdim, out.first);
}
void var(Tensor& out, const Tensor& t, const Dims& dims, double correction, bool) {
  record_var(t, dims, std::max(0.0, double(ops::reduced_count(t, dims)) - correction), false, out);
}
void std(Tensor& out, const Tensor& t, const Dims& dims, double correction, bool) {
  record_var(t, dims, std::max(0.0, double(ops::reduced_count(t, dims)) - correction), true, out);
}
void norm(Tensor& out, const Tensor& t, double p, const Dims& dims, bool) { record_norm(t, p, dims, out); }
void logsumexp(Tensor& out, const Tensor& t, const Dims& dims, bool) { record_logsumexp(t, dims, out); }

// ---- scans, softmax, sorting --------------------------------------------------------------
void cumsum(Tensor& out, const Tensor& t, int64_t dim, std::optional<DType>) {
  record_cumsum(t, dim_of(t, dim, "cumsum"), out);
}
void cumprod(Tensor& out, const Tensor& t, int64_t dim, std::optional<DType>) {
  record_cumprod(t, dim_of(t, dim, "cumprod"), out);
}
void cummax(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim) {
  record_pick("CummaxBackward0", t, dim_of(t, dim, "cummax"), out.second, true, out.first);
}
void cummin(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim) {
  record_pick("CumminBackward0", t, dim_of(t, dim, "cummin"), out.second, true, out.first);
}
void logcumsumexp(Tensor& out, const Tensor& t, int64_t dim) {
  record_logcumsumexp(t, dim_of(t, dim, "logcumsumexp"), out);
}
void softmax(Tensor& out, const Tensor& t, int64_t dim, std::optional<DType>) {
  record_softmax(t, dim_of(t, dim, "softmax"), false, out);
}
void log_softmax(Tensor& out, const Tensor& t, int64_t dim, std::optional<DType>) {
  record_softmax(t, dim_of(t, dim, "log_softmax"), true, out);
}
void sort(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim, bool, bool stable) {
  pick(stable ? "SortBackward1" : "SortBackward0", t, dim, "sort", out, true);
}
void topk(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t, int64_t dim, bool, bool) {
  pick("TopkBackward0", t, dim, "topk", out, true);
}
void kthvalue(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t, int64_t dim, bool keepdim) {
  pick("KthvalueBackward0", t, dim, "kthvalue", out, keepdim);
}

// ---- matrix products, joins ----------------------------------------------------------------
void mm(Tensor& out, const Tensor& a, const Tensor& b) { record_mm("MmBackward0", a, b, out); }
void bmm(Tensor& out, const Tensor& a, const Tensor& b) { record_mm("BmmBackward0", a, b, out); }
void addmm(Tensor& out, const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
  record_addmm(self, a, b, beta, alpha, out);
}
void dot(Tensor& out, const Tensor& a, const Tensor& b) { record_dot(a, b, out); }
void cat(Tensor& out, const std::vector<Tensor>& tensors, int64_t dim) {
  // The dim is wrapped by the first part cat did not skip (1-D empty parts are skipped).
  for (const Tensor& t : tensors)
    if (!(t.dim() == 1 && t.numel() == 0)) return record_cat(tensors, wrap_dim(dim, t.dim(), "cat"), out);
}

// ---- elementwise with several inputs ---------------------------------------------------
void addcmul(Tensor& out, const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value) {
  record_addcmul(self, t1, t2, value, false, out);
}
void addcdiv(Tensor& out, const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value) {
  record_addcmul(self, t1, t2, value, true, out);
}
void lerp(Tensor& out, const Tensor& start, const Tensor& end, const Tensor& weight) {
  record_lerp(start, end, weight, out);
}
void clamp(Tensor& out, const Tensor& t, std::optional<Tensor> min, std::optional<Tensor> max) {
  record_clamp(t, min, max, out);
}
void where(Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) { record_where(cond, a, b, out); }
void softplus(Tensor& out, const Tensor& t, double beta, double threshold) {
  record_softplus(t, beta, threshold, out);
}

// ---- masks and indexing -------------------------------------------------------------------
void masked_fill(Tensor& out, const Tensor& self, const Tensor& mask, const Tensor& value) {
  record_masked_fill(self, mask, value, out);
}
void masked_select(Tensor& out, const Tensor& self, const Tensor& mask) { record_masked_select(self, mask, out); }
void masked_scatter(Tensor& out, const Tensor& self, const Tensor& mask, const Tensor& source) {
  record_masked_scatter(self, mask, source, out);
}
void gather(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  record_gather(self, wrap_dim(dim, std::max<int64_t>(self.dim(), 1), "gather"), index, out);
}
void scatter(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  record_scatter(self, dim, index, src, false, out);
}
void scatter_add(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
  record_scatter(self, dim, index, src, true, out);
}
void scatter_reduce(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                    const std::string& reduce, bool include_self) {
  record_scatter_reduce(self, dim, index, src, reduce, include_self, out);
}
void index_select(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index) {
  if (!needs_grad(self)) return;
  // The index as index_select used it: 1-D int64 (index_select refuses negative entries).
  const int64_t d = wrap_dim(dim, std::max<int64_t>(self.dim(), 1), "index_select");
  record_index_select(self, d, index.to(kInt64).reshape({-1}), out);
}
void index_add(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
               Scalar alpha) {
  record_index_add(self, dim, index, source, alpha, out);
}
void index_copy(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
  record_index_copy(self, dim, index, source, out);
}
void index_fill(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value) {
  record_index_fill(self, dim, index, value, out);
}
void take(Tensor& out, const Tensor& self, const Tensor& index) {
  if (!needs_grad(self)) return;
  const Tensor idx = index.to(kInt64);
  record_take(self, where(lt(idx, 0), add(idx, self.numel()), idx), out);
}
void embedding(Tensor& out, const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx) {
  record_embedding(weight, indices, padding_idx, out);
}
void index(Tensor& out, const Tensor& self, const IndexList& indices) { record_index(self, indices, out); }
void index_put(Tensor& out, const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate) {
  record_index_put(self, indices, values, accumulate, out);
}

// ---- sampling -------------------------------------------------------------------------------
void bernoulli(Tensor& out, const Tensor& p, std::optional<Generator>) {
  record_zero_grad("BernoulliBackward0", p, out);
}

// ---- views --------------------------------------------------------------------------------
namespace {
// The view's gradient is the incoming one reshaped back to t's shape.
void reshaped(const char* node, Tensor& out, const Tensor& t) {
  const Dims shape = t.sizes();
  record_view(node, t, out, [shape](const Tensor& g) { return g.reshape(shape); });
}
}  // namespace

void view(Tensor& out, const Tensor& t, const Dims&) { reshaped("ViewBackward0", out, t); }
void squeeze(Tensor& out, const Tensor& t) { reshaped("SqueezeBackward0", out, t); }
void squeeze(Tensor& out, const Tensor& t, int64_t) { reshaped("SqueezeBackward1", out, t); }
void unsqueeze(Tensor& out, const Tensor& t, int64_t) { reshaped("UnsqueezeBackward0", out, t); }
void permute(Tensor& out, const Tensor& t, const Dims& dims) {
  Dims inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) inverse[size_t(wrap_dim(dims[i], t.dim(), "permute"))] = int64_t(i);
  record_view("PermuteBackward0", t, out, [inverse](const Tensor& g) { return g.permute(inverse); });
}
void transpose(Tensor& out, const Tensor& t, int64_t dim0, int64_t dim1) {
  if (out.impl() == t.impl()) return;  // a 0-dim input, returned as is
  const int64_t a = wrap_dim(dim0, t.dim(), "transpose"), b = wrap_dim(dim1, t.dim(), "transpose");
  record_view("TransposeBackward0", t, out, [a, b](const Tensor& g) { return g.transpose(a, b); });
}
void t(Tensor& out, const Tensor& x) {
  if (out.impl() == x.impl()) return;  // fewer than 2 dims: returned as is
  record_view("TBackward0", x, out, [](const Tensor& g) { return g.transpose(0, 1); });
}
// The node sums the gradient over the expanded dims.
void expand(Tensor& out, const Tensor& t, const Dims&) {
  record_view("ExpandBackward0", t, out, [](const Tensor& g) { return g; });
}
void slice(Tensor& out, const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
           int64_t step) {
  const int64_t d = wrap_dim(dim, t.dim(), "slice");
  const auto [b, e] = slice_bounds(t.size(d), start, end);
  record_slice("SliceBackward0", t, out, [d, b, e, step](const Tensor& gi) { return gi.slice(d, b, e, step); });
}
void select(Tensor& out, const Tensor& t, int64_t dim, int64_t index) {
  const int64_t d = wrap_dim(dim, t.dim(), "select");
  const int64_t i = index < 0 ? index + t.size(d) : index;
  record_slice("SelectBackward0", t, out, [d, i](const Tensor& gi) { return gi.select(d, i); });
}
// Each gradient element is added at its storage position (positions the view reaches twice
// get both), on a zero canvas laid out like the input's storage.
void as_strided(Tensor& out, const Tensor& t, const Dims& size, const Dims& stride, std::optional<int64_t> offset) {
  const int64_t elems = int64_t(t.storage()->nbytes / t.element_size()), off = offset.value_or(t.storage_offset());
  record_view("AsStridedBackward0", t, out,
              [elems, size, stride, off, in_size = t.sizes(), in_stride = t.strides(),
               in_off = t.storage_offset()](const Tensor& g) {
                Tensor pos = full({}, off, kInt64);
                for (size_t i = 0; i < size.size(); ++i) {
                  Dims shape(size.size(), 1);
                  shape[i] = size[i];
                  pos = flambeau::add(pos, flambeau::mul(arange(size[i]), stride[i]).reshape(shape));
                }
                Tensor flat = zeros({elems}, g.dtype());
                index_add_(flat, 0, pos.expand(size).reshape({-1}), g.reshape({-1}));
                return flat.as_strided(in_size, in_stride, in_off);
              });
}

// ---- copies -------------------------------------------------------------------------------
void clone(Tensor& out, const Tensor& t) { record_identity("CloneBackward0", t, out); }
void to(Tensor& out, const Tensor& t, DType) {
  if (out.impl() != t.impl()) record_identity("ToCopyBackward0", t, out);  // same dtype: t itself
}

}  // namespace flambeau::autograd::derivative
