// The op schema parser and the schema table (ops/schema.h, ops/op_schemas.h).
#include <gtest/gtest.h>

#include <set>

#include "flambeau/core/error.h"
#include "flambeau/core/op_list.h"
#include "flambeau/ops/schema.h"

namespace flambeau {
namespace {

TEST(Schema, ParsesArgumentsDefaultsAndKeywordOnly) {
  const OpSchema op = parse_schema("sum(Tensor input, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor");
  EXPECT_EQ(op.qualified_name(), "sum");
  ASSERT_EQ(op.arguments.size(), 4u);
  const SchemaArg& dim = op.arguments[1];
  EXPECT_EQ(dim.name, "dim");
  EXPECT_EQ(dim.kind, ArgKind::Int);
  EXPECT_TRUE(dim.list && dim.optional && !dim.kwarg_only);
  EXPECT_EQ(dim.list_size, 1);
  EXPECT_EQ(dim.default_value, "None");
  EXPECT_FALSE(op.arguments[2].kwarg_only);
  EXPECT_TRUE(op.arguments[3].kwarg_only);
  EXPECT_EQ(op.arguments[3].kind, ArgKind::ScalarType);
  EXPECT_FALSE(op.arguments[0].default_value.has_value());
  ASSERT_EQ(op.returns.size(), 1u);
  EXPECT_EQ(op.returns[0].kind, ArgKind::Tensor);
  EXPECT_EQ(op.argument("keepdim")->default_value, "False");
  EXPECT_EQ(op.argument("nope"), nullptr);
}

TEST(Schema, ParsesNamespacesOverloadsStringsListsAndTupleResults) {
  const OpSchema op = parse_schema(
      "mylib::fused.dim(Tensor x, Tensor[] rest, str mode=\"a, b)\", float[] w=[1.0, 2.0], Generator? g=None) "
      "-> (Tensor values, Tensor indices)");
  EXPECT_EQ(op.ns, "mylib");
  EXPECT_EQ(op.name, "fused");
  EXPECT_EQ(op.overload, "dim");
  EXPECT_EQ(op.qualified_name(), "mylib::fused.dim");
  EXPECT_EQ(op.arguments[1].kind, ArgKind::Tensor);
  EXPECT_TRUE(op.arguments[1].list);
  EXPECT_EQ(op.arguments[2].default_value, "\"a, b)\"");
  EXPECT_EQ(op.arguments[3].default_value, "[1.0, 2.0]");
  EXPECT_EQ(op.arguments[4].kind, ArgKind::Generator);
  ASSERT_EQ(op.returns.size(), 2u);
  EXPECT_EQ(op.returns[1].name, "indices");
  EXPECT_TRUE(parse_schema("f() -> ()").returns.empty());
}

TEST(Schema, RejectsMalformedTextNamingTheColumn) {
  const char* bad[] = {
      "sum(Tensor input",                     // no ')'
      "sum(Tensr input) -> Tensor",           // unknown type
      "sum(Tensor input, Tensor input) -> Tensor",  // repeated name
      "sum(Tensor input, *, *, int a) -> Tensor",   // two '*'
      "sum(Tensor input) Tensor",             // no '->'
      "sum(Tensor input) -> Tensor extra",    // trailing text
      "sum(Tensor input, str s=\"open) -> Tensor",  // unterminated string
      "(Tensor input) -> Tensor",             // no name
  };
  for (const char* text : bad) {
    try {
      parse_schema(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("[parse_schema] unexpected"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("at column"), std::string::npos) << e.what();
    }
  }
}

TEST(Schema, TheTableHasEveryElementwiseOpAndUniqueNames) {
  std::set<std::string> names;
  for (const OpSchema& op : op_schemas()) {
    EXPECT_TRUE(names.insert(op.qualified_name()).second) << "listed twice: " << op.qualified_name();
    EXPECT_FALSE(op.returns.empty()) << op.text;
    EXPECT_EQ(&op_schema(op.qualified_name()), &op);
  }
#define FLB_EXPECT_LISTED(name, ...) EXPECT_TRUE(names.count(#name)) << #name;
  FLB_UNARY_OPS(FLB_EXPECT_LISTED)
  FLB_BINARY_OPS(FLB_EXPECT_LISTED)
  FLB_COMPARE_OPS(FLB_EXPECT_LISTED)
#undef FLB_EXPECT_LISTED
  for (const char* op : {"sum", "scatter_reduce", "topk", "addmm", "cat", "multinomial"}) EXPECT_TRUE(names.count(op)) << op;
  EXPECT_EQ(op_schema("exp").text, "exp(Tensor input) -> Tensor");
  EXPECT_THROW(op_schema("no_such_op"), ValueError);
}

}  // namespace
}  // namespace flambeau
