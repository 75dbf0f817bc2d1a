// The profiler (torch.profiler's role on the CPU). Events come from the op hook (every
// user-level op), from scopes placed in kernels, the autograd engine, the allocator,
// collectives and the compiler, and from user ranges (RecordFunction). Each thread appends
// to its own buffer with no lock; a collector thread drains the buffers while profiling
// runs; the trace is built after stop(). Off, a scope costs one relaxed atomic load.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace flambeau::profiler {

enum class EventKind : uint8_t { Op, Kernel, Backward, UserRange, Memory, Collective, Compile };
const char* kind_name(EventKind k);  // the Chrome trace category ("cpu_op", "kernel", ...)

struct Event {
  EventKind kind = EventKind::Op;
  std::string name;
  int64_t start_ns = 0, end_ns = 0;  // steady clock (op_hook::now_ns); equal for an instant
  uint64_t tid = 0;                  // the recording thread's profiler id (1, 2, ...)
  int64_t seq = -1;                  // autograd sequence number: links an op and its backward node
  uint64_t correlation = 0;          // unique per op call (graph capture reports the same id)
  std::string shapes;                // input shapes, "[[2, 3], [3]]", when record_shapes
  int64_t bytes = 0;                 // Memory: bytes allocated (< 0: released)
  int64_t total_allocated = 0;       // Memory: allocator bytes in use after the event
  int64_t collective_seq = -1;       // Collective: the communicator's sequence number
};

struct Options {
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;  // accepted for torch's signature; no stacks are recorded
};

namespace detail {
extern std::atomic<bool> g_on;
extern std::atomic<bool> g_memory;
}  // namespace detail

// Whether a profile is being collected (one relaxed load).
inline bool enabled() { return detail::g_on.load(std::memory_order_relaxed); }
inline bool memory_enabled() { return detail::g_memory.load(std::memory_order_relaxed); }

// Appends an event to the calling thread's buffer (no lock); its tid is filled in.
void record(Event&& e);
// Memory events (called by the allocator while memory profiling is on).
void record_memory(int64_t bytes, int64_t total_allocated);
// Names the calling thread in traces ("main", "flambeau worker 1", ...).
void set_thread_name(const std::string& name);

// Starts collecting; ValueError when a profile is already running.
void start(const Options& options);
// Stops collecting and returns every event recorded since start(), sorted by start time.
std::vector<Event> stop();
// The thread names by profiler tid.
std::vector<std::pair<uint64_t, std::string>> thread_names();

// A timed range: a user range (torch.profiler.record_function), or a kernel's, backward
// node's, collective's or compile step's scope. Records nothing unless enabled() when made.
class Scope {
 public:
  explicit Scope(const char* name, EventKind kind = EventKind::UserRange, int64_t seq = -1)
      : on_(enabled()) {
    if (on_) [[unlikely]] begin(name, kind, seq);
  }
  explicit Scope(const std::string& name, EventKind kind = EventKind::UserRange, int64_t seq = -1)
      : on_(enabled()) {
    if (on_) [[unlikely]] begin(name.c_str(), kind, seq);
  }
  ~Scope() {
    if (on_) [[unlikely]] end();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  Event* event() { return on_ ? &event_ : nullptr; }  // to add fields (collective_seq)

 private:
  void begin(const char* name, EventKind kind, int64_t seq);
  void end();
  bool on_;
  Event event_;
};
using RecordFunction = Scope;

// Chrome trace-event JSON (chrome://tracing, Perfetto): complete events per thread, flow
// arrows from each op to its backward node, memory counters, thread and process names.
// `pid` names the process (a rank when several traces merge into one timeline).
std::string chrome_trace_json(const std::vector<Event>& events, int64_t pid, const std::string& process_name);
// Writes it atomically (a temporary file renamed over `path`).
void export_chrome_trace(const std::vector<Event>& events, const std::string& path, int64_t pid,
                         const std::string& process_name);

// Times per name (and input shapes), torch's key_averages: total and self time in
// microseconds (self = the event's time less its direct children's on the same thread).
struct EventAverage {
  std::string key, input_shapes;
  EventKind kind = EventKind::Op;
  int64_t count = 0;
  double cpu_time_total_us = 0, self_cpu_time_total_us = 0;
  int64_t self_cpu_memory_usage = 0;  // bytes allocated less freed inside, not in children
  double cpu_time_us() const { return count ? cpu_time_total_us / double(count) : 0.0; }
};
std::vector<EventAverage> key_averages(const std::vector<Event>& events, bool group_by_input_shape);
// The table torch prints; sort_by: "self_cpu_time_total", "cpu_time_total", "cpu_time",
// "count" or "self_cpu_memory_usage" (ValueError otherwise); row_limit < 0: every row.
std::string table(std::vector<EventAverage> rows, const std::string& sort_by, int64_t row_limit);

}  // namespace flambeau::profiler
