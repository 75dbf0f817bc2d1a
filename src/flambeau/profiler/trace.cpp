// What a profile becomes: Chrome trace-event JSON, and torch's key_averages table.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "flambeau/core/error.h"
#include "flambeau/io/text_file.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::profiler {
namespace {

void json_string(std::ostream& os, const std::string& s) {
  os << '"';
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') os << '\\' << ch;
    else if (ch < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", ch);
      os << buf;
    } else os << ch;
  }
  os << '"';
}

// Microseconds with three decimals (Chrome traces count in us).
std::string us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
  return buf;
}

// For each event, the index of its parent: the innermost earlier event on the same thread
// whose range contains it (-1: none). Events must be sorted by start (stop() sorts them).
std::vector<int64_t> parents(const std::vector<Event>& events) {
  std::vector<int64_t> parent(events.size(), -1);
  std::map<uint64_t, std::vector<int64_t>> open;  // per thread, a stack of enclosing ranges
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    std::vector<int64_t>& stack = open[e.tid];
    while (!stack.empty() && events[stack.back()].end_ns < e.end_ns) stack.pop_back();
    // An event that ends after its would-be parent overlaps it without nesting: not a child.
    while (!stack.empty() && events[stack.back()].end_ns <= e.start_ns) stack.pop_back();
    if (!stack.empty()) parent[i] = stack.back();
    if (e.kind != EventKind::Memory) stack.push_back(int64_t(i));
  }
  return parent;
}

}  // namespace

std::string chrome_trace_json(const std::vector<Event>& events, int64_t pid, const std::string& process_name) {
  std::ostringstream os;
  os << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  os << "{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << pid << ", \"tid\": 0, \"args\": {\"name\": ";
  json_string(os, process_name);
  os << "}}";
  for (const auto& [tid, name] : thread_names()) {
    os << ",\n{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << pid << ", \"tid\": " << tid
       << ", \"args\": {\"name\": ";
    json_string(os, name);
    os << "}}";
  }
  std::map<int64_t, const Event*> forward_of;  // seq -> the op that made the node
  for (const Event& e : events)
    if (e.kind == EventKind::Op && e.seq >= 0) forward_of.emplace(e.seq, &e);
  for (const Event& e : events) {
    os << ",\n";
    if (e.kind == EventKind::Memory) {
      os << "{\"ph\": \"i\", \"s\": \"t\", \"name\": \"[memory]\", \"cat\": \"cpu_instant_event\", \"pid\": " << pid
         << ", \"tid\": " << e.tid << ", \"ts\": " << us(e.start_ns) << ", \"args\": {\"Bytes\": " << e.bytes
         << ", \"Total Allocated\": " << e.total_allocated << "}},\n";
      os << "{\"ph\": \"C\", \"name\": \"Total Allocated\", \"pid\": " << pid << ", \"ts\": " << us(e.start_ns)
         << ", \"args\": {\"bytes\": " << e.total_allocated << "}}";
      continue;
    }
    os << "{\"ph\": \"X\", \"cat\": \"" << kind_name(e.kind) << "\", \"name\": ";
    json_string(os, e.name);
    os << ", \"pid\": " << pid << ", \"tid\": " << e.tid << ", \"ts\": " << us(e.start_ns)
       << ", \"dur\": " << us(e.end_ns - e.start_ns) << ", \"args\": {";
    const char* sep = "";
    if (e.correlation) os << sep << "\"correlation\": " << e.correlation, sep = ", ";
    if (e.seq >= 0) os << sep << "\"Sequence number\": " << e.seq, sep = ", ";
    if (e.collective_seq >= 0) os << sep << "\"Collective sequence\": " << e.collective_seq, sep = ", ";
    if (!e.shapes.empty()) {
      os << sep << "\"Input Dims\": ";
      json_string(os, e.shapes);
    }
    os << "}}";
    // A flow arrow from the forward op to its backward node (same id, start then finish).
    if (e.kind == EventKind::Backward && e.seq >= 0)
      if (auto it = forward_of.find(e.seq); it != forward_of.end()) {
        const Event& f = *it->second;
        os << ",\n{\"ph\": \"s\", \"id\": " << e.seq << ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\", \"pid\": " << pid
           << ", \"tid\": " << f.tid << ", \"ts\": " << us(f.start_ns) << "},\n";
        os << "{\"ph\": \"f\", \"bp\": \"e\", \"id\": " << e.seq
           << ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\", \"pid\": " << pid << ", \"tid\": " << e.tid
           << ", \"ts\": " << us(e.start_ns) << "}";
      }
  }
  os << "\n]}\n";
  return os.str();
}

