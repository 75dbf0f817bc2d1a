// Profiler collection: per-thread event buffers written with no lock, a collector thread
// that drains them while a profile runs, and the op-hook listener that turns every
// user-level op into an event (Note [Profiler buffers]).
#include "flambeau/profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>

#include "flambeau/autograd/node.h"
#include "flambeau/core/error.h"
#include "flambeau/core/op_hook.h"

namespace flambeau::profiler {
namespace detail {
std::atomic<bool> g_on{false};
std::atomic<bool> g_memory{false};
}  // namespace detail

// Note [Profiler buffers]
// Each thread owns a chain of fixed-size chunks. The thread (the only writer) builds an
// event in the next free slot, then publishes it by a release store of the chunk's count;
// a full chunk gets a successor linked by a release store of `next`. The collector (the
// only reader) reads up to the count it loads with acquire, and frees a chunk only once it
// has read all of it and a successor exists, which the writer then never touches again.
// So neither side takes a lock or the GIL, and no event is lost or read half-written.
namespace {

constexpr uint32_t kChunkEvents = 1024;

struct Chunk {
  Event events[kChunkEvents];
  std::atomic<uint32_t> count{0};
  std::atomic<Chunk*> next{nullptr};
};

struct ThreadBuffer {
  uint64_t tid = 0;
  std::string name;
  Chunk* tail = new Chunk;  // the writer's
  Chunk* head = tail;       // the collector's
  uint32_t read = 0;        // events of head already collected
};

struct Collector {
  std::mutex mu;  // guards buffers, names and collected (never taken by a writer's record())
  std::vector<ThreadBuffer*> buffers;  // never freed: a thread's events outlive it
  std::vector<Event> collected;
  std::thread thread;
  std::condition_variable wake;
  bool running = false;
  bool started = false;  // a profile is open (start() called, stop() not yet)
  int listener = 0;
  Options options;

