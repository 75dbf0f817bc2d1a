// TCPStore, c10d's rendezvous store over TCP. The master runs a server thread that poll()s
// its listening socket and client sockets and keeps the map; every TCPStore object, the
// master's included, is one client connection whose calls are serialized by a mutex.
// Blocking get/wait are parked on the server and answered when their keys arrive or their
// deadline passes. See Note [TCPStore protocol].
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "flambeau/distributed/store.h"
#include "flambeau/distributed/store_internal.h"

// Note [TCPStore protocol]
// On connect the client sends the 5 bytes "FLBS" + version; the server answers the same 5
// bytes, counts the connection (for wait_for_workers) and drops a peer that sends anything
// else. Then a request is a frame: u8 op, u32 field count, fields (u32 length + bytes; ints
// are 8-byte fields), little-endian. A reply is a frame too: u8 status (Ok, Timeout with the
// missing keys, Error with a message), u32 count, fields. A client has one request in flight;
// get/wait/wait-workers that cannot be answered yet are parked as waiters on the server. A
// malformed frame (unknown op, wrong field count, oversize) drops the peer.

namespace flambeau::distributed {
namespace {

using detail::Clock;
using detail::Deadline;

constexpr char kMagic[4] = {'F', 'L', 'B', 'S'};
constexpr uint8_t kVersion = 1;
constexpr size_t kHelloSize = 5;
constexpr uint32_t kMaxFields = 1u << 20;
constexpr uint64_t kMaxFrame = uint64_t(1) << 30;  // 1 GiB
constexpr Millis kReplyGrace{1000};   // extra client wait for a parked request's answer
constexpr Millis kConnectRetry{20};

enum Op : uint8_t {
  kSet = 1, kGet, kAdd, kCompareSet, kWait, kCheck, kDelete, kNumKeys, kWaitWorkers,
};
enum Status : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

// ---- framing ----

struct Frame {
  uint8_t tag = 0;
  std::vector<std::string> fields;
};

void put_u32(std::string& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
std::string int_field(int64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((uint64_t(v) >> (8 * i)) & 0xff));
  return s;
}
bool field_int(const std::string& s, int64_t* v) {
  if (s.size() != 8) return false;
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u |= uint64_t(static_cast<uint8_t>(s[i])) << (8 * i);
  *v = static_cast<int64_t>(u);
  return true;
}

std::string encode(uint8_t tag, const std::vector<std::string>& fields) {
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
Parse parse_frame(const char* p, size_t n, Frame* f, size_t* used) {
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

std::string errno_text(int e) { return std::strerror(e); }

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// ---- server ----

class Server {
 public:
  Server(const std::string& host, int port);
  ~Server();
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

Server::Server(const std::string& host, int port) {
  const std::string shown = host.empty() ? "0.0.0.0" : host;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_str = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port_str.c_str(), &hints, &res);
  if (rc != 0)
    throw DistNetworkError("[TCPStore] could not resolve host '" + shown +
                           "': " + ::gai_strerror(rc));
  std::string error = "no address";
  bool in_use = false;
  for (addrinfo* ai = res; ai && listen_fd_ < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = errno_text(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      in_use = in_use || errno == EADDRINUSE;
      error = errno_text(errno);
      ::close(fd);
      continue;
    }
    listen_fd_ = fd;
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) {
    if (in_use)
      throw DistNetworkError("[TCPStore] port " + port_str + " on " + shown + " is in use");
    throw DistNetworkError("[TCPStore] could not listen on " + shown + ":" + port_str + ": " +
                           error);
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (::pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    throw DistNetworkError("[TCPStore] could not create the server's wake pipe: " +
                           errno_text(e));
  }
  thread_ = std::thread([this] { run(); });
}

Server::~Server() {
  stop_ = true;
  const char b = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_[1], &b, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void Server::run() {
  std::vector<pollfd> fds;
  try {
    while (!stop_) {
      fds.clear();
      fds.push_back({wake_[0], POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& [fd, p] : peers_)
        fds.push_back({fd, static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
      int timeout = -1;
      for (const auto& w : waiters_) {
        const int t = w.deadline.poll_ms();
        if (t >= 0 && (timeout < 0 || t < timeout)) timeout = t;
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (stop_) break;
      if (fds[0].revents) {
        char buf[64];
        while (::read(wake_[0], buf, sizeof(buf)) > 0) {
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        Peer& p = peers_.at(fds[i].fd);
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_peer(fds[i].fd, p);
        if (!p.dead && (fds[i].revents & POLLOUT)) flush_peer(p, fds[i].fd);
      }
      if (fds[1].revents) accept_peers();
      // Answer what can be answered until nothing changes, then send.
      expire_waiters();
      for (bool progress = true; progress;) {
        progress = false;
        for (auto& [fd, p] : peers_)
          if (!p.dead && !p.parked) progress |= process_peer(fd, p);
        progress |= resolve_waiters();
      }
      for (auto it = peers_.begin(); it != peers_.end();) {
        if (!it->second.dead && !it->second.out.empty()) flush_peer(it->second, it->first);
        if (it->second.dead) {
          const int fd = it->first;
          waiters_.remove_if([fd](const Waiter& w) { return w.fd == fd; });
          ::close(fd);
          it = peers_.erase(it);
        } else {
          ++it;
        }
      }
    }
  } catch (...) {
    // Out of memory or similar: close every connection below so that clients see an error.
  }
  for (auto& [fd, p] : peers_) ::close(fd);
  peers_.clear();
  waiters_.clear();
}

void Server::accept_peers() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(Millis(10));
      return;  // EAGAIN, or an error for one pending connection
    }
    set_nodelay(fd);
    peers_[fd] = Peer{};
  }
}

void Server::read_peer(int fd, Peer& p) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      p.in.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof(buf)) return;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {
      p.dead = true;  // closed by the peer, or reset
      return;
    }
  }
}

void Server::flush_peer(Peer& p, int fd) {
  size_t sent = 0;
  while (sent < p.out.size()) {
    ssize_t n = ::send(fd, p.out.data() + sent, p.out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      p.dead = true;
      return;
    }
  }
  p.out.erase(0, sent);
}

// Handles the complete requests buffered from one peer; whether it handled any.
bool Server::process_peer(int fd, Peer& p) {
  bool progress = false;
  if (!p.greeted) {
    if (p.in.size() < kHelloSize) return false;
    if (std::memcmp(p.in.data(), kMagic, 4) != 0 || static_cast<uint8_t>(p.in[4]) != kVersion) {
      p.dead = true;  // not one of ours
      return false;
    }
    p.greeted = true;
    p.in_pos = kHelloSize;
    p.out.append(kMagic, 4);
    p.out.push_back(static_cast<char>(kVersion));
    ++workers_;
    progress = true;
  }
  while (!p.parked && !p.dead) {
    Frame f;
    size_t used = 0;
    const Parse r = parse_frame(p.in.data() + p.in_pos, p.in.size() - p.in_pos, &f, &used);
    if (r == Parse::Incomplete) break;
    if (r == Parse::Bad) {
      p.dead = true;
      break;
    }
    p.in_pos += used;
    handle(fd, p, f);
    progress = true;
  }
  if (p.in_pos == p.in.size()) {
    p.in.clear();
    p.in_pos = 0;
  } else if (p.in_pos > 65536) {
    p.in.erase(0, p.in_pos);
    p.in_pos = 0;
  }
  return progress;
}

// One request. A malformed one marks the peer dead.
void Server::handle(int fd, Peer& p, const Frame& f) {
  const auto& a = f.fields;
  const size_t n = a.size();
  int64_t x = 0, y = 0;
  switch (f.tag) {
    case kSet:
      if (n != 2) break;
      map_[a[0]] = a[1];
      return reply(p, kOk);
    case kGet:
    case kWait:
    case kWaitWorkers: {
      if (n < 1 || !field_int(a[0], &x)) break;
      if (f.tag == kGet && n != 2) break;
      if (f.tag == kWaitWorkers && (n != 2 || !field_int(a[1], &y))) break;
      Waiter w{fd, f.tag, {}, y, Deadline::after(Millis(x))};
      if (f.tag != kWaitWorkers) w.keys.assign(a.begin() + 1, a.end());
      if (satisfied(w)) return answer(w);
      p.parked = true;
      waiters_.push_back(std::move(w));
      return;
    }
    case kAdd: {
      if (n != 2 || !field_int(a[1], &x)) break;
      auto it = map_.find(a[0]);
      Bytes cur;
      if (it != map_.end()) cur.assign(it->second.begin(), it->second.end());
      std::string error;
      if (!detail::add_to_counter(a[0], it == map_.end() ? nullptr : &cur, x, &y, &error))
        return reply(p, kError, {error});
      map_[a[0]] = std::to_string(y);
      return reply(p, kOk, {int_field(y)});
    }
    case kCompareSet: {
      if (n != 3) break;
      auto it = map_.find(a[0]);
      if (it == map_.end()) {
        if (!a[1].empty()) return reply(p, kOk, {a[1]});  // c10d's answer for an absent key
        map_[a[0]] = a[2];
        return reply(p, kOk, {a[2]});
      }
      if (it->second == a[1]) it->second = a[2];
      return reply(p, kOk, {it->second});
    }
    case kCheck:
      return reply(p, kOk, {int_field(missing(a).empty() ? 1 : 0)});
    case kDelete:
      if (n != 1) break;
      return reply(p, kOk, {int_field(map_.erase(a[0]) ? 1 : 0)});
    case kNumKeys:
      if (n != 0) break;
      return reply(p, kOk, {int_field(static_cast<int64_t>(map_.size()))});
    default:
      break;
  }
  p.dead = true;  // unknown op or wrong fields
}

bool Server::satisfied(const Waiter& w) const {
  if (w.op == kWaitWorkers) return workers_ >= w.workers;
  for (const auto& k : w.keys)
    if (!map_.count(k)) return false;
  return true;
}

void Server::answer(const Waiter& w) {
  Peer& p = peers_.at(w.fd);
  p.parked = false;
  if (w.op == kGet) return reply(p, kOk, {map_.at(w.keys[0])});
  if (w.op == kWaitWorkers) return reply(p, kOk, {int_field(workers_)});
  reply(p, kOk);
}

bool Server::resolve_waiters() {
  bool any = false;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (satisfied(*it)) {
      answer(*it);
      it = waiters_.erase(it);
      any = true;
    } else {
      ++it;
    }
  }
  return any;
}

void Server::expire_waiters() {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->deadline.expired() && !satisfied(*it)) {
      Peer& p = peers_.at(it->fd);
      p.parked = false;
      if (it->op == kWaitWorkers)
        reply(p, kTimeout, {int_field(workers_)});
      else
        reply(p, kTimeout, missing(it->keys));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

// ---- client ----

class Connection {
 public:
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  void connect(const std::string& host, int port, Millis timeout);
  // Sends one request and returns the reply (Ok or Timeout); throws on an Error reply or a
  // lost connection. `wait` is how long the reply may take.
  Frame call(const std::string& op, uint8_t code, const std::vector<std::string>& fields,
             Millis wait);
  const std::string& peer() const { return peer_; }

 private:
  bool try_connect(const addrinfo* ai, const Deadline& deadline, std::string* error);
  void fail(const std::string& op, const std::string& why);
  bool send_all(const std::string& b, const Deadline& deadline, std::string* error);
  // Reads until n bytes are buffered after in_pos_: 1 done, 0 deadline passed, -1 error.
  int fill(size_t n, const Deadline& deadline, std::string* error);

  int fd_ = -1;
  std::string peer_;  // "host:port"
  std::mutex mu_;
  bool broken_ = false;
  std::string in_;
  size_t in_pos_ = 0;
};

void Connection::connect(const std::string& host, int port, Millis timeout) {
  peer_ = host + ":" + std::to_string(port);
  const Deadline deadline = Deadline::after(timeout);
  const std::string port_str = std::to_string(port);
  std::string error = "no address";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), port_str.c_str(), &hints, &res);
    if (rc != 0) {
      error = ::gai_strerror(rc);
    } else {
      bool ok = false;
      for (addrinfo* ai = res; ai && !ok; ai = ai->ai_next) ok = try_connect(ai, deadline, &error);
      ::freeaddrinfo(res);
      if (ok) return;
    }
    if (deadline.expired())
      throw DistNetworkError("[TCPStore] could not connect to " + peer_ + " within " +
                             std::to_string(timeout.count()) + " ms: " + error);
    const int left = deadline.poll_ms();
    std::this_thread::sleep_for(left < 0 ? kConnectRetry : std::min(kConnectRetry, Millis(left)));
  }
}

// One attempt: connect (bounded by the deadline) and exchange the hello.
bool Connection::try_connect(const addrinfo* ai, const Deadline& deadline, std::string* error) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = errno_text(errno);
    return false;
  }
  fd_ = fd;
  in_.clear();
  in_pos_ = 0;
  auto give_up = [&](const std::string& why) {
    *error = why;
    ::close(fd_);
    fd_ = -1;
    return false;
  };
  if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return give_up(errno_text(errno));
    pollfd pfd{fd, POLLOUT, 0};
    int r;
    while ((r = ::poll(&pfd, 1, deadline.poll_ms())) < 0 && errno == EINTR) {
    }
    if (r <= 0) return give_up(r == 0 ? "connection timed out" : errno_text(errno));
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return give_up(errno_text(err));
  }
  set_nodelay(fd);
  std::string hello(kMagic, 4);
  hello.push_back(static_cast<char>(kVersion));
  std::string why;
  if (!send_all(hello, deadline, &why)) return give_up(why);
  const int r = fill(kHelloSize, deadline, &why);
  if (r <= 0) return give_up(r == 0 ? "no answer to the hello" : why);
  if (in_.compare(0, kHelloSize, hello) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw DistNetworkError("[TCPStore] " + peer_ + " is not a flambeau TCPStore server");
  }
  in_pos_ = kHelloSize;
  return true;
}

