// Device telemetry for the CPU, with the names of torch.xpu's queries (2.13): memory in use,
// utilization, clock, temperature, power and the device's properties, read from Linux's
// /proc and /sys. Each query returns std::nullopt where the machine does not expose the
// value (a VM without sensors, RAPL readable only by root): never an estimate.
//
// The roots: /proc and /sys are read under $FLAMBEAU_PROCFS_ROOT and $FLAMBEAU_SYSFS_ROOT
// when those are set (read at every call), so tests can point them at a fake tree.
// The name and the ISA come from cpuid (core/cpu_info.h), not from those files.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flambeau::cpu {

// The root /proc and /sys are read under ("/proc", "/sys" unless the variables above are set).
std::string procfs_root();
std::string sysfs_root();

// Resident memory of this process in bytes (VmRSS of /proc/self/status). The caching
// allocator's own figures are in core/allocator.h (flambeau.memory).
std::optional<int64_t> device_memory_used();

// CPU time counters at one moment, in clock ticks (USER_HZ), from /proc/stat and
// /proc/self/stat.
struct CpuTimes {
  struct Core {
    uint64_t busy = 0, total = 0;  // total = busy + idle + iowait
  };
  Core all;                 // the "cpu" line: every core together
  std::vector<Core> cores;  // cpu0, cpu1, ... in /proc/stat's order
  uint64_t process = 0;     // this process's user + system time
};
std::optional<CpuTimes> read_cpu_times();

// Utilization in percent (0-100) between two readings.
struct Utilization {
  double process = 0;              // this process's share of the whole CPU's time
  double total = 0;                // the whole CPU busy, any process
  std::vector<double> per_core;    // each core busy, any process
};
// nullopt when no tick went by between them or the core counts differ.
std::optional<Utilization> utilization_between(const CpuTimes& before, const CpuTimes& after);
// Two readings `interval` apart (torch.xpu samples 150 ms); the call sleeps that long.
std::optional<Utilization> utilization(std::chrono::milliseconds interval = std::chrono::milliseconds(150));

// Current clock in MHz, the mean over the cores: cpufreq's scaling_cur_freq, else the
// "cpu MHz" lines of /proc/cpuinfo.
std::optional<double> clock_rate();

// Temperature in degrees Celsius: the hottest CPU sensor of hwmon (coretemp, k10temp,
// zenpower, cpu_thermal), else of the CPU thermal zones (x86_pkg_temp, cpu-thermal, ...).
std::optional<double> temperature();

// RAPL package energy counters (/sys/class/powercap/intel-rapl:N/energy_uj, one per socket)
// at one moment. Often readable by root only.
struct EnergyReading {
  struct Domain {
    uint64_t energy_uj = 0, max_energy_range_uj = 0;
  };
  std::vector<Domain> packages;
  double seconds = 0;  // steady-clock time of the reading
};
std::optional<EnergyReading> read_energy();
// Mean power in watts between two readings; a counter that wrapped around counts from
// max_energy_range_uj. nullopt when no time went by or the domains differ.
std::optional<double> power_between(const EnergyReading& before, const EnergyReading& after);
// Power draw in watts (torch.xpu's unit) over `interval` (the call sleeps that long).
std::optional<double> power_draw(std::chrono::milliseconds interval = std::chrono::milliseconds(150));

struct DeviceProperties {
  std::string name;            // the brand string ("AMD EPYC 9B14")
  std::string vendor;          // "GenuineIntel", "AuthenticAMD", ...
  std::string type = "cpu";
  std::vector<std::string> isa;  // the extensions flambeau uses that this CPU has (cpu_isa_flags)
  int max_compute_units = 1;     // logical CPUs
  std::optional<int> physical_cores;  // distinct (package, core) pairs of sysfs's topology
  // Cache sizes in bytes from sysfs (cpu*/cache/index*): L1 data and L2 as one core sees them,
  // L3 summed over its distinct instances; last level = the highest level present.
  std::optional<int64_t> l1d_cache_size, l2_cache_size, l3_cache_size, last_level_cache_size;
  bool is_integrated = true;            // the CPU shares the host's memory
  std::optional<int64_t> total_memory;  // MemTotal of /proc/meminfo, in bytes
};
DeviceProperties get_device_properties();

// Waits for the work queued on the CPU. flambeau's ops are synchronous (each parallel region
// joins before its op returns), so nothing is ever in flight: this returns at once, as
// torch.cpu.synchronize does, and exists for device-agnostic code.
void synchronize();

}  // namespace flambeau::cpu
