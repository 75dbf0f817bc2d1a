// CPU telemetry from Linux's /proc and /sys (roots overridable for tests): resident memory,
// utilization from /proc/stat deltas, clock, temperature, RAPL power and the device's
// properties. A file that is absent or unreadable gives std::nullopt, never a guess.
#include "flambeau/core/telemetry.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "flambeau/core/cpu_info.h"

namespace flambeau::cpu {
namespace fs = std::filesystem;
namespace {

std::string root_from(const char* variable, const char* fallback) {
  const char* v = std::getenv(variable);
  return v && *v ? v : fallback;
}

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return std::nullopt;
  std::stringstream s;
  s << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return s.str();
}

// The first number of a file ("123\n"), if it has one.
template <class T>
std::optional<T> read_number(const fs::path& p) {
  std::ifstream f(p);
  T v;
  if (f >> v) return v;
  return std::nullopt;
}

// Directory entries whose names start with `prefix`, sorted by name.
std::vector<fs::path> entries(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(prefix, 0) == 0) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

// "cpu12" -> true, "cpufreq" -> false.
bool is_cpu_dir(const std::string& name) {
  return name.size() > 3 && name.rfind("cpu", 0) == 0 &&
         std::all_of(name.begin() + 3, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The value after the colon of each "key ... : value" line of a /proc file whose key starts with `key`.
std::vector<std::string> field_values(const std::string& text, const std::string& key) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (line.rfind(key, 0) != 0 || colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    out.push_back(start == std::string::npos ? "" : line.substr(start));
  }
  return out;
}

// "1024K" / "32M" / "512" -> bytes.
std::optional<int64_t> parse_size(const std::string& s) {
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || v < 0) return std::nullopt;
  const char unit = *end;
  return unit == 'K' ? v << 10 : unit == 'M' ? v << 20 : unit == 'G' ? v << 30 : v;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A counter's growth between two readings (0 if it went back, e.g. a CPU taken offline).
uint64_t grown(uint64_t before, uint64_t after) { return after > before ? after - before : 0; }

double percent(uint64_t part, uint64_t whole) {
  return whole ? std::clamp(100.0 * double(part) / double(whole), 0.0, 100.0) : 0.0;
}

// between(read(), read() `interval` later), or nullopt when a reading fails.
template <class Read, class Between>
auto over_interval(Read read, Between between, std::chrono::milliseconds interval)
    -> decltype(between(*read(), *read())) {
  const auto before = read();
  if (!before) return std::nullopt;
  std::this_thread::sleep_for(interval);
  const auto after = read();
  return after ? between(*before, *after) : std::nullopt;
}

}  // namespace

std::string procfs_root() { return root_from("FLAMBEAU_PROCFS_ROOT", "/proc"); }
std::string sysfs_root() { return root_from("FLAMBEAU_SYSFS_ROOT", "/sys"); }

std::optional<int64_t> device_memory_used() {
  const auto text = read_text(fs::path(procfs_root()) / "self/status");
  if (!text) return std::nullopt;
  const auto rss = field_values(*text, "VmRSS");  // "123456 kB"
  if (rss.empty()) return std::nullopt;
  const auto kb = parse_size(rss[0]);
  return kb ? std::optional<int64_t>(*kb * 1024) : std::nullopt;
}

std::optional<CpuTimes> read_cpu_times() {
  const fs::path proc = procfs_root();
  const auto stat = read_text(proc / "stat");
  const auto self = read_text(proc / "self/stat");
  if (!stat || !self) return std::nullopt;
  CpuTimes t;
  bool has_all = false;
  std::istringstream in(*stat);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::string name;
    words >> name;
    if (name != "cpu" && !is_cpu_dir(name)) continue;
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    uint64_t v[8] = {};
    for (uint64_t& x : v) words >> x;
    CpuTimes::Core c;
    c.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    c.total = c.busy + v[3] + v[4];
    if (name == "cpu") t.all = c, has_all = true;
    else t.cores.push_back(c);
  }
  // /proc/self/stat: "pid (comm) state ..." with utime, stime the 14th and 15th fields; the
  // name may hold spaces and parentheses, so count from the last ')'.
  const size_t paren = self->rfind(')');
  if (!has_all || paren == std::string::npos) return std::nullopt;
  std::istringstream rest(self->substr(paren + 1));
  std::string word;
  for (int i = 0; i < 11; ++i) rest >> word;  // fields 3..13
  uint64_t utime = 0, stime = 0;
  if (!(rest >> utime >> stime)) return std::nullopt;
  t.process = utime + stime;
  return t;
}

std::optional<Utilization> utilization_between(const CpuTimes& before, const CpuTimes& after) {
  if (after.all.total <= before.all.total || before.cores.size() != after.cores.size()) return std::nullopt;
  const uint64_t total = after.all.total - before.all.total;
  Utilization u;
  u.total = percent(grown(before.all.busy, after.all.busy), total);
  u.process = percent(grown(before.process, after.process), total);
  for (size_t i = 0; i < after.cores.size(); ++i) {
    const auto &b = before.cores[i], &a = after.cores[i];
    u.per_core.push_back(percent(grown(b.busy, a.busy), grown(b.total, a.total)));
  }
  return u;
}

std::optional<Utilization> utilization(std::chrono::milliseconds interval) {
  return over_interval(read_cpu_times, utilization_between, interval);
}

std::optional<double> clock_rate() {
  double sum = 0;
  int n = 0;
  for (const fs::path& cpu : entries(fs::path(sysfs_root()) / "devices/system/cpu", "cpu")) {
    if (!is_cpu_dir(cpu.filename().string())) continue;
    if (const auto khz = read_number<double>(cpu / "cpufreq/scaling_cur_freq")) sum += *khz / 1000, ++n;
  }
  if (n == 0) {
    const auto text = read_text(fs::path(procfs_root()) / "cpuinfo");
    if (text)
      for (const std::string& mhz : field_values(*text, "cpu MHz")) sum += std::atof(mhz.c_str()), ++n;
  }
  if (n == 0 || sum <= 0) return std::nullopt;
  return sum / n;
}