void Connection::fail(const std::string& op, const std::string& why) {
  broken_ = true;
  ::close(fd_);
  fd_ = -1;
  throw DistNetworkError("[" + op + "] lost the connection to " + peer_ + ": " + why);
}

bool Connection::send_all(const std::string& b, const Deadline& deadline, std::string* error) {
  size_t sent = 0;
  while (sent < b.size()) {
    ssize_t n = ::send(fd_, b.data() + sent, b.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd_, POLLOUT, 0};
      const int r = ::poll(&pfd, 1, deadline.poll_ms());
      if (r == 0) {
        *error = "send timed out";
        return false;
      }
      if (r < 0 && errno != EINTR) {
        *error = errno_text(errno);
        return false;
      }
      continue;
    }
    *error = n < 0 ? errno_text(errno) : "send failed";
    return false;
  }
  return true;
}

int Connection::fill(size_t n, const Deadline& deadline, std::string* error) {
  char buf[65536];
  while (in_.size() - in_pos_ < n) {
    ssize_t got = ::recv(fd_, buf, sizeof(buf), 0);
    if (got > 0) {
      in_.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got == 0) {
      *error = "the server closed the connection";
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *error = errno_text(errno);
      return -1;
    }
    pollfd pfd{fd_, POLLIN, 0};
    const int r = ::poll(&pfd, 1, deadline.poll_ms());
    if (r == 0) return 0;
    if (r < 0 && errno != EINTR) {
      *error = errno_text(errno);
      return -1;
    }
  }
  return 1;
}

