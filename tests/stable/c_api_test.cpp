// The stable C ABI (stable/c_api.h, stable/extension.h): the example extension's ops, their
// backward kernels and random draws; an extension built against the frozen version-1
// header; broken libraries and kernels; the table's own checks.
#include <cstddef>

#include "flambeau/autograd/autograd.h"
#include "flambeau/compile/compile.h"
#include "flambeau/core/generator.h"
#include "flambeau/core/op_hook.h"
#include "flambeau/nn/functional.h"
#include "flambeau/ops/ops.h"
#include "flambeau/stable/extension.h"
#include "test_util.h"

// The frozen version-1 header, its names in namespace v1 (its macros are the same text).
#undef FLAMBEAU_STABLE_C_API_H
#undef FLB_ABI_VERSION
#undef FLAMBEAU_EXTENSION
namespace v1 {
#include "stable/v1/flambeau/stable/c_api.h"
}

namespace flambeau::testing {
namespace {

std::string extension(const std::string& name) { return std::string(FLB_EXTENSION_DIR) + "/lib" + name + ".so"; }
Tensor first(const std::vector<Value>& r) { return std::get<Tensor>(r.at(0)); }
template <class ErrT, class F>
void expect_error(F&& f, const std::string& part) {
  const std::string message = error_of<ErrT>(f);
  EXPECT_TRUE(contains(message, part)) << "'" << message << "' lacks '" << part << "'";
}
Value generator_value(const Generator& g) { return op_hook::Opaque{"generator", std::make_shared<Generator>(g)}; }

class Extension : public ::testing::Test {
 protected:
  void SetUp() override { load_library(extension("flambeau_example")); }
};

TEST_F(Extension, FusedBiasGeluMatchesTheComposedOps) {
  for (DType dt : {kFloat64, kFloat32}) {
    const Tensor x = random_tensor({4, 7}, dt, Layout::Transposed, 1), b = random_tensor({7}, dt, Layout::Contiguous, 2);
    const Tensor y = first(call_op("mylib::fused_bias_gelu", {x, b}));
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.sizes(), x.sizes());
    EXPECT_TRUE(all_close(values(y), values(gelu(add(x, b))), dt == kFloat64 ? 1e-14 : 1e-5,
                          dt == kFloat64 ? 1e-14 : 1e-6));
  }
  expect_error<ValueError>([] { call_op("mylib::fused_bias_gelu", {ones({2, 3}), ones({4})}); },
                           "[mylib::fused_bias_gelu] the kernel failed: b must have shape (n,)");
  expect_error<TypeError>([] { call_op("mylib::fused_bias_gelu", {ones({2, 3}), ones({3}, kFloat64)}); },
                          "x and b must both be float32 or both float64");
  expect_error<TypeError>([] { call_op("mylib::fused_bias_gelu", {ones({3})}); }, "missing argument 'b'");
}

TEST_F(Extension, GradcheckThroughTheBackwardKernel) {
  Tensor x = random_tensor({3, 5}, kFloat64, Layout::Contiguous, 3).requires_grad_();
  Tensor b = random_tensor({5}, kFloat64, Layout::Contiguous, 4).requires_grad_();
  std::string report;
  EXPECT_TRUE(autograd::gradcheck(
      [](const std::vector<Tensor>& in) { return first(call_op("mylib::fused_bias_gelu", {in[0], in[1]})); }, {x, b},
      1e-6, 1e-8, 1e-6, &report))
      << report;
  const Tensor y = first(call_op("mylib::fused_bias_gelu", {x, b}));
  EXPECT_EQ(y.grad_fn()->name(), "FusedBiasGeluBackward0");
}

TEST_F(Extension, LoadingTwiceDoesNothing) {
  load_library(extension("flambeau_example"));
  int count = 0;
  for (const std::string& p : loaded_libraries()) count += contains(p, "libflambeau_example.so");
  EXPECT_EQ(count, 1);
}

TEST_F(Extension, DropoutDrawsFlambeausStreamAndTheNextDrawContinues) {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = random_tensor({5, 9}, dt, Layout::Contiguous, 5);
    manual_seed(11);
    const std::vector<Value> r = call_op("mylib::random_dropout", {x, 0.3});
    const Tensor after = rand({6}, kFloat64);
    manual_seed(11);
    const Tensor reference = nn::functional::dropout(x, 0.3, true);
    EXPECT_TRUE(bitwise_equal(std::get<Tensor>(r[0]), reference)) << std::get<Tensor>(r[0]) << reference;
    EXPECT_TRUE(bitwise_equal(rand({6}, kFloat64), after));
    const Tensor mask = std::get<Tensor>(r[1]);
    EXPECT_TRUE(bitwise_equal(mask, ne(reference, 0.0).to(dt)) || x.numel() == 0);
  }
  // A generator given as an argument: its stream, not the default one.
  Generator g(99), h(99);
  const Tensor x = ones({40}, kFloat64);
  const uint64_t default_offset = default_generator().offset();
  const Tensor mask = std::get<Tensor>(call_op("mylib::random_dropout", {x, 0.5, generator_value(g)})[1]);
  Tensor keep = empty({40}, kFloat64);
  bernoulli_(keep, 0.5, h);
  EXPECT_TRUE(bitwise_equal(mask, keep));
  EXPECT_EQ(g.offset(), h.offset());
  EXPECT_EQ(default_generator().offset(), default_offset);
}

