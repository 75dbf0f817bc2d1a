// flambeau._C._profiler: the profiler of profiler/profiler.h; flambeau.profiler wraps it
// with torch.profiler's names (profile, schedule, record_function, key_averages).
#include "bindings.h"
#include "flambeau/profiler/profiler.h"

#include <optional>

namespace flambeau::python {
namespace {
// A user range as a Python context manager (record_function's core).
// The events of one stopped profile.
struct Events {
  std::vector<profiler::Event> events;
};
struct Range {
  std::string name;
  std::optional<profiler::Scope> scope;
};
}  // namespace

void bind_profiler(nb::module_& m) {
  nb::module_ p = m.def_submodule("_profiler", "The profiler (profiler/profiler.h)");
  using profiler::Event;
  nb::enum_<profiler::EventKind>(p, "EventKind")
      .value("Op", profiler::EventKind::Op)
      .value("Kernel", profiler::EventKind::Kernel)
      .value("Backward", profiler::EventKind::Backward)
      .value("UserRange", profiler::EventKind::UserRange)
      .value("Memory", profiler::EventKind::Memory)
      .value("Collective", profiler::EventKind::Collective)
      .value("Compile", profiler::EventKind::Compile);
  nb::class_<Event>(p, "Event")
      .def_ro("kind", &Event::kind)
      .def_ro("name", &Event::name)
      .def_ro("start_ns", &Event::start_ns)
      .def_ro("end_ns", &Event::end_ns)
      .def_ro("tid", &Event::tid)
      .def_ro("sequence_nr", &Event::seq)
      .def_ro("correlation_id", &Event::correlation)
      .def_ro("input_shapes", &Event::shapes)
      .def_ro("bytes", &Event::bytes)
      .def_ro("total_allocated", &Event::total_allocated)
      .def_ro("collective_seq", &Event::collective_seq)
      .def_prop_ro("category", [](const Event& e) { return profiler::kind_name(e.kind); });
  nb::class_<profiler::EventAverage>(p, "EventAverage")
      .def_ro("key", &profiler::EventAverage::key)
      .def_ro("input_shapes", &profiler::EventAverage::input_shapes)
      .def_ro("count", &profiler::EventAverage::count)
      .def_ro("cpu_time_total", &profiler::EventAverage::cpu_time_total_us)
      .def_ro("self_cpu_time_total", &profiler::EventAverage::self_cpu_time_total_us)
      .def_ro("self_cpu_memory_usage", &profiler::EventAverage::self_cpu_memory_usage)
      .def_prop_ro("cpu_time", &profiler::EventAverage::cpu_time_us);
  nb::class_<Events>(p, "Events")
      .def("__len__", [](const Events& e) { return e.events.size(); })
      .def("list", [](const Events& e) { return e.events; })
      .def("chrome_trace", [](const Events& e, int64_t pid, const std::string& name) {
        return profiler::chrome_trace_json(e.events, pid, name);
      }, "pid"_a, "process_name"_a)
      .def("export_chrome_trace", [](const Events& e, const std::string& path, int64_t pid, const std::string& name) {
        profiler::export_chrome_trace(e.events, path, pid, name);
      }, "path"_a, "pid"_a, "process_name"_a)
      .def("key_averages", [](const Events& e, bool by_shape) { return profiler::key_averages(e.events, by_shape); },
           "group_by_input_shape"_a);
  p.def("table", &profiler::table, "rows"_a, "sort_by"_a, "row_limit"_a);
  p.def("start", [](bool shapes, bool memory, bool stack) {
    profiler::Options o;
    o.record_shapes = shapes, o.profile_memory = memory, o.with_stack = stack;
    profiler::start(o);
  }, "record_shapes"_a, "profile_memory"_a, "with_stack"_a);
  p.def("stop", [] { return Events{release_call_t([] { return profiler::stop(); })}; });
  p.def("enabled", &profiler::enabled);
  p.def("set_thread_name", &profiler::set_thread_name);
  nb::class_<Range>(p, "Range")
      .def(nb::init<std::string>())
      .def("__enter__", [](Range& r) -> Range& {
        r.scope.emplace(r.name);
        return r;
      }, nb::rv_policy::reference)
      .def("__exit__", [](Range& r, nb::args) { r.scope.reset(); });
}

}  // namespace flambeau::python
