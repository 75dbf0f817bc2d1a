// The op hook: the one point every public op passes through. Listeners (the compiler's
// tracer, the profiler, graph capture, tests) see each user-level call: its name, its
// arguments and its outputs. Calls an op makes internally (div inside mean, the ops run by
// backward) are not reported: a per-thread depth count keeps them out.
//
// An op opts in by defining itself with FLB_OP (see the end of this file). With no listener
// registered, the cost per call is one relaxed atomic load and a direct call.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "flambeau/core/tensor.h"

namespace flambeau {
class Generator;
}

namespace flambeau::op_hook {

// An argument as a listener sees it. Values a listener cannot use (generators, callables)
// show up as Opaque, naming their kind.
struct Opaque {
  std::string kind;
  std::shared_ptr<Generator> generator;  // kind "generator": the generator (shares its state)
};
using Value = std::variant<std::monostate, Tensor, std::vector<Tensor>, std::vector<std::optional<Tensor>>, bool,
                           int64_t, double, Scalar, DType, std::string, Dims, Opaque>;

// One user-level op call, as it returned (an op that raises is not reported).
struct OpCall {
  std::string_view name;
  std::vector<Value> args;
  std::vector<Tensor> outputs;
  int64_t start_ns = 0;  // steady-clock time when the call began (the profiler's op start)
  uint64_t correlation = 0;  // unique per reported call: the profiler and graph capture share it
};

using Listener = std::function<void(const OpCall&)>;

// Registers a listener for every thread's calls; returns its id. Listeners run on the
// calling thread, in registration order, after the op returned; a listener must not
// assume it runs alone (ops run on several threads at once).
int add_listener(Listener listener);
// Unregisters; unknown ids are ignored.
void remove_listener(int id);

// Steady-clock nanoseconds (the clock every profiler timestamp uses).
int64_t now_ns();

namespace detail {
extern std::atomic<int> g_listeners;  // how many are registered
uint64_t next_correlation();          // 1, 2, ... (process-wide)
// The depth of op calls on this thread: 0 outside any op.
int& depth();
void notify(OpCall&& call);
// Ends a listened call: restores the depth, frees `pending`.
void leave(OpCall* pending);

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_int_vector : std::false_type {};
template <class T>
struct is_int_vector<std::vector<T>> : std::is_integral<T> {};

template <class T>
Value to_value(const T& v) {
  using U = std::decay_t<T>;
  if constexpr (std::is_same_v<U, Tensor> || std::is_same_v<U, std::vector<Tensor>> ||
                std::is_same_v<U, std::vector<std::optional<Tensor>>> || std::is_same_v<U, bool> ||
                std::is_same_v<U, double> || std::is_same_v<U, Scalar> || std::is_same_v<U, DType> ||
                std::is_same_v<U, std::string> || std::is_same_v<U, Dims>)
    return v;
  else if constexpr (std::is_integral_v<U>) return int64_t(v);
  else if constexpr (std::is_same_v<U, MemoryFormat>) return int64_t(v);  // boxed as torch boxes it
  else if constexpr (std::is_floating_point_v<U>) return double(v);
  else if constexpr (std::is_same_v<U, const char*> || std::is_same_v<U, char*>) return std::string(v);
  else if constexpr (std::is_same_v<U, Device>) return Opaque{"device " + v.str(), nullptr};
  else if constexpr (is_optional<U>::value) return v ? to_value(*v) : Value();
  else if constexpr (is_int_vector<U>::value) return Dims(std::vector<int64_t>(v.begin(), v.end()));
  else if constexpr (std::is_same_v<U, Generator>) return Opaque{"generator", std::make_shared<U>(v)};
  else return Opaque{"object", nullptr};
}

inline void collect(std::vector<Tensor>& out, const Tensor& t) { out.push_back(t); }
inline void collect(std::vector<Tensor>& out, const std::vector<Tensor>& v) {
  out.insert(out.end(), v.begin(), v.end());
}
template <class A, class B>
void collect(std::vector<Tensor>& out, const std::pair<A, B>& p) {
  collect(out, p.first), collect(out, p.second);
}
template <class... Ts>
void collect(std::vector<Tensor>& out, const std::tuple<Ts...>& t) {
  std::apply([&](const auto&... x) { (collect(out, x), ...); }, t);
}
template <class T>
void collect(std::vector<Tensor>&, const T&) {}  // non-tensor results (bool, DType, ...)


}  // namespace detail

// True when some listener is registered (one relaxed load).
inline bool active() { return detail::g_listeners.load(std::memory_order_relaxed) != 0; }

namespace detail {
// One call's bookkeeping; does nothing unless a listener was registered when the call began.
// The listened path is out of line, so an op without listeners pays one load and one test.
struct Frame {
  bool entered = false;
  OpCall* pending = nullptr;  // set for a user-level call; owned
  Frame() = default;
  Frame(const Frame&) = delete;
  Frame& operator=(const Frame&) = delete;
  template <class... Args>
  void enter(std::string_view name, const Args&... args) {
    entered = true;
    if (depth()++ == 0) pending = new OpCall{name, {to_value(args)...}, {}, now_ns(), next_correlation()};
  }
  template <class R>
  void finish(const R& result) {
    collect(pending->outputs, result);
    notify(std::move(*pending));
  }
  ~Frame() {
    if (entered) [[unlikely]]
      leave(pending);
  }
};
}  // namespace detail

// Runs body() as the op `name` called with `args`, reporting the call to the listeners when
// it is a user-level one. body() is called from one place only, so the compiler can inline
// the op's body as if the hook were not there.
template <class Body, class... Args>
decltype(auto) call(std::string_view name, Body&& body, const Args&... args) {
  detail::Frame frame;
  if (active()) [[unlikely]]
    frame.enter(name, args...);
  if constexpr (std::is_void_v<decltype(body())>) {
    body();
    if (frame.pending) [[unlikely]]
      detail::notify(std::move(*frame.pending));
  } else {
    decltype(auto) result = body();
    if (frame.pending) [[unlikely]]
      frame.finish(result);
    return result;
  }
}

// The form for member functions, whose bodies use the object:
//   return op_hook::op("view", *this, shape)([&]() -> Tensor { ... });
template <class... Args>
struct PendingCall {
  std::string_view name;
  std::tuple<const Args&...> args;
  template <class Body>
  decltype(auto) operator()(Body&& body) const {
    return std::apply([&](const Args&... a) -> decltype(auto) { return call(name, body, a...); }, args);
  }
};
template <class... Args>
PendingCall<Args...> op(std::string_view name, const Args&... args) {
  return {name, std::tuple<const Args&...>(args...)};
}

// RAII: ops run inside it are not reported (listeners run in one; code that calls ops on
// the user's behalf without being an op itself may use it too).
class Internal {
 public:
  Internal() { ++detail::depth(); }
  ~Internal() { --detail::depth(); }
  Internal(const Internal&) = delete;
  Internal& operator=(const Internal&) = delete;
};

}  // namespace flambeau::op_hook

// Defines the public op `name`: the function with the given parameters (parenthesised, no
// default values) and return type, whose body follows the macro, reported to the op hook
// under "name" with the arguments listed in `args`. Example:
//   FLB_OP(exp, (const Tensor& t), (t), Tensor) { return unary("exp", ...); }
#define FLB_OP(name, params, args, ...) FLB_OP_NAMED(#name, name, params, args, __VA_ARGS__)
// The same, reported under a name other than the C++ one (overloads, namespaced ops).
#define FLB_OP_NAMED(op_name, name, params, args, ...)                                             \
  static __VA_ARGS__ name##_op_body params;                                                        \
  __VA_ARGS__ name params {                                                                        \
    return ::flambeau::op_hook::call(op_name, [&]() -> __VA_ARGS__ { return name##_op_body args; }, \
                                     FLB_OP_UNPAREN args);                                         \
  }                                                                                                \
  static __VA_ARGS__ name##_op_body params
#define FLB_OP_UNPAREN(...) __VA_ARGS__
