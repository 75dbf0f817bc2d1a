// CPU telemetry: exact values from a fake /proc and /sys tree (FLAMBEAU_PROCFS_ROOT /
// FLAMBEAU_SYSFS_ROOT), nullopt where a file is absent, plausible values on this machine.
#include "flambeau/core/telemetry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace flambeau::cpu {
namespace {
namespace fs = std::filesystem;

// A temporary /proc and /sys for the test's lifetime; the previous roots come back after.
class FakeRoots {
 public:
  FakeRoots() {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("flambeau_telemetry_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_ / "proc");
    fs::create_directories(dir_ / "sys");
    save("FLAMBEAU_PROCFS_ROOT", old_proc_), save("FLAMBEAU_SYSFS_ROOT", old_sys_);
    setenv("FLAMBEAU_PROCFS_ROOT", (dir_ / "proc").c_str(), 1);
    setenv("FLAMBEAU_SYSFS_ROOT", (dir_ / "sys").c_str(), 1);
  }
  ~FakeRoots() {
    restore("FLAMBEAU_PROCFS_ROOT", old_proc_), restore("FLAMBEAU_SYSFS_ROOT", old_sys_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void proc(const std::string& path, const std::string& text) { write(dir_ / "proc" / path, text); }
  void sys(const std::string& path, const std::string& text) { write(dir_ / "sys" / path, text); }

 private:
  static void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  static void save(const char* name, std::optional<std::string>& to) {
    if (const char* v = std::getenv(name)) to = v;
  }
  static void restore(const char* name, const std::optional<std::string>& v) {
    if (v) setenv(name, v->c_str(), 1);
    else unsetenv(name);
  }
  fs::path dir_;
  std::optional<std::string> old_proc_, old_sys_;
};

TEST(CpuTelemetry, RootsFollowTheEnvironment) {
  {
    FakeRoots roots;
    EXPECT_NE(procfs_root(), "/proc");
    EXPECT_NE(sysfs_root(), "/sys");
  }
  if (!std::getenv("FLAMBEAU_PROCFS_ROOT")) {
    EXPECT_EQ(procfs_root(), "/proc");
  }
  if (!std::getenv("FLAMBEAU_SYSFS_ROOT")) {
    EXPECT_EQ(sysfs_root(), "/sys");
  }
}

TEST(CpuTelemetry, AbsentFilesGiveNullopt) {
  FakeRoots roots;
  EXPECT_EQ(device_memory_used(), std::nullopt);
  EXPECT_FALSE(read_cpu_times().has_value());
  EXPECT_FALSE(utilization(std::chrono::milliseconds(1)).has_value());
  EXPECT_EQ(clock_rate(), std::nullopt);
  EXPECT_EQ(temperature(), std::nullopt);
  EXPECT_FALSE(read_energy().has_value());
  EXPECT_EQ(power_draw(std::chrono::milliseconds(1)), std::nullopt);
  const DeviceProperties p = get_device_properties();
  EXPECT_EQ(p.physical_cores, std::nullopt);
  EXPECT_EQ(p.l1d_cache_size, std::nullopt);
  EXPECT_EQ(p.l2_cache_size, std::nullopt);
  EXPECT_EQ(p.l3_cache_size, std::nullopt);
  EXPECT_EQ(p.last_level_cache_size, std::nullopt);
  EXPECT_EQ(p.total_memory, std::nullopt);
  EXPECT_GE(p.max_compute_units, 1);  // from cpuid / the OS, not from the files
  EXPECT_TRUE(p.is_integrated);
  EXPECT_EQ(p.type, "cpu");
}

TEST(CpuTelemetry, ResidentMemoryFromStatus) {
  FakeRoots roots;
  roots.proc("self/status", "Name:\tpython\nVmPeak:\t  9000 kB\nVmRSS:\t    2216 kB\nThreads:\t1\n");
  EXPECT_EQ(device_memory_used(), int64_t(2216) * 1024);
  roots.proc("self/status", "Name:\tkthread\n");  // kernel threads have no VmRSS
  EXPECT_EQ(device_memory_used(), std::nullopt);
}

TEST(CpuTelemetry, UtilizationFromTwoStatReadings) {
  FakeRoots roots;
  // user nice system idle iowait irq softirq steal guest guest_nice
  roots.proc("stat", "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\n"
                     "cpu1 50 0 25 400 25 0 0 0 0 0\nintr 12345 0 0\nctxt 999\n");
  // utime, stime are fields 14, 15; the name holds spaces and parentheses.
  roots.proc("self/stat", "1234 (my (odd) name) R 1 2 3 4 5 6 7 8 9 10 30 20 0 0 20 0 1 0\n");
  const auto before = read_cpu_times();
  ASSERT_TRUE(before.has_value());
  EXPECT_EQ(before->all.busy, 150u);
  EXPECT_EQ(before->all.total, 1000u);
  EXPECT_EQ(before->cores.size(), 2u);
  EXPECT_EQ(before->process, 50u);
  EXPECT_FALSE(utilization_between(*before, *before).has_value());  // no tick went by

  roots.proc("stat", "cpu  400 0 150 1350 100 0 0 0 0 0\ncpu0 350 0 125 500 25 0 0 0 0 0\n"
                     "cpu1 50 0 25 850 75 0 0 0 0 0\n");
  roots.proc("self/stat", "1234 (my (odd) name) R 1 2 3 4 5 6 7 8 9 10 230 70 0 0 20 0 1 0\n");
  const auto after = read_cpu_times();
  ASSERT_TRUE(after.has_value());
  const auto u = utilization_between(*before, *after);
  ASSERT_TRUE(u.has_value());
  EXPECT_DOUBLE_EQ(u->total, 40.0);    // +400 busy of +1000
  EXPECT_DOUBLE_EQ(u->process, 25.0);  // +250 of +1000
  ASSERT_EQ(u->per_core.size(), 2u);
  EXPECT_DOUBLE_EQ(u->per_core[0], 80.0);  // +400 of +500
  EXPECT_DOUBLE_EQ(u->per_core[1], 0.0);   // idle and iowait only

  // Static files: no time passes between the two readings, so no figure.
  EXPECT_FALSE(utilization(std::chrono::milliseconds(1)).has_value());
}

TEST(CpuTelemetry, ClockFromCpufreqElseCpuinfo) {
  FakeRoots roots;
  roots.proc("cpuinfo", "processor\t: 0\ncpu MHz\t\t: 2400.000\n\nprocessor\t: 1\ncpu MHz\t\t: 2600.000\n");
  EXPECT_DOUBLE_EQ(*clock_rate(), 2500.0);
  roots.sys("devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "2000000\n");  // kHz
  roots.sys("devices/system/cpu/cpu1/cpufreq/scaling_cur_freq", "3500000\n");
  roots.sys("devices/system/cpu/cpufreq/boost", "1\n");  // not a core
  EXPECT_DOUBLE_EQ(*clock_rate(), 2750.0);
}

TEST(CpuTelemetry, TemperatureFromCpuSensorsOnly) {
  FakeRoots roots;
  roots.sys("class/thermal/thermal_zone0/type", "acpitz\n");  // the board, not the CPU
  roots.sys("class/thermal/thermal_zone0/temp", "90000\n");
  EXPECT_EQ(temperature(), std::nullopt);
  roots.sys("class/thermal/thermal_zone1/type", "x86_pkg_temp\n");
  roots.sys("class/thermal/thermal_zone1/temp", "61000\n");
  EXPECT_DOUBLE_EQ(*temperature(), 61.0);
  // hwmon's CPU chip comes first: its hottest input, in millidegrees.
  roots.sys("class/hwmon/hwmon0/name", "nvme\n");
  roots.sys("class/hwmon/hwmon0/temp1_input", "99000\n");
  roots.sys("class/hwmon/hwmon1/name", "k10temp\n");
  roots.sys("class/hwmon/hwmon1/temp1_input", "45500\n");
  roots.sys("class/hwmon/hwmon1/temp1_label", "Tctl\n");
  roots.sys("class/hwmon/hwmon1/temp3_input", "51250\n");
  EXPECT_DOUBLE_EQ(*temperature(), 51.25);
}

TEST(CpuTelemetry, PowerFromRaplPackagesWithWrapAround) {
  FakeRoots roots;
  roots.sys("class/powercap/intel-rapl:0/name", "package-0\n");
  roots.sys("class/powercap/intel-rapl:0/energy_uj", "999000000\n");
  roots.sys("class/powercap/intel-rapl:0/max_energy_range_uj", "1000000000\n");
  roots.sys("class/powercap/intel-rapl:0:0/name", "core\n");  // part of package 0
  roots.sys("class/powercap/intel-rapl:0:0/energy_uj", "5\n");
  roots.sys("class/powercap/intel-rapl:0:0/max_energy_range_uj", "10\n");
  roots.sys("class/powercap/intel-rapl:1/name", "psys\n");  // the platform: would count twice
  roots.sys("class/powercap/intel-rapl:1/energy_uj", "7\n");
  roots.sys("class/powercap/intel-rapl:1/max_energy_range_uj", "10\n");
  auto before = read_energy();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->packages.size(), 1u);
  EXPECT_EQ(before->packages[0].energy_uj, 999000000u);
  EXPECT_EQ(before->packages[0].max_energy_range_uj, 1000000000u);

  EnergyReading after = *before;
  after.packages[0].energy_uj = 1000000;  // wrapped: 1 J to the top, 1 J after
  after.seconds = before->seconds + 0.5;
  EXPECT_DOUBLE_EQ(*power_between(*before, after), 4.0);
  after.packages[0].energy_uj = 999500000;  // no wrap: 0.5 J
  EXPECT_DOUBLE_EQ(*power_between(*before, after), 1.0);
  EXPECT_EQ(power_between(*before, *before), std::nullopt);  // no time went by

  roots.sys("class/powercap/intel-rapl:2/name", "package-1\n");  // a package without its counter
  EXPECT_FALSE(read_energy().has_value());
}

TEST(CpuTelemetry, PropertiesFromSysfsAndMeminfo) {
  FakeRoots roots;
  for (const std::string cpu : {"cpu0", "cpu1", "cpu2", "cpu3"}) {
    const std::string d = "devices/system/cpu/" + cpu + "/";
    roots.sys(d + "topology/physical_package_id", "0\n");
    roots.sys(d + "topology/core_id", cpu == "cpu0" || cpu == "cpu2" ? "0\n" : "1\n");  // 2 threads a core
    roots.sys(d + "cache/index0/level", "1\n"), roots.sys(d + "cache/index0/type", "Data\n");
    roots.sys(d + "cache/index0/size", "48K\n");
    roots.sys(d + "cache/index1/level", "1\n"), roots.sys(d + "cache/index1/type", "Instruction\n");
    roots.sys(d + "cache/index1/size", "32K\n");
    roots.sys(d + "cache/index2/level", "2\n"), roots.sys(d + "cache/index2/type", "Unified\n");
    roots.sys(d + "cache/index2/size", "2048K\n");
    // Two L3 instances of 16 MiB, each shared by two CPUs.
    roots.sys(d + "cache/index3/level", "3\n"), roots.sys(d + "cache/index3/type", "Unified\n");
    roots.sys(d + "cache/index3/size", "16384K\n");
    roots.sys(d + "cache/index3/shared_cpu_list", cpu == "cpu0" || cpu == "cpu1" ? "0-1\n" : "2-3\n");
  }
  roots.proc("meminfo", "MemTotal:       16384 kB\nMemFree:  100 kB\n");
  const DeviceProperties p = get_device_properties();
  EXPECT_EQ(p.physical_cores, 2);
  EXPECT_EQ(p.l1d_cache_size, 48 << 10);
  EXPECT_EQ(p.l2_cache_size, 2 << 20);
  EXPECT_EQ(p.l3_cache_size, int64_t(32) << 20);
  EXPECT_EQ(p.last_level_cache_size, int64_t(32) << 20);
  EXPECT_EQ(p.total_memory, int64_t(16) << 20);
}

// This machine: whatever it exposes is in a plausible range.
TEST(CpuTelemetry, RealMachineValuesArePlausible) {
  if (std::getenv("FLAMBEAU_PROCFS_ROOT") || std::getenv("FLAMBEAU_SYSFS_ROOT")) GTEST_SKIP() << "roots overridden";
  const auto rss = device_memory_used();
  ASSERT_TRUE(rss.has_value()) << "Linux always has /proc/self/status";
  EXPECT_GT(*rss, 0);
  {
    std::vector<char> block(100 << 20, 1);  // written, so resident
    const auto grown = device_memory_used();
    ASSERT_TRUE(grown.has_value());
    EXPECT_GE(*grown - *rss, 90 << 20) << "after touching 100 MiB";
    EXPECT_EQ(block[12345], 1);
  }
  if (const auto u = utilization(std::chrono::milliseconds(50))) {
    EXPECT_TRUE(u->process >= 0 && u->process <= 100) << u->process;
    EXPECT_TRUE(u->total >= 0 && u->total <= 100) << u->total;
    EXPECT_FALSE(u->per_core.empty());
    for (double c : u->per_core) EXPECT_TRUE(c >= 0 && c <= 100) << c;
  }
  if (const auto mhz = clock_rate()) {
    EXPECT_TRUE(*mhz > 100 && *mhz < 10000) << *mhz << " MHz";
  }
  if (const auto c = temperature()) {
    EXPECT_TRUE(*c > 0 && *c < 150) << *c << " C";
  }
  if (const auto w = power_draw(std::chrono::milliseconds(50))) {
    EXPECT_TRUE(*w >= 0 && *w < 5000) << *w << " W";
  }
  const DeviceProperties p = get_device_properties();
  EXPECT_GE(p.max_compute_units, 1);
  if (p.physical_cores) {
    EXPECT_TRUE(*p.physical_cores >= 1 && *p.physical_cores <= p.max_compute_units);
  }
  for (const auto& size : {p.l1d_cache_size, p.l2_cache_size, p.l3_cache_size, p.last_level_cache_size})
    if (size) {
      EXPECT_TRUE(*size > 0 && *size < (int64_t(1) << 32)) << *size;
    }
  if (p.total_memory) {
    EXPECT_GT(*p.total_memory, int64_t(64) << 20);
  }
  synchronize();  // returns at once: nothing is in flight
}

}  // namespace
}  // namespace flambeau::cpu
