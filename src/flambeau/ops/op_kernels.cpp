// The boxed kernels of the schema table: each op's C++ function (ops.h) in the schema's
// argument order, or an adaptor below where the C++ API differs (members, merged overloads,
// Python-only arguments). A kernel whose parameters do not carry its schema's arguments
// (count and kinds, schema_text::matches) fails to build.
// The one file of ops/ that sees nn/: the table covers nn.functional's ops too.
#include "flambeau/nn/attention.h"
#include "flambeau/nn/functional.h"
#include "flambeau/nn/linear_cross_entropy.h"
#include "flambeau/ops/linalg.h"
#include "flambeau/ops/op_schemas.h"
#include "flambeau/ops/ops.h"
#include "flambeau/ops/registry.h"

namespace flambeau {
namespace adapt {

Tensor div(const Tensor& a, const Tensor& b, std::optional<std::string> rounding_mode) {
  return flambeau::div(a, b, rounding_mode.value_or(""));
}
// max(input) or max(input, dim, keepdim) -> (values, indices).
std::vector<Value> max(const Tensor& t, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return {flambeau::max(t)};
  auto [values, indices] = flambeau::max(t, *dim, keepdim);
  return {values, indices};
}
std::vector<Value> min(const Tensor& t, std::optional<int64_t> dim, bool keepdim) {
  if (!dim) return {flambeau::min(t)};
  auto [values, indices] = flambeau::min(t, *dim, keepdim);
  return {values, indices};
}
// correction wins over unbiased; both absent: 1 (Bessel's correction), as torch.
double correction_of(std::optional<bool> unbiased, std::optional<double> correction) {
  return correction ? *correction : unbiased.value_or(true) ? 1.0 : 0.0;
}
Tensor var(const Tensor& t, const Dims& dim, std::optional<bool> unbiased, bool keepdim,
           std::optional<double> correction) {
  return flambeau::var(t, dim, correction_of(unbiased, correction), keepdim);
}
Tensor std(const Tensor& t, const Dims& dim, std::optional<bool> unbiased, bool keepdim,
           std::optional<double> correction) {
  return flambeau::std(t, dim, correction_of(unbiased, correction), keepdim);
}
// split_size_or_sections: an int (chunks of that size) or a list (the sizes).
std::vector<Tensor> split(const Tensor& t, const Value& size, int64_t dim) {
  if (auto* n = std::get_if<int64_t>(&size)) return flambeau::split(t, *n, dim);
  const Dims d = detail::Unbox<Dims>::get(size);
  return flambeau::split(t, std::vector<int64_t>(d.begin(), d.end()), dim);
}
Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors, std::optional<Dims> path) {
  return flambeau::einsum(equation, tensors, path);
}
// dims: an int (a's last dims against b's first), or a's dims then b's, as one list of even length.
Tensor tensordot(const Tensor& a, const Tensor& b, const Value& dims) {
  if (auto* n = std::get_if<int64_t>(&dims)) return flambeau::tensordot(a, b, *n);
  const Dims d = detail::Unbox<Dims>::get(dims);
  FLB_CHECK(d.size() % 2 == 0, ValueError, "[tensordot] dims as one list must hold a's dims then b's, got ",
            shape_str(d));
  const size_t h = d.size() / 2;
  return flambeau::tensordot(a, b, Dims(d.data(), h), Dims(d.data() + h, h));
}
std::vector<Value> linalg_slogdet(const Tensor& A) {
  auto [sign, logabs] = linalg::slogdet(A);
  return {sign, logabs};
}
std::vector<Value> linalg_qr(const Tensor& A, const std::string& mode) {
  auto [q, r] = linalg::qr(A, mode);
  return {q, r};
}
std::vector<Value> linalg_svd(const Tensor& A, bool full_matrices, std::optional<std::string>) {  // driver: CUDA's
  auto [u, s, vh] = linalg::svd(A, full_matrices);
  return {u, s, vh};
}
Tensor linalg_svdvals(const Tensor& A, std::optional<std::string>) { return linalg::svdvals(A); }
std::vector<Value> linalg_eigh(const Tensor& A, const std::string& uplo) {
  auto [l, v] = linalg::eigh(A, uplo);
  return {l, v};
}
std::vector<Value> linalg_lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond,
                                std::optional<std::string> driver) {
  auto [x, res, rank, sv] = linalg::lstsq(A, B, rcond, driver);
  return {x, res, rank, sv};
}
Tensor linalg_vector_norm(const Tensor& x, double ord, std::optional<Dims> dim, bool keepdim, std::optional<DType> dtype) {
  return linalg::vector_norm(x, ord, dim, keepdim, dtype);
}
// ord: "fro", "nuc" or a number.
Tensor linalg_matrix_norm(const Tensor& A, const Value& ord, const Dims& dim, bool keepdim, std::optional<DType> dtype) {
  if (auto* s = std::get_if<std::string>(&ord)) return linalg::matrix_norm(A, *s, dim, keepdim, dtype);
  return linalg::matrix_norm(A, detail::Unbox<double>::get(ord), dim, keepdim, dtype);
}
// ord: none, a number, "fro" or "nuc".
Tensor linalg_norm(const Tensor& A, const Value& ord, std::optional<Dims> dim, bool keepdim, std::optional<DType> dtype) {
  if (auto* s = std::get_if<std::string>(&ord)) return linalg::norm(A, *s, dim, keepdim, dtype);
  if (std::holds_alternative<std::monostate>(ord)) return linalg::norm(A, std::nullopt, dim, keepdim, dtype);
  return linalg::norm(A, detail::Unbox<double>::get(ord), dim, keepdim, dtype);
}
Tensor reshape(const Tensor& t, const Dims& shape) { return t.reshape(shape); }
Tensor permute(const Tensor& t, const Dims& dims) { return t.permute(dims); }
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) { return t.transpose(dim0, dim1); }
Tensor t(const Tensor& x) { return x.t(); }
Tensor unsqueeze(const Tensor& t, int64_t dim) { return t.unsqueeze(dim); }
Tensor squeeze(const Tensor& t, std::optional<int64_t> dim) { return dim ? t.squeeze(*dim) : t.squeeze(); }
Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) { return t.flatten(start_dim, end_dim); }
Tensor unflatten(const Tensor& t, int64_t dim, const Dims& sizes) { return t.unflatten(dim, sizes); }
Tensor select(const Tensor& t, int64_t dim, int64_t index) { return t.select(dim, index); }
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) { return t.narrow(dim, start, length); }
Tensor as_strided(const Tensor& t, const Dims& size, const Dims& stride, std::optional<int64_t> storage_offset) {
  return t.as_strided(size, stride, storage_offset);
}
Tensor expand_as(const Tensor& t, const Tensor& other) { return t.expand(other.sizes()); }
Tensor view_as(const Tensor& t, const Tensor& other) { return t.view(other.sizes()); }
Tensor contiguous(const Tensor& t, MemoryFormat format) { return t.contiguous(format); }
// None: torch's default, preserve_format.
Tensor clone(const Tensor& t, std::optional<MemoryFormat> format) {
  return t.clone(format.value_or(MemoryFormat::Preserve));
}
Tensor copy_(Tensor& t, const Tensor& src) { return t.copy_(src); }
Tensor fill_(Tensor& t, Scalar value) { return t.fill_(value); }
Tensor zero_(Tensor& t) { return t.zero_(); }
// torch's argument order (indices first).
Tensor embedding(const Tensor& input, const Tensor& weight, std::optional<int64_t> padding_idx) {
  return flambeau::embedding(weight, input, padding_idx);
}

