// Data crossing between Python and flambeau: DLPack capsules both ways (no copies),
// numpy arrays sharing memory, nested lists (tolist / flambeau.tensor).
#include <nanobind/ndarray.h>

#include "bindings.h"
#include "flambeau/kernels/cpu/cast.h"

namespace flambeau::python {
namespace {

// The DLPack (v0.8) ABI, as exchanged in "dltensor" capsules.
struct DLDevice {
  int32_t device_type;  // 1: CPU
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 4 bfloat, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};

DLDataType dl_dtype(DType dt) {
  const uint8_t bits = uint8_t(8 * itemsize(dt));
  switch (dt) {
    case DType::Bool: return {6, 8, 1};
    case DType::UInt8: return {1, 8, 1};
    case DType::BFloat16: return {4, 16, 1};
    case DType::Float16:
    case DType::Float32:
    case DType::Float64: return {2, bits, 1};
    default: return {0, bits, 1};
  }
}

DType from_dl_dtype(uint8_t code, uint8_t bits, uint16_t lanes) {
  FLB_CHECK(lanes == 1, TypeError, "[from_dlpack] vector dtypes (lanes ", lanes, ") are not supported");
  switch (code) {
    case 0:
      if (bits == 8) return kInt8;
      if (bits == 16) return kInt16;
      if (bits == 32) return kInt32;
      if (bits == 64) return kInt64;
      break;
    case 1:
      if (bits == 8) return kUInt8;
      break;
    case 2:
      if (bits == 16) return kFloat16;
      if (bits == 32) return kFloat32;
      if (bits == 64) return kFloat64;
      break;
    case 4:
      if (bits == 16) return kBFloat16;
      break;
    case 6:
      if (bits == 8) return kBool;
      break;
  }
  throw TypeError(detail::str_cat("[from_dlpack] unsupported DLPack dtype (code ", int(code), ", ", int(bits), " bits)"));
}

struct ExportCtx {
  Tensor t;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed;
};

void delete_export(DLManagedTensor* m) { delete static_cast<ExportCtx*>(m->manager_ctx); }

void capsule_destructor(PyObject* capsule) {
  // Still named "dltensor": nobody consumed it, so it is ours to free.
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  } else {
    PyErr_Clear();
  }
}

// Storage ctx of an imported array: keeps the exporter's buffer alive.
void release_import(void*, size_t, void* ctx) {
  PyGILState_STATE s = PyGILState_Ensure();
  delete static_cast<nb::ndarray<nb::ro>*>(ctx);
  PyGILState_Release(s);
}

}  // namespace

nb::object to_dlpack(const Tensor& t) {
  auto* ctx = new ExportCtx{t, std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                            std::vector<int64_t>(t.strides().begin(), t.strides().end()), {}};
  ctx->managed.dl_tensor = {t.data_ptr(), {1, 0}, int32_t(t.dim()), dl_dtype(t.dtype()), ctx->shape.data(),
                            ctx->strides.data(), 0};
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = delete_export;
  PyObject* cap = PyCapsule_New(&ctx->managed, "dltensor", capsule_destructor);
  if (!cap) {
    delete ctx;
    throw nb::python_error();
  }
  return nb::steal(cap);
}

Tensor from_dlpack(nb::handle obj) {
  Tensor* t = nullptr;
  if (nb::try_cast<Tensor*>(obj, t) && t) return *t;
  nb::ndarray<nb::ro> arr;  // read-only arrays too (numpy's broadcast_to): imported as a copy below
  if (!nb::try_cast(obj, arr))
    throw TypeError(std::string("[from_dlpack] expected an object with __dlpack__ (numpy array, torch tensor), got ") +
                    nb::type_name(obj.type()).c_str());
  FLB_CHECK(arr.device_type() == nb::device::cpu::value, NotImplementedError,
            "[from_dlpack] only CPU arrays are supported");
  const DType dt = from_dl_dtype(arr.dtype().code, arr.dtype().bits, arr.dtype().lanes);
  Dims sizes, strides;
  int64_t extent = 1;
  bool empty = false;
  for (size_t d = 0; d < arr.ndim(); ++d) {
    sizes.push_back(int64_t(arr.shape(d)));
    strides.push_back(arr.stride(d));
    FLB_CHECK(arr.stride(d) >= 0, ValueError, "[from_dlpack] negative strides are not supported (copy the array first)");
    empty = empty || arr.shape(d) == 0;
    extent += (int64_t(arr.shape(d)) - 1) * arr.stride(d);
  }
  auto storage = std::make_shared<Storage>();
  storage->data = const_cast<void*>(arr.data());
  storage->nbytes = empty ? 0 : size_t(extent) * itemsize(dt);
  storage->ctx = new nb::ndarray<nb::ro>(arr);
  storage->deleter = release_import;
  const Tensor out = make_tensor(storage, dt, sizes, strides, 0);
  // A tensor may be written, a read-only array must not be: take a copy of those.
  const bool read_only = nb::hasattr(obj, "flags") && !nb::cast<bool>(obj.attr("flags").attr("writeable"));
  return read_only ? out.clone() : out;
}

