// The backward formulas of the ops, called by the ops themselves right after they compute
// their outputs (each records nothing unless grad mode is on and an input requires grad).
#pragma once
#include <functional>
#include <string>

#include "flambeau/autograd/function.h"

namespace flambeau::kernels {
enum class UnaryOp : uint8_t;  // kernels/cpu/simd.h
}  // namespace flambeau::kernels

namespace flambeau::autograd {

// The in-place form of an op on a tensor that needs grad: runs `op` out of place on a
// clone of self (so that saved inputs stay intact), writes the result into self and
// gives self the result's history. Leaves that require grad are refused.
Tensor& inplace_with_grad(const char* name, Tensor& self, const std::function<Tensor(const Tensor&)>& op);
// The in-place form of an op on a tensor that needs grad, from its out-of-place form:
// refuses a leaf before `out_of_place` runs, then assigns its result (assign_with_grad).
Tensor& assign_out_of_place(const char* name, Tensor& self, const std::function<Tensor()>& out_of_place);
// Writes `result` (computed out of place from self) into self and gives self its history.
Tensor& assign_with_grad(const char* name, Tensor& self, const Tensor& result);

void record_unary(kernels::UnaryOp op, const Tensor& in, Tensor& out);
void record_softplus(const Tensor& in, double beta, double threshold, Tensor& out);

// floor/trunc division have a zero gradient (almost everywhere), stated per op.
void record_binary(BinaryOp op, const Tensor& a, const Tensor& b, Scalar alpha, Tensor& out);
void record_where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out);
void record_clamp(const Tensor& t, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi, Tensor& out);
void record_addcmul(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value, bool divide, Tensor& out);
void record_lerp(const Tensor& start, const Tensor& end, const Tensor& weight, Tensor& out);
// Casts, copies and contiguous(): the gradient passes through (cast back to the input dtype).
void record_identity(const char* name, const Tensor& in, Tensor& out);
// Random sampling from `in` (in-place samplers, bernoulli): a zero gradient, as in PyTorch.
void record_zero_grad(const char* name, const Tensor& in, Tensor& out);

// A view (or reshape) whose backward maps the gradient back with `back`.
void record_view(const char* name, const Tensor& in, Tensor& out, std::function<Tensor(const Tensor&)> back);
// slice/narrow/select: the gradient lands in the viewed part of a zero tensor shaped like in.
void record_slice(const char* name, const Tensor& in, Tensor& out, std::function<Tensor(const Tensor&)> part);

// Reductions over `dims` (empty: all) of `in` into `out`; `name`: PyTorch's node name.
void record_sum(const char* name, const Tensor& in, const Dims& dims, double scale, Tensor& out);
void record_prod(const Tensor& in, const Dims& dims, Tensor& out);
void record_extreme(const char* name, const Tensor& in, const Dims& dims, Tensor& out);
// Values of max/min/sort/topk/kthvalue/cummax along dim, picked at `indices`.
// var, or std when is_std, with denominator max(0, n - correction).
void record_var(const Tensor& in, const Dims& dims, double denom, bool is_std, Tensor& out);
void record_norm(const Tensor& in, double p, const Dims& dims, Tensor& out);
void record_logsumexp(const Tensor& in, const Dims& dims, Tensor& out);
void record_pick(const char* name, const Tensor& in, int64_t dim, const Tensor& indices, bool keepdim, Tensor& out);
void record_softmax(const Tensor& in, int64_t dim, bool log, Tensor& out);
void record_cumsum(const Tensor& in, int64_t dim, Tensor& out);
void record_cumprod(const Tensor& in, int64_t dim, Tensor& out);
void record_logcumsumexp(const Tensor& in, int64_t dim, Tensor& out);

void record_dot(const Tensor& a, const Tensor& b, Tensor& out);
void record_mm(const char* name, const Tensor& a, const Tensor& b, Tensor& out);  // mm and bmm
void record_addmm(const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha, Tensor& out);
void record_cat(const std::vector<Tensor>& parts, int64_t dim, Tensor& out);

void record_index_select(const Tensor& self, int64_t dim, const Tensor& index, Tensor& out);
void record_gather(const Tensor& self, int64_t dim, const Tensor& index, Tensor& out);
void record_embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx, Tensor& out);
void record_index(const Tensor& self, const std::vector<std::optional<Tensor>>& indices, Tensor& out);
void record_masked_fill(const Tensor& self, const Tensor& mask, const Tensor& value, Tensor& out);

// derivatives_index.cpp: the indexing writes, masked_scatter/select and take. `index` and
// `dim` are as given to the op (the formulas call the public ops with them).
// scatter (add false) or scatter_add (add true); a wrapped-number src gets no gradient.
void record_scatter(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, bool add,
                    Tensor& out);
void record_scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                           const std::string& reduce, bool include_self, Tensor& out);
void record_index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha,
                      Tensor& out);
void record_index_copy(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Tensor& out);
void record_index_fill(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value, Tensor& out);
void record_index_put(const Tensor& self, const std::vector<std::optional<Tensor>>& indices, const Tensor& values,
                      bool accumulate, Tensor& out);
void record_masked_scatter(const Tensor& self, const Tensor& mask, const Tensor& source, Tensor& out);
void record_masked_select(const Tensor& self, const Tensor& mask, Tensor& out);
// index: int64, negative entries already wrapped.
void record_take(const Tensor& self, const Tensor& index, Tensor& out);

}  // namespace flambeau::autograd