// conv*d with numeric padding (the C++ API also takes padding "valid" / "same").
#define FLB_CONV_KERNEL(N)                                                                                  \
  Tensor conv##N##d(const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, const Dims& stride, \
                    const Dims& padding, const Dims& dilation, int64_t groups) {                          \
    return nn::functional::conv##N##d(x, w, b, stride, padding, dilation, groups);                        \
  }
FLB_CONV_KERNEL(1)
FLB_CONV_KERNEL(2)
FLB_CONV_KERNEL(3)
#undef FLB_CONV_KERNEL

// interpolate: scale_factor a number (every spatial dim), a list or None.
Tensor interpolate(const Tensor& x, const std::optional<Dims>& size, const Value& scale,
                          const std::string& mode, std::optional<bool> align_corners,
                          std::optional<bool> recompute_scale_factor, bool antialias) {
  std::optional<std::vector<double>> s;
  const size_t n = size_t(std::max<int64_t>(x.dim() - 2, 0));
  if (auto* d = std::get_if<double>(&scale)) s = std::vector<double>(n, *d);
  else if (auto* i = std::get_if<int64_t>(&scale)) s = std::vector<double>(n, double(*i));
  else if (auto* l = std::get_if<Dims>(&scale)) s = std::vector<double>(l->begin(), l->end());
  return nn::functional::interpolate(x, size, s, mode, align_corners, recompute_scale_factor, antialias);
}

