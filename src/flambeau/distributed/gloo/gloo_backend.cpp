// The Gloo engine (libgloo-dev): one TCP context per communicator, connected through the
// rendezvous store. Up to 16 ranks: all_gather in one direct exchange; all_reduce in one
// direct exchange up to 64 KiB (4 MiB on two ranks), above as the ring reduce-scatter then
// the direct all-gather;
// reduce-scatter is a pipelined ring on Gloo's P2P buffers (Gloo's own helpers would
// all-reduce everything); the other collectives are Gloo's. A failed context is dead: abort()
// fails and closes its connections, which also makes the peers' pending ops fail at once,
// and a watcher does the same when a pair fails during an op (Note [Gloo waits a failed
// connection does not wake]).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/gather.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "flambeau/distributed/engines.h"
#include "flambeau/distributed/gloo/gloo_pair_failure.h"
#include "flambeau/ops/ops.h"

namespace flambeau::distributed {

bool gloo_available() { return true; }

namespace {

// Gloo's store interface over a flambeau store, under a prefix.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<distributed::Store> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(k(key), Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    Bytes b = store_->get(k(key));
    return std::vector<char>(b.begin(), b.end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, store_->timeout()); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    std::vector<std::string> full;
    for (auto& key : keys) full.push_back(k(key));
    store_->wait(full, t);
  }

 private:
  std::string k(const std::string& key) const { return prefix_ + "/" + key; }
  std::shared_ptr<distributed::Store> store_;
  std::string prefix_;
};

// An unsigned type of the element's size: Gloo's templates only need sizeof(T).
template <class F>
void by_size(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    case 8: return f.template operator()<uint64_t>();
  }
  throw TypeError(detail::str_cat("[gloo] no element type of ", bytes, " bytes"));
}

// Note [SIGPIPE]: Gloo writes to its sockets with writev, without MSG_NOSIGNAL, so a write
// to a peer that has just closed its end (it failed, or failed its context first) raises
// SIGPIPE, whose default action ends the process: a C++ program would die instead of
// getting the error. A gloo communicator therefore ignores SIGPIPE when nothing else
// handles it (Python already does; a handler the program installed is left alone), and
// the write fails with EPIPE, which Gloo reports.
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO))
      ::signal(SIGPIPE, SIG_IGN);
  });
}

