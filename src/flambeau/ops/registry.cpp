// The op registry: a name -> (schema, boxed kernel) table, filled with the schema table's
// ops (ops/op_kernels.cpp) on first use; call_op checks arguments against the schema.
#include "flambeau/ops/registry.h"

#include <mutex>
#include <unordered_map>

#include "flambeau/core/error.h"

namespace flambeau {

// The boxed kernels of the schema table's ops, in table order (ops/op_kernels.cpp).
std::vector<std::pair<const OpSchema*, BoxedKernel>> builtin_kernels();

namespace {

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::string, std::unique_ptr<RegisteredOp>> ops;  // entries never move
  std::vector<std::string> order;

  void add(OpSchema schema, BoxedKernel kernel) {
    std::string name = schema.qualified_name();
    FLB_CHECK(!ops.count(name), ValueError, "[register_op] an op named '", name, "' is already registered");
    ops.emplace(name, std::make_unique<RegisteredOp>(RegisteredOp{std::move(schema), std::move(kernel)}));
    order.push_back(std::move(name));
  }
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;  // never destroyed: ops may be called during exit
    for (auto& [schema, kernel] : builtin_kernels()) reg->add(*schema, std::move(kernel));
    return reg;
  }();
  return *r;
}

bool fits(const Value& v, const SchemaArg& a) {
  if (std::holds_alternative<std::monostate>(v)) return a.optional || (a.list && a.kind == ArgKind::Int);
  const bool number = std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v) ||
                      std::holds_alternative<bool>(v) || std::holds_alternative<Scalar>(v);
  if (a.list) {
    if (a.kind == ArgKind::Tensor) return std::holds_alternative<std::vector<Tensor>>(v);
    return std::holds_alternative<Dims>(v) || std::holds_alternative<int64_t>(v);
  }
  switch (a.kind) {
    case ArgKind::Tensor: return std::holds_alternative<Tensor>(v) || number;
    case ArgKind::Int: return std::holds_alternative<int64_t>(v);
    case ArgKind::Float: return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v);
    case ArgKind::Bool: return std::holds_alternative<bool>(v);
    case ArgKind::Str: return std::holds_alternative<std::string>(v);
    case ArgKind::Scalar: return number;
    case ArgKind::ScalarType: return std::holds_alternative<DType>(v);
    case ArgKind::MemoryFormat: return std::holds_alternative<int64_t>(v);
    case ArgKind::Generator: {
      auto* o = std::get_if<op_hook::Opaque>(&v);
      return o && o->generator;
    }
  }
  return false;
}

std::string kind_text(const SchemaArg& a) {
  return detail::str_cat(arg_kind_name(a.kind), a.list ? "[]" : "", a.optional ? "?" : "");
}

}  // namespace

namespace detail {
void bad_boxed_argument(const char* expected) {
  throw TypeError(str_cat("[call_op] expected ", expected, " for a boxed argument"));
}
}  // namespace detail

void register_op(std::string_view schema, BoxedKernel kernel) {
  OpSchema parsed = parse_schema(schema);
  FLB_CHECK(kernel, ValueError, "[register_op] no kernel given for '", parsed.qualified_name(), "'");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.add(std::move(parsed), std::move(kernel));
}

const RegisteredOp* find_op(std::string_view qualified_name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.ops.find(std::string(qualified_name));
  return it == r.ops.end() ? nullptr : it->second.get();
}

std::vector<std::string> registered_ops() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.order;
}

bool output_shape_depends_on_values(std::string_view name) {
  static constexpr std::string_view kOps[] = {"nonzero", "unique", "unique_consecutive", "masked_select",
                                              "argwhere", "bincount", "repeat_interleave"};
  for (std::string_view op : kOps)
    if (op == name) return true;
  return false;
}

std::vector<const Value*> in_schema_order(std::string_view name, const std::vector<Value>& reported) {
  std::vector<const Value*> out;
  for (const Value& v : reported) out.push_back(&v);
  // Schema argument i is reported argument order[i].
  static const std::vector<std::pair<std::string_view, std::vector<size_t>>> kReordered{{"embedding", {1, 0, 2}}};
  for (const auto& [op, order] : kReordered)
    if (op == name && reported.size() >= order.size())
      for (size_t i = 0; i < order.size(); ++i) out[i] = &reported[order[i]];
  return out;
}

Value default_value(const SchemaArg& arg) {
  FLB_CHECK(arg.default_value, ValueError, "[default_value] argument '", arg.name, "' has no default");
  const std::string& d = *arg.default_value;
  if (d == "None") return {};
  if (arg.kind == ArgKind::MemoryFormat) {
    for (auto f : {MemoryFormat::Contiguous, MemoryFormat::Preserve, MemoryFormat::ChannelsLast,
                   MemoryFormat::ChannelsLast3d})
      if (d == memory_format_name(f)) return int64_t(f);
    throw ValueError("[default_value] '" + d + "' is not a memory format");
  }
  if (d == "True" || d == "False") return d == "True";
  if (d.size() >= 2 && d.front() == '"') return d.substr(1, d.size() - 2);
  if (d.front() == '[') {
    Dims dims;
    size_t pos = 1;
    while (pos < d.size() && d[pos] != ']') {
      size_t used = 0;
      dims.push_back(std::stoll(d.substr(pos), &used));
      pos += used;
      while (pos < d.size() && (d[pos] == ',' || d[pos] == ' ')) ++pos;
    }
    return dims;
  }
  if (arg.kind == ArgKind::Int || (arg.kind == ArgKind::Scalar && d.find_first_of(".e") == std::string::npos))
    return int64_t(std::stoll(d));
  return std::stod(d);
}

bool arguments_fit(const RegisteredOp& op, const std::vector<const Value*>& args) {
  const std::vector<SchemaArg>& params = op.schema.arguments;
  if (args.size() > params.size()) return false;
  for (size_t i = 0; i < params.size(); ++i)
    if (i < args.size() ? !fits(*args[i], params[i]) : !params[i].default_value) return false;
  return true;
}

std::vector<Value> call_op(std::string_view name, std::vector<Value> args) {
  const RegisteredOp* op = find_op(name);
  FLB_CHECK(op, ValueError, "[call_op] no op named '", name, "'");
  return call_op(*op, std::move(args));
}

std::vector<Value> call_op(const RegisteredOp& registered, std::vector<Value> args) {
  const RegisteredOp* op = &registered;
  const std::vector<SchemaArg>& params = op->schema.arguments;
  FLB_CHECK(args.size() <= params.size(), TypeError, "[call_op] ", op->schema.qualified_name(), " takes ", params.size(),
            " arguments, got ", args.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const SchemaArg& p = params[i];
    if (i >= args.size()) {
      FLB_CHECK(p.default_value, TypeError, "[call_op] ", op->schema.qualified_name(), ": missing argument '", p.name, "'");
      args.push_back(default_value(p));
    }
    FLB_CHECK(fits(args[i], p), TypeError, "[call_op] ", op->schema.qualified_name(), ": argument '", p.name, "' must be ",
              kind_text(p));
  }
  return op->kernel(args);
}

}  // namespace flambeau
