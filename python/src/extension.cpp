// flambeau.ops: ops by qualified name (torch.ops.mylib.op), custom-op libraries
// (load_library), and the call of a registered op from Python arguments, converted by its
// schema.
#include "bindings.h"
#include "flambeau/core/small_vector.h"
#include "flambeau/ops/registry.h"
#include "flambeau/stable/extension.h"

namespace flambeau::python {
namespace {

// A registered op as a Python callable.
struct OpHandle {
  const RegisteredOp* op;
};

[[noreturn]] void bad_argument(const RegisteredOp& op, const SchemaArg& a, nb::handle h) {
  throw TypeError(detail::str_cat("[", op.schema.qualified_name(), "] argument '", a.name, "' must be ",
                                  arg_kind_name(a.kind), a.list ? "[]" : "", a.optional ? "?" : "", ", got ",
                                  nb::type_name(h.type()).c_str()));
}

// A Python argument as the registry's Value for schema argument a.
Value to_value(const RegisteredOp& op, const SchemaArg& a, nb::handle h) {
  if (h.is_none()) return std::monostate{};
  const bool is_bool = PyBool_Check(h.ptr()), is_int = PyLong_Check(h.ptr()) && !is_bool;
  if (a.list) {
    if (a.kind != ArgKind::Tensor) return dims_from(h);
    if (!PyList_Check(h.ptr()) && !PyTuple_Check(h.ptr())) bad_argument(op, a, h);
    std::vector<Tensor> l;
    for (nb::handle e : h) {
      if (!nb::isinstance<Tensor>(e)) bad_argument(op, a, e);
      l.push_back(nb::cast<Tensor>(e));
    }
    return l;
  }
  switch (a.kind) {
    case ArgKind::Tensor:
      if (Tensor* t = nullptr; nb::try_cast<Tensor*>(h, t) && t) return *t;
      [[fallthrough]];
    case ArgKind::Scalar:
      if (is_bool) return h.ptr() == Py_True;
      if (is_int) return nb::cast<int64_t>(h);
      if (PyFloat_Check(h.ptr())) return nb::cast<double>(h);
      break;
    case ArgKind::Int:
      if (is_int) return nb::cast<int64_t>(h);
      break;
    case ArgKind::Float:
      if (is_int || PyFloat_Check(h.ptr())) return nb::cast<double>(h);
      break;
    case ArgKind::Bool:
      if (is_bool) return h.ptr() == Py_True;
      break;
    case ArgKind::Str:
      if (PyUnicode_Check(h.ptr())) return nb::cast<std::string>(h);
      break;
    case ArgKind::ScalarType: {
      DType d;
      if (nb::try_cast<DType>(h, d)) return d;
      break;
    }
    case ArgKind::MemoryFormat: {
      MemoryFormat f;
      if (nb::try_cast<MemoryFormat>(h, f)) return int64_t(f);
      break;
    }
    case ArgKind::Generator:
      if (nb::isinstance<Generator>(h))
        return op_hook::Opaque{"generator", std::make_shared<Generator>(nb::cast<Generator>(h))};
      break;
  }
  bad_argument(op, a, h);
}

// op(*args, **kwargs): arguments placed by the schema (keyword-only ones by name only).
nb::object call(const RegisteredOp& op, PyObject* args, PyObject* kwargs) {
  const std::vector<SchemaArg>& params = op.schema.arguments;
  const size_t nargs = size_t(PyTuple_GET_SIZE(args)), nkw = kwargs ? size_t(PyDict_GET_SIZE(kwargs)) : 0;
  size_t positional = 0;
  while (positional < params.size() && !params[positional].kwarg_only) ++positional;
  FLB_CHECK(nargs <= positional, TypeError, "[", op.schema.qualified_name(), "] takes ", positional,
            " positional arguments, got ", nargs);
  std::vector<Value> values;
  values.reserve(params.size());
  if (nkw == 0) {  // the common case: positional arguments only
    for (size_t i = 0; i < nargs; ++i) values.push_back(to_value(op, params[i], PyTuple_GET_ITEM(args, i)));
  } else {
    size_t used = 0;        // keyword arguments consumed
    size_t last = nargs;    // arguments up to here are given; later defaults are left to call_op
    SmallVec<PyObject*, 8> given(params.size(), nullptr);
    for (size_t i = 0; i < nargs; ++i) given[i] = PyTuple_GET_ITEM(args, i);
    for (size_t i = 0; i < params.size() && used < nkw; ++i) {
      PyObject* v = PyDict_GetItemString(kwargs, params[i].name.c_str());  // borrowed
      if (!v) continue;
      FLB_CHECK(!given[i], TypeError, "[", op.schema.qualified_name(), "] got multiple values for argument '",
                params[i].name, "'");
      given[i] = v, last = std::max(last, i + 1), ++used;
    }
    if (used < nkw)
      for (auto [k, v] : nb::borrow<nb::dict>(kwargs))
        FLB_CHECK(op.schema.argument(nb::cast<std::string>(k)), TypeError, "[", op.schema.qualified_name(),
                  "] got an unexpected keyword argument '", nb::cast<std::string>(k), "'");
    for (size_t i = 0; i < last; ++i) {
      if (given[i]) {
        values.push_back(to_value(op, params[i], given[i]));
      } else {
        FLB_CHECK(params[i].default_value, TypeError, "[", op.schema.qualified_name(), "] missing argument '",
                  params[i].name, "'");
        values.push_back(default_value(params[i]));
      }
    }
  }
  std::vector<Value> results;
  {
    nb::gil_scoped_release release;
    results = call_op(op, std::move(values));
  }
  auto to_python = [](const Value& v) -> nb::object {
    if (auto* t = std::get_if<Tensor>(&v)) return nb::cast(*t);
    if (auto* l = std::get_if<std::vector<Tensor>>(&v)) return to_list_of(*l);
    if (auto* b = std::get_if<bool>(&v)) return nb::bool_(*b);
    if (auto* i = std::get_if<int64_t>(&v)) return nb::int_(*i);
    if (auto* d = std::get_if<double>(&v)) return nb::float_(*d);
    if (std::holds_alternative<std::monostate>(v)) return nb::none();
    throw TypeError("[ops] a result the Python binding cannot convert");
  };
  if (results.size() == 1) return to_python(results[0]);
  nb::list out;
  for (const Value& r : results) out.append(to_python(r));
  return nb::tuple(out);
}

// The type's tp_call: CPython hands over the argument tuple and dict as they are, with no
// overload resolution in between (a call's overhead is what the op costs).
PyObject* op_handle_call(PyObject* self, PyObject* args, PyObject* kwargs) noexcept {
  try {
    return call(*nb::inst_ptr<OpHandle>(self)->op, args, kwargs).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const nb::cast_error& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const std::exception& e) {
    if (!set_python_error(std::current_exception())) PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

PyType_Slot g_op_handle_slots[] = {{Py_tp_call, reinterpret_cast<void*>(op_handle_call)}, {0, nullptr}};

}  // namespace

void bind_extension(nb::module_& m) {
  nb::class_<OpHandle>(m, "_OpHandle", nb::type_slots(g_op_handle_slots))
      .def_prop_ro("schema", [](const OpHandle& h) { return h.op->schema.text; })
      .def_prop_ro("name", [](const OpHandle& h) { return h.op->schema.qualified_name(); })
      .def("__repr__", [](const OpHandle& h) { return "<flambeau op " + h.op->schema.qualified_name() + ">"; });
  m.def("_find_op", [](const std::string& name) -> nb::object {
    const RegisteredOp* op = find_op(name);
    return op ? nb::cast(OpHandle{op}) : nb::none();
  }, "name"_a);
  m.def("_registered_ops", &registered_ops);
  m.def("_load_library", [](const std::string& path) { load_library(path); }, "path"_a, release_gil());
  m.def("_loaded_libraries", &loaded_libraries);
}

}  // namespace flambeau::python
