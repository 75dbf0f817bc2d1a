// flambeau._C._compile: the compiler of src/flambeau/compile (trace, graph, backends) for
// flambeau.compile and flambeau.compiler (python/flambeau/_compile.py).
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>

#include "bindings.h"
#include "flambeau/compile/compile.h"
#include "flambeau/compile/cpp_backend.h"

namespace flambeau::python {

namespace cc = flambeau::compiler;

namespace {

// A Python function of a list of tensors returning a list of tensors, as a TensorFn.
cc::TensorFn python_fn(nb::object fn) {
  auto holder = std::make_shared<nb::object>(std::move(fn));
  return [holder](const std::vector<Tensor>& in) {
    nb::gil_scoped_acquire gil;
    nb::object r = (*holder)(in);
    std::vector<Tensor> out;
    for (nb::handle x : r) out.push_back(nb::cast<Tensor>(x));
    return out;
  };
}

}  // namespace

void bind_compile(nb::module_& m) {
  nb::module_ c = m.def_submodule("_compile", "The compiler: tracing, graphs, backends");
  nb::class_<cc::Graph>(c, "Graph", "A traced program (print it; to_dot(); call it on the inputs)")
      .def("__str__", &cc::Graph::str)
      .def("to_dot", &cc::Graph::to_dot)
      .def_prop_ro("ops", [](const cc::Graph& g) {
        std::vector<std::string> ops;
        for (const auto& n : g.nodes) ops.push_back(n.op);
        return ops;
      })
      .def_prop_ro("num_inputs", [](const cc::Graph& g) { return g.inputs.size(); })
      .def_prop_ro("num_outputs", [](const cc::Graph& g) { return g.outputs.size(); })
      .def("__call__", [](const cc::Graph& g, nb::args args) {
        std::vector<Tensor> in;
        for (nb::handle a : args) in.push_back(nb::cast<Tensor>(a));
        return cc::interpret(g, in);
      });
  nb::class_<cc::Compiled>(c, "Compiled")
      .def("__init__", [](cc::Compiled* self, nb::object fn, std::string backend, bool fullgraph, int limit,
                          std::map<std::string, std::string> options, bool dynamic) {
        new (self) cc::Compiled(python_fn(std::move(fn)),
                                {std::move(backend), fullgraph, limit, std::move(options), dynamic});
      }, "fn"_a, "backend"_a, "fullgraph"_a, "cache_size_limit"_a, "options"_a, "dynamic"_a = false)
      .def("__call__", [](cc::Compiled& f, const std::vector<Tensor>& in) { return f(in); })
      .def("call", &cc::Compiled::call, "inputs"_a)
      .def_prop_ro("traces", &cc::Compiled::traces)
      .def("graph", &cc::Compiled::graph, nb::rv_policy::copy);
  c.def("register_backend", [](const std::string& name, nb::object fn, std::vector<std::string> tags) {
    auto holder = std::make_shared<nb::object>(std::move(fn));
    cc::register_backend(name, [holder](const cc::Graph& g, const std::vector<Tensor>& example) -> cc::CompiledFn {
      nb::gil_scoped_acquire gil;
      nb::object run = (*holder)(nb::cast(g, nb::rv_policy::copy), example);
      if (!PyCallable_Check(run.ptr()))
        throw TypeError("[compile] a backend must return a callable, got " + std::string(nb::type_name(run.type()).c_str()));
      return [run = std::make_shared<nb::object>(run)](const std::vector<Tensor>& in) {
        nb::gil_scoped_acquire gil;
        nb::list args;
        for (const Tensor& t : in) args.append(nb::cast(t));
        nb::object r = (*run)(*nb::tuple(args));
        std::vector<Tensor> out;
        if (nb::isinstance<Tensor>(r)) return std::vector<Tensor>{nb::cast<Tensor>(r)};
        for (nb::handle x : r) out.push_back(nb::cast<Tensor>(x));
        return out;
      };
    }, std::move(tags));
  }, "name"_a, "fn"_a, "tags"_a);
  c.def("generated_source", &cc::generated_source, "graph"_a, "The cpp backend's C++ for a graph");
  c.def("unregister_backend", &cc::unregister_backend, "name"_a);
  c.def("list_backends", &cc::list_backends, "exclude_tags"_a);
  c.def("set_default_backend", &cc::set_default_backend, "name"_a);
  c.def("get_default_backend", &cc::get_default_backend);
  c.def("is_tracing", &cc::is_tracing);
  c.def("break_trace", &cc::break_trace, "what"_a, "why"_a);
  c.def("set_warning_handler", [](nb::object fn) {
    if (fn.is_none()) return cc::set_warning_handler(nullptr);
    auto holder = std::make_shared<nb::object>(std::move(fn));
    cc::set_warning_handler([holder](const std::string& m) {
      nb::gil_scoped_acquire gil;
      (*holder)(m);
    });
  }, "fn"_a.none());
}

}  // namespace flambeau::python
