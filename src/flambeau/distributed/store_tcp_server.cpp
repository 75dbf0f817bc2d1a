// TCPStore's server: the master's thread that poll()s the listening socket, a wake pipe and
// every client socket, keeps the map and parks blocking get/wait requests as waiters until
// their keys arrive or their deadline passes. See Note [TCPStore protocol].
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "flambeau/distributed/store_tcp_wire.h"

namespace flambeau::distributed::detail {

StoreServer::StoreServer(const std::string& host, int port) {
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

StoreServer::~StoreServer() {
  stop_ = true;
  const char b = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_[1], &b, 1);
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void StoreServer::run() {
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

void StoreServer::accept_peers() {
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

void StoreServer::read_peer(int fd, Peer& p) {
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

void StoreServer::flush_peer(Peer& p, int fd) {
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
bool StoreServer::process_peer(int fd, Peer& p) {
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
void StoreServer::handle(int fd, Peer& p, const Frame& f) {
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

bool StoreServer::satisfied(const Waiter& w) const {
  if (w.op == kWaitWorkers) return workers_ >= w.workers;
  for (const auto& k : w.keys)
    if (!map_.count(k)) return false;
  return true;
}

void StoreServer::answer(const Waiter& w) {
  Peer& p = peers_.at(w.fd);
  p.parked = false;
  if (w.op == kGet) return reply(p, kOk, {map_.at(w.keys[0])});
  if (w.op == kWaitWorkers) return reply(p, kOk, {int_field(workers_)});
  reply(p, kOk);
}

bool StoreServer::resolve_waiters() {
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

void StoreServer::expire_waiters() {
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

}  // namespace flambeau::distributed::detail
