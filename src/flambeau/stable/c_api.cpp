// The stable C ABI's function table (flambeau/stable/c_api.h): each entry catches every
// exception at the boundary and turns it into a status code and the thread's message.
#include <algorithm>
#include <array>
#include <cstring>
#include <functional>

#include "flambeau/core/error.h"
#include "flambeau/core/generator.h"
#include "flambeau/kernels/cpu/simd_random.h"
#include "flambeau/ops/ops.h"
#include "flambeau/stable/extension.h"

namespace flambeau::stable {

// register_op of the table: defined with the library loader (load_library.cpp).
FlbStatus register_op_from_library(FlbLibrary library, const char* schema, FlbKernel kernel,
                                   FlbBackwardKernel backward, FlbShapeFn shape, void* user_data);

namespace {

thread_local std::string t_last_error;

// Runs f, mapping what it throws to a status code (the message kept for last_error()).
template <class F>
FlbStatus guarded(F&& f) noexcept {
  try {
    f();
    return FLB_OK;
  } catch (const IndexError& e) {
    t_last_error = e.what();
    return FLB_INDEX_ERROR;
  } catch (const ValueError& e) {
    t_last_error = e.what();
    return FLB_VALUE_ERROR;
  } catch (const TypeError& e) {
    t_last_error = e.what();
    return FLB_TYPE_ERROR;
  } catch (const NotImplementedError& e) {
    t_last_error = e.what();
    return FLB_NOT_IMPLEMENTED;
  } catch (const std::exception& e) {
    t_last_error = e.what();
    return FLB_ERROR;
  } catch (...) {
    t_last_error = "unknown C++ exception";
    return FLB_ERROR;
  }
}

void check_out(const void* p, const char* fn) {
  FLB_CHECK(p, ValueError, "[", fn, "] the output pointer is NULL");
}
const Tensor& tensor(FlbTensor t, const char* fn) {
  FLB_CHECK(t, ValueError, "[", fn, "] the tensor handle is NULL");
  return unwrap(t);
}
Generator& generator(FlbGenerator g, const char* fn) {
  FLB_CHECK(g, ValueError, "[", fn, "] the generator handle is NULL");
  return unwrap(g);
}

Dims dims_of(const int64_t* sizes, int64_t dim, const char* fn) {
  FLB_CHECK(dim >= 0 && (dim == 0 || sizes), ValueError, "[", fn, "] expected dim >= 0 and sizes for each, got dim ",
            dim);
  Dims d;
  for (int64_t i = 0; i < dim; ++i) {
    FLB_CHECK(sizes[i] >= 0, ValueError, "[", fn, "] negative size ", sizes[i], " in dimension ", i);
    d.push_back(sizes[i]);
  }
  return d;
}

Device device_of(FlbDevice d, const char* fn) {
  FLB_CHECK(d.type == FLB_DEVICE_CPU || d.type == FLB_DEVICE_CUDA, ValueError, "[", fn, "] unknown device type ",
            d.type);
  Device dev(d.type == FLB_DEVICE_CPU ? DeviceType::CPU : DeviceType::CUDA, d.index);
  check_device_available(dev, fn);
  return dev;
}

const char* c_last_error() { return t_last_error.c_str(); }
void c_set_error(const char* message) { t_last_error = message ? message : ""; }

FlbStatus c_tensor_new_handle(FlbTensor t, FlbTensor* out) {
  return guarded([&] {
    check_out(out, "tensor_new_handle");
    *out = new_handle(tensor(t, "tensor_new_handle"));
  });
}
void c_tensor_free(FlbTensor t) { delete reinterpret_cast<Tensor*>(t); }

// A getter of one property: out = f(tensor).
template <class T, class F>
FlbStatus get(FlbTensor t, T* out, const char* fn, F f) {
  return guarded([&] {
    check_out(out, fn);
    *out = f(tensor(t, fn));
  });
}
FlbStatus c_tensor_dtype(FlbTensor t, int32_t* out) {
  return get(t, out, "tensor_dtype", [](const Tensor& x) { return dtype_code(x.dtype()); });
}
FlbStatus c_tensor_dim(FlbTensor t, int64_t* out) {
  return get(t, out, "tensor_dim", [](const Tensor& x) { return x.dim(); });
}
FlbStatus c_tensor_sizes(FlbTensor t, const int64_t** out) {
  return get(t, out, "tensor_sizes", [](const Tensor& x) { return x.sizes().data(); });
}
FlbStatus c_tensor_strides(FlbTensor t, const int64_t** out) {
  return get(t, out, "tensor_strides", [](const Tensor& x) { return x.strides().data(); });
}
FlbStatus c_tensor_storage_offset(FlbTensor t, int64_t* out) {
  return get(t, out, "tensor_storage_offset", [](const Tensor& x) { return x.storage_offset(); });
}
FlbStatus c_tensor_numel(FlbTensor t, int64_t* out) {
  return get(t, out, "tensor_numel", [](const Tensor& x) { return x.numel(); });
}
FlbStatus c_tensor_data_ptr(FlbTensor t, void** out) {
  return get(t, out, "tensor_data_ptr", [](const Tensor& x) { return x.data_ptr(); });
}
FlbStatus c_tensor_is_contiguous(FlbTensor t, int32_t* out) {
  return get(t, out, "tensor_is_contiguous", [](const Tensor& x) { return int32_t(x.is_contiguous()); });
}
FlbStatus c_tensor_device(FlbTensor t, FlbDevice* out) {
  return get(t, out, "tensor_device", [](const Tensor& x) {
    return FlbDevice{x.device().is_cpu() ? FLB_DEVICE_CPU : FLB_DEVICE_CUDA, int32_t(x.device().index)};
  });
}

FlbStatus c_empty(const int64_t* sizes, int64_t dim, int32_t dtype, FlbDevice device, FlbTensor* out) {
  return guarded([&] {
    check_out(out, "empty");
    *out = new_handle(empty(dims_of(sizes, dim, "empty"), dtype_from_code(dtype, "empty"), device_of(device, "empty")));
  });
}
FlbStatus c_empty_strided(const int64_t* sizes, const int64_t* strides, int64_t dim, int32_t dtype, FlbDevice device,
                          FlbTensor* out) {
  return guarded([&] {
    check_out(out, "empty_strided");
    const Dims size = dims_of(sizes, dim, "empty_strided");
    FLB_CHECK(dim == 0 || strides, ValueError, "[empty_strided] strides is NULL");
    Dims stride;
    int64_t extent = 1;  // elements the storage must hold: 1 + sum (size - 1) * stride
    for (int64_t i = 0; i < dim; ++i) {
      FLB_CHECK(strides[i] >= 0, ValueError, "[empty_strided] negative stride ", strides[i], " in dimension ", i);
      stride.push_back(strides[i]);
      extent += (size[size_t(i)] - 1) * strides[i];
    }
    if (numel_of(size) == 0) extent = 0;
    const DType dt = dtype_from_code(dtype, "empty_strided");
    Tensor storage = empty({extent}, dt, device_of(device, "empty_strided"));
    *out = new_handle(storage.as_strided(size, stride, 0));
  });
}
FlbStatus c_zeros(const int64_t* sizes, int64_t dim, int32_t dtype, FlbDevice device, FlbTensor* out) {
  return guarded([&] {
    check_out(out, "zeros");
    *out = new_handle(zeros(dims_of(sizes, dim, "zeros"), dtype_from_code(dtype, "zeros"), device_of(device, "zeros")));
  });
}
FlbStatus c_copy_(FlbTensor dst, FlbTensor src) {
  return guarded([&] {
    const Tensor& s = tensor(src, "copy_");
    Tensor& d = const_cast<Tensor&>(tensor(dst, "copy_"));
    d.copy_(s);
  });
}
FlbStatus c_contiguous(FlbTensor t, FlbTensor* out) {
  return guarded([&] {
    check_out(out, "contiguous");
    *out = new_handle(tensor(t, "contiguous").contiguous());
  });
}

FlbStatus c_default_generator(FlbDevice device, FlbGenerator* out) {
  return guarded([&] {
    check_out(out, "default_generator");
    device_of(device, "default_generator");
    *out = reinterpret_cast<FlbGenerator>(new Generator(default_generator()));
  });
}
FlbStatus c_generator_new_handle(FlbGenerator g, FlbGenerator* out) {
  return guarded([&] {
    check_out(out, "generator_new_handle");
    *out = reinterpret_cast<FlbGenerator>(new Generator(generator(g, "generator_new_handle")));
  });
}
void c_generator_free(FlbGenerator g) { delete reinterpret_cast<Generator*>(g); }
FlbStatus c_generator_seed(FlbGenerator g, uint64_t* out) {
  return guarded([&] {
    check_out(out, "generator_seed");
    *out = generator(g, "generator_seed").initial_seed();
  });
}
FlbStatus c_generator_reserve(FlbGenerator g, uint64_t blocks, uint64_t* first_block, uint32_t key[2]) {
  return guarded([&] {
    check_out(first_block, "generator_reserve");
    check_out(key, "generator_reserve");
    std::array<uint32_t, 2> k;
    *first_block = generator(g, "generator_reserve").reserve(blocks, &k);
    key[0] = k[0], key[1] = k[1];
  });
}
FlbStatus c_philox(uint64_t first_block, const uint32_t key[2], int64_t blocks, uint32_t* words) {
  return guarded([&] {
    FLB_CHECK(key && (blocks == 0 || words), ValueError, "[philox] key or words is NULL");
    FLB_CHECK(blocks >= 0, ValueError, "[philox] negative block count ", blocks);
    if (blocks) kernels::philox_words(first_block, {key[0], key[1]}, words, blocks);
  });
}

// A C argument as a registry Value.
Value to_value(const FlbValue& v, const char* op, int64_t i) {
  switch (v.kind) {
    case FLB_VALUE_NONE: return {};
    case FLB_VALUE_TENSOR: return tensor(v.v.tensor, op);
    case FLB_VALUE_INT: return v.v.i;
    case FLB_VALUE_FLOAT: return v.v.f;
    case FLB_VALUE_BOOL: return v.v.b != 0;
    case FLB_VALUE_STR:
      FLB_CHECK(v.v.str, ValueError, "[", op, "] argument ", i, " is a NULL string");
      return std::string(v.v.str);
    case FLB_VALUE_INT_LIST:
      FLB_CHECK(v.v.ints.size >= 0 && (v.v.ints.size == 0 || v.v.ints.data), ValueError, "[", op, "] argument ", i,
                " is a bad int list");
      return Dims(std::vector<int64_t>(v.v.ints.data, v.v.ints.data + v.v.ints.size));
    case FLB_VALUE_DTYPE: return dtype_from_code(v.v.dtype, op);
    case FLB_VALUE_GENERATOR:
      return op_hook::Opaque{"generator", std::make_shared<Generator>(generator(v.v.generator, op))};
    case FLB_VALUE_TENSOR_LIST: {
      FLB_CHECK(v.v.tensors.size >= 0 && (v.v.tensors.size == 0 || v.v.tensors.data), ValueError, "[", op,
                "] argument ", i, " is a bad tensor list");
      std::vector<Tensor> l;
      for (int64_t k = 0; k < v.v.tensors.size; ++k) l.push_back(tensor(v.v.tensors.data[k], op));
      return l;
    }
  }
  throw ValueError(detail::str_cat("[", op, "] argument ", i, " has unknown kind ", v.kind));
}

FlbStatus c_call_op(const char* name, const FlbValue* args, int64_t num_args, FlbTensor* outputs,
                    int64_t num_outputs) {
  return guarded([&] {
    FLB_CHECK(name, ValueError, "[call_op] the op name is NULL");
    FLB_CHECK(num_args >= 0 && (num_args == 0 || args) && num_outputs >= 0 && (num_outputs == 0 || outputs),
              ValueError, "[call_op] ", name, ": bad argument or output arrays");
    std::vector<Value> values;
    for (int64_t i = 0; i < num_args; ++i) values.push_back(to_value(args[i], name, i));
    std::vector<Value> results = call_op(name, std::move(values));
    FLB_CHECK(int64_t(results.size()) == num_outputs, ValueError, "[call_op] ", name, " returns ", results.size(),
              " values, but ", num_outputs, " outputs were given");
    for (const Value& r : results)
      FLB_CHECK(std::holds_alternative<Tensor>(r), TypeError, "[call_op] ", name,
                " returns a value that is not a Tensor; the C ABI takes Tensor results only");
    for (int64_t k = 0; k < num_outputs; ++k) outputs[k] = new_handle(std::get<Tensor>(results[size_t(k)]));
  });
}

const FlbApi kApi = {
    FLB_ABI_VERSION,        uint32_t(sizeof(FlbApi)),
    c_last_error,           c_set_error,
    c_tensor_new_handle,    c_tensor_free,
    c_tensor_dtype,         c_tensor_dim,
    c_tensor_sizes,         c_tensor_strides,
    c_tensor_storage_offset, c_tensor_numel,
    c_tensor_data_ptr,      c_tensor_is_contiguous,
    c_tensor_device,        c_empty,
    c_empty_strided,        c_zeros,
    c_copy_,                c_contiguous,
    c_default_generator,    c_generator_new_handle,
    c_generator_free,       c_generator_seed,
    c_generator_reserve,    c_philox,
    register_op_from_library, c_call_op,
};

}  // namespace

const FlbApi& api() { return kApi; }

const std::string& last_error() { return t_last_error; }

FlbStatus guarded_call(const std::function<void()>& f) noexcept { return guarded(f); }

Tensor take(FlbTensor t) {
  Tensor* p = reinterpret_cast<Tensor*>(t);
  Tensor r = std::move(*p);
  delete p;
  return r;
}

int32_t dtype_code(DType dtype) {
  switch (dtype) {
    case kBool: return FLB_BOOL;
    case kUInt8: return FLB_UINT8;
    case kInt8: return FLB_INT8;
    case kInt16: return FLB_INT16;
    case kInt32: return FLB_INT32;
    case kInt64: return FLB_INT64;
    case kFloat16: return FLB_FLOAT16;
    case kBFloat16: return FLB_BFLOAT16;
    case kFloat32: return FLB_FLOAT32;
    case kFloat64: return FLB_FLOAT64;
  }
  return -1;
}

DType dtype_from_code(int32_t code, const char* op) {
  static const auto by_code = [] {  // ScalarType number -> index + 1 (0: none)
    std::array<uint8_t, 32> t{};
    for (int i = 0; i < kNumDTypes; ++i) t[size_t(dtype_code(DType(i)))] = uint8_t(i + 1);
    return t;
  }();
  if (code >= 0 && code < int32_t(by_code.size()) && by_code[size_t(code)]) return DType(by_code[size_t(code)] - 1);
  throw ValueError(detail::str_cat("[", op, "] unknown dtype code ", code,
                                   " (expected a PyTorch ScalarType number: FLB_FLOAT32, ...)"));
}

void raise_status(FlbStatus status, const std::string& message) {
  switch (status) {
    case FLB_INDEX_ERROR: throw IndexError(message);
    case FLB_VALUE_ERROR: throw ValueError(message);
    case FLB_TYPE_ERROR: throw TypeError(message);
    case FLB_NOT_IMPLEMENTED: throw NotImplementedError(message);
    default: throw Error(message);
  }
}

}  // namespace flambeau::stable
