/* Broken or misbehaving test extensions, one per FLB_TEST_* variant (CMakeLists.txt): each
 * must give a clear error and leave flambeau usable. */
#include <string.h>

#include "flambeau/stable/c_api.h"

#if FLB_TEST_NOT_EXTENSION
/* No entry points at all. */
FLB_EXTERN_C FLB_EXPORT int not_a_flambeau_extension(void) { return 1; }
#else

static const FlbApi* flb;

static FlbStatus copy_kernel(const FlbValue* args, int64_t n, FlbTensor* out, int64_t m, void* ud) {
  return flb->call_op("clone", args, 1, out, 1);
}

#if FLB_TEST_KERNEL_ERRORS
static FlbStatus fails(const FlbValue* args, int64_t n, FlbTensor* out, int64_t m, void* ud) {
  FlbStatus s = flb->contiguous(args[0].v.tensor, &out[0]); /* stored, then the kernel fails: freed by flambeau */
  if (s != FLB_OK) return s;
  flb->set_error("this kernel fails on purpose");
  return FLB_VALUE_ERROR;
}
static FlbStatus leaves_unset(const FlbValue* args, int64_t n, FlbTensor* out, int64_t m, void* ud) {
  return FLB_OK;
}
static FlbStatus returns_input(const FlbValue* args, int64_t n, FlbTensor* out, int64_t m, void* ud) {
  return flb->tensor_new_handle(args[0].v.tensor, &out[0]);
}
static FlbStatus wrong_shape(const FlbValue* args, int64_t n, FlbTensorMeta* out, int64_t m, void* ud) {
  out[0].dtype = FLB_FLOAT64;
  out[0].dim = 1;
  out[0].sizes[0] = 12345;
  return FLB_OK;
}
static FlbStatus backward_fails(const FlbTensor* g, int64_t m, const FlbValue* args, int64_t n, const FlbTensor* o,
                                FlbTensor* gi, void* ud) {
  flb->set_error("this backward fails on purpose");
  return FLB_ERROR;
}
static FlbStatus throws_in_api(const FlbValue* args, int64_t n, FlbTensor* out, int64_t m, void* ud) {
  const int64_t size = -3; /* refused by empty: its message becomes the op's */
  return flb->empty(&size, 1, FLB_FLOAT32, (FlbDevice){FLB_DEVICE_CPU, -1}, &out[0]);
}
#endif

static FlbStatus init(const FlbApi* api, FlbLibrary library) {
  flb = api;
  (void)copy_kernel;
#if FLB_TEST_INIT_FAILS
  FlbStatus s = api->register_op(library, "initfails::op(Tensor x) -> Tensor", copy_kernel, NULL, NULL, NULL);
  if (s != FLB_OK) return s;
  api->set_error("this library's init fails on purpose");
  return FLB_VALUE_ERROR;
#elif FLB_TEST_DUPLICATE
  FlbStatus s = api->register_op(library, "dup::op(Tensor x) -> Tensor", copy_kernel, NULL, NULL, NULL);
  if (s != FLB_OK) return s;
  return api->register_op(library, "dup::op(Tensor y) -> Tensor", copy_kernel, NULL, NULL, NULL);
#elif FLB_TEST_BAD_SCHEMA
  return api->register_op(library, "badschema::op(Tensr x) -> Tensor", copy_kernel, NULL, NULL, NULL);
#elif FLB_TEST_KERNEL_ERRORS
  FlbStatus s = FLB_OK;
  if (s == FLB_OK) s = api->register_op(library, "kerr::fails(Tensor x) -> Tensor", fails, NULL, NULL, NULL);
  if (s == FLB_OK)
    s = api->register_op(library, "kerr::leaves_unset(Tensor x) -> Tensor", leaves_unset, NULL, NULL, NULL);
  if (s == FLB_OK)
    s = api->register_op(library, "kerr::returns_input(Tensor x) -> Tensor", returns_input, NULL, NULL, NULL);
  if (s == FLB_OK)
    s = api->register_op(library, "kerr::wrong_shape(Tensor x) -> Tensor", copy_kernel, NULL, wrong_shape, NULL);
  if (s == FLB_OK)
    s = api->register_op(library, "kerr::no_backward(Tensor x) -> Tensor", copy_kernel, NULL, NULL, NULL);
  if (s == FLB_OK)
    s = api->register_op(library, "kerr::backward_fails(Tensor x) -> Tensor", copy_kernel, backward_fails, NULL,
                         NULL);
  if (s == FLB_OK)
    s = api->register_op(library, "kerr::throws_in_api(Tensor x) -> Tensor", throws_in_api, NULL, NULL, NULL);
  return s;
#else
  return FLB_OK;
#endif
}

#if FLB_TEST_NEWER_ABI
/* Built for a version this flambeau does not provide yet. */
FLB_EXTERN_C FLB_EXPORT uint32_t flambeau_extension_abi_version(void) { return FLB_ABI_VERSION + 98; }
FLB_EXTERN_C FLB_EXPORT FlbStatus flambeau_extension_init(const FlbApi* api, FlbLibrary library) {
  return init(api, library);
}
#else
FLAMBEAU_EXTENSION(init)
#endif
#endif
