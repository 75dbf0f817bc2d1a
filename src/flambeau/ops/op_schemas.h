// The schema table: one line per public op that is not in the elementwise tables of
// core/op_list.h (those generate theirs: "exp(Tensor input) -> Tensor", "mul(Tensor input,
// Tensor other) -> Tensor"); schemas::<op> is each op's schema text.
// X(id, schema, variants): variants Both (flambeau.<op> and Tensor.<op>, the first argument
// as self), Function (flambeau.<op> only) or Method (Tensor.<op> only). The Python binding
// of each op takes its argument names, defaults and keyword-only marker from this line, and fails to build
// when its C++ function takes another number of arguments (python/src/bindings.h, def_op);
// the tests compare each line with PyTorch 2.13's signature of the op and generate their
// samples from it (tests/python/test_op_schema.py). Kinds as in PyTorch: a Tensor argument
// after the first also takes a Python number, int[] also takes one int.
#pragma once
#include <string_view>

#include "flambeau/core/op_list.h"
#include "flambeau/ops/schema.h"

#define FLB_OP_SCHEMAS(X)                                                                                        \
  /* elementwise, beyond the unary and binary tables */                                                     \
  X(gelu, "gelu(Tensor input, *, str approximate=\"none\") -> Tensor", Both)                                   \
  X(softplus, "softplus(Tensor input, float beta=1.0, float threshold=20.0) -> Tensor", Both)               \
  X(logical_not, "logical_not(Tensor input) -> Tensor", Both)                                               \
  X(isnan, "isnan(Tensor input) -> Tensor", Both)                                                           \
  X(isinf, "isinf(Tensor input) -> Tensor", Both)                                                           \
  X(isfinite, "isfinite(Tensor input) -> Tensor", Both)                                                     \
  X(add, "add(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor", Both)                              \
  X(sub, "sub(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor", Both)                              \
  X(div, "div(Tensor input, Tensor other, *, str? rounding_mode=None) -> Tensor", Both)                     \
  X(where, "where(Tensor condition, Tensor input, Tensor other) -> Tensor", Both)                           \
  X(clamp, "clamp(Tensor input, Tensor? min=None, Tensor? max=None) -> Tensor", Both)                       \
  X(addcmul, "addcmul(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", Both)    \
  X(addcdiv, "addcdiv(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", Both)    \
  X(lerp, "lerp(Tensor input, Tensor end, Tensor weight) -> Tensor", Both)                                  \
  /* reductions */                                                                                           \
  X(sum, "sum(Tensor input, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Both)   \
  X(mean, "mean(Tensor input, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Both) \
  X(prod, "prod(Tensor input, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Both) \
  X(amax, "amax(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor", Both)                        \
  X(amin, "amin(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor", Both)                        \
  X(any, "any(Tensor input, int[]? dim=None, bool keepdim=False) -> Tensor", Both)                          \
  X(all, "all(Tensor input, int[]? dim=None, bool keepdim=False) -> Tensor", Both)                          \
  /* max/min: max(input) or max(input, dim, keepdim) -> (values, indices), one Python function */          \
  X(max, "max(Tensor input, int? dim=None, bool keepdim=False) -> (Tensor values, Tensor indices)", Both)   \
  X(min, "min(Tensor input, int? dim=None, bool keepdim=False) -> (Tensor values, Tensor indices)", Both)   \
  X(argmax, "argmax(Tensor input, int? dim=None, bool keepdim=False) -> Tensor", Both)                      \
  X(argmin, "argmin(Tensor input, int? dim=None, bool keepdim=False) -> Tensor", Both)                      \
  X(var, "var(Tensor input, int[]? dim=None, bool? unbiased=None, bool keepdim=False, *, float? correction=None) -> Tensor", \
    Both)                                                                                                  \
  X(std, "std(Tensor input, int[]? dim=None, bool? unbiased=None, bool keepdim=False, *, float? correction=None) -> Tensor", \
    Both)                                                                                                  \
  X(norm, "norm(Tensor input, float p=2.0, int[]? dim=None, bool keepdim=False) -> Tensor", Both)           \
  X(logsumexp, "logsumexp(Tensor input, int[] dim, bool keepdim=False) -> Tensor", Both)                    \
  X(count_nonzero, "count_nonzero(Tensor input, int[]? dim=None) -> Tensor", Both)                          \
  X(softmax, "softmax(Tensor input, int dim, ScalarType? dtype=None) -> Tensor", Both)                      \
  X(log_softmax, "log_softmax(Tensor input, int dim, ScalarType? dtype=None) -> Tensor", Both)              \
  /* scans */                                                                                                \
  X(cumsum, "cumsum(Tensor input, int dim, *, ScalarType? dtype=None) -> Tensor", Both)                     \
  X(cumprod, "cumprod(Tensor input, int dim, *, ScalarType? dtype=None) -> Tensor", Both)                   \
  X(logcumsumexp, "logcumsumexp(Tensor input, int dim) -> Tensor", Both)                                    \
  X(cummax, "cummax(Tensor input, int dim) -> (Tensor values, Tensor indices)", Both)                       \
  X(cummin, "cummin(Tensor input, int dim) -> (Tensor values, Tensor indices)", Both)                       \
  /* sorting */                                                                                              \
  X(sort, "sort(Tensor input, int dim=-1, bool descending=False, *, bool stable=False) -> (Tensor values, Tensor indices)", \
    Both)                                                                                                  \
  X(argsort, "argsort(Tensor input, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor", Both) \
  X(topk, "topk(Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)", \
    Both)                                                                                                  \
  X(kthvalue, "kthvalue(Tensor input, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)", \
    Both)                                                                                                  \
  X(unique, "unique(Tensor input, bool sorted=True, bool return_inverse=False, bool return_counts=False) -> Tensor", \
    Both)                                                                                                  \
  X(searchsorted, "searchsorted(Tensor sorted_sequence, Tensor input, *, bool right=False) -> Tensor", Function) \
  /* matrix products */                                                                                      \
  X(mm, "mm(Tensor input, Tensor mat2) -> Tensor", Both)                                                    \
  X(bmm, "bmm(Tensor input, Tensor mat2) -> Tensor", Both)                                                  \
  X(matmul, "matmul(Tensor input, Tensor other) -> Tensor", Both)                                           \
  X(dot, "dot(Tensor input, Tensor tensor) -> Tensor", Both)                                                 \
  X(outer, "outer(Tensor input, Tensor vec2) -> Tensor", Both)                                              \
  X(addmm, "addmm(Tensor input, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", Both) \
  X(baddbmm, "baddbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", \
    Both)                                                                                                  \
  /* indexing */                                                                                             \
  X(index_select, "index_select(Tensor input, int dim, Tensor index) -> Tensor", Both)                      \
  X(gather, "gather(Tensor input, int dim, Tensor index) -> Tensor", Both)                                  \
  X(scatter, "scatter(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", Both)                    \
  X(scatter_add, "scatter_add(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", Both)            \
  X(scatter_reduce,                                                                                          \
    "scatter_reduce(Tensor input, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor", \
    Both)                                                                                                  \
  X(index_add, "index_add(Tensor input, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", Both) \
  X(index_copy, "index_copy(Tensor input, int dim, Tensor index, Tensor source) -> Tensor", Both)           \
  X(index_fill, "index_fill(Tensor input, int dim, Tensor index, Tensor value) -> Tensor", Both)            \
  X(masked_fill, "masked_fill(Tensor input, Tensor mask, Tensor value) -> Tensor", Both)                    \
  X(masked_scatter, "masked_scatter(Tensor input, Tensor mask, Tensor source) -> Tensor", Both)             \
  X(masked_select, "masked_select(Tensor input, Tensor mask) -> Tensor", Both)                              \
  X(nonzero, "nonzero(Tensor input) -> Tensor", Both)                                                       \
  X(take, "take(Tensor input, Tensor index) -> Tensor", Both)                                               \
  /* views and copies (the methods view, reshape, permute, expand take *sizes: bound by hand) */             \
  X(reshape, "reshape(Tensor input, int[] shape) -> Tensor", Function)                                       \
  X(permute, "permute(Tensor input, int[] dims) -> Tensor", Function)                                         \
  X(transpose, "transpose(Tensor input, int dim0, int dim1) -> Tensor", Both)                                 \
  X(t, "t(Tensor input) -> Tensor", Both)                                                                     \
  X(unsqueeze, "unsqueeze(Tensor input, int dim) -> Tensor", Both)                                            \
  X(squeeze, "squeeze(Tensor input, int? dim=None) -> Tensor", Both)                                          \
  X(flatten, "flatten(Tensor input, int start_dim=0, int end_dim=-1) -> Tensor", Both)                        \
  X(unflatten, "unflatten(Tensor input, int dim, int[] sizes) -> Tensor", Both)                               \
  X(select, "select(Tensor input, int dim, int index) -> Tensor", Both)                                       \
  X(narrow, "narrow(Tensor input, int dim, int start, int length) -> Tensor", Both)                           \
  X(as_strided, "as_strided(Tensor input, int[] size, int[] stride, int? storage_offset=None) -> Tensor", Both) \
  X(expand_as, "expand_as(Tensor input, Tensor other) -> Tensor", Method)                                     \
  X(view_as, "view_as(Tensor input, Tensor other) -> Tensor", Method)                                         \
  X(contiguous, "contiguous(Tensor input) -> Tensor", Method)                                                 \
  X(clone, "clone(Tensor input) -> Tensor", Both)                                                             \
  X(copy_, "copy_(Tensor input, Tensor src) -> Tensor", Method)                                               \
  X(fill_, "fill_(Tensor input, Scalar value) -> Tensor", Method)                                             \
  X(zero_, "zero_(Tensor input) -> Tensor", Method)                                                           \
  /* joining and splitting */                                                                                \
  X(split, "split(Tensor tensor, int[] split_size_or_sections, int dim=0) -> Tensor[]", Both)                 \
  X(cat, "cat(Tensor[] tensors, int dim=0) -> Tensor", Function)                                              \
  X(stack, "stack(Tensor[] tensors, int dim=0) -> Tensor", Function)                                          \
  X(chunk, "chunk(Tensor input, int chunks, int dim=0) -> Tensor[]", Both)                                  \
  /* random sampling */                                                                                      \
  X(multinomial,                                                                                             \
    "multinomial(Tensor input, int num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor", \
    Both)                                                                                                  \
  X(bernoulli, "bernoulli(Tensor input, *, Generator? generator=None) -> Tensor", Both)

namespace flambeau {

// One line of the table, as compile-time text (bindings check argument counts against it).
struct OpSchemaText {
  std::string_view name, text;
  OpVariants variants;
};

namespace schemas {
#define FLB_UNARY_SCHEMA(name, ...) \
  inline constexpr OpSchemaText name{#name, #name "(Tensor input) -> Tensor", OpVariants::Both};
#define FLB_BINARY_SCHEMA(name) \
  inline constexpr OpSchemaText name{#name, #name "(Tensor input, Tensor other) -> Tensor", OpVariants::Both};
#define FLB_TABLE_SCHEMA(id, schema, variants) inline constexpr OpSchemaText id{#id, schema, OpVariants::variants};
FLB_UNARY_OPS(FLB_UNARY_SCHEMA)
FLB_BINARY_OPS(FLB_BINARY_SCHEMA)
FLB_COMPARE_OPS(FLB_BINARY_SCHEMA)
FLB_LOGICAL_OPS(FLB_BINARY_SCHEMA)
FLB_OP_SCHEMAS(FLB_TABLE_SCHEMA)
#undef FLB_TABLE_SCHEMA
#undef FLB_BINARY_SCHEMA
#undef FLB_UNARY_SCHEMA

}  // namespace schemas

// Every schema, in the order above.
#define FLB_SCHEMA_ADDRESS(name, ...) &schemas::name,
#define FLB_BINARY_SCHEMA_ADDRESS(name) &schemas::name,
inline constexpr const OpSchemaText* kOpSchemaTexts[] = {
    FLB_UNARY_OPS(FLB_SCHEMA_ADDRESS) FLB_BINARY_OPS(FLB_BINARY_SCHEMA_ADDRESS)
        FLB_COMPARE_OPS(FLB_BINARY_SCHEMA_ADDRESS) FLB_LOGICAL_OPS(FLB_BINARY_SCHEMA_ADDRESS)
            FLB_OP_SCHEMAS(FLB_SCHEMA_ADDRESS)};
#undef FLB_BINARY_SCHEMA_ADDRESS
#undef FLB_SCHEMA_ADDRESS

}  // namespace flambeau
