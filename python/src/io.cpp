// flambeau._C._io: safetensors load/save and SafeOpen (wrapped by flambeau.safetensors and
// flambeau.load/save). File work runs with the GIL released.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"

namespace flambeau::python {
namespace {

nb::dict to_dict(const io::TensorList& tensors) {
  nb::dict d;
  for (const auto& [name, t] : tensors) d[nb::str(name.data(), name.size())] = nb::cast(t);
  return d;
}

nb::dict to_dict(const io::Metadata& m) {
  nb::dict d;
  for (const auto& [k, v] : m) d[nb::str(k.data(), k.size())] = nb::str(v.data(), v.size());
  return d;
}

}  // namespace

void bind_io(nb::module_& m) {
  nb::module_ io = m.def_submodule("_io", "safetensors (wrapped by flambeau.safetensors)");
  io.def("load", [](const std::string& path, bool copy) {
    io::Metadata meta;
    io::TensorList t;
    {
      nb::gil_scoped_release release;
      t = io::load(path, &meta, {.copy = copy});
    }
    return nb::make_tuple(to_dict(t), to_dict(meta));
  }, "path"_a, "copy"_a = false, "(tensors dict, metadata dict) of a safetensors file, index or directory");
  io.def("save", [](const io::TensorList& tensors, const std::string& path, const io::Metadata& metadata) {
    io::save(tensors, path, metadata);
  }, "tensors"_a, "path"_a, "metadata"_a, release_gil());
  io.def("is_safetensors", &io::is_safetensors, "path"_a);
  io.def("float8_to_float32", &io::float8_to_float32, "bytes"_a, "format_dtype"_a);

  nb::class_<io::SafeOpen>(io, "SafeOpen")
      .def("__init__", [](io::SafeOpen* self, const std::string& path) {
        nb::gil_scoped_release release;
        new (self) io::SafeOpen(path);
      }, "path"_a)
      .def("keys", &io::SafeOpen::keys)
      .def("metadata", [](const io::SafeOpen& f) -> nb::object {
        if (!f.header().has_metadata) return nb::none();
        return to_dict(f.metadata());
      })
      .def("__contains__", &io::SafeOpen::contains)
      .def("get_tensor", &io::SafeOpen::get_tensor, "name"_a, "copy"_a = false, release_gil())
      .def("get_rows", &io::SafeOpen::get_rows, "name"_a, "start"_a, "end"_a, release_gil())
      .def("info", [](const io::SafeOpen& f, const std::string& name) {
        const io::TensorInfo& t = f.info(name);
        return nb::make_tuple(t.format_dtype, std::vector<int64_t>(t.shape.begin(), t.shape.end()));
      }, "name"_a, "(dtype string as in the file, shape in the file)");
}

}  // namespace flambeau::python
