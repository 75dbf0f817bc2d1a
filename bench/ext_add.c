/* The custom ops of bench/bench_custom_op.py: the same work as flambeau's add, as a C op.
 *   bench::add(Tensor a, Tensor b) -> Tensor        flambeau's add through api->call_op
 *   bench::add_loop(Tensor a, Tensor b) -> Tensor   a + b in a C loop (float32, same shape,
 *                                                    contiguous) */
#include "flambeau/stable/c_api.h"

static const FlbApi* flb;

static FlbStatus add(const FlbValue* args, int64_t n, FlbTensor* out, int64_t m, void* ud) {
  return flb->call_op("add", args, 2, out, 1);
}

static FlbStatus add_loop(const FlbValue* args, int64_t n, FlbTensor* out, int64_t m, void* ud) {
  FlbTensor a = args[0].v.tensor, b = args[1].v.tensor;
  int64_t dim, numel, nb;
  const int64_t* sizes;
  int32_t dtype, ca, cb;
  float *pa, *pb, *po;
  FlbStatus s;
  if ((s = flb->tensor_dim(a, &dim)) || (s = flb->tensor_sizes(a, &sizes)) || (s = flb->tensor_dtype(a, &dtype)) ||
      (s = flb->tensor_numel(a, &numel)) || (s = flb->tensor_numel(b, &nb)) || (s = flb->tensor_is_contiguous(a, &ca)) ||
      (s = flb->tensor_is_contiguous(b, &cb)))
    return s;
  if (dtype != FLB_FLOAT32 || numel != nb || !ca || !cb) {
    flb->set_error("add_loop takes contiguous float32 tensors of one shape");
    return FLB_VALUE_ERROR;
  }
  FlbDevice cpu = {FLB_DEVICE_CPU, -1};
  if ((s = flb->empty(sizes, dim, FLB_FLOAT32, cpu, &out[0])) || (s = flb->tensor_data_ptr(a, (void**)&pa)) ||
      (s = flb->tensor_data_ptr(b, (void**)&pb)) || (s = flb->tensor_data_ptr(out[0], (void**)&po)))
    return s;
  for (int64_t i = 0; i < numel; ++i) po[i] = pa[i] + pb[i];
  return FLB_OK;
}

static FlbStatus init(const FlbApi* api, FlbLibrary library) {
  flb = api;
  FlbStatus s = api->register_op(library, "bench::add(Tensor a, Tensor b) -> Tensor", add, NULL, NULL, NULL);
  return s ? s : api->register_op(library, "bench::add_loop(Tensor a, Tensor b) -> Tensor", add_loop, NULL, NULL, NULL);
}

FLAMBEAU_EXTENSION(init)