void export_chrome_trace(const std::vector<Event>& events, const std::string& path, int64_t pid,
                         const std::string& process_name) {
  io::write_text_file(path, chrome_trace_json(events, pid, process_name), "export_chrome_trace");
}

std::vector<EventAverage> key_averages(const std::vector<Event>& events, bool group_by_input_shape) {
  const std::vector<int64_t> parent = parents(events);
  std::vector<double> self_us(events.size());
  std::vector<int64_t> self_mem(events.size(), 0);
  for (size_t i = 0; i < events.size(); ++i)
    if (events[i].kind != EventKind::Memory) self_us[i] = double(events[i].end_ns - events[i].start_ns) / 1e3;
  for (size_t i = 0; i < events.size(); ++i) {
    if (parent[i] < 0) continue;
    if (events[i].kind == EventKind::Memory) self_mem[parent[i]] += events[i].bytes;
    else self_us[parent[i]] -= double(events[i].end_ns - events[i].start_ns) / 1e3;
  }
  std::vector<EventAverage> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;
  for (size_t i = 0; i < events.size(); ++i) {
    const Event& e = events[i];
    if (e.kind == EventKind::Memory) continue;
    std::pair<std::string, std::string> key{e.name, group_by_input_shape ? e.shapes : std::string()};
    auto [it, fresh] = index.emplace(key, rows.size());
    if (fresh) rows.push_back(EventAverage{key.first, key.second, e.kind});
    EventAverage& r = rows[it->second];
    r.count += 1;
    r.cpu_time_total_us += double(e.end_ns - e.start_ns) / 1e3;
    r.self_cpu_time_total_us += std::max(0.0, self_us[i]);
    r.self_cpu_memory_usage += self_mem[i];
  }
  return rows;
}

std::string table(std::vector<EventAverage> rows, const std::string& sort_by, int64_t row_limit) {
  auto metric = [&](const EventAverage& r) -> double {
    if (sort_by == "self_cpu_time_total") return r.self_cpu_time_total_us;
    if (sort_by == "cpu_time_total") return r.cpu_time_total_us;
    if (sort_by == "cpu_time") return r.cpu_time_us();
    if (sort_by == "count") return double(r.count);
    if (sort_by == "self_cpu_memory_usage") return double(r.self_cpu_memory_usage);
    throw ValueError(::flambeau::detail::str_cat("[table] sort_by must be self_cpu_time_total, cpu_time_total, cpu_time, ",
                                     "count or self_cpu_memory_usage, not '", sort_by, "'"));
  };
  metric(EventAverage{});  // checks sort_by even for an empty table
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) { return metric(a) > metric(b); });
  double self_total = 0;
  for (const EventAverage& r : rows) self_total += r.self_cpu_time_total_us;
  const bool shapes = std::any_of(rows.begin(), rows.end(), [](const auto& r) { return !r.input_shapes.empty(); });
  size_t width = 4;
  for (const EventAverage& r : rows) width = std::max(width, std::min<size_t>(r.key.size(), 60));
  std::ostringstream os;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-*s  %12s  %12s  %12s  %12s  %10s", int(width), "Name", "Self CPU %", "Self CPU",
                "CPU total", "CPU time avg", "# of Calls");
  const std::string header = std::string(buf) + (shapes ? "  Input Shapes" : "");
  const std::string rule(header.size(), '-');
  os << rule << '\n' << header << '\n' << rule << '\n';
  auto fmt = [](double v) {
    char b[32];
    if (v >= 1e6) std::snprintf(b, sizeof b, "%.3fs", v / 1e6);
    else if (v >= 1e3) std::snprintf(b, sizeof b, "%.3fms", v / 1e3);
    else std::snprintf(b, sizeof b, "%.3fus", v);
    return std::string(b);
  };
  int64_t shown = 0;
  for (const EventAverage& r : rows) {
    if (row_limit >= 0 && shown++ >= row_limit) break;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.2f%%", self_total > 0 ? 100.0 * r.self_cpu_time_total_us / self_total : 0.0);
    std::snprintf(buf, sizeof buf, "%-*s  %12s  %12s  %12s  %12s  %10lld", int(width), r.key.substr(0, 60).c_str(),
                  pct, fmt(r.self_cpu_time_total_us).c_str(), fmt(r.cpu_time_total_us).c_str(),
                  fmt(r.cpu_time_us()).c_str(), (long long)r.count);
    os << buf << (shapes ? "  " + r.input_shapes : "") << '\n';
  }
  os << rule << '\n' << "Self CPU time total: " << fmt(self_total) << '\n';
  return os.str();
}

}  // namespace flambeau::profiler