TEST_F(Extension, DropoutBackwardScalesByTheMask) {
  Tensor x = random_tensor({64}, kFloat64, Layout::Contiguous, 6).requires_grad_();
  const std::vector<Value> r = call_op("mylib::random_dropout", {x, 0.25});
  sum(std::get<Tensor>(r[0])).backward();
  EXPECT_TRUE(all_close(values(x.grad()), values(div(std::get<Tensor>(r[1]), 0.75)), 0, 0));
}

TEST_F(Extension, TheOpHookSeesCustomOpsAsUserCalls) {
  const Tensor x = random_tensor({2, 3}, kFloat32, Layout::Transposed, 7), b = ones({3});
  std::vector<std::string> seen;
  struct Listener {
    int id;
    ~Listener() { op_hook::remove_listener(id); }
  } listener{op_hook::add_listener([&](const op_hook::OpCall& c) { seen.emplace_back(c.name); })};
  call_op("mylib::fused_bias_gelu", {x, b});
  EXPECT_EQ(seen, std::vector<std::string>{"mylib::fused_bias_gelu"});  // not the contiguous() inside
}

TEST_F(Extension, TheCompilerTracesThroughCustomOps) {
  auto f = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{mul(first(call_op("mylib::fused_bias_gelu", {in[0], in[1]})), 2.0)};
  };
  compiler::CompileOptions options;
  options.fullgraph = true;
  compiler::Compiled compiled = compiler::compile(f, options);
  const Tensor x = random_tensor({3, 4}, kFloat32, Layout::Contiguous, 8), b = random_tensor({4}, kFloat32, Layout::Contiguous, 9);
  EXPECT_TRUE(bitwise_equal(compiled({x, b}).at(0), f({x, b}).at(0)));
  ASSERT_EQ(compiled.traces(), 1u);
}

