// Key-value stores for rendezvous, with c10d's semantics: TCPStore (one process serves, all
// connect), FileStore (a shared file), HashStore (in-process) and PrefixStore (a namespace on
// another store). Every blocking call waits at most the store's timeout and then throws
// DistStoreError naming the keys; a timeout of 0 (or less) waits without limit, as c10d's
// kNoTimeout. Values are bytes. Errors start with the op: "[TCPStore.get] ...".
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flambeau/distributed/errors.h"

namespace flambeau::distributed {

using Bytes = std::vector<uint8_t>;
using Millis = std::chrono::milliseconds;

inline constexpr Millis kDefaultStoreTimeout{300'000};  // c10d's 300 s

class Store {
 public:
  virtual ~Store() = default;
  // Sets key to value (overwrites).
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // The value of key, waiting up to timeout() for it to be set.
  virtual Bytes get(const std::string& key) = 0;
  // Adds delta to the integer stored at key (decimal text, as c10d; absent = 0) and returns
  // the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // If key's value is `expected` (or key is absent and expected is empty), sets it to
  // `desired`. Returns the value now stored (c10d's compare_set; like c10d, when key is
  // absent and expected is not empty nothing is set and `expected` is returned).
  virtual Bytes compare_set(const std::string& key, const Bytes& expected,
                            const Bytes& desired) = 0;
  // Waits until every key is set, up to `timeout` (DistStoreError naming the missing keys).
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }
  // Whether every key is set, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  // Removes key; whether it was there.
  virtual bool delete_key(const std::string& key) = 0;
  virtual int64_t num_keys() = 0;

  Millis timeout() const { return timeout_; }
  void set_timeout(Millis t) { timeout_ = t; }

  // Strings for convenience.
  void set(const std::string& key, const std::string& value) {
    set(key, Bytes(value.begin(), value.end()));
  }
  std::string get_string(const std::string& key) {
    Bytes b = get(key);
    return std::string(b.begin(), b.end());
  }

 protected:
  Millis timeout_ = kDefaultStoreTimeout;
};

// c10d's TCPStore. The master (is_master) listens on host:port (port 0 picks a free one;
// port() tells which) and serves in a background thread; every instance, master included,
// is a client. Connecting retries until `timeout`, then DistNetworkError names host:port.
// A port in use raises DistNetworkError naming it. With wait_for_workers and world_size > 0
// the master's constructor waits until world_size clients have connected. Calls on one object
// are serialized (one connection): a thread blocked in its get/wait holds it, so the key must
// come from another object. A lost server makes every later call throw DistNetworkError.
struct TCPStoreOptions {
  int port = 0;
  bool is_master = false;
  int world_size = -1;  // -1: unknown
  Millis timeout = kDefaultStoreTimeout;
  bool wait_for_workers = true;
};
class TCPStore : public Store {
 public:
  TCPStore(std::string host, TCPStoreOptions options);
  ~TCPStore() override;
  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected,
                    const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  const std::string& host() const;
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// c10d's FileStore: the keys live in one file shared by the processes (locked with flock).
// The file is removed when the last of world_size users destroys its store (world_size -1:
// never).
class FileStore : public Store {
 public:
  FileStore(std::string path, int world_size = -1);
  ~FileStore() override;
  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected,
                    const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// An in-process store (threads of one process share it).
class HashStore : public Store {
 public:
  HashStore();
  ~HashStore() override;
  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected,
                    const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Keys of `base` under "prefix/". Its timeout starts as base's; its get and wait use its own.
// num_keys counts all of base's keys, as c10d.
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);
  void set(const std::string& key, const Bytes& value) override;
  using Store::set;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compare_set(const std::string& key, const Bytes& expected,
                    const Bytes& desired) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;
  bool check(const std::vector<std::string>& keys) override;
  bool delete_key(const std::string& key) override;
  int64_t num_keys() override;
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::string key(const std::string& k) const { return prefix_ + "/" + k; }
  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace flambeau::distributed