Frame Connection::call(const std::string& op, uint8_t code,
                       const std::vector<std::string>& fields, Millis wait) {
  std::lock_guard<std::mutex> lock(mu_);
  if (broken_ || fd_ < 0)
    throw DistNetworkError("[" + op + "] the connection to " + peer_ + " was lost earlier");
  const std::string request = encode(code, fields);
  if (request.size() > kMaxFrame || fields.size() > kMaxFields)
    throw DistStoreError("[" + op + "] the request (" + std::to_string(request.size()) +
                         " bytes) exceeds the store's 1 GiB limit");
  const Deadline deadline = Deadline::after(wait);
  std::string why;
  if (!send_all(request, deadline, &why)) fail(op, why);
  Frame f;
  for (;;) {
    size_t used = 0;
    const Parse r = parse_frame(in_.data() + in_pos_, in_.size() - in_pos_, &f, &used);
    if (r == Parse::Complete) {
      in_pos_ += used;
      break;
    }
    if (r == Parse::Bad) fail(op, "malformed reply");
    const int got = fill(in_.size() - in_pos_ + 1, deadline, &why);
    if (got < 0) fail(op, why);
    if (got == 0) {
      // The server should have answered by now; the stream is out of step from here on.
      broken_ = true;
      ::close(fd_);
      fd_ = -1;
      throw DistStoreError("[" + op + "] no reply from " + peer_ + " within " +
                           std::to_string(wait.count()) + " ms");
    }
  }
  if (in_pos_ == in_.size()) {
    in_.clear();
    in_pos_ = 0;
  }
  if (f.tag == kError) throw DistStoreError("[" + op + "] " + (f.fields.empty() ? "" : f.fields[0]));
  if (f.tag != kOk && f.tag != kTimeout) fail(op, "malformed reply");
  return f;
}

