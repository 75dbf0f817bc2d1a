// The schema parser: a small recursive descent over PyTorch's signature language.
#include "flambeau/ops/schema.h"

#include <cctype>
#include <unordered_map>

#include "flambeau/core/error.h"
#include "flambeau/ops/op_schemas.h"

namespace flambeau {
namespace {

constexpr std::pair<std::string_view, ArgKind> kKinds[] = {
    {"Tensor", ArgKind::Tensor}, {"int", ArgKind::Int},       {"SymInt", ArgKind::Int},
    {"float", ArgKind::Float},   {"bool", ArgKind::Bool},     {"str", ArgKind::Str},
    {"Scalar", ArgKind::Scalar}, {"ScalarType", ArgKind::ScalarType}, {"Generator", ArgKind::Generator},
    {"MemoryFormat", ArgKind::MemoryFormat},
};

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  OpSchema parse() {
    OpSchema op;
    op.text = std::string(s_);
    std::string first = identifier("an op name");
    if (eat("::")) {
      op.ns = first;
      first = identifier("an op name");
    }
    op.name = first;
    if (eat(".")) op.overload = identifier("an overload name");
    expect("(");
    bool kwarg_only = false;
    while (!eat(")")) {
      if (!op.arguments.empty() || kwarg_only) expect(",");
      if (eat("*")) {
        fail_if(kwarg_only, "a second '*'");
        kwarg_only = true;
        continue;
      }
      SchemaArg a = type();
      a.name = identifier("an argument name");
      a.kwarg_only = kwarg_only;
      if (eat("=")) a.default_value = default_value();
      for (const SchemaArg& b : op.arguments) fail_if(b.name == a.name, "a repeated argument name");
      op.arguments.push_back(std::move(a));
    }
    expect("->");
    if (eat("()")) {
      // no results
    } else if (eat("(")) {
      do {
        op.returns.push_back(type());
        skip_space();
        if (pos_ < s_.size() && (std::isalpha(uint8_t(s_[pos_])) || s_[pos_] == '_'))
          op.returns.back().name = identifier("a result name");
      } while (eat(","));
      expect(")");
    } else {
      op.returns.push_back(type());
    }
    skip_space();
    fail_if(pos_ != s_.size(), "text after the results");
    return op;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw ValueError(detail::str_cat("[parse_schema] unexpected ", what, " at column ", pos_ + 1, " of '", s_, "'"));
  }
  void fail_if(bool cond, std::string_view what) const {
    if (cond) fail(what);
  }
  void skip_space() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool eat(std::string_view token) {
    skip_space();
    if (s_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  void expect(std::string_view token) {
    if (!eat(token)) fail(pos_ < s_.size() ? detail::str_cat("'", s_.substr(pos_, 1), "' (expected '", token, "')")
                                           : detail::str_cat("end (expected '", token, "')"));
  }
  std::string identifier(const char* what) {
    skip_space();
    const size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(uint8_t(s_[pos_])) || s_[pos_] == '_')) ++pos_;
    if (pos_ == start || std::isdigit(uint8_t(s_[start]))) fail(detail::str_cat("text (expected ", what, ")"));
    return std::string(s_.substr(start, pos_ - start));
  }
  SchemaArg type() {
    const size_t start = pos_;
    const std::string base = identifier("a type");
    SchemaArg a{};
    bool known = false;
    for (const auto& [name, kind] : kKinds)
      if (name == base) a.kind = kind, known = true;
    if (!known) {
      pos_ = start;
      skip_space();
      fail(detail::str_cat("type '", base, "'"));
    }
    if (eat("[")) {
      a.list = true;
      while (pos_ < s_.size() && std::isdigit(uint8_t(s_[pos_]))) a.list_size = a.list_size * 10 + (s_[pos_++] - '0');
      expect("]");
    }
    a.optional = eat("?");
    return a;
  }
  // A literal: None, True, False, a number, a "string" or a [list]; kept as written.
  std::string default_value() {
    skip_space();
    const size_t start = pos_;
    int depth = 0;
    bool quoted = false;
    for (; pos_ < s_.size(); ++pos_) {
      const char c = s_[pos_];
      if (c == '"') quoted = !quoted;
      if (quoted) continue;
      if (c == '[') ++depth;
      if (c == ']') --depth;
      if (depth == 0 && (c == ',' || c == ')')) break;
    }
    fail_if(quoted || depth != 0 || pos_ == start, "default value");
    size_t end = pos_;
    while (end > start && s_[end - 1] == ' ') --end;
    return std::string(s_.substr(start, end - start));
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

std::string OpSchema::qualified_name() const {
  return (ns.empty() ? "" : ns + "::") + name + (overload.empty() ? "" : "." + overload);
}

const SchemaArg* OpSchema::argument(std::string_view arg) const {
  for (const SchemaArg& a : arguments)
    if (a.name == arg) return &a;
  return nullptr;
}

OpSchema parse_schema(std::string_view text) { return Parser(text).parse(); }

const char* arg_kind_name(ArgKind kind) {
  for (const auto& [name, k] : kKinds)
    if (k == kind) return name.data();  // the first spelling ("int" for SymInt too)
  return "?";
}

const std::vector<OpSchema>& op_schemas() {
  static const std::vector<OpSchema> all = [] {
    std::vector<OpSchema> v;
    for (const OpSchemaText* text : kOpSchemaTexts) {
      v.push_back(parse_schema(text->text));
      v.back().variants = text->variants;
    }
    return v;
  }();
  return all;
}

const OpSchema& op_schema(std::string_view qualified_name) {
  static const std::unordered_map<std::string, const OpSchema*> by_name = [] {
    std::unordered_map<std::string, const OpSchema*> m;
    for (const OpSchema& op : op_schemas()) m.emplace(op.qualified_name(), &op);
    return m;
  }();
  auto it = by_name.find(std::string(qualified_name));
  FLB_CHECK(it != by_name.end(), ValueError, "[op_schema] no op named '", qualified_name, "'");
  return *it->second;
}

}  // namespace flambeau