nb::object to_numpy(const Tensor& t) {
  FLB_CHECK(t.dtype() != kBFloat16, TypeError, "[numpy] numpy has no bfloat16: convert with .float() first");
  const DLDataType d = dl_dtype(t.dtype());
  std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
  std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
  nb::capsule owner(new Tensor(t), [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  nb::dlpack::dtype nd{d.code == 6 ? uint8_t(nb::dlpack::dtype_code::Bool) : d.code, d.bits, d.lanes};
  nb::ndarray<nb::numpy> arr(t.data_ptr(), shape.size(), shape.data(), owner, strides.data(), nd);
  return nb::cast(arr, nb::rv_policy::reference);
}

nb::object to_list(const Tensor& t) {
  const Tensor c = t.contiguous();
  return visit_dtype(c.dtype(), [&]<class T>() -> nb::object {
    const T* p = static_cast<const T*>(c.data_ptr());
    auto leaf = [](T v) -> nb::object {
      if constexpr (std::is_same_v<T, bool>) return nb::bool_(v);
      else if constexpr (std::is_integral_v<T>) return nb::int_(int64_t(v));
      else if constexpr (std::is_same_v<T, double>) return nb::float_(v);
      else return nb::float_(double(float(v)));  // float, half, bfloat16, float8
    };
    std::function<nb::object(int64_t, int64_t)> build = [&](int64_t dim, int64_t offset) -> nb::object {
      if (dim == c.dim()) return leaf(p[offset]);
      nb::list l;
      const int64_t stride = c.stride(dim);
      for (int64_t i = 0; i < c.size(dim); ++i) l.append(build(dim + 1, offset + i * stride));
      return l;
    };
    return build(0, 0);
  });
}

Tensor tensor_from_data(nb::handle data, std::optional<DType> dtype) {
  Tensor* t = nullptr;
  if (nb::try_cast<Tensor*>(data, t) && t) return t->to(dtype.value_or(t->dtype())).clone();
  Scalar s;
  if (scalar_from_python(data, s)) return scalar_tensor(s, dtype.value_or(s.is_floating() ? kFloat32 : s.is_bool() ? kBool : kInt64));
  if (nb::hasattr(data, "__dlpack__")) {
    const Tensor v = from_dlpack(data);
    return v.to(dtype.value_or(v.dtype())).clone();
  }
  // Nested sequences: find the shape along the first elements, then read every leaf.
  Dims shape;
  for (nb::handle h = data; PyList_Check(h.ptr()) || PyTuple_Check(h.ptr());) {
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(h.ptr());
    shape.push_back(n);
    if (n == 0) break;
    h = PySequence_Fast_GET_ITEM(h.ptr(), 0);
  }
  std::vector<Scalar> leaves;
  bool any_float = false, any_int = false;
  std::function<void(nb::handle, size_t)> walk = [&](nb::handle h, size_t dim) {
    if (dim == shape.size()) {
      Scalar v;
      if (!scalar_from_python(h, v)) {
        Tensor* e = nullptr;
        FLB_CHECK(nb::try_cast<Tensor*>(h, e) && e && e->numel() == 1, TypeError,
                  "[tensor] could not convert an element of type ", nb::type_name(h.type()).c_str(), " to a number");
        v = e->item();
      }
      any_float = any_float || v.is_floating();
      any_int = any_int || v.is_integral();
      leaves.push_back(v);
      return;
    }
    FLB_CHECK(PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()), ValueError, "[tensor] expected a sequence at dim ", dim,
              " (the data is ragged)");
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(h.ptr());
    FLB_CHECK(n == shape[dim], ValueError, "[tensor] expected sequence of length ", shape[dim], " at dim ", dim,
              " (got ", n, ")");
    for (Py_ssize_t i = 0; i < n; ++i) walk(PySequence_Fast_GET_ITEM(h.ptr(), i), dim + 1);
  };
  walk(data, 0);
  const DType dt = dtype.value_or(any_float ? kFloat32 : any_int ? kInt64 : leaves.empty() ? kFloat32 : kBool);
  Tensor out = empty(shape, dt);
  visit_dtype(dt, [&]<class T>() {
    T* p = static_cast<T*>(out.data_ptr());
    for (size_t i = 0; i < leaves.size(); ++i) p[i] = kernels::scalar_to<T>(leaves[i]);
  });
  return out;
}

Dims dims_from(nb::handle h) {
  Dims out;
  int64_t v;
  if (nb::try_cast<int64_t>(h, v)) {
    out.push_back(v);
    return out;
  }
  FLB_CHECK(!PyLong_Check(h.ptr()), ValueError, "[shape] size ", nb::str(h).c_str(), " does not fit in int64");
  FLB_CHECK(PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()), TypeError,
            "[shape] expected an int or a sequence of ints, got ", nb::type_name(h.type()).c_str());
  for (Py_ssize_t i = 0, n = PySequence_Fast_GET_SIZE(h.ptr()); i < n; ++i) {
    nb::handle e = PySequence_Fast_GET_ITEM(h.ptr(), i);
    FLB_CHECK(!PyLong_Check(e.ptr()) || nb::try_cast<int64_t>(e, v), ValueError, "[shape] size ", nb::str(e).c_str(),
              " does not fit in int64");
    FLB_CHECK(nb::try_cast<int64_t>(e, v), TypeError, "[shape] expected a sequence of ints, got an element of type ",
              nb::type_name(e.type()).c_str());
    out.push_back(v);
  }
  return out;
}

}  // namespace flambeau::python