std::string local_host() {
  if (const char* h = std::getenv("FLAMBEAU_GLOO_HOST"); h && *h) return h;
  const char* master = std::getenv("MASTER_ADDR");
  std::string m = master ? master : "";
  if (m.empty() || m == "127.0.0.1" || m == "localhost") return "127.0.0.1";
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

// Slot of P2P messages: a prefix Gloo's collectives do not use.
constexpr uint64_t kP2PSlot = uint64_t(0x7e) << 56;
// Reduce-scatter's ring and the direct all_reduce use their own prefixes, one tag per op.
constexpr uint64_t kRingSlot = uint64_t(0x7d) << 56;
constexpr uint64_t kDirectSlot = uint64_t(0x7c) << 56;
// all_reduce up to this size goes direct (one exchange; see all_reduce_direct).
constexpr size_t kDirectBytes = 64 << 10;
constexpr size_t kDirectBytes2 = 4 << 20;  // on two ranks

class GlooBackend : public Backend {
 public:
  GlooBackend(std::shared_ptr<distributed::Store> store, int rank, int size, std::string name,
              Millis timeout)
      : store_(std::move(store)), name_(std::move(name)), rank_(rank), size_(size),
        timeout_(timeout) {
    // A generation per (name, group of ranks joining together), so a communicator made
    // again under the same name does not meet the old one's keys.
    int64_t joined = store_->add("gloo/" + name_ + "/joined", 1);
    std::string prefix = "gloo/" + name_ + "/" + std::to_string((joined - 1) / size_);
    GlooStore gstore(store_, prefix);
    ignore_sigpipe();
    gloo::transport::tcp::attr attr;
    attr.hostname = local_host();
    device_ = gloo::transport::tcp::CreateDevice(attr);
    context_ = std::make_shared<gloo::rendezvous::Context>(rank_, size_);
    context_->setTimeout(timeout_);
    try {
      context_->connectFullMesh(gstore, device_);
    } catch (const std::exception& e) {
      throw DistNetworkError(detail::str_cat("[new_comm] gloo could not connect rank ", rank_,
                                             " of ", size_, " for communicator '", name_,
                                             "': ", e.what()));
    }
    if (gloo_pairs::supported()) watcher_ = std::thread([this] { watch(); });
  }

  ~GlooBackend() override {
    {
      std::lock_guard lock(watch_mutex_);
      watch_stop_ = true;
    }
    watch_cv_.notify_all();
    if (watcher_.joinable()) watcher_.join();
  }

  std::string version() const override { return "gloo 0.0~git20220518 (Debian)"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(const Tensor& t, RedOpType op, Millis timeout) override {
    const size_t bytes = t.numel() * t.element_size();
    // Two ranks: the direct exchange moves no more than the ring, in one step; from 4 MiB
    // the ring's adding, half as much and overlapped with the transfer, wins.
    const size_t direct = size_ == 2 ? kDirectBytes2 : kDirectBytes;
    if (size_ > 1 && bytes <= direct && size_ <= 16) return all_reduce_direct(t, op, timeout);
    if (size_ > 1 && size_ <= 16) return all_reduce_ring(t, op, timeout);
    guard([&] {
      gloo::AllreduceOptions o(context_);
      by_size(t.element_size(), [&]<class T>() { o.setOutput(static_cast<T*>(t.data_ptr()), t.numel()); });
      o.setReduceFunction(reducer(t.dtype(), op));
      // bcube has the lower latency for small messages, the ring the better bandwidth.
      o.setAlgorithm(t.numel() * t.element_size() < (256 << 10) ? gloo::AllreduceOptions::Algorithm::BCUBE
                                                               : gloo::AllreduceOptions::Algorithm::RING);
      o.setTag(next_tag());
      o.setTimeout(timeout);
      gloo::allreduce(o);
    });
  }

  // all_reduce in one exchange: every rank sends its tensor to every other one and reduces
  // all of them in rank order (the same bits on every rank). Each rank receives (size - 1)
  // tensors: for latency-bound sizes (larger ones on two ranks).
  void all_reduce_direct(const Tensor& t, RedOpType op, Millis timeout) {
    guard([&] {
      const size_t es = t.element_size(), n = t.numel(), bytes = n * es;
      Tensor mine = size_ == 2 ? t : t.clone();  // two ranks: t is sent before it is written
      Tensor others = empty({int64_t(n) * (size_ - 1)}, t.dtype());
      char* base = static_cast<char*>(others.data_ptr());
      auto send_buf = context_->createUnboundBuffer(mine.data_ptr(), bytes);
      auto recv_buf = context_->createUnboundBuffer(base, bytes * (size_ - 1));
      const uint64_t slot = kDirectSlot | next_tag();
      auto index = [&](int r) { return size_t(r < rank_ ? r : r - 1); };  // in `others`
      for (int r = 0; r < size_; ++r)
        if (r != rank_) {
          send_buf->send(r, slot);
          recv_buf->recv(r, slot, index(r) * bytes, bytes);
        }
      for (int k = 0; k < size_ - 1; ++k)
        if (!recv_buf->waitRecv(timeout)) throw aborted_error(-1);
      auto block = [&](int r) -> const void* {
        return r == rank_ ? mine.data_ptr() : base + index(r) * bytes;
      };
      auto wait_sends = [&] {
        for (int k = 0; k < size_ - 1; ++k)
          if (!send_buf->waitSend(timeout)) throw aborted_error(-1);
      };
      if (size_ == 2) {  // t is one of the two blocks: written once its send is done
        wait_sends();
        reduce_buffers(t.data_ptr(), block(0), block(1), n, t.dtype(), op);
        return;
      }
      std::memcpy(t.data_ptr(), block(0), bytes);
      for (int r = 1; r < size_; ++r) reduce_buffers(t.data_ptr(), t.data_ptr(), block(r), n, t.dtype(), op);
      wait_sends();
    });
  }

  // Large all_reduce: the ring reduce-scatter below, in place, then the direct all-gather:
  // each rank sends 2 (size - 1) / size of the tensor, as in Gloo's ring, with the adding
  // overlapped with the transfer. The few elements past the last whole block go direct.
  void all_reduce_ring(const Tensor& t, RedOpType op, Millis timeout) {
    const int64_t n = t.numel(), block = n / size_;
    Tensor flat = t.view({n});
    Tensor mine = flat.narrow(0, rank_ * block, block);
    reduce_scatter_single(mine, flat.narrow(0, 0, block * size_), op, timeout);
    all_gather_single(flat.narrow(0, 0, block * size_), mine, timeout);
    if (n % size_) all_reduce_direct(flat.narrow(0, block * size_, n % size_), op, timeout);
  }

  void all_gather_single(const Tensor& out, const Tensor& in, Millis timeout) override {
    const size_t bytes = in.numel() * in.element_size();
    if (size_ > 1 && size_ <= 16) {
      // One direct exchange: each rank sends its block to every other, as much as Gloo's
      // ring moves, in one step instead of size - 1.
      return guard([&] {
        char* o = static_cast<char*>(out.data_ptr());
        auto send_buf = context_->createUnboundBuffer(in.data_ptr(), bytes);
        auto recv_buf = context_->createUnboundBuffer(o, bytes * size_);
        const uint64_t slot = kDirectSlot | next_tag();
        for (int r = 0; r < size_; ++r)
          if (r != rank_) {
            send_buf->send(r, slot);
            recv_buf->recv(r, slot, r * bytes, bytes);
          }
        if (o + rank_ * bytes != in.data_ptr()) std::memcpy(o + rank_ * bytes, in.data_ptr(), bytes);
        for (int k = 0; k < size_ - 1; ++k)
          if (!recv_buf->waitRecv(timeout)) throw aborted_error(-1);
        for (int k = 0; k < size_ - 1; ++k)
          if (!send_buf->waitSend(timeout)) throw aborted_error(-1);
      });
    }
    guard([&] {
      gloo::AllgatherOptions o(context_);
      by_size(in.element_size(), [&]<class T>() {
        o.setInput(static_cast<T*>(in.data_ptr()), in.numel());
        o.setOutput(static_cast<T*>(out.data_ptr()), out.numel());
      });
      o.setTag(next_tag());
      o.setTimeout(timeout);
      gloo::allgather(o);
    });
  }

  // Ring reduce-scatter: in step s, rank r sends its partial sum of block (r - s - 1) to
  // r + 1 and adds its own share of block (r - s - 2), received from r - 1; after size - 1
  // steps block r is complete. Partial sums alternate between two buffers (one is being
  // sent while the next is made); blocks move in segments, so adding overlaps the transfer.
  void reduce_scatter_single(const Tensor& out, const Tensor& in, RedOpType op,
                             Millis timeout) override {
    guard([&] {
      const size_t es = in.element_size(), n = out.numel();
      char* src = static_cast<char*>(in.data_ptr());
      if (size_ == 1) {
        std::memcpy(out.data_ptr(), src, n * es);
        return;
      }
      const size_t seg = std::max<size_t>(1, std::min(n, (size_t(256) << 10) / es));
      const size_t nseg = (n + seg - 1) / seg;
      auto seg_len = [&](size_t k) { return std::min(seg, n - k * seg); };
      auto block = [&](int b) { return size_t((b % size_ + size_) % size_) * n * es; };
      Tensor acc = empty({int64_t(2 * n)}, in.dtype());
      Tensor inbox = empty({int64_t(2 * seg)}, in.dtype());
      char* accp = static_cast<char*>(acc.data_ptr());
      char* box = static_cast<char*>(inbox.data_ptr());
      auto in_ub = context_->createUnboundBuffer(src, size_t(size_) * n * es);
      std::unique_ptr<gloo::transport::UnboundBuffer> acc_ub[2] = {
          context_->createUnboundBuffer(accp, n * es), context_->createUnboundBuffer(accp + n * es, n * es)};
      auto box_ub = context_->createUnboundBuffer(box, 2 * seg * es);
      const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
      const uint64_t slot = kRingSlot | next_tag();
      auto sent_from = [&](int s) { return s == 0 ? in_ub.get() : acc_ub[s & 1].get(); };
      auto wait_sends = [&](int s) {
        for (size_t k = 0; k < nseg; ++k)
          if (!sent_from(s)->waitSend(timeout)) throw aborted_error(next);
      };
      for (int s = 0; s < size_ - 1; ++s) {
        size_t base = s == 0 ? block(rank_ - 1) : 0;
        for (size_t k = 0; k < nseg; ++k)
          sent_from(s)->send(next, slot, base + k * seg * es, seg_len(k) * es);
        char* dst = s == size_ - 2 ? static_cast<char*>(out.data_ptr()) : accp + ((s + 1) & 1) * n * es;
        if (s >= 1) wait_sends(s - 1);  // dst was sent in step s - 1
        const char* own = src + block(rank_ - s - 2);
        for (size_t k = 0; k < nseg && k < 2; ++k) box_ub->recv(prev, slot, k * seg * es, seg_len(k) * es);
        for (size_t k = 0; k < nseg; ++k) {
          if (!box_ub->waitRecv(timeout)) throw aborted_error(prev);
          char* half = box + (k & 1) * seg * es;
          reduce_buffers(dst + k * seg * es, half, own + k * seg * es, seg_len(k), in.dtype(), op);
          if (k + 2 < nseg) box_ub->recv(prev, slot, (k & 1) * seg * es, seg_len(k + 2) * es);
        }
      }
      wait_sends(size_ - 2);
    });
  }

  void all_to_all_single(const Tensor& out, const Tensor& in,
                         const std::vector<int64_t>& out_counts,
                         const std::vector<int64_t>& in_counts, Millis timeout) override {
    guard([&] {
      gloo::AlltoallvOptions o(context_);
      by_size(in.element_size(), [&]<class T>() {
        o.setInput(static_cast<T*>(in.data_ptr()), in_counts);
        o.setOutput(static_cast<T*>(out.data_ptr()), out_counts);
      });
      o.setTag(next_tag());
      o.setTimeout(timeout);
      gloo::alltoallv(o);
    });
  }

  void broadcast(const Tensor& t, int root, Millis timeout) override {
    guard([&] {
      gloo::BroadcastOptions o(context_);
      by_size(t.element_size(), [&]<class T>() { o.setOutput(static_cast<T*>(t.data_ptr()), t.numel()); });
      o.setRoot(root);
      o.setTag(next_tag());
      o.setTimeout(timeout);
      gloo::broadcast(o);
    });
  }

  void reduce(const Tensor& t, int root, RedOpType op, Millis timeout) override {
    guard([&] {
      gloo::ReduceOptions o(context_);
      by_size(t.element_size(), [&]<class T>() { o.setOutput(static_cast<T*>(t.data_ptr()), t.numel()); });
      o.setReduceFunction(reducer(t.dtype(), op));
      o.setRoot(root);
      o.setTag(next_tag());
      o.setTimeout(timeout);
      gloo::reduce(o);
    });
  }

  void gather_single(const Tensor& out, const Tensor& in, int root, Millis timeout) override {
    guard([&] {
      gloo::GatherOptions o(context_);
      by_size(in.element_size(), [&]<class T>() {
        o.setInput(static_cast<T*>(in.data_ptr()), in.numel());
        if (rank_ == root) o.setOutput(static_cast<T*>(out.data_ptr()), out.numel());
      });
      o.setRoot(root);
      o.setTag(next_tag());
      o.setTimeout(timeout);
      gloo::gather(o);
    });
  }

  void scatter_single(const Tensor& out, const Tensor& in, int root, Millis timeout) override {
    guard([&] {
      gloo::ScatterOptions o(context_);
      by_size(out.element_size(), [&]<class T>() {
        if (rank_ == root) {
          std::vector<T*> ptrs;
          for (int r = 0; r < size_; ++r) ptrs.push_back(static_cast<T*>(in.data_ptr()) + r * out.numel());
          o.setInputs(ptrs, out.numel());
        }
        o.setOutput(static_cast<T*>(out.data_ptr()), out.numel());
      });
      o.setRoot(root);
      o.setTag(next_tag());
      o.setTimeout(timeout);
      gloo::scatter(o);
    });
  }

  void batch_p2p(std::span<const P2POp> ops, Millis timeout) override {
    guard([&] {
      std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> bufs;
      for (const P2POp& p : ops) {
        size_t bytes = p.tensor.numel() * p.tensor.element_size();
        bufs.push_back(context_->createUnboundBuffer(p.tensor.data_ptr(), bytes));
        if (p.kind == P2POp::Send) bufs.back()->send(p.peer, kP2PSlot);
        else bufs.back()->recv(p.peer, kP2PSlot);
      }
      for (size_t i = 0; i < ops.size(); ++i) {
        bool ok = ops[i].kind == P2POp::Send ? bufs[i]->waitSend(timeout) : bufs[i]->waitRecv(timeout);
        if (!ok) throw aborted_error(ops[i].peer);
      }
    });
  }

  bool exchange(const void* message, size_t bytes, void* inbox, size_t slot_bytes,
                Millis timeout) override {
    guard([&] {
      // A receive may be posted longer than the message that fills it (Gloo checks <=).
      auto send_buf = context_->createUnboundBuffer(const_cast<void*>(message), bytes);
      auto recv_buf = context_->createUnboundBuffer(inbox, slot_bytes * size_);
      const uint64_t slot = kDirectSlot | next_tag();
      for (int r = 0; r < size_; ++r)
        if (r != rank_) {
          send_buf->send(r, slot);
          recv_buf->recv(r, slot, r * slot_bytes, slot_bytes);
        }
      for (int k = 0; k < size_ - 1; ++k)
        if (!recv_buf->waitRecv(timeout)) throw aborted_error(-1);
      for (int k = 0; k < size_ - 1; ++k)
        if (!send_buf->waitSend(timeout)) throw aborted_error(-1);
    });
    return true;
  }

  void barrier(Millis timeout) override {
    guard([&] {
      gloo::BarrierOptions o(context_);
      o.setTag(next_tag());
      o.setTimeout(timeout);
      gloo::barrier(o);
    });
  }

  void abort() override {
    if (aborted_.exchange(true)) return;
    gloo_pairs::fail_context(*context_, "the communicator was aborted");  // wakes a running op
    for (int r = 0; r < size_; ++r)
      if (r != rank_) {
        try {
          context_->getPair(r)->close();
        } catch (...) {
        }
      }
  }

  std::unique_ptr<Backend> split(const std::vector<int>& ranks, const std::string& name) override {
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    if (it == ranks.end()) return nullptr;
    return std::make_unique<GlooBackend>(store_, int(it - ranks.begin()), int(ranks.size()), name,
                                         timeout_);
  }

  bool supports_reconfigure() const override { return true; }

  std::unique_ptr<Backend> remake(int new_rank, int new_size, const std::string& key,
                                  Millis timeout) override {
    return std::make_unique<GlooBackend>(store_, new_rank, new_size, key, timeout);
  }

 private:
  uint32_t next_tag() { return tag_++ & 0xffffff; }
  static DistBackendError aborted_error(int peer) {
    return DistBackendError("the gloo context was aborted", CommErrorKind::Aborted, "", -1, peer);
  }

  gloo::AllreduceOptions::Func reducer(DType dtype, RedOpType op) {
    return [dtype, op](void* out, const void* a, const void* b, size_t n) {
      reduce_buffers(out, a, b, n, dtype, op);
    };
  }

  // Runs a Gloo call, turning its exceptions into DistBackendError; the watcher looks after
  // the pairs meanwhile.
  template <class F>
  void guard(F&& f) {
    if (aborted_)
      throw DistBackendError("the gloo context was aborted", CommErrorKind::Aborted, "", -1, -1);
    OpInFlight in_flight(*this);
    try {
      f();
    } catch (const DistBackendError&) {
      throw;
    } catch (const gloo::IoException& e) {
      std::string what = e.what();
      bool timed_out = what.find("imed out") != std::string::npos;
      int peer = failed_peer_.load();
      throw DistBackendError("gloo: " + what +
                                 (peer >= 0 ? detail::str_cat(" (rank ", peer, " failed)") : ""),
                             aborted_    ? CommErrorKind::Aborted
                             : timed_out ? CommErrorKind::Timeout  // a timeout also fails its pair
                                         : CommErrorKind::PeerFailed,
                             "", -1, peer);
    } catch (const gloo::Exception& e) {
      throw DistBackendError(std::string("gloo: ") + e.what(),
                             aborted_ ? CommErrorKind::Aborted : CommErrorKind::Backend, "", -1, -1);
    }
  }

  // Marks an op running, so the watcher polls the pairs.
  struct OpInFlight {
    explicit OpInFlight(GlooBackend& b) : b(b) {
      {
        std::lock_guard lock(b.watch_mutex_);
        ++b.ops_in_flight_;
      }
      b.watch_cv_.notify_all();
    }
    ~OpInFlight() {
      std::lock_guard lock(b.watch_mutex_);
      --b.ops_in_flight_;
    }
    GlooBackend& b;
  };

  // While an op runs, polls the pairs; on the first failed one fails the whole context, so
  // the op raises now instead of at its timeout (Note [Gloo waits a failed connection does
  // not wake]).
  void watch() {
    std::unique_lock lock(watch_mutex_);
    while (!watch_stop_) {
      watch_cv_.wait(lock, [&] { return watch_stop_ || ops_in_flight_ > 0; });
      while (!watch_stop_ && ops_in_flight_ > 0 && failed_peer_ < 0) {
        lock.unlock();
        int peer = gloo_pairs::failed_peer(*context_);
        if (peer >= 0) {
          failed_peer_ = peer;
          gloo_pairs::fail_context(*context_, detail::str_cat("rank ", peer, " failed"));
        }
        lock.lock();
        watch_cv_.wait_for(lock, kWatchPoll, [&] { return watch_stop_; });
      }
      if (failed_peer_ >= 0) watch_cv_.wait(lock, [&] { return watch_stop_; });
    }
  }

  std::shared_ptr<distributed::Store> store_;
  std::string name_;
  int rank_, size_;
  Millis timeout_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::atomic<bool> aborted_{false};
  uint32_t tag_ = 1;
  // The watcher: ops running, the first failed peer it saw, its thread.
  static constexpr Millis kWatchPoll{5};
  std::mutex watch_mutex_;
  std::condition_variable watch_cv_;
  int ops_in_flight_ = 0;
  bool watch_stop_ = false;
  std::atomic<int> failed_peer_{-1};
  std::thread watcher_;
};

}  // namespace

std::unique_ptr<Backend> make_gloo_backend(const BackendInit& init) {
  return std::make_unique<GlooBackend>(init.store, init.rank, init.size, init.name, init.timeout);
}

}  // namespace flambeau::distributed