// max_pool*d / adaptive_max_pool*d: return_indices gives (values, indices), else values.
#define FLB_POOL_KERNELS(N)                                                                                   \
  std::vector<Value> max_pool##N##d(const Tensor& x, const Dims& kernel, const Dims& stride, const Dims& pad, \
                                    const Dims& dilation, bool ceil_mode, bool return_indices) {             \
    namespace F = nn::functional;                                                                            \
    if (!return_indices) return {F::max_pool##N##d(x, kernel, stride, pad, dilation, ceil_mode)};           \
    auto [v, i] = F::max_pool##N##d_with_indices(x, kernel, stride, pad, dilation, ceil_mode);               \
    return {v, i};                                                                                           \
  }                                                                                                          \
  std::vector<Value> adaptive_max_pool##N##d(const Tensor& x, const Dims& output_size, bool return_indices) { \
    namespace F = nn::functional;                                                                            \
    if (!return_indices) return {F::adaptive_max_pool##N##d(x, output_size)};                               \
    auto [v, i] = F::adaptive_max_pool##N##d_with_indices(x, output_size);                                   \
    return {v, i};                                                                                           \
  }
FLB_POOL_KERNELS(1)
FLB_POOL_KERNELS(2)
FLB_POOL_KERNELS(3)
#undef FLB_POOL_KERNELS

// Ops the op hook reports that are not in the schema table (methods Python binds by hand:
// the *sizes forms, the in-place forms; the fused attention and norm kernels' two halves): boxed too,
// so that recorded programs replay them.
Tensor view(const Tensor& t, const Dims& size) { return t.view(size); }
Tensor expand(const Tensor& t, const Dims& size) { return t.expand(size); }
Tensor broadcast_to(const Tensor& t, const Dims& size) { return t.broadcast_to(size); }
Tensor to(const Tensor& t, DType dtype) { return t.to(dtype); }
Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step) {
  return t.slice(dim, start, end, step);
}
Tensor add_(Tensor& t, const Tensor& other, Scalar alpha) { return flambeau::add_(t, other, alpha); }
Tensor sub_(Tensor& t, const Tensor& other, Scalar alpha) { return flambeau::sub_(t, other, alpha); }
Tensor mul_(Tensor& t, const Tensor& other) { return flambeau::mul_(t, other); }
Tensor div_(Tensor& t, const Tensor& other, std::optional<std::string> rounding_mode) {
  return flambeau::div_(t, other, rounding_mode.value_or(""));
}
Tensor index_add_(Tensor& t, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha) {
  return flambeau::index_add_(t, dim, index, source, alpha);
}
Tensor index_copy_(Tensor& t, int64_t dim, const Tensor& index, const Tensor& source) {
  return flambeau::index_copy_(t, dim, index, source);
}
Tensor scatter_(Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  return flambeau::scatter_(t, dim, index, src);
}
Tensor scatter_add_(Tensor& t, int64_t dim, const Tensor& index, const Tensor& src) {
  return flambeau::scatter_add_(t, dim, index, src);
}
Tensor masked_fill_(Tensor& t, const Tensor& mask, const Tensor& value) { return flambeau::masked_fill_(t, mask, value); }

Tensor tril_indices(int64_t row, int64_t col, int64_t offset, std::optional<DType> dtype) {
  return flambeau::tril_indices(row, col, offset, dtype.value_or(kInt64));
}
Tensor triu_indices(int64_t row, int64_t col, int64_t offset, std::optional<DType> dtype) {
  return flambeau::triu_indices(row, col, offset, dtype.value_or(kInt64));
}
}  // namespace adapt

