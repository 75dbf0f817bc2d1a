// The schema table: one line per public op that is not in the elementwise tables of
// core/op_list.h (those generate theirs: "exp(Tensor input) -> Tensor", "mul(Tensor input,
// Tensor other) -> Tensor"); schemas::<op> is each op's schema text.
// X(id, schema, variants, kernel):
//   variants: Both (flambeau.<op> and Tensor.<op>, the first argument as self), Function
//     (flambeau.<op> only), Method (Tensor.<op> only) or Functional (flambeau._C._nn.<op>,
//     what flambeau.nn.functional.<op> calls);
//   kernel: the C++ function the op registry (ops/registry.h) calls by name, its arguments
//     in the schema's order (adapt::<op> in ops/op_kernels.cpp where the C++ API differs).
// The Python binding of each op takes its argument names, defaults and keyword-only marker
// from this line, and fails to build when its C++ function takes another number of
// arguments (python/src/def_op.h); the tests compare each line with PyTorch 2.13's
// signature of the op and generate their samples from it (tests/python/test_op_schema.py,
// tests/ops/registry_test.cpp). Kinds as in PyTorch: a Tensor argument after the first
// also takes a number, int[] also takes one int.
#pragma once
#include <string_view>
#include <type_traits>

#include "flambeau/core/generator.h"
#include "flambeau/core/op_hook.h"

#include "flambeau/core/op_list.h"
#include "flambeau/ops/schema.h"