TEST(StableAbi, AnExtensionBuiltAgainstTheVersion1HeaderLoadsAndWorks) {
  load_library(extension("flambeau_test_ext_v1"));
  const Tensor base = arange(0, 24, 1, kFloat32).reshape({4, 6});
  const Tensor view = base.slice(1, 1, 5, 2).t();  // (2, 4), strides (2, 6), offset 1
  const Tensor d = first(call_op("v1test::describe", {view}));
  EXPECT_EQ(values(d), (std::vector<double>{2, 8, 1, 0, FLB_DEVICE_CPU, FLB_FLOAT32, 2, 4, 2, 6}));
  for (const char* layout : {"contiguous", "transposed"}) {
    const Tensor y = first(call_op("v1test::affine", {view, 2.0, 1.0, true, std::string(layout)}));
    EXPECT_TRUE(all_close(values(y), values(neg(add(mul(view.to(kFloat64), 2.0), 1.0))), 0, 0)) << layout;
    EXPECT_EQ(y.is_contiguous(), std::string(layout) == "contiguous");
  }
  expect_error<ValueError>([&] { call_op("v1test::affine", {view, 2.0, 0.0, false, std::string("diagonal")}); },
                           "[v1test::affine] the kernel failed: layout must be");
  const Tensor f = first(call_op("v1test::filled", {Dims{2, 3}, kInt32, int64_t(7)}));
  EXPECT_TRUE(bitwise_equal(f, full({2, 3}, 7, kInt32)));
  EXPECT_TRUE(bitwise_equal(first(call_op("v1test::filled", {Dims{0, 3}, kFloat64})), zeros({0, 3}, kFloat64)));
  const Tensor a = random_tensor({3, 4}, kFloat64, Layout::Contiguous, 10), b = random_tensor({4, 2}, kFloat64, Layout::Contiguous, 11);
  EXPECT_TRUE(bitwise_equal(first(call_op("v1test::matmul", {a, b})), matmul(a, b)));
  // Draws as rand does, and the next draw continues after it.
  manual_seed(5);
  const Tensor u = first(call_op("v1test::uniform", {int64_t(10)}));
  const Tensor next = rand({3});
  manual_seed(5);
  EXPECT_TRUE(bitwise_equal(u, rand({10})));
  EXPECT_TRUE(bitwise_equal(next, rand({3})));
  Generator g(1234);
  EXPECT_EQ(first(call_op("v1test::seed", {generator_value(g)})).item<int64_t>(), 1234);
  manual_seed(77);
  EXPECT_EQ(first(call_op("v1test::seed", {})).item<int64_t>(), 77);
}

TEST(StableAbi, TheVersion1TableIsAPrefixOfTodays) {
  static_assert(sizeof(v1::FlbApi) <= sizeof(FlbApi));
  static_assert(sizeof(v1::FlbValue) == sizeof(FlbValue) && sizeof(v1::FlbTensorMeta) == sizeof(FlbTensorMeta));
  static_assert(sizeof(v1::FlbDevice) == sizeof(FlbDevice));
#define FLB_SAME_OFFSET(field) EXPECT_EQ(offsetof(v1::FlbApi, field), offsetof(FlbApi, field)) << #field;
  FLB_SAME_OFFSET(abi_version) FLB_SAME_OFFSET(size) FLB_SAME_OFFSET(last_error) FLB_SAME_OFFSET(set_error)
  FLB_SAME_OFFSET(tensor_new_handle) FLB_SAME_OFFSET(tensor_free) FLB_SAME_OFFSET(tensor_dtype)
  FLB_SAME_OFFSET(tensor_dim) FLB_SAME_OFFSET(tensor_sizes) FLB_SAME_OFFSET(tensor_strides)
  FLB_SAME_OFFSET(tensor_storage_offset) FLB_SAME_OFFSET(tensor_numel) FLB_SAME_OFFSET(tensor_data_ptr)
  FLB_SAME_OFFSET(tensor_is_contiguous) FLB_SAME_OFFSET(tensor_device) FLB_SAME_OFFSET(empty)
  FLB_SAME_OFFSET(empty_strided) FLB_SAME_OFFSET(zeros) FLB_SAME_OFFSET(copy_) FLB_SAME_OFFSET(contiguous)
  FLB_SAME_OFFSET(default_generator) FLB_SAME_OFFSET(generator_new_handle) FLB_SAME_OFFSET(generator_free)
  FLB_SAME_OFFSET(generator_seed) FLB_SAME_OFFSET(generator_reserve) FLB_SAME_OFFSET(philox)
  FLB_SAME_OFFSET(register_op) FLB_SAME_OFFSET(call_op)
#undef FLB_SAME_OFFSET
  EXPECT_EQ(offsetof(v1::FlbValue, v), offsetof(FlbValue, v));
  EXPECT_EQ(stable::api().abi_version, uint32_t(FLB_ABI_VERSION));
  EXPECT_EQ(stable::api().size, sizeof(FlbApi));
}