  // Moves every published event into `collected` (holding mu).
  void drain_locked() {
    for (ThreadBuffer* b : buffers) {
      while (true) {
        const uint32_t n = b->head->count.load(std::memory_order_acquire);
        for (; b->read < n; ++b->read) collected.push_back(std::move(b->head->events[b->read]));
        Chunk* next = b->head->next.load(std::memory_order_acquire);
        if (b->read < kChunkEvents || !next) break;
        delete b->head;
        b->head = next;
        b->read = 0;
      }
    }
  }
};

Collector& collector() {
  static Collector* c = new Collector;  // never destroyed: threads may record during teardown
  return *c;
}

ThreadBuffer& my_buffer() {
  thread_local ThreadBuffer* mine = nullptr;
  if (!mine) [[unlikely]] {
    auto* b = new ThreadBuffer;
    Collector& c = collector();
    std::lock_guard lock(c.mu);  // once per thread
    b->tid = c.buffers.size() + 1;
    b->name = b->tid == 1 ? "main" : "thread " + std::to_string(b->tid);
    c.buffers.push_back(b);
    mine = b;
  }
  return *mine;
}

std::string shape_string(const std::vector<op_hook::Value>& args) {
  std::ostringstream os;
  os << '[';
  bool first = true;
  for (const op_hook::Value& v : args) {
    if (!first) os << ", ";
    first = false;
    if (const Tensor* t = std::get_if<Tensor>(&v); t && t->defined()) {
      os << '[';
      for (int64_t d = 0; d < t->dim(); ++d) os << (d ? ", " : "") << t->size(d);
      os << ']';
    } else {
      os << "[]";
    }
  }
  os << ']';
  return os.str();
}

void on_op(const op_hook::OpCall& call) {
  if (!enabled()) return;
  Event e;
  e.kind = EventKind::Op;
  e.name = std::string(call.name);
  e.start_ns = call.start_ns;
  e.end_ns = op_hook::now_ns();
  e.correlation = call.correlation;
  for (const Tensor& out : call.outputs)
    if (out.defined() && out.impl()->autograd && out.impl()->autograd->grad_fn) {
      e.seq = int64_t(out.impl()->autograd->grad_fn->seq);
      break;
    }
  if (collector().options.record_shapes) e.shapes = shape_string(call.args);
  record(std::move(e));
}

}  // namespace

const char* kind_name(EventKind k) {
  switch (k) {
    case EventKind::Op: return "cpu_op";
    case EventKind::Kernel: return "kernel";
    case EventKind::Backward: return "autograd";
    case EventKind::UserRange: return "user_annotation";
    case EventKind::Memory: return "cpu_instant_event";
    case EventKind::Collective: return "collective";
    case EventKind::Compile: return "compile";
  }
  return "unknown";
}

void record(Event&& e) {
  ThreadBuffer& b = my_buffer();
  Chunk* c = b.tail;
  uint32_t n = c->count.load(std::memory_order_relaxed);
  if (n == kChunkEvents) [[unlikely]] {
    Chunk* fresh = new Chunk;
    c->next.store(fresh, std::memory_order_release);
    b.tail = c = fresh;
    n = 0;
  }
  e.tid = b.tid;
  c->events[n] = std::move(e);
  c->count.store(n + 1, std::memory_order_release);
}

void record_memory(int64_t bytes, int64_t total_allocated) {
  Event e;
  e.kind = EventKind::Memory;
  e.name = "[memory]";
  e.start_ns = e.end_ns = op_hook::now_ns();
  e.bytes = bytes;
  e.total_allocated = total_allocated;
  record(std::move(e));
}

void set_thread_name(const std::string& name) {
  ThreadBuffer& b = my_buffer();
  std::lock_guard lock(collector().mu);
  b.name = name;
}

std::vector<std::pair<uint64_t, std::string>> thread_names() {
  Collector& c = collector();
  std::lock_guard lock(c.mu);
  std::vector<std::pair<uint64_t, std::string>> out;
  for (ThreadBuffer* b : c.buffers) out.emplace_back(b->tid, b->name);
  return out;
}

void start(const Options& options) {
  Collector& c = collector();
  {
    std::lock_guard lock(c.mu);
    FLB_CHECK(!c.started, ValueError, "[profiler] a profile is already running; stop it before starting another");
    c.started = true;
    c.drain_locked();  // events of an earlier profile recorded after its stop: not ours
    c.collected.clear();
    c.options = options;
    c.running = true;
  }
  c.thread = std::thread([&c] {
    set_thread_name("flambeau profiler collector");
    std::unique_lock lock(c.mu);
    while (c.running) {
      c.wake.wait_for(lock, std::chrono::milliseconds(10));
      c.drain_locked();
    }
  });
  c.listener = op_hook::add_listener(on_op);
  detail::g_memory.store(options.profile_memory, std::memory_order_relaxed);
  detail::g_on.store(true, std::memory_order_seq_cst);
}

std::vector<Event> stop() {
  Collector& c = collector();
  {
    std::lock_guard lock(c.mu);
    FLB_CHECK(c.started, ValueError, "[profiler] no profile is running");
  }
  detail::g_on.store(false, std::memory_order_seq_cst);
  detail::g_memory.store(false, std::memory_order_relaxed);
  op_hook::remove_listener(c.listener);
  {
    std::lock_guard lock(c.mu);
    c.running = false;
  }
  c.wake.notify_all();
  c.thread.join();
  std::vector<Event> out;
  {
    std::lock_guard lock(c.mu);
    c.drain_locked();
    out.swap(c.collected);
    c.started = false;
  }
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  return out;
}

void Scope::begin(const char* name, EventKind kind, int64_t seq) {
  event_.kind = kind;
  event_.name = name;
  event_.seq = seq;
  event_.start_ns = op_hook::now_ns();
}

void Scope::end() {
  event_.end_ns = op_hook::now_ns();
  record(std::move(event_));
}

}  // namespace flambeau::profiler
