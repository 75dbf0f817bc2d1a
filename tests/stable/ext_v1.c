/* A test extension built against the frozen header of ABI version 1 (tests/stable/v1):
 * it must keep loading and working in every later flambeau. It uses every function of the
 * version-1 table.
 *   v1test::describe(Tensor x) -> Tensor          int64 [dim, numel, offset, contiguous,
 *                                                  device type, dtype, sizes..., strides...]
 *   v1test::affine(Tensor x, float scale, float shift=0.0, bool negate=False, str layout="contiguous") -> Tensor
 *       float64 (negate ? -1 : 1) * (x * scale + shift); layout "transposed" returns a 2-d
 *       result with column-major strides (empty_strided)
 *   v1test::filled(int[] size, ScalarType dtype, int value=0) -> Tensor    zeros + value
 *   v1test::matmul(Tensor a, Tensor b) -> Tensor   flambeau's matmul through call_op
 *   v1test::uniform(int n, Generator? generator=None) -> Tensor
 *       float32 [0, 1) drawn as flambeau's rand draws it (word i's top 24 bits)
 *   v1test::seed(Generator? generator=None) -> Tensor   the generator's seed (int64) */
#include <string.h>

#include "flambeau/stable/c_api.h"

#if FLB_ABI_VERSION != 1
#error "ext_v1.c must be built against the frozen version-1 header"
#endif

static const FlbApi* flb;

#define TRY(call)                          \
  do {                                     \
    FlbStatus status_ = (call);            \
    if (status_ != FLB_OK) return status_; \
  } while (0)

static const FlbDevice kCpu = {FLB_DEVICE_CPU, -1};

static FlbStatus describe(const FlbValue* args, int64_t num_args, FlbTensor* out, int64_t num_out, void* ud) {
  FlbTensor x = args[0].v.tensor;
  int64_t dim, numel, offset;
  int32_t contiguous, dtype;
  const int64_t *sizes, *strides;
  FlbDevice device;
  TRY(flb->tensor_dim(x, &dim));
  TRY(flb->tensor_numel(x, &numel));
  TRY(flb->tensor_storage_offset(x, &offset));
  TRY(flb->tensor_is_contiguous(x, &contiguous));
  TRY(flb->tensor_dtype(x, &dtype));
  TRY(flb->tensor_sizes(x, &sizes));
  TRY(flb->tensor_strides(x, &strides));
  TRY(flb->tensor_device(x, &device));
  const int64_t n = 6 + 2 * dim;
  TRY(flb->empty(&n, 1, FLB_INT64, kCpu, &out[0]));
  int64_t* o;
  TRY(flb->tensor_data_ptr(out[0], (void**)&o));
  o[0] = dim, o[1] = numel, o[2] = offset, o[3] = contiguous, o[4] = device.type, o[5] = dtype;
  for (int64_t d = 0; d < dim; ++d) o[6 + d] = sizes[d], o[6 + dim + d] = strides[d];
  return FLB_OK;
}

static FlbStatus affine(const FlbValue* args, int64_t num_args, FlbTensor* out, int64_t num_out, void* ud) {
  FlbTensor x = args[0].v.tensor;
  const double scale = args[1].v.f, shift = args[2].v.f, sign = args[3].v.b ? -1.0 : 1.0;
  const int transposed = strcmp(args[4].v.str, "transposed") == 0;
  if (!transposed && strcmp(args[4].v.str, "contiguous") != 0) {
    flb->set_error("layout must be \"contiguous\" or \"transposed\"");
    return FLB_VALUE_ERROR;
  }
  int64_t dim;
  const int64_t* sizes;
  TRY(flb->tensor_dim(x, &dim));
  TRY(flb->tensor_sizes(x, &sizes));
  if (transposed && dim != 2) {
    flb->set_error("layout \"transposed\" needs a 2-d x");
    return FLB_VALUE_ERROR;
  }
  int64_t strides[16];
  if (dim > 16) {
    flb->set_error("too many dimensions");
    return FLB_VALUE_ERROR;
  }
  for (int64_t d = dim - 1, s = 1; d >= 0; --d) strides[d] = s, s *= sizes[d];
  if (transposed) strides[0] = 1, strides[1] = sizes[0];
  TRY(flb->empty_strided(sizes, strides, dim, FLB_FLOAT64, kCpu, &out[0]));
  TRY(flb->copy_(out[0], x)); /* converts x to float64 in out's layout */
  int64_t numel;
  double* y;
  TRY(flb->tensor_numel(out[0], &numel));
  TRY(flb->tensor_data_ptr(out[0], (void**)&y));
  /* Dense either way: every element once, whatever the order. */
  for (int64_t i = 0; i < numel; ++i) y[i] = sign * (y[i] * scale + shift);
  return FLB_OK;
}