TEST(StableAbi, BrokenLibrariesAreRefusedAndFlambeauStaysUsable) {
  expect_error<ValueError>([] { load_library(extension("flambeau_test_ext_not_extension")); },
                           "is not a flambeau extension");
  expect_error<Error>([] { load_library(extension("flambeau_test_ext_newer_abi")); },
                      "was built for flambeau C ABI version 99, but this flambeau provides version 1");
  expect_error<ValueError>([] { load_library(extension("flambeau_test_ext_init_fails")); },
                           "flambeau_extension_init failed (FLB_VALUE_ERROR): this library's init fails on purpose");
  EXPECT_EQ(find_op("initfails::op"), nullptr);  // what it registered before failing is dropped
  expect_error<ValueError>([] { load_library(extension("flambeau_test_ext_duplicate")); },
                           "an op named 'dup::op' is already registered");
  EXPECT_EQ(find_op("dup::op"), nullptr);
  expect_error<ValueError>([] { load_library(extension("flambeau_test_ext_bad_schema")); },
                           "[parse_schema] unexpected type 'Tensr'");
  expect_error<Error>([] { load_library("/no/such/library.so"); }, "no such file");
  expect_error<Error>([] { load_library(FLB_EXTENSION_DIR "/../CMakeCache.txt"); }, "cannot load");
  for (const std::string& p : loaded_libraries()) EXPECT_FALSE(contains(p, "ext_init_fails")) << p;
  EXPECT_TRUE(bitwise_equal(add(ones({2}), ones({2})), full({2}, 2.0)));
}

TEST(StableAbi, KernelErrorsNameTheOpAndLeaveNothingBehind) {
  load_library(extension("flambeau_test_ext_kernel_errors"));
  const Tensor x = ones({2, 3}, kFloat64);
  expect_error<ValueError>([&] { call_op("kerr::fails", {x}); },
                           "[kerr::fails] the kernel failed: this kernel fails on purpose");
  expect_error<Error>([&] { call_op("kerr::leaves_unset", {x}); }, "left result 0 unset");
  expect_error<Error>([&] { call_op("kerr::returns_input", {x}); }, "shares memory with an argument");
  expect_error<Error>([&] { call_op("kerr::wrong_shape", {x}); },
                      "returned result 0 of shape (2, 3) and dtype float64, but the shape function says (12345,)");
  expect_error<ValueError>([&] { call_op("kerr::throws_in_api", {x}); }, "[empty] negative size -3");
  expect_error<TypeError>([&] { call_op("kerr::fails", {x, x}); }, "takes 1 arguments, got 2");
  Tensor leaf = ones({3}, kFloat64).requires_grad_();
  Tensor y = first(call_op("kerr::no_backward", {leaf}));
  EXPECT_TRUE(bitwise_equal(y, leaf.detach()));
  expect_error<Error>([&] { sum(y).backward(); }, "[kerr::no_backward] has no backward kernel");
  Tensor z = first(call_op("kerr::backward_fails", {leaf}));
  expect_error<Error>([&] { sum(z).backward(); }, "[kerr::backward_fails] the backward kernel failed: this backward");
  sum(mul(leaf, 2.0)).backward();  // autograd still works
  EXPECT_TRUE(bitwise_equal(leaf.grad(), full({3}, 2.0, kFloat64)));
}

