/* An example flambeau extension, built only against the stable C header
 * (flambeau/stable/c_api.h): two custom ops in the namespace "mylib".
 *   mylib::fused_bias_gelu(Tensor x, Tensor b) -> Tensor
 *       gelu(x + b) (erf form) in one pass; b has x's last dimension; with a backward and
 *       a shape function.
 *   mylib::random_dropout(Tensor x, float p, Generator? generator=None) -> (Tensor, Tensor)
 *       (x * mask / (1 - p), mask), the mask drawn from flambeau's generator exactly as
 *       flambeau's bernoulli_(1 - p) draws it; with a backward.
 * Load it with flambeau.ops.load_library(path) or flambeau::load_library(path). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "flambeau/stable/c_api.h"

static const FlbApi* flb;

#define TRY(call)                   \
  do {                              \
    FlbStatus status_ = (call);     \
    if (status_ != FLB_OK) return status_; \
  } while (0)

static FlbStatus fail(FlbStatus code, const char* message) {
  flb->set_error(message);
  return code;
}

/* A contiguous float32/float64 tensor's data and element count. */
typedef struct {
  FlbTensor t; /* owned */
  int32_t dtype;
  int64_t numel;
  void* data;
} Dense;

static FlbStatus dense(FlbTensor t, Dense* out) {
  TRY(flb->contiguous(t, &out->t));
  TRY(flb->tensor_dtype(out->t, &out->dtype));
  TRY(flb->tensor_numel(out->t, &out->numel));
  return flb->tensor_data_ptr(out->t, &out->data);
}

static FlbStatus new_like(FlbTensor t, FlbTensor* out) {
  int64_t dim;
  const int64_t* sizes;
  int32_t dtype;
  FlbDevice device;
  TRY(flb->tensor_dim(t, &dim));
  TRY(flb->tensor_sizes(t, &sizes));
  TRY(flb->tensor_dtype(t, &dtype));
  TRY(flb->tensor_device(t, &device));
  return flb->empty(sizes, dim, dtype, device, out);
}

static const double kSqrtHalf = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;
static double gelu(double z) { return 0.5 * z * (1.0 + erf(z * kSqrtHalf)); }
static double gelu_grad(double z) { /* Phi(z) + z phi(z) */
  return 0.5 * (1.0 + erf(z * kSqrtHalf)) + z * exp(-0.5 * z * z) * kInvSqrt2Pi;
}

/* x and b: same floating dtype, b of shape (n,) with n x's last size. */
static FlbStatus check_bias_args(FlbTensor x, FlbTensor b, int64_t* n) {
  int64_t xd, bd;
  const int64_t *xs, *bs;
  int32_t xt, bt;
  TRY(flb->tensor_dim(x, &xd));
  TRY(flb->tensor_dim(b, &bd));
  TRY(flb->tensor_sizes(x, &xs));
  TRY(flb->tensor_sizes(b, &bs));
  TRY(flb->tensor_dtype(x, &xt));
  TRY(flb->tensor_dtype(b, &bt));
  if (xt != bt || (xt != FLB_FLOAT32 && xt != FLB_FLOAT64))
    return fail(FLB_TYPE_ERROR, "x and b must both be float32 or both float64");
  if (xd < 1 || bd != 1 || bs[0] != xs[xd - 1])
    return fail(FLB_VALUE_ERROR, "b must have shape (n,), n the last size of x");
  *n = bs[0];
  return FLB_OK;
}

