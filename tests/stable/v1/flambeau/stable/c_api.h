/* FROZEN COPY of ABI version 1 (never edit; see tests/stable/c_api_test.cpp).
 * flambeau's stable C ABI: what a custom-kernel library (an "extension") built once
 * against this header may use of any later flambeau.
 *
 * C11, no C++ types. An extension links against nothing of flambeau's: it defines its two
 * entry points with FLAMBEAU_EXTENSION(init) and gets, when loaded, a table of functions
 * (FlbApi) to create and read tensors, draw from flambeau's random streams and register ops.
 *
 * Stability rules:
 * - FLB_ABI_VERSION counts the versions of the table. A new version only appends members
 *   to FlbApi and adds constants; nothing is removed, reordered or changes meaning.
 * - An extension built against version N loads into any flambeau providing version >= N;
 *   one that targets a newer version than the host provides is refused at load, with both
 *   versions in the message.
 *
 * Conventions:
 * - Functions return FlbStatus: FLB_OK, or an error code with a message kept per thread
 *   (api->last_error()). Results come back through out-parameters, written only on FLB_OK.
 * - Handles: every handle written to an out-parameter is owned by the caller and freed
 *   with its *_free function. Handles a kernel receives in its arguments are borrowed:
 *   valid during the call, never freed by the kernel.
 * - Sizes and strides are counted in elements; dtypes are PyTorch's ScalarType numbers.
 */
#ifndef FLAMBEAU_STABLE_C_API_H
#define FLAMBEAU_STABLE_C_API_H

#include <stddef.h>
#include <stdint.h>

#define FLB_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes ---------------------------------------------------------------- */
typedef int32_t FlbStatus;
#define FLB_OK 0
#define FLB_ERROR 1               /* RuntimeError */
#define FLB_VALUE_ERROR 2         /* ValueError */
#define FLB_TYPE_ERROR 3          /* TypeError */
#define FLB_INDEX_ERROR 4         /* IndexError */
#define FLB_NOT_IMPLEMENTED 5     /* NotImplementedError */

/* ---- Element types (PyTorch's ScalarType numbers) --------------------------------- */
#define FLB_UINT8 0
#define FLB_INT8 1
#define FLB_INT16 2
#define FLB_INT32 3
#define FLB_INT64 4
#define FLB_FLOAT16 5
#define FLB_FLOAT32 6
#define FLB_FLOAT64 7
#define FLB_BOOL 11
#define FLB_BFLOAT16 15

/* ---- Devices ---------------------------------------------------------------------- */
#define FLB_DEVICE_CPU 0
#define FLB_DEVICE_CUDA 1
typedef struct FlbDevice {
  int32_t type;  /* FLB_DEVICE_* */
  int32_t index; /* -1: the current one */
} FlbDevice;

/* ---- Handles ---------------------------------------------------------------------- */
typedef struct FlbTensorOpaque* FlbTensor;       /* a tensor (shares storage like Tensor) */
typedef struct FlbGeneratorOpaque* FlbGenerator; /* a random stream (shares state when copied) */
typedef struct FlbLibraryOpaque* FlbLibrary;     /* the library being loaded (init only) */

/* ---- Boxed op arguments ----------------------------------------------------------- */
#define FLB_VALUE_NONE 0        /* None: an optional argument left out */
#define FLB_VALUE_TENSOR 1      /* v.tensor */
#define FLB_VALUE_INT 2         /* v.i */
#define FLB_VALUE_FLOAT 3       /* v.f */
#define FLB_VALUE_BOOL 4        /* v.b: 0 or 1 */
#define FLB_VALUE_STR 5         /* v.str: NUL-terminated UTF-8 */
#define FLB_VALUE_INT_LIST 6    /* v.ints */
#define FLB_VALUE_DTYPE 7       /* v.dtype: FLB_FLOAT32, ... */
#define FLB_VALUE_GENERATOR 8   /* v.generator */
#define FLB_VALUE_TENSOR_LIST 9 /* v.tensors */
typedef struct FlbValue {
  int32_t kind; /* FLB_VALUE_* */
  int32_t reserved;
  union {
    FlbTensor tensor;
    int64_t i;
    double f;
    int32_t b;
    const char* str;
    int32_t dtype;
    FlbGenerator generator;
    struct {
      const int64_t* data;
      int64_t size;
    } ints;
    struct {
      const FlbTensor* data;
      int64_t size;
    } tensors;
  } v;
} FlbValue;

