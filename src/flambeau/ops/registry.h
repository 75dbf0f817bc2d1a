// The op registry: every op of the schema table (ops/op_schemas.h) callable by name with
// boxed arguments, the ones left out taking the schema's defaults. It is what replays a
// recorded program (the op hook reports calls as the same Values) and where ops defined
// outside flambeau register, each with its schema.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "flambeau/core/generator.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/ops/schema.h"

namespace flambeau {

using Value = op_hook::Value;
// An op's kernel on boxed arguments (every argument of its schema, in order); returns its
// results (a Tensor[] result is one Value).
using BoxedKernel = std::function<std::vector<Value>(const std::vector<Value>& args)>;

struct RegisteredOp {
  OpSchema schema;
  BoxedKernel kernel;
};

// Registers an op from its full schema ("mylib::fused_bias_gelu(Tensor x, Tensor b) ->
// Tensor"); ValueError when the schema is malformed or its name is taken.
void register_op(std::string_view schema, BoxedKernel kernel);
// The op called `qualified_name`, or nullptr.
const RegisteredOp* find_op(std::string_view qualified_name);
// Every registered op's name: the schema table's, then the others in registration order.
std::vector<std::string> registered_ops();

// Calls op `name` on positional `args`; arguments left out take their schema defaults.
// ValueError for an unknown op; TypeError naming the op and the argument when one is
// missing, of the wrong kind, or too many are given.
std::vector<Value> call_op(std::string_view name, std::vector<Value> args);
// The same for an op found already (no lookup by name).
std::vector<Value> call_op(const RegisteredOp& op, std::vector<Value> args);

// Whether call_op would take these arguments for op (their count and kinds).
bool arguments_fit(const RegisteredOp& op, const std::vector<const Value*>& args);

// The arguments of a call the op hook reported for op `name`, in its schema's order (a few
// ops' C++ functions take them in another order: embedding(weight, input)).
std::vector<const Value*> in_schema_order(std::string_view name, const std::vector<Value>& reported);

// Whether op's output shape depends on its inputs' values (nonzero, unique, ...): a traced
// or captured program cannot fix it.
bool output_shape_depends_on_values(std::string_view name);

// The value of an argument's default as written in a schema: None, True/False, an integer,
// a float, a "string" or a [list of integers].
Value default_value(const SchemaArg& arg);

namespace detail {

[[noreturn]] void bad_boxed_argument(const char* expected);

// A boxed argument as the C++ parameter type T.
template <class T>
struct Unbox;
template <>
struct Unbox<Tensor> {
  static Tensor get(const Value& v) {
    if (auto* t = std::get_if<Tensor>(&v)) return *t;
    if (auto* i = std::get_if<int64_t>(&v)) return Tensor(Scalar(*i));  // a number: wrapped
    if (auto* d = std::get_if<double>(&v)) return Tensor(Scalar(*d));
    if (auto* b = std::get_if<bool>(&v)) return Tensor(Scalar(*b));
    if (auto* s = std::get_if<Scalar>(&v)) return Tensor(*s);
    bad_boxed_argument("a Tensor");
  }
};
template <>
struct Unbox<int64_t> {
  static int64_t get(const Value& v) {
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    bad_boxed_argument("an int");
  }
};
template <>
struct Unbox<double> {
  static double get(const Value& v) {
    if (auto* d = std::get_if<double>(&v)) return *d;
    if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
    bad_boxed_argument("a float");
  }
};
template <>
struct Unbox<bool> {
  static bool get(const Value& v) {
    if (auto* b = std::get_if<bool>(&v)) return *b;
    bad_boxed_argument("a bool");
  }
};
template <>
struct Unbox<Scalar> {
  static Scalar get(const Value& v) {
    if (auto* s = std::get_if<Scalar>(&v)) return *s;
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    if (auto* d = std::get_if<double>(&v)) return *d;
    if (auto* b = std::get_if<bool>(&v)) return *b;
    bad_boxed_argument("a number");
  }
};
template <>
struct Unbox<DType> {
  static DType get(const Value& v) {
    if (auto* d = std::get_if<DType>(&v)) return *d;
    bad_boxed_argument("a dtype");
  }
};
template <>
struct Unbox<MemoryFormat> {
  static MemoryFormat get(const Value& v) {
    if (auto* i = std::get_if<int64_t>(&v); i && *i >= 0 && *i <= int64_t(MemoryFormat::ChannelsLast3d))
      return MemoryFormat(*i);
    bad_boxed_argument("a memory format");
  }
};
template <>
struct Unbox<std::string> {
  static std::string get(const Value& v) {
    if (auto* s = std::get_if<std::string>(&v)) return *s;
    bad_boxed_argument("a str");
  }
};
template <>
struct Unbox<Dims> {  // int[]: a list, one int, or None (every dim)
  static Dims get(const Value& v) {
    if (auto* d = std::get_if<Dims>(&v)) return *d;
    if (auto* i = std::get_if<int64_t>(&v)) return Dims{*i};
    if (std::holds_alternative<std::monostate>(v)) return Dims{};
    bad_boxed_argument("a list of ints");
  }
};
template <>
struct Unbox<std::vector<Tensor>> {
  static std::vector<Tensor> get(const Value& v) {
    if (auto* l = std::get_if<std::vector<Tensor>>(&v)) return *l;
    bad_boxed_argument("a list of Tensors");
  }
};
template <>
struct Unbox<Value> {  // kernels that read the Value themselves (split: an int or a list)
  static const Value& get(const Value& v) { return v; }
};
template <class T>
struct Unbox<std::optional<T>> {
  static std::optional<T> get(const Value& v) {
    if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
    if constexpr (std::is_same_v<T, Generator>) {
      if (auto* o = std::get_if<op_hook::Opaque>(&v); o && o->generator) return *o->generator;
      bad_boxed_argument("a Generator");
    } else {
      return Unbox<T>::get(v);
    }
  }
};

inline void box_result(std::vector<Value>& out, const Tensor& t) { out.push_back(t); }
inline void box_result(std::vector<Value>& out, const std::vector<Value>& v) {  // results boxed already
  out.insert(out.end(), v.begin(), v.end());
}
inline void box_result(std::vector<Value>& out, const std::vector<Tensor>& v) { out.push_back(v); }
template <class A, class B>
void box_result(std::vector<Value>& out, const std::pair<A, B>& p) {
  box_result(out, p.first), box_result(out, p.second);
}
template <class... Ts>
void box_result(std::vector<Value>& out, const std::tuple<Ts...>& t) {
  std::apply([&](const auto&... x) { (box_result(out, x), ...); }, t);
}

}  // namespace detail

// The boxed form of fn: its arguments unboxed in order, its result boxed.
template <class R, class... A>
BoxedKernel box(R (*fn)(A...)) {
  return [fn](const std::vector<Value>& args) {
    std::vector<Value> out;
    [&]<size_t... I>(std::index_sequence<I...>) {
      if constexpr (std::is_void_v<R>) {
        fn(detail::Unbox<std::decay_t<A>>::get(args.at(I))...);
      } else {
        // Arguments are unboxed into locals first: Tensor& parameters bind to them.
        std::tuple<std::decay_t<A>...> unboxed{detail::Unbox<std::decay_t<A>>::get(args.at(I))...};
        detail::box_result(out, fn(std::get<I>(unboxed)...));
      }
    }(std::index_sequence_for<A...>());
    return out;
  };
}

}  // namespace flambeau
