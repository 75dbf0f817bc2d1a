// Op schemas in PyTorch's signature language, e.g.
//   "sum(Tensor input, int[]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor"
// One string per public op (ops/op_schemas.cpp) names its arguments, their kinds and
// defaults, which ones are keyword-only, and its results. The Python bindings take their
// argument names, defaults and keyword-only markers from it, and the tests generate their
// samples from it; custom ops (namespace "mylib::op") are declared in the same language.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flambeau {

// The kinds of values an argument or a result can hold (the base type of the text).
// MemoryFormat is boxed as an int64 (MemoryFormat's value), as torch boxes it.
enum class ArgKind : uint8_t { Tensor, Int, Float, Bool, Str, Scalar, ScalarType, Generator, MemoryFormat };

struct SchemaArg {
  std::string name;  // empty for an unnamed result
  ArgKind kind;
  bool list = false;      // "int[]", "Tensor[]"; list_size > 0 for "int[1]"
  int64_t list_size = 0;
  bool optional = false;  // "?": None is accepted
  bool kwarg_only = false;
  std::optional<std::string> default_value;  // as written: "None", "False", "-1", "\"none\""
};

// Where an op is bound in Python: flambeau.<op> (Function), Tensor.<op> with the first
// argument as self (Method), both, or flambeau._C._nn.<op> (Functional: nn.functional's).
enum class OpVariants : uint8_t { Function, Method, Both, Functional };

struct OpSchema {
  OpVariants variants = OpVariants::Both;
  std::string ns;        // "" for flambeau's own ops
  std::string name;      // "sum"
  std::string overload;  // "dim" in "max.dim"
  std::vector<SchemaArg> arguments, returns;
  std::string text;      // the schema as given

  // "mylib::op.overload" (parts that are empty left out).
  std::string qualified_name() const;
  // The argument called `name`, or nullptr.
  const SchemaArg* argument(std::string_view name) const;
};

// Parses a schema; ValueError naming the column and the text when it is malformed.
OpSchema parse_schema(std::string_view text);

// Every public op's schema, parsed once: the generated ones of the elementwise tables
// (core/op_list.h), then the table of ops/op_schemas.h.
const std::vector<OpSchema>& op_schemas();
// The schema of the public op `qualified_name` ("max", "max.dim"); ValueError when none.
const OpSchema& op_schema(std::string_view qualified_name);

const char* arg_kind_name(ArgKind kind);

}  // namespace flambeau