#define FLB_OP_SCHEMAS(X)                                                                                            \
  /* elementwise, beyond the unary and binary tables */                                                              \
  X(gelu, "gelu(Tensor input, *, str approximate=\"none\") -> Tensor", Both, &gelu)                                  \
  X(softplus, "softplus(Tensor input, float beta=1.0, float threshold=20.0) -> Tensor", Both, &softplus)             \
  X(logical_not, "logical_not(Tensor input) -> Tensor", Both, &logical_not)                                          \
  X(isnan, "isnan(Tensor input) -> Tensor", Both, &isnan)                                                            \
  X(isinf, "isinf(Tensor input) -> Tensor", Both, &isinf)                                                            \
  X(isfinite, "isfinite(Tensor input) -> Tensor", Both, &isfinite)                                                   \
  X(add, "add(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor", Both, &add)                                 \
  X(sub, "sub(Tensor input, Tensor other, *, Scalar alpha=1) -> Tensor", Both, &sub)                                 \
  X(div, "div(Tensor input, Tensor other, *, str? rounding_mode=None) -> Tensor", Both, &adapt::div)                 \
  X(where, "where(Tensor condition, Tensor input, Tensor other) -> Tensor", Both, &where)                            \
  X(clamp, "clamp(Tensor input, Tensor? min=None, Tensor? max=None) -> Tensor", Both, &clamp)                        \
  X(addcmul, "addcmul(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", Both, &addcmul)   \
  X(addcdiv, "addcdiv(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor", Both, &addcdiv)   \
  X(lerp, "lerp(Tensor input, Tensor end, Tensor weight) -> Tensor", Both, &lerp)                                    \
  /* reductions */                                                                                                   \
  X(sum, "sum(Tensor input, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Both, &sum)  \
  X(mean, "mean(Tensor input, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Both, &mean) \
  X(prod, "prod(Tensor input, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Both, &prod) \
  X(amax, "amax(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor", Both, &amax)                            \
  X(amin, "amin(Tensor input, int[1] dim=[], bool keepdim=False) -> Tensor", Both, &amin)                            \
  X(any, "any(Tensor input, int[]? dim=None, bool keepdim=False) -> Tensor", Both, &any)                             \
  X(all, "all(Tensor input, int[]? dim=None, bool keepdim=False) -> Tensor", Both, &all)                             \
  /* max/min: max(input) or max(input, dim, keepdim) -> (values, indices), one Python function */                    \
  X(max, "max(Tensor input, int? dim=None, bool keepdim=False) -> (Tensor values, Tensor indices)", Both, &adapt::max) \
  X(min, "min(Tensor input, int? dim=None, bool keepdim=False) -> (Tensor values, Tensor indices)", Both, &adapt::min) \
  X(argmax, "argmax(Tensor input, int? dim=None, bool keepdim=False) -> Tensor", Both, &argmax)                      \
  X(argmin, "argmin(Tensor input, int? dim=None, bool keepdim=False) -> Tensor", Both, &argmin)                      \
  X(var, "var(Tensor input, int[]? dim=None, bool? unbiased=None, bool keepdim=False, *, float? correction=None) -> Tensor", \
    Both, &adapt::var)                                                                                               \
  X(std, "std(Tensor input, int[]? dim=None, bool? unbiased=None, bool keepdim=False, *, float? correction=None) -> Tensor", \
    Both, &adapt::std)                                                                                               \
  X(norm, "norm(Tensor input, float p=2.0, int[]? dim=None, bool keepdim=False) -> Tensor", Both, &norm)             \
  X(logsumexp, "logsumexp(Tensor input, int[] dim, bool keepdim=False) -> Tensor", Both, &logsumexp)                 \
  X(count_nonzero, "count_nonzero(Tensor input, int[]? dim=None) -> Tensor", Both, &count_nonzero)                   \
  X(softmax, "softmax(Tensor input, int dim, ScalarType? dtype=None) -> Tensor", Both, &softmax)                     \
  X(log_softmax, "log_softmax(Tensor input, int dim, ScalarType? dtype=None) -> Tensor", Both, &log_softmax)         \
  /* scans */                                                                                                        \
  X(cumsum, "cumsum(Tensor input, int dim, *, ScalarType? dtype=None) -> Tensor", Both, &cumsum)                     \
  X(cumprod, "cumprod(Tensor input, int dim, *, ScalarType? dtype=None) -> Tensor", Both, &cumprod)                  \
  X(logcumsumexp, "logcumsumexp(Tensor input, int dim) -> Tensor", Both, &logcumsumexp)                              \
  X(cummax, "cummax(Tensor input, int dim) -> (Tensor values, Tensor indices)", Both, &cummax)                       \
  X(cummin, "cummin(Tensor input, int dim) -> (Tensor values, Tensor indices)", Both, &cummin)                       \
  /* sorting */                                                                                                      \
  X(sort, "sort(Tensor input, int dim=-1, bool descending=False, *, bool stable=False) -> (Tensor values, Tensor indices)", \
    Both, &sort)                                                                                                     \
  X(argsort, "argsort(Tensor input, int dim=-1, bool descending=False, *, bool stable=False) -> Tensor", Both, &argsort) \
  X(topk, "topk(Tensor input, int k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)", \
    Both, &topk)                                                                                                     \
  X(kthvalue, "kthvalue(Tensor input, int k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",    \
    Both, &kthvalue)                                                                                                 \
  X(unique, "unique(Tensor input, bool sorted=True, bool return_inverse=False, bool return_counts=False, "           \
    "int? dim=None) -> Tensor", Both, &unique)                                                                       \
  X(unique_consecutive,                                                                                              \
    "unique_consecutive(Tensor input, bool return_inverse=False, bool return_counts=False, int? dim=None) -> Tensor",  \
    Both, &unique_consecutive)                                                                                       \
  X(searchsorted, "searchsorted(Tensor sorted_sequence, Tensor input, *, bool right=False) -> Tensor", Function, &searchsorted) \
  /* matrix products */                                                                                              \
  X(mm, "mm(Tensor input, Tensor mat2) -> Tensor", Both, &mm)                                                        \
  X(bmm, "bmm(Tensor input, Tensor mat2) -> Tensor", Both, &bmm)                                                     \
  X(matmul, "matmul(Tensor input, Tensor other) -> Tensor", Both, &matmul)                                           \
  X(dot, "dot(Tensor input, Tensor tensor) -> Tensor", Both, &dot)                                                   \
  X(outer, "outer(Tensor input, Tensor vec2) -> Tensor", Both, &outer)                                               \
  X(addmm, "addmm(Tensor input, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor", Both, &addmm) \
  X(baddbmm, "baddbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",      \
    Both, &baddbmm)                                                                                                  \
  /* indexing */                                                                                                     \
  X(index_select, "index_select(Tensor input, int dim, Tensor index) -> Tensor", Both, &index_select)                \
  X(gather, "gather(Tensor input, int dim, Tensor index) -> Tensor", Both, &gather)                                  \
  X(scatter, "scatter(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", Both, &scatter)                   \
  X(scatter_add, "scatter_add(Tensor input, int dim, Tensor index, Tensor src) -> Tensor", Both, &scatter_add)       \
  X(scatter_reduce,                                                                                                  \
    "scatter_reduce(Tensor input, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor", \
    Both, &scatter_reduce)                                                                                           \
  X(index_add, "index_add(Tensor input, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor", Both, &index_add) \
  X(index_copy, "index_copy(Tensor input, int dim, Tensor index, Tensor source) -> Tensor", Both, &index_copy)       \
  X(index_fill, "index_fill(Tensor input, int dim, Tensor index, Tensor value) -> Tensor", Both, &index_fill)        \
  X(masked_fill, "masked_fill(Tensor input, Tensor mask, Tensor value) -> Tensor", Both, &masked_fill)               \
  X(masked_scatter, "masked_scatter(Tensor input, Tensor mask, Tensor source) -> Tensor", Both, &masked_scatter)     \
  X(masked_select, "masked_select(Tensor input, Tensor mask) -> Tensor", Both, &masked_select)                       \
  X(nonzero, "nonzero(Tensor input) -> Tensor", Both, &nonzero)                                                      \
  X(take, "take(Tensor input, Tensor index) -> Tensor", Both, &take)                                                 \
  /* views and copies (the methods view, reshape, permute, expand take *sizes: bound by hand) */                     \
  X(reshape, "reshape(Tensor input, int[] shape) -> Tensor", Function, &adapt::reshape)                              \
  X(permute, "permute(Tensor input, int[] dims) -> Tensor", Function, &adapt::permute)                               \
  X(transpose, "transpose(Tensor input, int dim0, int dim1) -> Tensor", Both, &adapt::transpose)                     \
  X(t, "t(Tensor input) -> Tensor", Both, &adapt::t)                                                                 \
  X(unsqueeze, "unsqueeze(Tensor input, int dim) -> Tensor", Both, &adapt::unsqueeze)                                \
  X(squeeze, "squeeze(Tensor input, int? dim=None) -> Tensor", Both, &adapt::squeeze)                                \
  X(flatten, "flatten(Tensor input, int start_dim=0, int end_dim=-1) -> Tensor", Both, &adapt::flatten)              \
  X(unflatten, "unflatten(Tensor input, int dim, int[] sizes) -> Tensor", Both, &adapt::unflatten)                   \
  X(select, "select(Tensor input, int dim, int index) -> Tensor", Both, &adapt::select)                              \
  X(narrow, "narrow(Tensor input, int dim, int start, int length) -> Tensor", Both, &adapt::narrow)                  \
  X(as_strided, "as_strided(Tensor input, int[] size, int[] stride, int? storage_offset=None) -> Tensor", Both, &adapt::as_strided) \
  X(expand_as, "expand_as(Tensor input, Tensor other) -> Tensor", Method, &adapt::expand_as)                         \
  X(view_as, "view_as(Tensor input, Tensor other) -> Tensor", Method, &adapt::view_as)                               \
  X(contiguous, "contiguous(Tensor input, *, MemoryFormat memory_format=contiguous_format) -> Tensor", Method,          \
    &adapt::contiguous)                                                                                              \
  X(clone, "clone(Tensor input, *, MemoryFormat? memory_format=None) -> Tensor", Both, &adapt::clone)                \
  X(copy_, "copy_(Tensor input, Tensor src) -> Tensor", Method, &adapt::copy_)                                       \
  X(fill_, "fill_(Tensor input, Scalar value) -> Tensor", Method, &adapt::fill_)                                     \
  X(zero_, "zero_(Tensor input) -> Tensor", Method, &adapt::zero_)                                                   \
  /* shape ops (ops/shape.cpp) */                                                                                     \
  X(flip, "flip(Tensor input, int[] dims) -> Tensor", Both, &flip)                                                    \
  X(fliplr, "fliplr(Tensor input) -> Tensor", Both, &fliplr)                                                          \
  X(flipud, "flipud(Tensor input) -> Tensor", Both, &flipud)                                                          \
  X(roll, "roll(Tensor input, int[] shifts, int[] dims=[]) -> Tensor", Both, &roll)                                   \
  X(rot90, "rot90(Tensor input, int k=1, int[] dims=[0, 1]) -> Tensor", Both, &rot90)                                 \
  X(tril, "tril(Tensor input, int diagonal=0) -> Tensor", Both, &tril)                                                \
  X(triu, "triu(Tensor input, int diagonal=0) -> Tensor", Both, &triu)                                                \
  X(tril_indices, "tril_indices(int row, int col, int offset=0, *, ScalarType? dtype=None) -> Tensor", Function, &adapt::tril_indices)\
  X(triu_indices, "triu_indices(int row, int col, int offset=0, *, ScalarType? dtype=None) -> Tensor", Function, &adapt::triu_indices)\
  X(repeat, "repeat(Tensor input, int[] repeats) -> Tensor", Method, &repeat)                                         \
  X(tile, "tile(Tensor input, int[] dims) -> Tensor", Both, &tile)                                                    \
  X(repeat_interleave, "repeat_interleave(Tensor input, Tensor repeats, int? dim=None) -> Tensor", Both, &repeat_interleave)\
  X(movedim, "movedim(Tensor input, int[] source, int[] destination) -> Tensor", Both, &movedim)                      \
  X(moveaxis, "moveaxis(Tensor input, int[] source, int[] destination) -> Tensor", Both, &moveaxis)                   \
  X(swapaxes, "swapaxes(Tensor input, int axis0, int axis1) -> Tensor", Both, &swapaxes)                              \
  X(swapdims, "swapdims(Tensor input, int dim0, int dim1) -> Tensor", Both, &swapdims)                                \
  X(unbind, "unbind(Tensor input, int dim=0) -> Tensor[]", Both, &unbind)                                             \
  X(narrow_copy, "narrow_copy(Tensor input, int dim, int start, int length) -> Tensor", Both, &narrow_copy)           \
  X(diagonal, "diagonal(Tensor input, int offset=0, int dim1=0, int dim2=1) -> Tensor", Both, &diagonal)              \
  X(diag_embed, "diag_embed(Tensor input, int offset=0, int dim1=-2, int dim2=-1) -> Tensor", Both, &diag_embed)      \
  X(diag, "diag(Tensor input, int diagonal=0) -> Tensor", Both, &diag)                                                \
  X(trace, "trace(Tensor input) -> Tensor", Both, &trace)                                                             \
  X(take_along_dim, "take_along_dim(Tensor input, Tensor indices, int? dim=None) -> Tensor", Both, &take_along_dim)   \
  X(meshgrid, "meshgrid(Tensor[] tensors, *, str indexing=\"ij\") -> Tensor[]", Function, &meshgrid)                  \
  X(cartesian_prod, "cartesian_prod(Tensor[] tensors) -> Tensor", Function, &cartesian_prod)                          \
  X(kron, "kron(Tensor input, Tensor other) -> Tensor", Both, &kron)                                                  \
  X(block_diag, "block_diag(Tensor[] tensors) -> Tensor", Function, &block_diag)                                      \
  X(bucketize, "bucketize(Tensor input, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor", Function, &bucketize)\
  /* math (ops/math.cpp, nn/distance.cpp) */                                                                          \
  X(isposinf, "isposinf(Tensor input) -> Tensor", Both, &isposinf)                                                    \
  X(isneginf, "isneginf(Tensor input) -> Tensor", Both, &isneginf)                                                    \
  X(nan_to_num, "nan_to_num(Tensor input, float? nan=None, float? posinf=None, float? neginf=None) -> Tensor", Both, &nan_to_num)\
  X(logaddexp, "logaddexp(Tensor input, Tensor other) -> Tensor", Both, &logaddexp)                                   \
  X(logaddexp2, "logaddexp2(Tensor input, Tensor other) -> Tensor", Both, &logaddexp2)                                \
  X(bincount, "bincount(Tensor input, Tensor? weights=None, int minlength=0) -> Tensor", Both, &bincount)             \
  X(histc, "histc(Tensor input, int bins=100, Scalar min=0, Scalar max=0) -> Tensor", Both, &histc)                   \
  X(cosine_similarity, "cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor", Function, &cosine_similarity)\
  X(pairwise_distance, "pairwise_distance(Tensor x1, Tensor x2, float p=2.0, float eps=1e-06, bool keepdim=False) -> Tensor", Function, &pairwise_distance)\
  X(convolution,                                                                                                     \
    "convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] dilation, "           \
    "bool transposed, int[] output_padding, int groups) -> Tensor", Function, &convolution)                          \
  X(cdist, "cdist(Tensor x1, Tensor x2, float p=2.0) -> Tensor", Function, &cdist)                                    \
  X(einsum, "einsum(str equation, Tensor[] tensors, *, int[]? path=None) -> Tensor", Function, &adapt::einsum)        \
  X(tensordot, "tensordot(Tensor a, Tensor b, int[] dims=2) -> Tensor", Function, &adapt::tensordot)                 \
  /* torch.linalg (ops/linalg.cpp) */                                                                                 \
  X(linalg_det, "linalg_det(Tensor A) -> Tensor", Function, &linalg::det) \
  X(linalg_slogdet, "linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet)", Function, &adapt::linalg_slogdet) \
  X(linalg_inv, "linalg_inv(Tensor A) -> Tensor", Function, &linalg::inv) \
  X(linalg_solve, "linalg_solve(Tensor A, Tensor B, *, bool left=True) -> Tensor", Function, &linalg::solve) \
  X(linalg_cholesky, "linalg_cholesky(Tensor input, *, bool upper=False) -> Tensor", Function, &linalg::cholesky) \
  X(linalg_qr, "linalg_qr(Tensor A, str mode=\"reduced\") -> (Tensor Q, Tensor R)", Function, &adapt::linalg_qr) \
  X(linalg_svd, "linalg_svd(Tensor A, bool full_matrices=True, *, str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)", Function, &adapt::linalg_svd) \
  X(linalg_svdvals, "linalg_svdvals(Tensor A, *, str? driver=None) -> Tensor", Function, &adapt::linalg_svdvals) \
  X(linalg_eigh, "linalg_eigh(Tensor input, str UPLO=\"L\") -> (Tensor eigenvalues, Tensor eigenvectors)", Function, &adapt::linalg_eigh) \
  X(linalg_eigvalsh, "linalg_eigvalsh(Tensor input, str UPLO=\"L\") -> Tensor", Function, &linalg::eigvalsh) \
  X(linalg_pinv, "linalg_pinv(Tensor input, *, float? atol=None, float? rtol=None, bool hermitian=False) -> Tensor", Function, &linalg::pinv) \
  X(linalg_lstsq, "linalg_lstsq(Tensor input, Tensor b, float? rcond=None, *, str? driver=None) -> (Tensor solution, Tensor residuals, Tensor rank, Tensor singular_values)", Function, &adapt::linalg_lstsq) \
  X(linalg_vector_norm, "linalg_vector_norm(Tensor input, float ord=2, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Function, &adapt::linalg_vector_norm) \
  X(linalg_matrix_norm, "linalg_matrix_norm(Tensor input, str ord=\"fro\", int[] dim=[-2, -1], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Function, &adapt::linalg_matrix_norm) \
  X(linalg_norm, "linalg_norm(Tensor input, float? ord=None, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor", Function, &adapt::linalg_norm) \
  /* joining and splitting */                                                                                        \
  X(split, "split(Tensor tensor, int[] split_size_or_sections, int dim=0) -> Tensor[]", Both, &adapt::split)         \
  X(cat, "cat(Tensor[] tensors, int dim=0) -> Tensor", Function, &cat)                                               \
  X(stack, "stack(Tensor[] tensors, int dim=0) -> Tensor", Function, &stack)                                         \
  X(chunk, "chunk(Tensor input, int chunks, int dim=0) -> Tensor[]", Both, &chunk)                                   \
  /* nn.functional: bound in flambeau._C._nn (wrapped by flambeau.nn.functional) */                                 \
  X(linear, "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", Functional, &nn::functional::linear) \
  X(layer_norm,                                                                                                      \
    "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) "     \
    "-> Tensor",                                                                                                     \
    Functional, &nn::functional::layer_norm)                                                                         \
  X(rms_norm, "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> Tensor",      \
    Functional, &nn::functional::rms_norm)                                                                           \
  X(dropout, "dropout(Tensor input, float p=0.5, bool training=True, Generator? generator=None) -> Tensor",          \
    Functional, &nn::functional::dropout)                                                                            \
  /* activations (nn/activation.cpp) */                                                                              \
  X(elu, "elu(Tensor input, float alpha=1.0, bool inplace=False) -> Tensor", Functional, &nn::functional::elu)       \
  X(selu, "selu(Tensor input, bool inplace=False) -> Tensor", Functional, &nn::functional::selu)                     \
  X(celu, "celu(Tensor input, float alpha=1.0, bool inplace=False) -> Tensor", Functional, &nn::functional::celu)    \
  X(leaky_relu,                                                                                                      \
    "leaky_relu(Tensor input, float negative_slope=0.01, bool inplace=False) -> Tensor",                             \
    Functional, &nn::functional::leaky_relu)                                                                         \
  X(prelu, "prelu(Tensor input, Tensor weight) -> Tensor", Functional, &nn::functional::prelu)                       \
  X(rrelu,                                                                                                           \
    "rrelu(Tensor input, float lower=0.125, float upper=0.3333333333333333, "                                        \
    "bool training=False, bool inplace=False) -> Tensor",                                                            \
    Functional, &nn::functional::rrelu)                                                                              \
  X(hardtanh,                                                                                                        \
    "hardtanh(Tensor input, float min_val=-1.0, float max_val=1.0, bool inplace=False) -> Tensor",                   \
    Functional, &nn::functional::hardtanh)                                                                           \
  X(relu6, "relu6(Tensor input, bool inplace=False) -> Tensor", Functional, &nn::functional::relu6)                  \
  X(hardsigmoid,                                                                                                     \
    "hardsigmoid(Tensor input, bool inplace=False) -> Tensor",                                                       \
    Functional, &nn::functional::hardsigmoid)                                                                        \
  X(hardswish, "hardswish(Tensor input, bool inplace=False) -> Tensor", Functional, &nn::functional::hardswish)      \
  X(mish, "mish(Tensor input, bool inplace=False) -> Tensor", Functional, &nn::functional::mish)                     \
  X(glu, "glu(Tensor input, int dim=-1) -> Tensor", Functional, &nn::functional::glu)                                \
  X(log_sigmoid, "log_sigmoid(Tensor input) -> Tensor", Functional, &nn::functional::log_sigmoid)                    \
  X(softsign, "softsign(Tensor input) -> Tensor", Functional, &nn::functional::softsign)                             \
  X(softshrink, "softshrink(Tensor input, float lambd=0.5) -> Tensor", Functional, &nn::functional::softshrink)      \
  X(hardshrink, "hardshrink(Tensor input, float lambd=0.5) -> Tensor", Functional, &nn::functional::hardshrink)      \
  X(tanhshrink, "tanhshrink(Tensor input) -> Tensor", Functional, &nn::functional::tanhshrink)                       \
  X(threshold,                                                                                                       \
    "threshold(Tensor input, float threshold, float value, bool inplace=False) -> Tensor",                           \
    Functional, &nn::functional::threshold)                                                                          \
  X(softmin,                                                                                                         \
    "softmin(Tensor input, int? dim=None, ScalarType? dtype=None) -> Tensor",                                        \
    Functional, &nn::functional::softmin)                                                                            \
  X(normalize, "normalize(Tensor input, float p=2.0, int dim=1, float eps=1e-12) -> Tensor", Functional,           \
    &nn::functional::normalize)                                                                                      \
  X(conv1d, "conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[1] stride=[1], "                             \
    "int[1] padding=[0], int[1] dilation=[1], int groups=1) -> Tensor", Functional, &adapt::conv1d)                  \
  X(conv_transpose1d, "conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, "                            \
    "int[1] stride=[1], int[1] padding=[0], int[1] output_padding=[0], int groups=1, "                               \
    "int[1] dilation=[1]) -> Tensor", Functional, &nn::functional::conv_transpose1d)                                 \
  X(conv2d, "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[2] stride=[1, 1], "                          \
    "int[2] padding=[0, 0], int[2] dilation=[1, 1], int groups=1) -> Tensor", Functional, &adapt::conv2d)            \
  X(conv_transpose2d, "conv_transpose2d(Tensor input, Tensor weight, Tensor? bias=None, "                            \
    "int[2] stride=[1, 1], int[2] padding=[0, 0], int[2] output_padding=[0, 0], int groups=1, "                      \
    "int[2] dilation=[1, 1]) -> Tensor", Functional, &nn::functional::conv_transpose2d)                              \
  X(conv3d, "conv3d(Tensor input, Tensor weight, Tensor? bias=None, int[3] stride=[1, 1, 1], "                       \
    "int[3] padding=[0, 0, 0], int[3] dilation=[1, 1, 1], int groups=1) -> Tensor", Functional, &adapt::conv3d)      \
  X(conv_transpose3d, "conv_transpose3d(Tensor input, Tensor weight, Tensor? bias=None, "                            \
    "int[3] stride=[1, 1, 1], int[3] padding=[0, 0, 0], int[3] output_padding=[0, 0, 0], int groups=1, "             \
    "int[3] dilation=[1, 1, 1]) -> Tensor", Functional, &nn::functional::conv_transpose3d)                           \
  X(pad, "pad(Tensor input, int[] pad, str mode=\"constant\", float? value=None) -> Tensor", Functional,             \
    &nn::functional::pad)                                                                                            \
  X(batch_norm, "batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, "          \
    "Tensor? bias=None, bool training=False, float momentum=0.1, float eps=1e-05) -> Tensor", Functional,            \
    &nn::functional::batch_norm)                                                                                     \
  X(group_norm, "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) " \
    "-> Tensor", Functional, &nn::functional::group_norm)                                                            \
  X(instance_norm, "instance_norm(Tensor input, Tensor? running_mean=None, Tensor? running_var=None, "               \
    "Tensor? weight=None, Tensor? bias=None, bool use_input_stats=True, float momentum=0.1, float eps=1e-05) "       \
    "-> Tensor", Functional, &nn::functional::instance_norm)                                                         \
  X(local_response_norm, "local_response_norm(Tensor input, int size, float alpha=0.0001, float beta=0.75, "         \
    "float k=1.0) -> Tensor", Functional, &nn::functional::local_response_norm)                                      \
  /* pooling (nn/pooling.cpp) */                                                                                     \
  X(max_pool1d, "max_pool1d(Tensor input, int[1] kernel_size, int[1]? stride=None, int[1] padding=0, "               \
    "int[1] dilation=1, bool ceil_mode=False, bool return_indices=False) -> (Tensor, Tensor)", Functional,           \
    &adapt::max_pool1d)                                                                                              \
  X(max_pool2d, "max_pool2d(Tensor input, int[2] kernel_size, int[2]? stride=None, int[2] padding=0, "               \
    "int[2] dilation=1, bool ceil_mode=False, bool return_indices=False) -> (Tensor, Tensor)", Functional,           \
    &adapt::max_pool2d)                                                                                              \
  X(max_pool3d, "max_pool3d(Tensor input, int[3] kernel_size, int[3]? stride=None, int[3] padding=0, "               \
    "int[3] dilation=1, bool ceil_mode=False, bool return_indices=False) -> (Tensor, Tensor)", Functional,           \
    &adapt::max_pool3d)                                                                                              \
  X(avg_pool1d, "avg_pool1d(Tensor input, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], "                \
    "bool ceil_mode=False, bool count_include_pad=True) -> Tensor", Functional, &nn::functional::avg_pool1d)         \
  X(avg_pool2d, "avg_pool2d(Tensor input, int[2] kernel_size, int[2] stride=[], int[2] padding=[0, 0], "             \
    "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor", Functional,          \
    &nn::functional::avg_pool2d)                                                                                     \
  X(avg_pool3d, "avg_pool3d(Tensor input, int[3] kernel_size, int[3] stride=[], int[3] padding=[0, 0, 0], "          \
    "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor", Functional,          \
    &nn::functional::avg_pool3d)                                                                                     \
  X(adaptive_avg_pool1d, "adaptive_avg_pool1d(Tensor input, int[1] output_size) -> Tensor", Functional,              \
    &nn::functional::adaptive_avg_pool1d)                                                                            \
  X(adaptive_max_pool1d, "adaptive_max_pool1d(Tensor input, int[1] output_size, bool return_indices=False) "         \
    "-> (Tensor, Tensor)", Functional, &adapt::adaptive_max_pool1d)                                                  \
  X(adaptive_avg_pool2d, "adaptive_avg_pool2d(Tensor input, int[2] output_size) -> Tensor", Functional,              \
    &nn::functional::adaptive_avg_pool2d)                                                                            \
  X(adaptive_max_pool2d, "adaptive_max_pool2d(Tensor input, int[2] output_size, bool return_indices=False) "         \
    "-> (Tensor, Tensor)", Functional, &adapt::adaptive_max_pool2d)                                                  \
  X(adaptive_avg_pool3d, "adaptive_avg_pool3d(Tensor input, int[3] output_size) -> Tensor", Functional,              \
    &nn::functional::adaptive_avg_pool3d)                                                                            \
  X(adaptive_max_pool3d, "adaptive_max_pool3d(Tensor input, int[3] output_size, bool return_indices=False) "         \
    "-> (Tensor, Tensor)", Functional, &adapt::adaptive_max_pool3d)                                                  \
  X(lp_pool1d, "lp_pool1d(Tensor input, Scalar norm_type, int[1] kernel_size, int[1]? stride=None, "                 \
    "bool ceil_mode=False) -> Tensor", Functional, &nn::functional::lp_pool1d)                                       \
  X(lp_pool2d, "lp_pool2d(Tensor input, Scalar norm_type, int[2] kernel_size, int[2]? stride=None, "                 \
    "bool ceil_mode=False) -> Tensor", Functional, &nn::functional::lp_pool2d)                                       \
  X(lp_pool3d, "lp_pool3d(Tensor input, Scalar norm_type, int[3] kernel_size, int[3]? stride=None, "                 \
    "bool ceil_mode=False) -> Tensor", Functional, &nn::functional::lp_pool3d)                                       \
  X(max_unpool1d, "max_unpool1d(Tensor input, Tensor indices, int[1] kernel_size, int[1]? stride=None, "             \
    "int[1] padding=0, int[1]? output_size=None) -> Tensor", Functional, &nn::functional::max_unpool1d)              \
  X(max_unpool2d, "max_unpool2d(Tensor input, Tensor indices, int[2] kernel_size, int[2]? stride=None, "             \
    "int[2] padding=0, int[2]? output_size=None) -> Tensor", Functional, &nn::functional::max_unpool2d)              \
  X(max_unpool3d, "max_unpool3d(Tensor input, Tensor indices, int[3] kernel_size, int[3]? stride=None, "             \
    "int[3] padding=0, int[3]? output_size=None) -> Tensor", Functional, &nn::functional::max_unpool3d)              \
  /* resampling (nn/resample.cpp) */                                                                                  \
  X(interpolate, "interpolate(Tensor input, int[]? size=None, float[]? scale_factor=None, str mode=\"nearest\", "     \
    "bool? align_corners=None, bool? recompute_scale_factor=None, bool antialias=False) -> Tensor", Functional,      \
    &adapt::interpolate)                                                                                             \
  X(pixel_shuffle, "pixel_shuffle(Tensor input, int upscale_factor) -> Tensor", Functional,                         \
    &nn::functional::pixel_shuffle)                                                                                  \
  X(pixel_unshuffle, "pixel_unshuffle(Tensor input, int downscale_factor) -> Tensor", Functional,                   \
    &nn::functional::pixel_unshuffle)                                                                                \
  X(unfold, "unfold(Tensor input, int[2] kernel_size, int[2] dilation=1, int[2] padding=0, int[2] stride=1) "        \
    "-> Tensor", Functional, &nn::functional::unfold)                                                                \
  X(fold, "fold(Tensor input, int[2] output_size, int[2] kernel_size, int[2] dilation=1, int[2] padding=0, "         \
    "int[2] stride=1) -> Tensor", Functional, &nn::functional::fold)                                                 \
  X(embedding, "embedding(Tensor input, Tensor weight, int? padding_idx=None) -> Tensor", Functional,               \
    &adapt::embedding)                                                                                               \
  X(one_hot, "one_hot(Tensor input, int num_classes=-1) -> Tensor", Functional, &one_hot)                            \
  X(scaled_dot_product_attention,                                                                                    \
    "scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "                  \
    "float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",                \
    Functional, &nn::scaled_dot_product_attention)                                                                   \
  X(cross_entropy,                                                                                                   \
    "cross_entropy(Tensor input, Tensor target, Tensor? weight=None, int ignore_index=-100, "                        \
    "str reduction=\"mean\", float label_smoothing=0.0) -> Tensor",                                                  \
    Functional, &nn::functional::cross_entropy)                                                                      \
  X(nll_loss,                                                                                                        \
    "nll_loss(Tensor input, Tensor target, Tensor? weight=None, int ignore_index=-100, str reduction=\"mean\") "     \
    "-> Tensor",                                                                                                     \
    Functional, &nn::functional::nll_loss)                                                                           \
  X(mse_loss, "mse_loss(Tensor input, Tensor target, str reduction=\"mean\") -> Tensor", Functional,                \
    &nn::functional::mse_loss)                                                                                       \
  X(l1_loss, "l1_loss(Tensor input, Tensor target, str reduction=\"mean\") -> Tensor", Functional,                  \
    &nn::functional::l1_loss)                                                                                        \
  X(binary_cross_entropy_with_logits,                                                                                \
    "binary_cross_entropy_with_logits(Tensor input, Tensor target, Tensor? weight=None, str reduction=\"mean\", "    \
    "Tensor? pos_weight=None) -> Tensor",                                                                            \
    Functional, &nn::functional::binary_cross_entropy_with_logits)                                                   \
  X(linear_cross_entropy,                                                                                            \
    "linear_cross_entropy(Tensor input, Tensor linear_weight, Tensor target, *, Tensor? linear_bias=None, "          \
    "Tensor? weight=None, str reduction=\"mean\", int ignore_index=-100, float label_smoothing=0.0, "               \
    "float z_loss=0.0, int? chunk_size=None) -> Tensor",                                                             \
    Functional, &nn::functional::linear_cross_entropy)                                                               \
  /* random sampling */                                                                                              \
  X(multinomial,                                                                                                     \
    "multinomial(Tensor input, int num_samples, bool replacement=False, *, Generator? generator=None) -> Tensor",    \
    Both, &multinomial)                                                                                              \
  X(bernoulli, "bernoulli(Tensor input, *, Generator? generator=None) -> Tensor", Both, &bernoulli)

namespace flambeau {

// One line of the table, as compile-time text (bindings check argument counts against it).
struct OpSchemaText {
  std::string_view name, text;
  OpVariants variants;
};

namespace schemas {
#define FLB_UNARY_SCHEMA(name, ...)                                                                                  \
  inline constexpr OpSchemaText name{#name, #name "(Tensor input) -> Tensor", OpVariants::Both};
#define FLB_BINARY_SCHEMA(name)                                                                                      \
  inline constexpr OpSchemaText name{#name, #name "(Tensor input, Tensor other) -> Tensor", OpVariants::Both};
#define FLB_TABLE_SCHEMA(id, schema, variants, ...) inline constexpr OpSchemaText id{#id, schema, OpVariants::variants};
FLB_UNARY_OPS(FLB_UNARY_SCHEMA)
FLB_BINARY_OPS(FLB_BINARY_SCHEMA)
FLB_COMPARE_OPS(FLB_BINARY_SCHEMA)
FLB_LOGICAL_OPS(FLB_BINARY_SCHEMA)
FLB_OP_SCHEMAS(FLB_TABLE_SCHEMA)
#undef FLB_TABLE_SCHEMA
#undef FLB_BINARY_SCHEMA
#undef FLB_UNARY_SCHEMA

}  // namespace schemas

// Compile-time reading of a schema text: bindings and kernels are checked against it.
namespace schema_text {

// The argument list of a schema: the text between the first '(' and its ')'.
constexpr std::string_view argument_list(std::string_view s) {
  const size_t open = s.find('(');
  size_t depth = 0, i = open;
  for (; i < s.size(); ++i) {
    if (s[i] == '(') ++depth;
    if (s[i] == ')' && --depth == 0) break;
  }
  return s.substr(open + 1, i - open - 1);
}

// The i-th comma-separated item of the argument list ("*" counts as an item).
constexpr std::string_view item(std::string_view s, size_t i) {
  std::string_view list = argument_list(s);
  size_t start = 0, depth = 0, n = 0;
  bool quoted = false;
  for (size_t k = 0; k <= list.size(); ++k) {
    const char c = k < list.size() ? list[k] : ',';
    if (c == '"') quoted = !quoted;
    if (!quoted && c == '[') ++depth;
    if (!quoted && c == ']') --depth;
    if (!quoted && depth == 0 && c == ',') {
      if (n++ == i) {
        std::string_view it = list.substr(start, k - start);
        while (!it.empty() && it.front() == ' ') it.remove_prefix(1);
        return it;
      }
      start = k + 1;
    }
  }
  return {};
}

constexpr size_t item_count(std::string_view s) {
  size_t n = 0;
  while (!item(s, n).empty()) ++n;
  return n;
}

// Arguments before the keyword-only marker '*' (all of them when there is none).
constexpr size_t positional_count(std::string_view s) {
  for (size_t i = 0; i < item_count(s); ++i)
    if (item(s, i) == "*") return i;
  return item_count(s);
}

constexpr size_t argument_count(std::string_view s) {
  return item_count(s) - (positional_count(s) < item_count(s) ? 1 : 0);
}

// The item of argument i (skipping the '*').
constexpr std::string_view argument(std::string_view s, size_t i) {
  return item(s, i < positional_count(s) ? i : i + 1);
}

// Whether argument i accepts None: an optional type ("int?") or a None default.
constexpr bool accepts_none(std::string_view s, size_t i) {
  const std::string_view a = argument(s, i);
  const std::string_view type = a.substr(0, a.find(' '));
  return type.ends_with('?') || a.ends_with("=None");
}

// The type of argument i as written ("int[1]?").
constexpr std::string_view type(std::string_view s, size_t i) {
  const std::string_view a = argument(s, i);
  return a.substr(0, a.find(' '));
}

// Whether a C++ parameter of type P carries values of schema type t: Tensor (const& or &,
// in place), int (int64_t), float (double), bool, str (std::string), Scalar, ScalarType
// (DType), Generator, a list as Dims (int[], None meaning every dim) or std::vector<Tensor>,
// an optional type as std::optional; op_hook::Value carries anything (the kernel reads it).
template <class P>
constexpr bool carries(std::string_view t) {
  using T = std::remove_cvref_t<P>;
  if constexpr (std::is_same_v<T, op_hook::Value>) {
    return true;
  } else if constexpr (op_hook::detail::is_optional<T>::value) {
    return t.ends_with('?') && carries<typename T::value_type>(t.substr(0, t.size() - 1));
  } else {
    if (t.ends_with('?') && !std::is_same_v<T, Dims>) return false;
    if (t.ends_with('?')) t.remove_suffix(1);
    const bool list = t.ends_with(']');
    const std::string_view base = list ? t.substr(0, t.find('[')) : t;
    if constexpr (std::is_same_v<T, Dims>) return list && (base == "int" || base == "SymInt");
    if (list) return std::is_same_v<T, std::vector<Tensor>> && base == "Tensor";
    if constexpr (std::is_same_v<T, Tensor>) return base == "Tensor";
    if constexpr (std::is_same_v<T, int64_t>) return base == "int" || base == "SymInt";
    if constexpr (std::is_same_v<T, double>) return base == "float";
    if constexpr (std::is_same_v<T, bool>) return base == "bool";
    if constexpr (std::is_same_v<T, std::string>) return base == "str";
    if constexpr (std::is_same_v<T, Scalar>) return base == "Scalar";
    if constexpr (std::is_same_v<T, DType>) return base == "ScalarType";
    if constexpr (std::is_same_v<T, Generator>) return base == "Generator";
    if constexpr (std::is_same_v<T, MemoryFormat>) return base == "MemoryFormat";
    return false;
  }
}

// Whether a C++ function's parameters carry schema s's arguments, one to one.
template <class R, class... A>
constexpr bool matches(std::string_view s, R (*)(A...)) {
  if (sizeof...(A) != argument_count(s)) return false;
  size_t i = 0;
  return (carries<A>(type(s, i++)) && ...);
}

}  // namespace schema_text

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