TEST(StableAbi, TheTableChecksItsArguments) {
  const FlbApi& api = stable::api();
  int64_t dim = 0;
  EXPECT_EQ(api.tensor_dim(nullptr, &dim), FLB_VALUE_ERROR);
  EXPECT_STREQ(api.last_error(), "[tensor_dim] the tensor handle is NULL");
  Tensor t = ones({2});
  EXPECT_EQ(api.tensor_dim(stable::borrow(t), nullptr), FLB_VALUE_ERROR);
  FlbTensor out = nullptr;
  const int64_t sizes[] = {2, -1};
  EXPECT_EQ(api.empty(sizes, 2, FLB_FLOAT32, {FLB_DEVICE_CPU, -1}, &out), FLB_VALUE_ERROR);
  EXPECT_EQ(out, nullptr);  // nothing written on an error
  EXPECT_EQ(api.empty(sizes, 1, 42, {FLB_DEVICE_CPU, -1}, &out), FLB_VALUE_ERROR);
  EXPECT_TRUE(contains(api.last_error(), "unknown dtype code 42"));
  EXPECT_EQ(api.empty(sizes, 1, FLB_FLOAT32, {FLB_DEVICE_CUDA, 0}, &out), FLB_NOT_IMPLEMENTED);
  // empty_strided: the storage spans the strides.
  const int64_t strides[] = {1, 2};
  const int64_t shape[] = {2, 3};
  ASSERT_EQ(api.empty_strided(shape, strides, 2, FLB_FLOAT64, {FLB_DEVICE_CPU, -1}, &out), FLB_OK);
  const Tensor s = stable::take(out);
  EXPECT_EQ(s.strides(), (Dims{1, 2}));
  EXPECT_EQ(s.storage()->nbytes, size_t(6 * 8));
  // copy_ refuses shapes that do not broadcast.
  Tensor a = zeros({2, 3}), b = ones({4});
  EXPECT_EQ(api.copy_(stable::borrow(a), stable::borrow(b)), FLB_VALUE_ERROR);
  EXPECT_TRUE(bitwise_equal(a, zeros({2, 3})));
  // register_op outside an init; call_op with the wrong result count.
  EXPECT_EQ(api.register_op(nullptr, "x::y(Tensor a) -> Tensor", nullptr, nullptr, nullptr, nullptr), FLB_VALUE_ERROR);
  EXPECT_TRUE(contains(api.last_error(), "during flambeau_extension_init only"));
  FlbValue arg{};
  arg.kind = FLB_VALUE_TENSOR, arg.v.tensor = stable::borrow(t);
  FlbTensor outs[2] = {nullptr, nullptr};
  EXPECT_EQ(api.call_op("neg", &arg, 1, outs, 2), FLB_VALUE_ERROR);
  EXPECT_EQ(api.call_op("no_such_op", &arg, 1, outs, 1), FLB_VALUE_ERROR);
  ASSERT_EQ(api.call_op("neg", &arg, 1, outs, 1), FLB_OK);
  EXPECT_TRUE(bitwise_equal(stable::take(outs[0]), neg(t)));
  // Philox words are the generator's.
  uint32_t words[8];
  const uint32_t key[2] = {3, 0};
  ASSERT_EQ(api.philox(5, key, 2, words), FLB_OK);
  const auto w = philox4x32_10({6, 0, 0, 0}, {3, 0});
  EXPECT_EQ(words[4], w[0]);
  EXPECT_EQ(words[7], w[3]);
}

// Host code registers C kernels too; the registration's checks.
FlbStatus negate_kernel(const FlbValue* args, int64_t, FlbTensor* outputs, int64_t, void*) {
  return stable::api().call_op("neg", args, 1, outputs, 1);
}

TEST(StableAbi, RegistrationChecksTheSchema) {
  stable::register_c_op("hostlib::negate(Tensor x) -> Tensor", negate_kernel, nullptr, nullptr, nullptr);
  const Tensor x = random_tensor({3}, kFloat32, Layout::Contiguous, 12);
  EXPECT_TRUE(bitwise_equal(first(call_op("hostlib::negate", {x})), neg(x)));
  expect_error<ValueError>([] { stable::register_c_op("hostlib::negate(Tensor x) -> Tensor", negate_kernel, nullptr, nullptr, nullptr); },
                           "already registered");
  expect_error<ValueError>([] { stable::register_c_op("negate2(Tensor x) -> Tensor", negate_kernel, nullptr, nullptr, nullptr); },
                           "has no namespace");
  expect_error<ValueError>([] { stable::register_c_op("hostlib::count(Tensor x) -> int", negate_kernel, nullptr, nullptr, nullptr); },
                           "every result of a C op must be a Tensor, got int");
  expect_error<ValueError>([] { stable::register_c_op("hostlib::nokernel(Tensor x) -> Tensor", nullptr, nullptr, nullptr, nullptr); },
                           "no kernel given");
}

}  // namespace
}  // namespace flambeau::testing