/* An op's kernel. args: one per schema argument, in order, defaults filled in (borrowed).
 * outputs: one slot per result (every result is a Tensor), NULL on entry; the kernel stores
 * a new tensor it owns in each, and flambeau takes them. The kernel runs with autograd off
 * and must not return (a view of) an input. On an error it returns its code after
 * api->set_error(message); outputs already stored are freed by flambeau. */
typedef FlbStatus (*FlbKernel)(const FlbValue* args, int64_t num_args, FlbTensor* outputs, int64_t num_outputs,
                               void* user_data);

/* An op's backward. grad_outputs: one per result (zeros where none flowed); args and
 * outputs: the forward call's. grad_inputs: one slot per schema argument, NULL on entry;
 * the kernel stores the gradient of each Tensor argument it differentiates (left NULL:
 * no gradient). A gradient may have its argument's shape or the broadcast shape of the
 * call (flambeau sums it down). */
typedef FlbStatus (*FlbBackwardKernel)(const FlbTensor* grad_outputs, int64_t num_outputs, const FlbValue* args,
                                       int64_t num_args, const FlbTensor* outputs, FlbTensor* grad_inputs,
                                       void* user_data);

/* What a result will be, before it is computed. */
#define FLB_MAX_DIMS 16
typedef struct FlbTensorMeta {
  int32_t dtype;
  int32_t dim;
  int64_t sizes[FLB_MAX_DIMS];
} FlbTensorMeta;

/* An op's shape function: each result's dtype and sizes from the arguments (their tensors'
 * metadata only; the data must not be read). flambeau checks every call's results against
 * it. */
typedef FlbStatus (*FlbShapeFn)(const FlbValue* args, int64_t num_args, FlbTensorMeta* outputs, int64_t num_outputs,
                                void* user_data);

