// HashStore (an in-process map guarded by a mutex; waiters sleep on a condition variable)
// and PrefixStore (forwards to a base store under "prefix/" keys). TCPStore lives in
// store_tcp.cpp, FileStore in store_file.cpp.
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "flambeau/distributed/store.h"
#include "flambeau/distributed/store_internal.h"

namespace flambeau::distributed {

// ---- HashStore ----

struct HashStore::Impl {
  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<std::string, Bytes> map;

  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> m;
    for (const auto& k : keys)
      if (!map.count(k)) m.push_back(k);
    return m;
  }
  // Waits (lock held) until every key is set; throws naming the missing ones.
  void wait_locked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                   Millis timeout, const char* op) {
    auto all_set = [&] { return missing(keys).empty(); };
    auto deadline = detail::Deadline::after(timeout);
    if (deadline.infinite) {
      cv.wait(lock, all_set);
    } else if (!cv.wait_until(lock, deadline.at, all_set)) {
      throw DistStoreError(detail::timeout_message(op, timeout, missing(keys)));
    }
  }
};

HashStore::HashStore() : impl_(std::make_unique<Impl>()) {}
HashStore::~HashStore() = default;

void HashStore::set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->map[key] = value;
  }
  impl_->cv.notify_all();
}

Bytes HashStore::get(const std::string& key) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->wait_locked(lock, {key}, timeout_, "HashStore.get");
  return impl_->map.at(key);
}

int64_t HashStore::add(const std::string& key, int64_t delta) {
  int64_t result = 0;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    auto it = impl_->map.find(key);
    std::string error;
    if (!detail::add_to_counter(key, it == impl_->map.end() ? nullptr : &it->second, delta,
                                &result, &error))
      throw DistStoreError("[HashStore.add] " + error);
    impl_->map[key] = detail::counter_bytes(result);
  }
  impl_->cv.notify_all();
  return result;
}

Bytes HashStore::compare_set(const std::string& key, const Bytes& expected,
                             const Bytes& desired) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  auto it = impl_->map.find(key);
  if (it == impl_->map.end()) {
    if (!expected.empty()) return expected;  // c10d's answer for an absent key
    impl_->map.emplace(key, desired);
  } else if (it->second == expected) {
    it->second = desired;
  } else {
    return it->second;
  }
  lock.unlock();
  impl_->cv.notify_all();
  return desired;
}

void HashStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->wait_locked(lock, keys, timeout, "HashStore.wait");
}

bool HashStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->missing(keys).empty();
}

bool HashStore::delete_key(const std::string& key) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->map.erase(key) > 0;
}

int64_t HashStore::num_keys() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int64_t>(impl_->map.size());
}

// ---- PrefixStore ----

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  FLB_CHECK(base_ != nullptr, ValueError, "[PrefixStore] the base store is null");
  timeout_ = base_->timeout();
}

void PrefixStore::set(const std::string& k, const Bytes& value) { base_->set(key(k), value); }
Bytes PrefixStore::get(const std::string& k) {
  // base's get waits with base's timeout; honour ours when it was changed.
  if (timeout_ != base_->timeout()) {
    try {
      base_->wait({key(k)}, timeout_);
    } catch (const DistStoreError& e) {  // name our op: "[HashStore.wait] x" -> "[PrefixStore.get] x"
      const std::string what = e.what();
      const size_t end = what.find("] ");
      throw DistStoreError("[PrefixStore.get] " + (end == std::string::npos ? what : what.substr(end + 2)));
    }
  }
  return base_->get(key(k));
}
int64_t PrefixStore::add(const std::string& k, int64_t delta) {
  return base_->add(key(k), delta);
}
Bytes PrefixStore::compare_set(const std::string& k, const Bytes& expected,
                               const Bytes& desired) {
  return base_->compare_set(key(k), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(key(k));
  base_->wait(full, timeout);
}
bool PrefixStore::check(const std::vector<std::string>& keys) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(key(k));
  return base_->check(full);
}
bool PrefixStore::delete_key(const std::string& k) { return base_->delete_key(key(k)); }
int64_t PrefixStore::num_keys() { return base_->num_keys(); }

}  // namespace flambeau::distributed
