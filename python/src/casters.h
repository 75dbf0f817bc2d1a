// Conversions between Python and flambeau values for the bindings: dtypes (the
// flambeau.float32 ... singletons), numbers (Scalar) and operands (a Tensor or a Python
// number, which becomes a weak wrapped-number tensor as in PyTorch).
#pragma once
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "flambeau/flambeau.h"

namespace flambeau::python {
namespace nb = nanobind;
using namespace nb::literals;

// The Python object behind flambeau.float32 etc.
struct PyDType {
  DType value;
};
// The singleton object of a dtype (created at module import).
nb::handle dtype_object(DType dt);

// The Python object behind flambeau.channels_last etc. (torch.memory_format).
struct PyMemoryFormat {
  MemoryFormat value;
};
nb::handle memory_format_object(MemoryFormat format);

// A tensor argument that may also be given as a Python number.
struct Operand {
  Tensor t;
};

// The Scalar of a Python bool/int/float; false when `h` is none of these.
inline bool scalar_from_python(nb::handle h, Scalar& out) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o)) {
    out = Scalar(o == Py_True);
  } else if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow) return false;
    out = Scalar(int64_t(v));
  } else if (PyFloat_Check(o)) {
    out = Scalar(PyFloat_AS_DOUBLE(o));
  } else {
    return false;
  }
  return true;
}

inline nb::object scalar_to_python(const Scalar& s) {
  if (s.is_bool()) return nb::bool_(s.to_bool());
  if (s.is_integral()) return nb::int_(s.to_int());
  return nb::float_(s.to_double());
}

}  // namespace flambeau::python

namespace nanobind::detail {

template <>
struct type_caster<flambeau::DType> {
  NB_TYPE_CASTER(flambeau::DType, const_name("flambeau.dtype"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    // Python's float, int and bool stand for float64, int64 and bool, as in PyTorch.
    if (src.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return value = flambeau::kFloat64, true;
    if (src.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return value = flambeau::kInt64, true;
    if (src.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return value = flambeau::kBool, true;
    flambeau::python::PyDType* p = nullptr;
    if (!nanobind::try_cast<flambeau::python::PyDType*>(src, p) || !p) return false;
    value = p->value;
    return true;
  }
  static handle from_cpp(flambeau::DType v, rv_policy, cleanup_list*) noexcept {
    return flambeau::python::dtype_object(v).inc_ref();
  }
};

template <>
struct type_caster<flambeau::MemoryFormat> {
  NB_TYPE_CASTER(flambeau::MemoryFormat, const_name("flambeau.memory_format"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    flambeau::python::PyMemoryFormat* p = nullptr;
    if (!nanobind::try_cast<flambeau::python::PyMemoryFormat*>(src, p) || !p) return false;
    value = p->value;
    return true;
  }
  static handle from_cpp(flambeau::MemoryFormat v, rv_policy, cleanup_list*) noexcept {
    return flambeau::python::memory_format_object(v).inc_ref();
  }
};

template <>
struct type_caster<flambeau::Scalar> {
  NB_TYPE_CASTER(flambeau::Scalar, const_name("bool | int | float"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    return flambeau::python::scalar_from_python(src, value);
  }
  static handle from_cpp(const flambeau::Scalar& s, rv_policy, cleanup_list*) noexcept {
    return flambeau::python::scalar_to_python(s).release();
  }
};

template <>
struct type_caster<flambeau::python::Operand> {
  NB_TYPE_CASTER(flambeau::python::Operand, const_name("Tensor | bool | int | float"))
  bool from_python(handle src, uint8_t, cleanup_list*) noexcept {
    flambeau::Tensor* t = nullptr;
    if (nanobind::try_cast<flambeau::Tensor*>(src, t) && t) {
      value.t = *t;
      return true;
    }
    flambeau::Scalar s;
    if (!flambeau::python::scalar_from_python(src, s)) return false;
    value.t = flambeau::Tensor(s);
    return true;
  }
  static handle from_cpp(const flambeau::python::Operand& o, rv_policy p, cleanup_list* c) noexcept {
    return make_caster<flambeau::Tensor>::from_cpp(o.t, p, c);
  }
};

}  // namespace nanobind::detail
