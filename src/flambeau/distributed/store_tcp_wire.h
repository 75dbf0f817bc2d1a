// The wire format of TCPStore (framing, ops, limits) and its server, shared by
// store_tcp.cpp (the clients) and store_tcp_server.cpp (the master's server thread).
// Internal: not part of the public API.
#pragma once
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "flambeau/distributed/store_internal.h"

// Note [TCPStore protocol]
// On connect the client sends the 5 bytes "FLBS" + version; the server answers the same 5
// bytes, counts the connection (for wait_for_workers) and drops a peer that sends anything
// else. Then a request is a frame: u8 op, u32 field count, fields (u32 length + bytes; ints
// are 8-byte fields), little-endian. A reply is a frame too: u8 status (Ok, Timeout with the
// missing keys, Error with a message), u32 count, fields. A client has one request in flight;
// get/wait/wait-workers that cannot be answered yet are parked as waiters on the server. A
// malformed frame (unknown op, wrong field count, oversize) drops the peer.

namespace flambeau::distributed::detail {

constexpr char kMagic[4] = {'F', 'L', 'B', 'S'};
constexpr uint8_t kVersion = 1;
constexpr size_t kHelloSize = 5;
constexpr uint32_t kMaxFields = 1u << 20;
constexpr uint64_t kMaxFrame = uint64_t(1) << 30;  // 1 GiB

enum Op : uint8_t {
  kSet = 1, kGet, kAdd, kCompareSet, kWait, kCheck, kDelete, kNumKeys, kWaitWorkers,
};
enum Status : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

// ---- framing ----

struct Frame {
  uint8_t tag = 0;
  std::vector<std::string> fields;
};

inline std::string int_field(int64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((uint64_t(v) >> (8 * i)) & 0xff));
  return s;
}
inline bool field_int(const std::string& s, int64_t* v) {
  if (s.size() != 8) return false;
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= uint64_t(static_cast<uint8_t>(s[i])) << (8 * i);
  *v = static_cast<int64_t>(u);
  return true;
}

inline std::string encode(uint8_t tag, const std::vector<std::string>& fields) {
  size_t n = 5;
  for (const auto& f : fields) n += 4 + f.size();
  std::string b;
  b.reserve(n);
  b.push_back(static_cast<char>(tag));
  put_u32(b, static_cast<uint32_t>(fields.size()));
  for (const auto& f : fields) {
    put_u32(b, static_cast<uint32_t>(f.size()));
    b += f;
  }
  return b;
}

enum class Parse { Complete, Incomplete, Bad };

// Parses one frame from p[0, n); on Complete, *used is its size.
inline Parse parse_frame(const char* p, size_t n, Frame* f, size_t* used) {
  if (n < 5) return Parse::Incomplete;
  const uint32_t count = get_u32(p + 1);
  if (count > kMaxFields) return Parse::Bad;
  size_t pos = 5;
  // Walk the lengths first so that an incomplete frame costs no copies.
  for (uint32_t i = 0; i < count; ++i) {
    if (n - pos < 4) return Parse::Incomplete;
    const uint64_t len = get_u32(p + pos);
    if (pos + 4 + len > kMaxFrame) return Parse::Bad;
    if (n - pos - 4 < len) return Parse::Incomplete;
    pos += 4 + len;
  }
  f->tag = static_cast<uint8_t>(p[0]);
  f->fields.clear();
  f->fields.reserve(count);
  size_t q = 5;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t len = get_u32(p + q);
    f->fields.emplace_back(p + q + 4, len);
    q += 4 + len;
  }
  *used = pos;
  return Parse::Complete;
}

inline void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// The master's server thread and its state (store_tcp_server.cpp).
class StoreServer {
 public:
  // Binds and listens (DistNetworkError when it cannot), then serves in a thread.
  StoreServer(const std::string& host, int port);
  ~StoreServer();  // stops the thread, closes every socket
  int port() const { return port_; }

 private:
  struct Peer {
    bool greeted = false;
    bool parked = false;  // a blocking request waits on the server
    bool dead = false;
    std::string in, out;
    size_t in_pos = 0;
  };
  struct Waiter {
    int fd;
    uint8_t op;
    std::vector<std::string> keys;  // get/wait
    int64_t workers = 0;            // wait-workers
    Deadline deadline;
  };

  void run();
  void accept_peers();
  void read_peer(int fd, Peer& p);
  void flush_peer(Peer& p, int fd);
  bool process_peer(int fd, Peer& p);
  void handle(int fd, Peer& p, const Frame& f);
  bool satisfied(const Waiter& w) const;
  void answer(const Waiter& w);
  bool resolve_waiters();
  void expire_waiters();
  void reply(Peer& p, uint8_t status, const std::vector<std::string>& fields = {}) {
    p.out += encode(status, fields);
  }
  std::vector<std::string> missing(const std::vector<std::string>& keys) const {
    std::vector<std::string> m;
    for (const auto& k : keys)
      if (!map_.count(k)) m.push_back(k);
    return m;
  }

  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::map<int, Peer> peers_;
  std::list<Waiter> waiters_;
  std::unordered_map<std::string, std::string> map_;
  int64_t workers_ = 0;  // handshakes so far
};

}  // namespace flambeau::distributed::detail