/* ---- The function table, version 1 ------------------------------------------------ */
typedef struct FlbApi {
  uint32_t abi_version; /* the version the host provides (>= the extension's) */
  uint32_t size;        /* sizeof(FlbApi) in the host */

  /* Errors: the calling thread's last error message ("" when none), and setting it (a
   * kernel does before returning an error code). */
  const char* (*last_error)(void);
  void (*set_error)(const char* message);

  /* Tensor handles. */
  FlbStatus (*tensor_new_handle)(FlbTensor t, FlbTensor* out); /* another owned handle to t */
  void (*tensor_free)(FlbTensor t);                            /* NULL is ignored */
  FlbStatus (*tensor_dtype)(FlbTensor t, int32_t* out);
  FlbStatus (*tensor_dim)(FlbTensor t, int64_t* out);
  /* Arrays of tensor_dim() elements, valid while the handle lives. */
  FlbStatus (*tensor_sizes)(FlbTensor t, const int64_t** out);
  FlbStatus (*tensor_strides)(FlbTensor t, const int64_t** out);
  FlbStatus (*tensor_storage_offset)(FlbTensor t, int64_t* out);
  FlbStatus (*tensor_numel)(FlbTensor t, int64_t* out);
  /* The address of element 0 (storage data + storage offset). */
  FlbStatus (*tensor_data_ptr)(FlbTensor t, void** out);
  FlbStatus (*tensor_is_contiguous)(FlbTensor t, int32_t* out);
  FlbStatus (*tensor_device)(FlbTensor t, FlbDevice* out);

  /* New tensors (uninitialised, strided, zero-filled) and copies. */
  FlbStatus (*empty)(const int64_t* sizes, int64_t dim, int32_t dtype, FlbDevice device, FlbTensor* out);
  FlbStatus (*empty_strided)(const int64_t* sizes, const int64_t* strides, int64_t dim, int32_t dtype,
                             FlbDevice device, FlbTensor* out);
  FlbStatus (*zeros)(const int64_t* sizes, int64_t dim, int32_t dtype, FlbDevice device, FlbTensor* out);
  FlbStatus (*copy_)(FlbTensor dst, FlbTensor src); /* broadcasts src, converts its dtype */
  FlbStatus (*contiguous)(FlbTensor t, FlbTensor* out); /* t itself (a new handle) if contiguous */

  /* Generators. The default generator of a device, another owned handle to g, and g's seed. */
  FlbStatus (*default_generator)(FlbDevice device, FlbGenerator* out);
  FlbStatus (*generator_new_handle)(FlbGenerator g, FlbGenerator* out);
  void (*generator_free)(FlbGenerator g); /* NULL is ignored */
  FlbStatus (*generator_seed)(FlbGenerator g, uint64_t* out);
  /* Reserves `blocks` Philox4x32-10 blocks of g's stream under its lock: *first_block is
   * the counter of the first, key the stream's key (the seed's low and high words). The
   * next draw of g, by flambeau or anyone, starts after them. flambeau's own ops: float32
   * uniform_ of n elements takes ceil(n / 4) blocks, element i from word i; float64 ops and
   * bernoulli_ take ceil(n / 2) blocks, element i from words 2i (high) and 2i + 1 (low). */
  FlbStatus (*generator_reserve)(FlbGenerator g, uint64_t blocks, uint64_t* first_block, uint32_t key[2]);
  /* The 4 words of each Philox4x32-10 block first_block, first_block + 1, ... into
   * words[0, 4 * blocks): block b is counter (b mod 2^32, b >> 32, 0, 0) under key. */
  FlbStatus (*philox)(uint64_t first_block, const uint32_t key[2], int64_t blocks, uint32_t* words);

  /* Ops. register_op, during flambeau_extension_init only: the op of `schema`
   * ("mylib::fused_bias_gelu(Tensor x, Tensor b) -> Tensor"; a namespace is required, every
   * result a Tensor) with its kernel, and optionally a backward and a shape function (NULL:
   * none); user_data is passed to all three. The library's ops become callable when init
   * returns FLB_OK (none of them if it fails). */
  FlbStatus (*register_op)(FlbLibrary library, const char* schema, FlbKernel kernel, FlbBackwardKernel backward,
                           FlbShapeFn shape, void* user_data);
  /* Calls any registered op by name (flambeau's own included), arguments as for a kernel
   * (trailing defaults may be left out); stores one new handle per result in outputs. */
  FlbStatus (*call_op)(const char* name, const FlbValue* args, int64_t num_args, FlbTensor* outputs,
                       int64_t num_outputs);
} FlbApi;

/* ---- Entry points of an extension ------------------------------------------------- */
/* The ABI version the extension was built against, and its initialiser: it registers the
 * library's ops and returns FLB_OK, or an error code after api->set_error(). */
typedef uint32_t (*FlbAbiVersionFn)(void);
typedef FlbStatus (*FlbInitFn)(const FlbApi* api, FlbLibrary library);

#if defined(_WIN32)
#define FLB_EXPORT __declspec(dllexport)
#else
#define FLB_EXPORT __attribute__((visibility("default")))
#endif
#ifdef __cplusplus
#define FLB_EXTERN_C extern "C"
#else
#define FLB_EXTERN_C
#endif

/* Defines the entry points flambeau looks for (flambeau_extension_abi_version and
 * flambeau_extension_init) around `init`, a FlbInitFn. */
#define FLAMBEAU_EXTENSION(init)                                                            \
  FLB_EXTERN_C FLB_EXPORT uint32_t flambeau_extension_abi_version(void) { return FLB_ABI_VERSION; } \
  FLB_EXTERN_C FLB_EXPORT FlbStatus flambeau_extension_init(const FlbApi* api, FlbLibrary library) {  \
    return (init)(api, library);                                                                       \
  }

#ifdef __cplusplus
}
#endif

#endif /* FLAMBEAU_STABLE_C_API_H */
