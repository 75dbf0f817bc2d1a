// def_op: binds a public op from its line in the schema table (src/flambeau/ops/op_schemas.h).
// The argument names, the defaults and the keyword-only marker come from the schema; the
// argument count is checked against the C++ function's at compile time.
#pragma once
#include <array>
#include <string_view>
#include <utility>

#include "flambeau/ops/op_schemas.h"
#include "flambeau/ops/registry.h"

namespace flambeau::python {

// A schema default (ops/registry.h: default_value) as a Python object.
inline nb::object default_to_python(const Value& v) {
  if (auto* d = std::get_if<Dims>(&v)) {
    nb::list l;
    for (int64_t x : *d) l.append(x);
    return l;
  }
  return std::visit([](const auto& x) -> nb::object {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, std::monostate>) return nb::none();
    else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                       std::is_same_v<T, std::string>)
      return nb::cast(x);
    else
      throw TypeError("[def_op] a schema default that is not a literal");
  }, v);
}

template <class F>
struct arity : arity<decltype(&F::operator())> {};
template <class C, class R, class... A>
struct arity<R (C::*)(A...) const> : std::integral_constant<size_t, sizeof...(A)> {};
template <class R, class... A>
struct arity<R (*)(A...)> : std::integral_constant<size_t, sizeof...(A)> {};

// The nanobind annotation of argument I of schema S: its name, its default (a Python
// literal) and whether it accepts None.
template <const OpSchemaText& S, size_t I>
auto schema_arg() {
  const SchemaArg& a = op_schema(S.name).arguments[I];
  nb::object value;
  if (a.default_value) value = default_to_python(default_value(a));
  if (a.kind == ArgKind::MemoryFormat && nb::isinstance<nb::int_>(value))
    value = nb::borrow(memory_format_object(MemoryFormat(nb::cast<int64_t>(value))));
  if constexpr (schema_text::accepts_none(S.text, I))
    return nb::arg_v_t<nb::detail::arg_flags_default | nb::detail::cast_flags::accepts_none, false>(
        nb::arg(a.name.c_str()), std::move(value));
  else
    return nb::arg_v(nb::arg(a.name.c_str()), std::move(value));
}

// def(annotations of arguments [from, n) of schema S..., extra...), with nb::kw_only()
// where the schema has its '*'.
template <const OpSchemaText& S, size_t from, class F, class Def, class... Extra>
void with_schema_args(Def&& def, const Extra&... extra) {
  constexpr size_t n = schema_text::argument_count(S.text), kw = schema_text::positional_count(S.text);
  static_assert(n == arity<F>::value, "the C++ function takes another number of arguments than its schema");
  static_assert(from <= kw, "a method's self cannot be keyword-only");
  [&]<size_t... I, size_t... J>(std::index_sequence<I...>, std::index_sequence<J...>) {
    if constexpr (kw < n)
      def(schema_arg<S, from + I>()..., nb::kw_only(), schema_arg<S, kw + J>()..., extra...);
    else
      def(schema_arg<S, from + I>()..., extra...);
  }(std::make_index_sequence<(kw < n ? kw : n) - from>(), std::make_index_sequence<n - (kw < n ? kw : n)>());
}

// Binds f as Tensor.<name> (default: the op's name), f's first argument as self, with the
// annotations of schema S's other arguments.
template <const OpSchemaText& S, class F, class... Extra>
void def_method(nb::class_<Tensor>& cls, F f, const char* name = nullptr, const Extra&... extra) {
  if (!name) name = op_schema(S.name).name.c_str();
  with_schema_args<S, 1, F>([&](const auto&... a) { cls.def(name, f, a...); }, extra...);
}

// Binds f as the function <op> of module m (flambeau._C; flambeau._C._nn for Functional ops).
template <const OpSchemaText& S, class F, class... Extra>
void def_function(nb::module_& m, F f, const Extra&... extra) {
  static_assert(S.variants != OpVariants::Method, "a Method op has no function form");
  const char* name = op_schema(S.name).name.c_str();
  with_schema_args<S, 0, F>([&](const auto&... a) { m.def(name, f, a...); }, extra...);
}

// Binds f as flambeau.<op> and/or Tensor.<op>, as the schema's variants say, with its
// argument names, defaults and keyword-only marker.
template <const OpSchemaText& S, class F, class... Extra>
void def_op(nb::module_& m, nb::class_<Tensor>& cls, F f, const Extra&... extra) {
  static_assert(S.variants != OpVariants::Functional, "bind Functional ops in _C._nn with def_function");
  if constexpr (S.variants != OpVariants::Method) def_function<S>(m, f, extra...);
  if constexpr (S.variants != OpVariants::Function) def_method<S>(cls, f, op_schema(S.name).name.c_str(), extra...);
}

}  // namespace flambeau::python