Bytes to_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
std::string to_field(const Bytes& b) { return std::string(b.begin(), b.end()); }

// How long the client waits for the answer to a parked request lasting `timeout`.
Millis parked_wait(Millis timeout) { return timeout.count() > 0 ? timeout + kReplyGrace : timeout; }

int64_t int_reply(const std::string& op, const Frame& f) {
  int64_t v = 0;
  if (f.tag != kOk || f.fields.size() != 1 || !field_int(f.fields[0], &v))
    throw DistNetworkError("[" + op + "] malformed reply");
  return v;
}

}  // namespace

// ---- TCPStore ----

struct TCPStore::Impl {
  std::string host;
  int port = 0;
  std::unique_ptr<Server> server;  // master only; declared first so it stops last
  Connection conn;
};

TCPStore::TCPStore(std::string host, TCPStoreOptions options) : impl_(std::make_unique<Impl>()) {
  timeout_ = options.timeout;
  impl_->host = std::move(host);
  FLB_CHECK(options.port >= 0 && options.port <= 65535, ValueError,
            "[TCPStore] the port must be in [0, 65535], got ", options.port);
  if (options.is_master) {
    impl_->server = std::make_unique<Server>(impl_->host, options.port);
    impl_->port = impl_->server->port();
  } else {
    FLB_CHECK(options.port > 0, ValueError, "[TCPStore] a client needs the master's port, got 0");
    impl_->port = options.port;
  }
  std::string target = impl_->host;
  if (target.empty() || target == "0.0.0.0") target = "127.0.0.1";
  if (target == "::") target = "::1";
  impl_->conn.connect(target, impl_->port, timeout_);
  if (options.is_master && options.wait_for_workers && options.world_size > 0) {
    const Frame f = impl_->conn.call("TCPStore", kWaitWorkers,
                                     {int_field(timeout_.count()), int_field(options.world_size)},
                                     parked_wait(timeout_));
    if (f.tag == kTimeout) {
      int64_t n = 0;
      if (!f.fields.empty()) field_int(f.fields[0], &n);
      throw DistStoreError("[TCPStore] timed out after " + std::to_string(timeout_.count()) +
                           " ms waiting for " + std::to_string(options.world_size) +
                           " workers to connect (" + std::to_string(n) + " connected)");
    }
  }
}

