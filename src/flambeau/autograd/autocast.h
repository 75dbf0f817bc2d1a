// Autocast (torch.autocast on the CPU): inside an AutocastGuard, matmul-like ops run in a
// 16-bit dtype (float32 inputs cast down) and the ops on torch's float32 list (losses, prod)
// run in float32 (16-bit inputs cast up); every other op runs in its inputs' dtype. The state
// is per thread, like torch's. Casts are autograd ops, so gradients reach float32 leaves.
#pragma once
#include <optional>
#include <tuple>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau::autocast {

// The CPU autocast state of this thread.
bool is_enabled();
DType dtype();  // bfloat16 unless set
bool is_cache_enabled();
void set_enabled(bool enabled);
void set_dtype(DType dtype);  // TypeError unless bfloat16 or float16
void set_cache_enabled(bool enabled);
// Drops the cached casts of float32 leaf parameters (done on leaving the outermost region).
void clear_cache();

// RAII region: sets the state, restores the previous one on exit (nests like torch's).
// Raises TypeError for a dtype other than bfloat16 / float16 (Python warns and disables).
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype = kBFloat16, bool enabled = true, bool cache_enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_, cache_enabled_;
  DType dtype_;
};

// Region entry / exit by hand (Python's context manager): enter returns the state to pass
// back to exit.
struct State {
  bool enabled, cache_enabled;
  DType dtype;
};
State enter(DType dtype, bool enabled, bool cache_enabled);
void exit(const State& previous);

enum class Policy { lower, fp32 };

// `t` as the policy wants it: lower casts float32 to the autocast dtype (leaf parameters
// through the cache), fp32 casts float16 / bfloat16 to float32; other dtypes are kept.
Tensor cast(Policy policy, const Tensor& t);

namespace detail {
inline bool needs(Policy p, const Tensor& t) {
  if (!t.defined()) return false;
  return p == Policy::lower ? t.dtype() == kFloat32 || (is_reduced_float(t.dtype()) && t.dtype() != dtype())
                            : is_reduced_float(t.dtype());
}
inline bool needs(Policy p, const std::optional<Tensor>& t) { return t && needs(p, *t); }
template <class T>
bool needs(Policy, const T&) { return false; }
inline Tensor apply(Policy p, const Tensor& t) { return t.defined() ? cast(p, t) : t; }
inline std::optional<Tensor> apply(Policy p, const std::optional<Tensor>& t) {
  return t ? std::optional<Tensor>(cast(p, *t)) : std::nullopt;
}
template <class T>
const T& apply(Policy, const T& x) { return x; }
}  // namespace detail

// The arguments recast for `policy` when autocast is on and some tensor needs a cast
// (non-tensor arguments pass through), else nullopt: one relaxed thread-local load when off.
template <class... Ts>
std::optional<std::tuple<std::decay_t<decltype(detail::apply(Policy::lower, std::declval<const Ts&>()))>...>>
cast_args(Policy policy, const Ts&... args) {
  if (!is_enabled() || !(detail::needs(policy, args) || ...)) return std::nullopt;
  return std::tuple{detail::apply(policy, args)...};
}

}  // namespace flambeau::autocast

namespace flambeau {
using autocast::AutocastGuard;  // flambeau::AutocastGuard guard(kBFloat16);
}  // namespace flambeau

// The first line of an op under autocast: reruns `op` on the recast arguments when a cast
// applies (the rerun finds nothing left to cast).
#define FLB_AUTOCAST(policy, op, ...)                                                              \
  if (auto flb_autocast_args_ = ::flambeau::autocast::cast_args(::flambeau::autocast::Policy::policy, __VA_ARGS__)) \
  return std::apply([](const auto&... flb_x_) { return op(flb_x_...); }, *flb_autocast_args_)