std::optional<double> temperature() {
  static const std::set<std::string> kCpuChips = {"coretemp", "k10temp", "zenpower", "cpu_thermal"};
  static const std::set<std::string> kCpuZones = {"x86_pkg_temp", "cpu-thermal", "cpu_thermal", "cpu",
                                                  "soc_thermal", "soc-thermal"};
  const fs::path sys = sysfs_root();
  std::optional<double> hottest;
  auto take = [&](const fs::path& file) {
    if (const auto milli = read_number<double>(file)) hottest = std::max(hottest.value_or(-1e9), *milli / 1000);
  };
  for (const fs::path& chip : entries(sys / "class/hwmon", "hwmon")) {
    const auto name = read_text(chip / "name");
    if (!name || !kCpuChips.count(name->substr(0, name->find('\n')))) continue;
    for (const fs::path& f : entries(chip, "temp"))
      if (f.filename().string().find("_input") != std::string::npos) take(f);
  }
  if (hottest) return hottest;
  for (const fs::path& zone : entries(sys / "class/thermal", "thermal_zone")) {
    const auto type = read_text(zone / "type");
    if (type && kCpuZones.count(type->substr(0, type->find('\n')))) take(zone / "temp");
  }
  return hottest;
}

std::optional<EnergyReading> read_energy() {
  EnergyReading r;
  for (const fs::path& zone : entries(fs::path(sysfs_root()) / "class/powercap", "intel-rapl:")) {
    // Top-level zones only (intel-rapl:0; intel-rapl:0:1 is a part of it), and packages only
    // (psys, the whole platform, would count them twice).
    const std::string id = zone.filename().string();
    const auto name = read_text(zone / "name");
    if (std::count(id.begin(), id.end(), ':') != 1 || !name || name->rfind("package", 0) != 0) continue;
    const auto energy = read_number<uint64_t>(zone / "energy_uj");
    const auto range = read_number<uint64_t>(zone / "max_energy_range_uj");
    if (!energy || !range) return std::nullopt;  // a package we cannot read: no partial sum
    r.packages.push_back({*energy, *range});
  }
  if (r.packages.empty()) return std::nullopt;
  r.seconds = now_seconds();
  return r;
}

std::optional<double> power_between(const EnergyReading& before, const EnergyReading& after) {
  const double seconds = after.seconds - before.seconds;
  if (seconds <= 0 || before.packages.size() != after.packages.size()) return std::nullopt;
  double joules = 0;
  for (size_t i = 0; i < after.packages.size(); ++i) {
    const auto& [e0, range] = before.packages[i];
    const uint64_t e1 = after.packages[i].energy_uj;
    joules += 1e-6 * double(e1 >= e0 ? e1 - e0 : range - e0 + e1);  // wrapped past range
  }
  return joules / seconds;
}

std::optional<double> power_draw(std::chrono::milliseconds interval) {
  return over_interval(read_energy, power_between, interval);
}

DeviceProperties get_device_properties() {
  const CpuInfo& info = cpu_info();
  DeviceProperties p;
  p.name = info.model, p.vendor = info.vendor, p.max_compute_units = info.logical_cpus;
  for (const auto& [flag, on] : cpu_isa_flags(info))
    if (on) p.isa.emplace_back(flag);

  std::set<std::pair<std::string, std::string>> cores;  // (package, core id)
  std::map<std::string, int64_t> l3_instances;            // shared_cpu_list -> size
  int last_level = 0;
  for (const fs::path& cpu : entries(fs::path(sysfs_root()) / "devices/system/cpu", "cpu")) {
    if (!is_cpu_dir(cpu.filename().string())) continue;
    const auto package = read_text(cpu / "topology/physical_package_id");
    const auto core = read_text(cpu / "topology/core_id");
    if (package && core) cores.emplace(*package, *core);
    const bool first_cpu = !p.l1d_cache_size && !p.l2_cache_size;
    for (const fs::path& index : entries(cpu / "cache", "index")) {
      const auto level = read_number<int>(index / "level");
      const auto type = read_text(index / "type");
      const auto size_text = read_text(index / "size");
      const auto size = size_text ? parse_size(*size_text) : std::nullopt;
      if (!level || !type || !size) continue;
      last_level = std::max(last_level, *level);
      if (*level == 1 && type->rfind("Data", 0) == 0 && first_cpu) p.l1d_cache_size = size;
      if (*level == 2 && first_cpu) p.l2_cache_size = size;
      if (*level == 3) l3_instances[read_text(index / "shared_cpu_list").value_or(cpu.string())] = *size;
    }
  }
  if (!cores.empty()) p.physical_cores = int(cores.size());
  if (!l3_instances.empty()) {
    p.l3_cache_size = 0;
    for (const auto& [cpus, size] : l3_instances) *p.l3_cache_size += size;
  }
  p.last_level_cache_size = last_level == 3 ? p.l3_cache_size : last_level == 2 ? p.l2_cache_size
                            : last_level == 1 ? p.l1d_cache_size : std::nullopt;

  if (const auto meminfo = read_text(fs::path(procfs_root()) / "meminfo")) {
    const auto total = field_values(*meminfo, "MemTotal");  // "16384256 kB"
    if (!total.empty())
      if (const auto kb = parse_size(total[0])) p.total_memory = *kb * 1024;
  }
  return p;
}

void synchronize() {}

}  // namespace flambeau::cpu