TCPStore::~TCPStore() = default;

const std::string& TCPStore::host() const { return impl_->host; }
int TCPStore::port() const { return impl_->port; }

void TCPStore::set(const std::string& key, const Bytes& value) {
  impl_->conn.call("TCPStore.set", kSet, {key, to_field(value)}, timeout_);
}

Bytes TCPStore::get(const std::string& key) {
  const char* op = "TCPStore.get";
  const Frame f =
      impl_->conn.call(op, kGet, {int_field(timeout_.count()), key}, parked_wait(timeout_));
  if (f.tag == kTimeout) throw DistStoreError(detail::timeout_message(op, timeout_, {key}));
  if (f.fields.size() != 1) throw DistNetworkError("[TCPStore.get] malformed reply");
  return to_bytes(f.fields[0]);
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  const char* op = "TCPStore.add";
  return int_reply(op, impl_->conn.call(op, kAdd, {key, int_field(delta)}, timeout_));
}

Bytes TCPStore::compare_set(const std::string& key, const Bytes& expected,
                            const Bytes& desired) {
  const Frame f = impl_->conn.call("TCPStore.compare_set", kCompareSet,
                                   {key, to_field(expected), to_field(desired)}, timeout_);
  if (f.tag != kOk || f.fields.size() != 1)
    throw DistNetworkError("[TCPStore.compare_set] malformed reply");
  return to_bytes(f.fields[0]);
}

void TCPStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  const char* op = "TCPStore.wait";
  std::vector<std::string> fields{int_field(timeout.count())};
  fields.insert(fields.end(), keys.begin(), keys.end());
  const Frame f = impl_->conn.call(op, kWait, fields, parked_wait(timeout));
  if (f.tag == kTimeout) throw DistStoreError(detail::timeout_message(op, timeout, f.fields));
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  const char* op = "TCPStore.check";
  return int_reply(op, impl_->conn.call(op, kCheck, keys, timeout_)) != 0;
}

bool TCPStore::delete_key(const std::string& key) {
  const char* op = "TCPStore.delete_key";
  return int_reply(op, impl_->conn.call(op, kDelete, {key}, timeout_)) != 0;
}

int64_t TCPStore::num_keys() {
  const char* op = "TCPStore.num_keys";
  return int_reply(op, impl_->conn.call(op, kNumKeys, {}, timeout_));
}

}  // namespace flambeau::distributed