std::vector<std::pair<const OpSchema*, BoxedKernel>> builtin_kernels() {
  std::vector<std::pair<const OpSchema*, BoxedKernel>> out;
#define FLB_KERNEL(id, kernel)                                                                         \
  static_assert(schema_text::matches(schemas::id.text, kernel),                                      \
                "the kernel of " #id " does not take its schema's arguments (count and kinds)");     \
  out.emplace_back(&op_schema(#id), box(kernel));
#define FLB_UNARY_KERNEL(name, ...) FLB_KERNEL(name, &flambeau::name)
#define FLB_BINARY_KERNEL(name) FLB_KERNEL(name, &flambeau::name)
#define FLB_TABLE_KERNEL(id, schema, variants, kernel) FLB_KERNEL(id, kernel)
  FLB_UNARY_OPS(FLB_UNARY_KERNEL)
  FLB_BINARY_OPS(FLB_BINARY_KERNEL)
  FLB_COMPARE_OPS(FLB_BINARY_KERNEL)
  FLB_LOGICAL_OPS(FLB_BINARY_KERNEL)
  FLB_OP_SCHEMAS(FLB_TABLE_KERNEL)
#undef FLB_TABLE_KERNEL
#undef FLB_BINARY_KERNEL
#undef FLB_UNARY_KERNEL
#undef FLB_KERNEL
  static const std::vector<OpSchema> methods{
      parse_schema("view(Tensor input, int[] size) -> Tensor"),
      parse_schema("expand(Tensor input, int[] size) -> Tensor"),
      parse_schema("broadcast_to(Tensor input, int[] size) -> Tensor"),
      parse_schema("to(Tensor input, ScalarType dtype) -> Tensor"),
      parse_schema("slice(Tensor input, int dim=0, int? start=None, int? end=None, int step=1) -> Tensor"),
      parse_schema("add_(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor"),
      parse_schema("sub_(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor"),
      parse_schema("mul_(Tensor input, Tensor other) -> Tensor"),
      parse_schema("div_(Tensor input, Tensor other, *, str? rounding_mode=None) -> Tensor"),
      parse_schema("index_add_(Tensor input, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor"),
      parse_schema("index_copy_(Tensor input, int dim, Tensor index, Tensor source) -> Tensor"),
      parse_schema("scatter_(Tensor input, int dim, Tensor index, Tensor src) -> Tensor"),
      parse_schema("scatter_add_(Tensor input, int dim, Tensor index, Tensor src) -> Tensor"),
      parse_schema("masked_fill_(Tensor input, Tensor mask, Tensor value) -> Tensor"),
      parse_schema("scaled_dot_product_flash_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, "
                   "bool is_causal, float scale) -> Tensor[]"),
      parse_schema("scaled_dot_product_flash_attention_backward(Tensor grad_out, Tensor query, Tensor key, "
                   "Tensor value, Tensor out, Tensor logsumexp, Tensor? attn_mask, bool is_causal, float scale) "
                   "-> Tensor[]"),
      parse_schema("fused_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps, "
                   "bool rms) -> Tensor[]"),
      parse_schema("fused_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor? weight, "
                   "Tensor mean, Tensor rstd, bool rms, bool need_input, bool need_weight, bool need_bias) "
                   "-> Tensor[]")};
  const std::vector<BoxedKernel> method_kernels{
      box(&adapt::view),    box(&adapt::expand),     box(&adapt::broadcast_to), box(&adapt::to),
      box(&adapt::slice),   box(&adapt::add_),       box(&adapt::sub_),         box(&adapt::mul_),
      box(&adapt::div_),    box(&adapt::index_add_), box(&adapt::index_copy_),  box(&adapt::scatter_),
      box(&adapt::scatter_add_), box(&adapt::masked_fill_), box(&nn::scaled_dot_product_flash_attention),
      box(&nn::scaled_dot_product_flash_attention_backward), box(&nn::functional::fused_norm),
      box(&nn::functional::fused_norm_backward)};
  for (size_t i = 0; i < methods.size(); ++i) out.emplace_back(&methods[i], method_kernels[i]);
  return out;
}

}  // namespace flambeau