static FlbStatus bias_gelu_kernel(const FlbValue* args, int64_t num_args, FlbTensor* outputs, int64_t num_outputs,
                                  void* user_data) {
  int64_t n;
  TRY(check_bias_args(args[0].v.tensor, args[1].v.tensor, &n));
  Dense x = {0}, b = {0};
  FlbStatus s = dense(args[0].v.tensor, &x);
  if (s == FLB_OK) s = dense(args[1].v.tensor, &b);
  if (s == FLB_OK) s = new_like(x.t, &outputs[0]);
  void* y = NULL;
  if (s == FLB_OK) s = flb->tensor_data_ptr(outputs[0], &y);
  if (s == FLB_OK) {
    for (int64_t i = 0; i < x.numel; ++i) {
      if (x.dtype == FLB_FLOAT32)
        ((float*)y)[i] = (float)gelu(((float*)x.data)[i] + ((float*)b.data)[i % n]); /* x + b in float */
      else
        ((double*)y)[i] = gelu(((double*)x.data)[i] + ((double*)b.data)[i % n]);
    }
  }
  flb->tensor_free(x.t);
  flb->tensor_free(b.t);
  return s;
}

/* d/dx = d/db (summed over the leading dims by flambeau) = grad * gelu'(x + b). */
static FlbStatus bias_gelu_backward(const FlbTensor* grad_outputs, int64_t num_outputs, const FlbValue* args,
                                    int64_t num_args, const FlbTensor* outputs, FlbTensor* grad_inputs,
                                    void* user_data) {
  int64_t n;
  TRY(check_bias_args(args[0].v.tensor, args[1].v.tensor, &n));
  Dense x = {0}, b = {0}, g = {0};
  FlbStatus s = dense(args[0].v.tensor, &x);
  if (s == FLB_OK) s = dense(args[1].v.tensor, &b);
  if (s == FLB_OK) s = dense(grad_outputs[0], &g);
  if (s == FLB_OK) s = new_like(x.t, &grad_inputs[0]);
  void* gx = NULL;
  if (s == FLB_OK) s = flb->tensor_data_ptr(grad_inputs[0], &gx);
  if (s == FLB_OK) {
    for (int64_t i = 0; i < x.numel; ++i) {
      if (x.dtype == FLB_FLOAT32)
        ((float*)gx)[i] = ((float*)g.data)[i] * (float)gelu_grad(((float*)x.data)[i] + ((float*)b.data)[i % n]);
      else
        ((double*)gx)[i] = ((double*)g.data)[i] * gelu_grad(((double*)x.data)[i] + ((double*)b.data)[i % n]);
    }
    s = flb->tensor_new_handle(grad_inputs[0], &grad_inputs[1]);
  }
  flb->tensor_free(x.t);
  flb->tensor_free(b.t);
  flb->tensor_free(g.t);
  return s;
}

static FlbStatus bias_gelu_shape(const FlbValue* args, int64_t num_args, FlbTensorMeta* outputs, int64_t num_outputs,
                                 void* user_data) {
  int64_t dim;
  const int64_t* sizes;
  TRY(flb->tensor_dim(args[0].v.tensor, &dim));
  TRY(flb->tensor_sizes(args[0].v.tensor, &sizes));
  TRY(flb->tensor_dtype(args[0].v.tensor, &outputs[0].dtype));
  if (dim > FLB_MAX_DIMS) return fail(FLB_VALUE_ERROR, "too many dimensions");
  outputs[0].dim = (int32_t)dim;
  for (int64_t d = 0; d < dim; ++d) outputs[0].sizes[d] = sizes[d];
  return FLB_OK;
}

/* [0, 1) with 53 random bits from two words, as flambeau's bernoulli_ draws. */
static double uniform53(uint32_t hi, uint32_t lo) {
  return (double)((((uint64_t)hi << 32) | lo) >> 11) * 0x1p-53;
}

