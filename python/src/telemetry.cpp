// flambeau._C._cpu: the CPU telemetry of core/telemetry.h (flambeau.cpu wraps it with torch's
// signatures) and the build configuration that flambeau.utils.collect_env prints.
#include "bindings.h"
#include "flambeau/core/telemetry.h"
#include "flambeau/kernels/cpu/build_config.h"

namespace flambeau::python {

void bind_telemetry(nb::module_& m) {
  nb::module_ c = m.def_submodule("_cpu", "CPU telemetry (core/telemetry.h)");
  using ms = std::chrono::milliseconds;
  c.def("device_memory_used", &cpu::device_memory_used, "Resident bytes of this process, or None");
  c.def("utilization", [](int64_t interval_ms) -> std::optional<nb::dict> {
    const auto u = release_call_t([&] { return cpu::utilization(ms(interval_ms)); });
    if (!u) return std::nullopt;
    nb::dict d;
    d["process"] = u->process, d["total"] = u->total, d["per_core"] = u->per_core;
    return d;
  }, "interval_ms"_a, "Percent (0-100) over interval_ms: {process, total, per_core}, or None");
  c.def("clock_rate", &cpu::clock_rate, "Mean clock in MHz, or None");
  c.def("temperature", &cpu::temperature, "Hottest CPU sensor in degrees Celsius, or None");
  c.def("power_draw", [](int64_t interval_ms) {
    return release_call_t([&] { return cpu::power_draw(ms(interval_ms)); });
  }, "interval_ms"_a, "RAPL package power in watts over interval_ms, or None");
  c.def("synchronize", &cpu::synchronize);
  c.def("procfs_root", &cpu::procfs_root);
  c.def("sysfs_root", &cpu::sysfs_root);

  nb::class_<cpu::DeviceProperties>(c, "_CpuDeviceProperties")
      .def_ro("name", &cpu::DeviceProperties::name)
      .def_ro("vendor", &cpu::DeviceProperties::vendor)
      .def_ro("type", &cpu::DeviceProperties::type)
      .def_ro("isa", &cpu::DeviceProperties::isa)
      .def_ro("max_compute_units", &cpu::DeviceProperties::max_compute_units)
      .def_ro("physical_cores", &cpu::DeviceProperties::physical_cores)
      .def_ro("l1d_cache_size", &cpu::DeviceProperties::l1d_cache_size)
      .def_ro("l2_cache_size", &cpu::DeviceProperties::l2_cache_size)
      .def_ro("l3_cache_size", &cpu::DeviceProperties::l3_cache_size)
      .def_ro("last_level_cache_size", &cpu::DeviceProperties::last_level_cache_size)
      .def_ro("is_integrated", &cpu::DeviceProperties::is_integrated)
      .def_ro("total_memory", &cpu::DeviceProperties::total_memory)
      .def("__repr__", [](const cpu::DeviceProperties& p) {
        auto opt = [](const auto& v) { return v ? std::to_string(*v) : std::string("None"); };
        return "_CpuDeviceProperties(name='" + p.name + "', max_compute_units=" +
               std::to_string(p.max_compute_units) + ", physical_cores=" + opt(p.physical_cores) +
               ", last_level_cache_size=" + opt(p.last_level_cache_size) +
               ", total_memory=" + opt(p.total_memory) + ")";
      });
  c.def("get_device_properties", &cpu::get_device_properties);

  c.def("build_config", [] {
    const backends::cpu::BuildConfig b = backends::cpu::build_config();
    nb::dict d;
    d["compiler"] = b.compiler, d["build_type"] = b.build_type, d["cxx_flags"] = b.cxx_flags;
    d["openmp"] = b.openmp, d["highway"] = b.highway, d["highway_targets"] = b.highway_targets;
    d["blas"] = b.blas;
    return d;
  });
}

}  // namespace flambeau::python
