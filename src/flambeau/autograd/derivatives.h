// The derivatives of the ops, as data keyed by op: a differentiable public op is defined
// with FLB_DIFF_OP (below), its body computes the outputs only, and its derivative
// autograd::derivative::<op>(outputs, arguments...) (declared here, one line per op, defined in
// op_derivatives.cpp) records the backward node from the op's arguments and outputs. The
// record_* formulas below are what the derivatives (and the in-place forms, views and
// copies) build the nodes with; each records nothing unless grad mode is on and an input
// requires grad.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "flambeau/autograd/autocast.h"
#include "flambeau/autograd/function.h"
#include "flambeau/core/op_hook.h"

namespace flambeau {
class Generator;
using IndexList = std::vector<std::optional<Tensor>>;  // ops/ops.h
namespace kernels {
enum class UnaryOp : uint8_t;  // kernels/cpu/simd.h
}  // namespace kernels
}  // namespace flambeau

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

// ---- the derivative of each op defined with FLB_DIFF_OP -----------------------------------
// derivative::<op>(outputs, the op's arguments): records the op's backward node.
namespace derivative {
void sum(Tensor& out, const Tensor& t, const Dims& dims, bool keepdim, std::optional<DType> dtype);
void prod(Tensor& out, const Tensor& t, const Dims& dims, bool keepdim, std::optional<DType> dtype);
void mean(Tensor& out, const Tensor& t, const Dims& dims, bool keepdim, std::optional<DType> dtype);
void amax(Tensor& out, const Tensor& t, const Dims& dims, bool keepdim);
void amin(Tensor& out, const Tensor& t, const Dims& dims, bool keepdim);
void max(Tensor& out, const Tensor& t);
void min(Tensor& out, const Tensor& t);
void max(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim, bool keepdim);
void min(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim, bool keepdim);
void var(Tensor& out, const Tensor& t, const Dims& dims, double correction, bool keepdim);
void std(Tensor& out, const Tensor& t, const Dims& dims, double correction, bool keepdim);
void norm(Tensor& out, const Tensor& t, double p, const Dims& dims, bool keepdim);
void logsumexp(Tensor& out, const Tensor& t, const Dims& dims, bool keepdim);
void cumsum(Tensor& out, const Tensor& t, int64_t dim, std::optional<DType> dtype);
void cumprod(Tensor& out, const Tensor& t, int64_t dim, std::optional<DType> dtype);
void cummax(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim);
void cummin(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim);
void logcumsumexp(Tensor& out, const Tensor& t, int64_t dim);
void softmax(Tensor& out, const Tensor& t, int64_t dim, std::optional<DType> dtype);
void log_softmax(Tensor& out, const Tensor& t, int64_t dim, std::optional<DType> dtype);
void sort(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t dim, bool descending, bool stable);
void topk(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t k, int64_t dim, bool largest, bool sorted);
void kthvalue(std::pair<Tensor, Tensor>& out, const Tensor& t, int64_t k, int64_t dim, bool keepdim);
void mm(Tensor& out, const Tensor& a, const Tensor& b);
void bmm(Tensor& out, const Tensor& a, const Tensor& b);
void addmm(Tensor& out, const Tensor& self, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha);
void dot(Tensor& out, const Tensor& a, const Tensor& b);
void cat(Tensor& out, const std::vector<Tensor>& tensors, int64_t dim);
void addcmul(Tensor& out, const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value);
void addcdiv(Tensor& out, const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value);
void lerp(Tensor& out, const Tensor& start, const Tensor& end, const Tensor& weight);
void clamp(Tensor& out, const Tensor& t, std::optional<Tensor> min, std::optional<Tensor> max);
void where(Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
void softplus(Tensor& out, const Tensor& t, double beta, double threshold);
void masked_fill(Tensor& out, const Tensor& self, const Tensor& mask, const Tensor& value);
void masked_select(Tensor& out, const Tensor& self, const Tensor& mask);
void masked_scatter(Tensor& out, const Tensor& self, const Tensor& mask, const Tensor& source);
void gather(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
void scatter(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
void scatter_add(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
void scatter_reduce(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                    const std::string& reduce, bool include_self);
void index_select(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index);
void index_add(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha);
void index_copy(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
void index_fill(Tensor& out, const Tensor& self, int64_t dim, const Tensor& index, const Tensor& value);
void take(Tensor& out, const Tensor& self, const Tensor& index);
void embedding(Tensor& out, const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx);
void index(Tensor& out, const Tensor& self, const IndexList& indices);
void index_put(Tensor& out, const Tensor& self, const IndexList& indices, const Tensor& values, bool accumulate);
void bernoulli(Tensor& out, const Tensor& p, std::optional<Generator> gen);
// Views (ops/view.cpp): an op that returned its input records nothing.
void view(Tensor& out, const Tensor& t, const Dims& shape);
void permute(Tensor& out, const Tensor& t, const Dims& dims);
void transpose(Tensor& out, const Tensor& t, int64_t dim0, int64_t dim1);
void t(Tensor& out, const Tensor& x);
void expand(Tensor& out, const Tensor& t, const Dims& shape);
void slice(Tensor& out, const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
           int64_t step);
void select(Tensor& out, const Tensor& t, int64_t dim, int64_t index);
void squeeze(Tensor& out, const Tensor& t);
void squeeze(Tensor& out, const Tensor& t, int64_t dim);
void unsqueeze(Tensor& out, const Tensor& t, int64_t dim);
void as_strided(Tensor& out, const Tensor& t, const Dims& size, const Dims& stride, std::optional<int64_t> offset);
// Copies (ops/copy.cpp).
void clone(Tensor& out, const Tensor& t);
void to(Tensor& out, const Tensor& t, DType dtype);
}  // namespace derivative

// Runs `forward` below autograd (grad mode off, so the ops it calls record nothing), then,
// when grad mode was on, `derivative` on its outputs.
template <class Forward, class Derivative>
auto forward_then_derivative(const Forward& forward, const Derivative& derivative) {
  if (!grad_mode_enabled()) return forward();
  auto out = [&] {
    NoGradGuard below_autograd;
    return forward();
  }();
  derivative(out);
  return out;
}

// The member form of FLB_DIFF_OP (views, copies): reported to the op hook as `name`; the
// body runs below autograd, then the derivative records the backward node:
//   return autograd::diff_member("permute", *this, dims)([&]() -> Tensor { ... },
//                                 [&](Tensor& out) { derivative::permute(out, *this, dims); });
template <class... Args>
auto diff_member(std::string_view name, const Args&... args) {
  return [pending = op_hook::op(name, args...)](const auto& body, const auto& derivative) -> Tensor {
    return pending([&]() -> Tensor { return forward_then_derivative(body, derivative); });
  };
}

}  // namespace flambeau::autograd

// Defines the differentiable public op `name` as FLB_OP does (same arguments; reported to
// the op hook), with the body below autograd and autograd::derivative::name recording the
// backward. The _AUTOCAST form first applies an autocast policy (lower, fp32) above
// autograd, so that the casts are recorded:
//   FLB_DIFF_OP(cumsum, (const Tensor& t, int64_t dim, std::optional<DType> dtype), (t, dim, dtype), Tensor) {
//     return cum_op<false>("cumsum", t, dim, dtype);
//   }
#define FLB_DIFF_OP(name, params, args, ...) FLB_DIFF_OP_IMPL(name, , params, args, __VA_ARGS__)
#define FLB_DIFF_OP_AUTOCAST(policy, name, params, args, ...) \
  FLB_DIFF_OP_IMPL(name, FLB_AUTOCAST(policy, name, FLB_OP_UNPAREN args);, params, args, __VA_ARGS__)
#define FLB_DIFF_OP_IMPL(name, autocast, params, args, ...)                                           \
  static __VA_ARGS__ name##_forward params;                                                           \
  FLB_OP(name, params, args, __VA_ARGS__) {                                                           \
    autocast return ::flambeau::autograd::forward_then_derivative(                                    \
        [&]() -> __VA_ARGS__ { return name##_forward args; },                                         \
        [&](__VA_ARGS__& out) { ::flambeau::autograd::derivative::name(out, FLB_OP_UNPAREN args); }); \
  }                                                                                                   \
  static __VA_ARGS__ name##_forward params