static FlbStatus dropout_kernel(const FlbValue* args, int64_t num_args, FlbTensor* outputs, int64_t num_outputs,
                                void* user_data) {
  const double p = args[1].v.f;
  if (!(p >= 0 && p < 1)) return fail(FLB_VALUE_ERROR, "p must be in [0, 1)");
  Dense x = {0};
  TRY(dense(args[0].v.tensor, &x));
  FlbStatus s = FLB_OK;
  if (x.dtype != FLB_FLOAT32 && x.dtype != FLB_FLOAT64) s = fail(FLB_TYPE_ERROR, "x must be float32 or float64");
  FlbGenerator owned = NULL, gen = NULL;
  if (s == FLB_OK) {
    if (args[2].kind == FLB_VALUE_GENERATOR) gen = args[2].v.generator; /* borrowed */
    else if ((s = flb->default_generator((FlbDevice){FLB_DEVICE_CPU, -1}, &owned)) == FLB_OK) gen = owned;
  }
  /* Element i: words 2i and 2i + 1 of blocks reserved for ceil(n / 2) elements. */
  const int64_t blocks = (x.numel + 1) / 2;
  uint32_t* words = malloc((size_t)(4 * blocks + 4) * sizeof(uint32_t));
  uint64_t first = 0;
  uint32_t key[2];
  if (s == FLB_OK && !words) s = fail(FLB_ERROR, "out of memory");
  if (s == FLB_OK) s = flb->generator_reserve(gen, (uint64_t)blocks, &first, key);
  if (s == FLB_OK) s = flb->philox(first, key, blocks, words);
  if (s == FLB_OK) s = new_like(x.t, &outputs[0]);
  if (s == FLB_OK) s = new_like(x.t, &outputs[1]);
  void *y = NULL, *mask = NULL;
  if (s == FLB_OK) s = flb->tensor_data_ptr(outputs[0], &y);
  if (s == FLB_OK) s = flb->tensor_data_ptr(outputs[1], &mask);
  if (s == FLB_OK) {
    for (int64_t i = 0; i < x.numel; ++i) {
      const int keep = uniform53(words[2 * i], words[2 * i + 1]) < 1 - p;
      if (x.dtype == FLB_FLOAT32) {
        ((float*)mask)[i] = (float)keep;
        ((float*)y)[i] = ((float*)x.data)[i] * (float)keep / (float)(1 - p);
      } else {
        ((double*)mask)[i] = keep;
        ((double*)y)[i] = ((double*)x.data)[i] * keep / (1 - p);
      }
    }
  }
  free(words);
  flb->generator_free(owned);
  flb->tensor_free(x.t);
  return s;
}

static FlbStatus dropout_backward(const FlbTensor* grad_outputs, int64_t num_outputs, const FlbValue* args,
                                  int64_t num_args, const FlbTensor* outputs, FlbTensor* grad_inputs,
                                  void* user_data) {
  const double p = args[1].v.f;
  Dense g = {0}, m = {0};
  FlbStatus s = dense(grad_outputs[0], &g);
  if (s == FLB_OK) s = dense(outputs[1], &m);
  if (s == FLB_OK) s = new_like(m.t, &grad_inputs[0]);
  void* gx = NULL;
  if (s == FLB_OK) s = flb->tensor_data_ptr(grad_inputs[0], &gx);
  if (s == FLB_OK) {
    for (int64_t i = 0; i < m.numel; ++i) {
      if (m.dtype == FLB_FLOAT32)
        ((float*)gx)[i] = ((float*)g.data)[i] * ((float*)m.data)[i] / (float)(1 - p);
      else
        ((double*)gx)[i] = ((double*)g.data)[i] * ((double*)m.data)[i] / (1 - p);
    }
  }
  flb->tensor_free(g.t);
  flb->tensor_free(m.t);
  return s;
}

static FlbStatus init(const FlbApi* api, FlbLibrary library) {
  flb = api;
  TRY(api->register_op(library, "mylib::fused_bias_gelu(Tensor x, Tensor b) -> Tensor", bias_gelu_kernel,
                       bias_gelu_backward, bias_gelu_shape, NULL));
  TRY(api->register_op(library,
                       "mylib::random_dropout(Tensor x, float p=0.5, Generator? generator=None) -> (Tensor, Tensor)",
                       dropout_kernel, dropout_backward, NULL, NULL));
  return FLB_OK;
}

FLAMBEAU_EXTENSION(init)