static FlbStatus filled(const FlbValue* args, int64_t num_args, FlbTensor* out, int64_t num_out, void* ud) {
  TRY(flb->zeros(args[0].v.ints.data, args[0].v.ints.size, args[1].v.dtype, kCpu, &out[0]));
  if (args[2].v.i == 0) return FLB_OK;
  FlbTensor value, tmp = NULL;
  const int64_t one = 1;
  TRY(flb->empty(&one, 0, FLB_INT64, kCpu, &value));
  int64_t* v;
  FlbStatus s = flb->tensor_data_ptr(value, (void**)&v);
  if (s == FLB_OK) {
    *v = args[2].v.i;
    s = flb->copy_(out[0], value); /* a 0-d source broadcasts */
  }
  if (s == FLB_OK) s = flb->tensor_new_handle(out[0], &tmp);
  flb->tensor_free(tmp); /* a second handle, freed: out[0] stays */
  flb->tensor_free(value);
  return s;
}

static FlbStatus matmul(const FlbValue* args, int64_t num_args, FlbTensor* out, int64_t num_out, void* ud) {
  return flb->call_op("matmul", args, 2, out, 1);
}

static FlbStatus generator_of(const FlbValue* arg, FlbGenerator* owned, FlbGenerator* g) {
  *owned = NULL;
  if (arg->kind == FLB_VALUE_GENERATOR) return *g = arg->v.generator, FLB_OK;
  FlbGenerator d;
  TRY(flb->default_generator(kCpu, &d));
  FlbStatus s = flb->generator_new_handle(d, owned); /* another handle of the same stream */
  flb->generator_free(d);
  *g = *owned;
  return s;
}

static FlbStatus uniform(const FlbValue* args, int64_t num_args, FlbTensor* out, int64_t num_out, void* ud) {
  const int64_t n = args[0].v.i;
  FlbGenerator owned, g;
  TRY(generator_of(&args[1], &owned, &g));
  FlbStatus s = flb->empty(&n, 1, FLB_FLOAT32, kCpu, &out[0]);
  float* y = NULL;
  if (s == FLB_OK) s = flb->tensor_data_ptr(out[0], (void**)&y);
  const int64_t blocks = (n + 3) / 4;
  uint64_t first = 0;
  uint32_t key[2];
  if (s == FLB_OK && n > 0) s = flb->generator_reserve(g, (uint64_t)blocks, &first, key);
  for (int64_t b = 0; s == FLB_OK && b < blocks; ++b) {
    uint32_t w[4];
    s = flb->philox(first + (uint64_t)b, key, 1, w);
    for (int64_t j = 0; s == FLB_OK && j < 4 && 4 * b + j < n; ++j) {
      const float u = (float)(w[j] >> 8) * 0x1p-24f;
      y[4 * b + j] = u < 1.0f ? u : 0x1.fffffep-1f;
    }
  }
  flb->generator_free(owned);
  return s;
}

static FlbStatus seed(const FlbValue* args, int64_t num_args, FlbTensor* out, int64_t num_out, void* ud) {
  FlbGenerator owned, g;
  TRY(generator_of(&args[0], &owned, &g));
  uint64_t s64 = 0;
  FlbStatus s = flb->generator_seed(g, &s64);
  if (s == FLB_OK) s = flb->empty(NULL, 0, FLB_INT64, kCpu, &out[0]);
  int64_t* y = NULL;
  if (s == FLB_OK) s = flb->tensor_data_ptr(out[0], (void**)&y);
  if (s == FLB_OK) *y = (int64_t)s64;
  flb->generator_free(owned);
  return s;
}

static FlbStatus init(const FlbApi* api, FlbLibrary library) {
  flb = api;
  if (api->abi_version < 1 || api->size < sizeof(FlbApi)) {
    api->set_error("the host's table is smaller than version 1's");
    return FLB_ERROR;
  }
  TRY(api->register_op(library, "v1test::describe(Tensor x) -> Tensor", describe, NULL, NULL, NULL));
  TRY(api->register_op(library,
                       "v1test::affine(Tensor x, float scale, float shift=0.0, bool negate=False, "
                       "str layout=\"contiguous\") -> Tensor",
                       affine, NULL, NULL, NULL));
  TRY(api->register_op(library, "v1test::filled(int[] size, ScalarType dtype, int value=0) -> Tensor", filled, NULL,
                       NULL, NULL));
  TRY(api->register_op(library, "v1test::matmul(Tensor a, Tensor b) -> Tensor", matmul, NULL, NULL, NULL));
  TRY(api->register_op(library, "v1test::uniform(int n, Generator? generator=None) -> Tensor", uniform, NULL, NULL,
                       NULL));
  TRY(api->register_op(library, "v1test::seed(Generator? generator=None) -> Tensor", seed, NULL, NULL, NULL));
  return FLB_OK;
}

FLAMBEAU_EXTENSION(init)
