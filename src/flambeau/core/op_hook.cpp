// The op hook's listener registry (see op_hook.h).
#include "flambeau/core/op_hook.h"

#include <chrono>
#include <memory>
#include <mutex>

namespace flambeau::op_hook {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace detail {

std::atomic<int> g_listeners{0};

uint64_t next_correlation() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

int& depth() {
  thread_local int d = 0;
  return d;
}

namespace {
struct Registry {
  std::mutex mu;
  int next_id = 1;
  // Replaced, never modified, so notify() can run listeners without holding the lock.
  std::shared_ptr<const std::vector<std::pair<int, Listener>>> listeners =
      std::make_shared<std::vector<std::pair<int, Listener>>>();
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: ops may run during static teardown
  return *r;
}
}  // namespace

void notify(OpCall&& call) {
  Registry& r = registry();
  std::shared_ptr<const std::vector<std::pair<int, Listener>>> snapshot;
  {
    std::lock_guard lock(r.mu);
    snapshot = r.listeners;
  }
  // A listener's own ops are not user-level calls.
  const Internal inside;
  for (const auto& [id, listener] : *snapshot) listener(call);
}

void leave(OpCall* pending) {
  --depth();
  delete pending;
}

}  // namespace detail

int add_listener(Listener listener) {
  detail::Registry& r = detail::registry();
  std::lock_guard lock(r.mu);
  auto next = std::make_shared<std::vector<std::pair<int, Listener>>>(*r.listeners);
  const int id = r.next_id++;
  next->emplace_back(id, std::move(listener));
  r.listeners = std::move(next);
  detail::g_listeners.store(int(r.listeners->size()), std::memory_order_relaxed);
  return id;
}

void remove_listener(int id) {
  detail::Registry& r = detail::registry();
  std::lock_guard lock(r.mu);
  auto next = std::make_shared<std::vector<std::pair<int, Listener>>>();
  for (const auto& entry : *r.listeners)
    if (entry.first != id) next->push_back(entry);
  r.listeners = std::move(next);
  detail::g_listeners.store(int(r.listeners->size()), std::memory_order_relaxed);
}

}  // namespace flambeau::op_hook
