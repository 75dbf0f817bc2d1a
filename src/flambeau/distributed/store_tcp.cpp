// TCPStore, c10d's rendezvous store over TCP. Every TCPStore object, the master's included,
// is one client connection whose calls are serialized by a mutex; the master also owns the
// server (store_tcp_server.cpp). Blocking get/wait are answered by the server when their keys
// arrive or their deadline passes. See Note [TCPStore protocol] in store_tcp_wire.h.
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "flambeau/distributed/store.h"
#include "flambeau/distributed/store_tcp_wire.h"

namespace flambeau::distributed {
namespace {

using namespace detail;

constexpr Millis kReplyGrace{1000};   // extra client wait for a parked request's answer
constexpr Millis kConnectRetry{20};

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
  // A retried connect to a free local port can connect the socket to itself (TCP
  // simultaneous open); it would echo our requests back as replies.
  sockaddr_storage self{}, other{};
  socklen_t self_len = sizeof(self), other_len = sizeof(other);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) == 0 &&
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&other), &other_len) == 0 &&
      self_len == other_len && std::memcmp(&self, &other, self_len) == 0)
    return give_up("connection refused");
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
  std::unique_ptr<detail::StoreServer> server;  // master only; declared first so it stops last
  Connection conn;
};

TCPStore::TCPStore(std::string host, TCPStoreOptions options) : impl_(std::make_unique<Impl>()) {
  timeout_ = options.timeout;
  impl_->host = std::move(host);
  FLB_CHECK(options.port >= 0 && options.port <= 65535, ValueError,
            "[TCPStore] the port must be in [0, 65535], got ", options.port);
  if (options.is_master) {
    impl_->server = std::make_unique<detail::StoreServer>(impl_->host, options.port);
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
