// The flambeau._C extension module: dtypes, device, errors, generator, threads and memory
// statistics here; Tensor, ops and conversions in the other files of python/src.
#include "bindings.h"

namespace flambeau::python {
namespace {

nb::handle g_dtypes[16];  // borrowed: the module's attributes own them

// Python exception types that are also RuntimeError, as PyTorch raises RuntimeError for
// most errors: `except ValueError` and `except RuntimeError` both catch them.
PyObject* new_error(nb::module_& m, const char* name, PyObject* base) {
  nb::object bases = nb::make_tuple(nb::handle(base), nb::handle(PyExc_RuntimeError));
  const std::string qual = std::string("flambeau.") + name;
  PyObject* t = PyErr_NewException(qual.c_str(), bases.ptr(), nullptr);
  m.attr(name) = nb::handle(t);
  return t;
}

PyObject *g_value_error, *g_type_error, *g_index_error, *g_linalg_error;

}  // namespace

bool set_python_error(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const flambeau::IndexError& e) {
    PyErr_SetString(g_index_error, e.what());
  } catch (const flambeau::ValueError& e) {
    PyErr_SetString(g_value_error, e.what());
  } catch (const flambeau::TypeError& e) {
    PyErr_SetString(g_type_error, e.what());
  } catch (const flambeau::NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what());
  } catch (const flambeau::LinAlgError& e) {
    PyErr_SetString(g_linalg_error, e.what());
  } catch (const flambeau::Error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (const std::bad_alloc&) {  // a standard container's allocation: no C++ names in the message
    PyErr_SetString(PyExc_MemoryError, "[allocate] out of memory");
  } catch (const std::length_error&) {
    PyErr_SetString(PyExc_MemoryError, "[allocate] out of memory: requested size is too large");
  } catch (...) {
    return false;
  }
  return true;
}

nb::handle dtype_object(DType dt) { return g_dtypes[int(dt)]; }
nb::handle g_memory_formats[4];
nb::handle memory_format_object(MemoryFormat format) { return g_memory_formats[int(format)]; }
nb::handle g_values_indices;

}  // namespace flambeau::python

using namespace flambeau;
using namespace flambeau::python;

NB_MODULE(_C, m) {
  m.doc() = "flambeau: an eager tensor framework in C++, PyTorch 2.13's API";

  // Errors keep the C++ message; types follow PyTorch (IndexError for bad indices).
  g_value_error = new_error(m, "ValueError", PyExc_ValueError);
  g_type_error = new_error(m, "TypeError", PyExc_TypeError);
  g_index_error = new_error(m, "IndexError", PyExc_IndexError);
  g_linalg_error = PyErr_NewException("flambeau.linalg.LinAlgError", PyExc_RuntimeError, nullptr);
  m.attr("LinAlgError") = nb::handle(g_linalg_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    if (!set_python_error(p)) std::rethrow_exception(p);  // nanobind's own types
  });

  nb::class_<PyDType>(m, "dtype")
      .def("__repr__", [](const PyDType& d) { return std::string("flambeau.") + dtype_name(d.value); })
      .def_prop_ro("is_floating_point", [](const PyDType& d) { return is_floating(d.value); })
      .def_prop_ro("itemsize", [](const PyDType& d) { return itemsize(d.value); });
#define FLB_DTYPE_OBJECT(e, T, s)                               \
  m.attr(s) = nb::cast(PyDType{DType::e}, nb::rv_policy::move); \
  g_dtypes[int(DType::e)] = m.attr(s);
  FLB_FORALL_DTYPES(FLB_DTYPE_OBJECT)
#undef FLB_DTYPE_OBJECT
  for (auto [alias, dt] : {std::pair{"float", kFloat32}, std::pair{"double", kFloat64}, std::pair{"half", kFloat16},
                           std::pair{"long", kInt64}, std::pair{"int", kInt32}, std::pair{"short", kInt16}})
    m.attr(alias) = dtype_object(dt);

  nb::class_<PyMemoryFormat>(m, "memory_format")
      .def("__repr__", [](const PyMemoryFormat& f) { return std::string("flambeau.") + memory_format_name(f.value); });
  for (auto f : {MemoryFormat::Contiguous, MemoryFormat::Preserve, MemoryFormat::ChannelsLast,
                 MemoryFormat::ChannelsLast3d}) {
    m.attr(memory_format_name(f)) = nb::cast(PyMemoryFormat{f}, nb::rv_policy::move);
    g_memory_formats[int(f)] = m.attr(memory_format_name(f));
  }

  nb::class_<Device>(m, "device")
      .def(nb::init<const std::string&>(), "type"_a)
      .def_prop_ro("type", [](const Device& d) { return d.is_cpu() ? "cpu" : "cuda"; })
      .def_prop_ro("index", [](const Device& d) -> nb::object { return d.index < 0 ? nb::object(nb::none()) : nb::object(nb::int_(d.index)); })
      .def("__repr__", [](const Device& d) { return "device(type='" + std::string(d.is_cpu() ? "cpu" : "cuda") + "')"; })
      .def("__str__", &Device::str)
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; });

  nb::class_<Generator>(m, "Generator")
      .def(nb::init<uint64_t>(), "seed"_a = Generator::kDefaultSeed)
      .def("manual_seed", [](nb::handle self, uint64_t seed) {
        nb::cast<Generator&>(self).manual_seed(seed);
        return nb::borrow(self);
      }, "seed"_a)
      .def("initial_seed", &Generator::initial_seed)
      .def("get_state", &Generator::get_state)
      .def("set_state", [](nb::handle self, const Tensor& s) {
        nb::cast<Generator&>(self).set_state(s);
        return nb::borrow(self);
      }, "new_state"_a)
      .def("get_offset", &Generator::offset)
      .def("set_offset", &Generator::set_offset, "offset"_a);
  m.def("manual_seed", [](uint64_t seed) {
    manual_seed(seed);
    return default_generator();
  }, "seed"_a);
  m.def("default_generator", []() { return default_generator(); });
  m.def("set_num_threads", &set_num_threads, "n"_a);
  m.def("get_num_threads", &get_num_threads);

  nb::module_ mem = m.def_submodule("memory", "The CPU allocator's statistics");
  mem.def("allocated", &memory::allocated, "Bytes in tensors alive now (block sizes)");
  mem.def("max_allocated", &memory::max_allocated, "Peak of allocated() since start or reset_peak_stats()");
  mem.def("reset_peak_stats", &memory::reset_peak_stats);
  mem.def("cached", &memory::cached, "Bytes in freed blocks kept for reuse");
  mem.def("empty_cache", &memory::empty_cache);

  m.attr("return_types") = nb::module_::import_("collections").attr("namedtuple")("return_types", "values indices");
  g_values_indices = m.attr("return_types");

  nb::class_<Tensor> cls(m, "Tensor");
  bind_tensor(m, cls);
  bind_ops(m, cls);
  bind_more_ops(m, cls);
  bind_shape_ops(m, cls);
  bind_autograd(m, cls);
  bind_optim(m);
  bind_nn(m);
  bind_conv(m, cls);
  bind_pool(m, cls);
  bind_resample(m, cls);
  bind_rnn(m);
  bind_linalg(m, cls);
  bind_io(m);
  bind_flex(m);
  bind_distributed(m);
  bind_compile(m);
  bind_telemetry(m);
  bind_profiler(m);
  bind_graphs(m);
  bind_extension(m);
}
