// The Open MPI engine (libopenmpi-dev; run under mpirun). Rank and size come from MPI.
// Each backend owns an MPI communicator (a dup of MPI_COMM_WORLD, or a split of its
// parent's) and runs every op in MPI's non-blocking form, polling MPI_Testsome until the op
// completes, its timeout passes or abort() is called (Note [MPI polling]). MPI cannot
// cancel a collective, so a timeout or abort leaves the requests pending: the backend is
// dead from then on (every later call throws Aborted) and keeps the buffers of the pending
// requests alive for the rest of the process, so that a late peer cannot write into freed
// memory.
//
// Datatypes and reductions (Note [MPI datatypes]): native MPI types and ops where they have
// PyTorch's semantics; bfloat16 and float16 travel as a 2-byte contiguous type and reduce
// with user-defined ops over reduce_buffers, as do MIN and MAX on every floating type
// (torch.minimum/maximum propagate NaN; MPI_MIN/MPI_MAX need not).
//
// Large counts (Note [MPI counts]): MPI counts are int. Elementwise ops (all_reduce,
// broadcast, reduce, P2P) run as several requests of at most INT_MAX elements; the block
// collectives fall back to one collective per rank (reduce-scatter: a chunked reduce per
// rank; all-gather: a chunked broadcast per rank) or to point-to-point messages (gather,
// scatter, all-to-all) when a block or a displacement does not fit.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "flambeau/distributed/engines.h"
#include "flambeau/distributed/mpi/mpi_process.h"
#include "flambeau/ops/ops.h"

namespace flambeau::distributed {

bool mpi_available() { return true; }

namespace {

using namespace mpi_detail;
using Clock = std::chrono::steady_clock;

// More ranks on this node than cores (Open MPI tells the local size).
bool oversubscribed() {
  static const bool over = [] {
    const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsigned cores = std::thread::hardware_concurrency();
    return v && cores && unsigned(std::atoi(v)) > cores;
  }();
  return over;
}

// P2P messages of the user (send, recv, batch_p2p) use tag 0; the point-to-point fallbacks
// of the collectives (Note [MPI counts]) use their own tag, so that the two never match.
constexpr int kUserTag = 0;
constexpr int kFallbackTag = 1;
constexpr int kExchangeTag = 2;  // the cross-rank check

DistBackendError backend_error(const std::string& what, CommErrorKind kind = CommErrorKind::Backend,
                               int peer = -1) {
  return DistBackendError("Open MPI: " + what, kind, "", -1, peer);
}

// ---- The requests of one op.

// The requests an op posted and everything they read or write. When the op cannot finish
// (timeout, abort, error) the whole Pending is kept alive to the end of the process: MPI
// may still write into those buffers.
struct Pending {
  std::vector<MPI_Request> reqs;
  // Per request: the peer of a point-to-point message (-1 for collectives) and, for a
  // receive, the element count it must deliver (-1 otherwise).
  std::vector<int> peer;
  std::vector<int64_t> expect;
  std::vector<MPI_Datatype> type;  // of each receive (for its count)
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<void>> keep;  // count and displacement arrays
};

std::mutex graveyard_mutex;
std::vector<std::unique_ptr<Pending>>& graveyard() {
  static auto* g = new std::vector<std::unique_ptr<Pending>>;  // never destroyed
  return *g;
}

// Splits n elements into pieces of at most max (at least one piece, of 0 elements when n is
// 0, so that both sides of a message always post it).
template <class F>
void for_chunks(int64_t n, int64_t max, F&& f) {
  int64_t at = 0;
  do {
    int64_t c = std::min(n - at, max);
    f(at, int(c));
    at += c;
  } while (at < n);
}

char* bytes_of(const Tensor& t) { return static_cast<char*>(t.data_ptr()); }

class MpiBackend : public Backend {
 public:
  MpiBackend(MPI_Comm comm, std::string name, Millis timeout, int64_t max_count)
      : comm_(comm), name_(std::move(name)), timeout_(timeout), max_count_(max_count),
        proc_(mpi_process()) {
    CallLock lock(proc_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_name(comm_, name_.c_str());
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }

  ~MpiBackend() override {
    // A dead communicator has requests MPI cannot cancel: it stays allocated with them.
    if (dead_) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    CallLock lock(proc_);
    MPI_Comm_free(&comm_);
  }

  std::string version() const override {
    static const std::string v = library_version();
    return v;
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void all_reduce(const Tensor& t, RedOpType op, Millis timeout) override {
    enter("all_reduce");
    Pending p;
    p.tensors = {t};
    MPI_Datatype dt = mpi_type(t.dtype());
    const int64_t n = t.numel();
    if (size_ == 2) {
      // Note [MPI all_reduce]: with two ranks, one exchange of the whole tensor and a local
      // reduction (in rank order, so both get the same bits) moves as much as any algorithm
      // and is 1.3-2x faster than Open MPI's non-blocking all_reduce from 1 MiB (its
      // reduce-scatter + all-gather is 3x slower still).
      const int peer = 1 - rank_;
      Tensor theirs = empty({n}, t.dtype());
      p.tensors.push_back(theirs);
      post_recv(p, bytes_of(theirs), n, dt, peer, kFallbackTag);
      post_send(p, bytes_of(t), n, dt, peer, kFallbackTag);
      wait(p, "all_reduce", timeout);
      const void* first = rank_ == 0 ? t.data_ptr() : theirs.data_ptr();
      const void* second = rank_ == 0 ? theirs.data_ptr() : t.data_ptr();
      reduce_buffers(t.data_ptr(), first, second, size_t(n), t.dtype(), op);
      return;
    }
    MPI_Op mop = mpi_op(t.dtype(), op);
    const size_t es = t.element_size();
    for_chunks(n, max_count_, [&](int64_t at, int c) {
      post(p, "MPI_Iallreduce", -1, [&](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, bytes_of(t) + at * es, c, dt, mop, comm_, r);
      });
    });
    wait(p, "all_reduce", timeout);
  }

  void all_gather_single(const Tensor& out, const Tensor& in, Millis timeout) override {
    enter("all_gather");
    Pending p;
    p.tensors = {out, in};
    MPI_Datatype dt = mpi_type(in.dtype());
    const int64_t n = in.numel();
    const size_t es = in.element_size();
    if (n <= max_count_) {
      post(p, "MPI_Iallgather", -1, [&](MPI_Request* r) {
        return MPI_Iallgather(in.data_ptr(), int(n), dt, out.data_ptr(), int(n), dt, comm_, r);
      });
    } else {
      // Note [MPI counts]: a chunked broadcast of each rank's block.
      std::memcpy(bytes_of(out) + rank_ * n * es, in.data_ptr(), n * es);
      for (int root = 0; root < size_; ++root)
        for_chunks(n, max_count_, [&](int64_t at, int c) {
          post(p, "MPI_Ibcast", -1, [&](MPI_Request* r) {
            return MPI_Ibcast(bytes_of(out) + (root * n + at) * es, c, dt, root, comm_, r);
          });
        });
    }
    wait(p, "all_gather", timeout);
  }

  void reduce_scatter_single(const Tensor& out, const Tensor& in, RedOpType op,
                             Millis timeout) override {
    enter("reduce_scatter");
    Pending p;
    p.tensors = {out, in};
    MPI_Datatype dt = mpi_type(in.dtype());
    MPI_Op mop = mpi_op(in.dtype(), op);
    const int64_t n = out.numel();
    const size_t es = in.element_size();
    if (n <= max_count_) {
      post(p, "MPI_Ireduce_scatter_block", -1, [&](MPI_Request* r) {
        return MPI_Ireduce_scatter_block(in.data_ptr(), out.data_ptr(), int(n), dt, mop, comm_, r);
      });
    } else {
      // Note [MPI counts]: a chunked reduce of block r to rank r.
      for (int root = 0; root < size_; ++root)
        for_chunks(n, max_count_, [&](int64_t at, int c) {
          void* recv = root == rank_ ? bytes_of(out) + at * es : nullptr;
          post(p, "MPI_Ireduce", -1, [&](MPI_Request* r) {
            return MPI_Ireduce(bytes_of(in) + (root * n + at) * es, recv, c, dt, mop, root, comm_, r);
          });
        });
    }
    wait(p, "reduce_scatter", timeout);
  }

  void all_to_all_single(const Tensor& out, const Tensor& in,
                         const std::vector<int64_t>& out_counts,
                         const std::vector<int64_t>& in_counts, Millis timeout) override {
    enter("all_to_all");
    Pending p;
    p.tensors = {out, in};
    MPI_Datatype dt = mpi_type(in.dtype());
    const size_t es = in.element_size();
    std::vector<int64_t> out_displs(size_), in_displs(size_);
    bool fits = true;
    int64_t oat = 0, iat = 0;
    for (int r = 0; r < size_; ++r) {
      out_displs[r] = oat;
      in_displs[r] = iat;
      fits = fits && out_counts[r] <= max_count_ && in_counts[r] <= max_count_ &&
             oat <= max_count_ && iat <= max_count_;
      oat += out_counts[r];
      iat += in_counts[r];
    }
    if (fits) {
      auto ints = [](const std::vector<int64_t>& v) {
        return std::make_shared<std::vector<int>>(v.begin(), v.end());
      };
      auto sc = ints(in_counts), sd = ints(in_displs), rc = ints(out_counts), rd = ints(out_displs);
      p.keep = {sc, sd, rc, rd};
      post(p, "MPI_Ialltoallv", -1, [&](MPI_Request* r) {
        return MPI_Ialltoallv(in.data_ptr(), sc->data(), sd->data(), dt, out.data_ptr(), rc->data(),
                              rd->data(), dt, comm_, r);
      });
    } else {
      // Note [MPI counts]: point-to-point messages, chunked.
      if (in_counts[rank_] != out_counts[rank_])
        throw backend_error(detail::str_cat("all_to_all: rank ", rank_, " sends itself ",
                                            in_counts[rank_], " elements but expects ",
                                            out_counts[rank_]));
      std::memcpy(bytes_of(out) + out_displs[rank_] * es, bytes_of(in) + in_displs[rank_] * es,
                  size_t(in_counts[rank_]) * es);
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        post_recv(p, bytes_of(out) + out_displs[r] * es, out_counts[r], dt, r, kFallbackTag);
        post_send(p, bytes_of(in) + in_displs[r] * es, in_counts[r], dt, r, kFallbackTag);
      }
    }
    wait(p, "all_to_all", timeout);
  }

  void broadcast(const Tensor& t, int root, Millis timeout) override {
    enter("broadcast");
    Pending p;
    p.tensors = {t};
    MPI_Datatype dt = mpi_type(t.dtype());
    const size_t es = t.element_size();
    for_chunks(t.numel(), max_count_, [&](int64_t at, int c) {
      post(p, "MPI_Ibcast", -1, [&](MPI_Request* r) {
        return MPI_Ibcast(bytes_of(t) + at * es, c, dt, root, comm_, r);
      });
    });
    wait(p, "broadcast", timeout);
  }

  void reduce(const Tensor& t, int root, RedOpType op, Millis timeout) override {
    enter("reduce");
    Pending p;
    p.tensors = {t};
    MPI_Datatype dt = mpi_type(t.dtype());
    MPI_Op mop = mpi_op(t.dtype(), op);
    const size_t es = t.element_size();
    const bool is_root = rank_ == root;
    for_chunks(t.numel(), max_count_, [&](int64_t at, int c) {
      char* buf = bytes_of(t) + at * es;
      post(p, "MPI_Ireduce", -1, [&](MPI_Request* r) {
        return MPI_Ireduce(is_root ? MPI_IN_PLACE : buf, is_root ? buf : nullptr, c, dt, mop, root,
                           comm_, r);
      });
    });
    wait(p, "reduce", timeout);
  }

  void gather_single(const Tensor& out, const Tensor& in, int root, Millis timeout) override {
    enter("gather");
    Pending p;
    p.tensors = {in};
    if (rank_ == root) p.tensors.push_back(out);
    MPI_Datatype dt = mpi_type(in.dtype());
    const int64_t n = in.numel();
    const size_t es = in.element_size();
    if (n <= max_count_) {
      void* recv = rank_ == root ? out.data_ptr() : nullptr;
      post(p, "MPI_Igather", -1, [&](MPI_Request* r) {
        return MPI_Igather(in.data_ptr(), int(n), dt, recv, int(n), dt, root, comm_, r);
      });
    } else if (rank_ == root) {
      std::memcpy(bytes_of(out) + root * n * es, in.data_ptr(), n * es);
      for (int r = 0; r < size_; ++r)
        if (r != root) post_recv(p, bytes_of(out) + r * n * es, n, dt, r, kFallbackTag);
    } else {
      post_send(p, bytes_of(in), n, dt, root, kFallbackTag);
    }
    wait(p, "gather", timeout);
  }

  void scatter_single(const Tensor& out, const Tensor& in, int root, Millis timeout) override {
    enter("scatter");
    Pending p;
    p.tensors = {out};
    if (rank_ == root) p.tensors.push_back(in);
    MPI_Datatype dt = mpi_type(out.dtype());
    const int64_t n = out.numel();
    const size_t es = out.element_size();
    if (n <= max_count_) {
      void* send = rank_ == root ? in.data_ptr() : nullptr;
      post(p, "MPI_Iscatter", -1, [&](MPI_Request* r) {
        return MPI_Iscatter(send, int(n), dt, out.data_ptr(), int(n), dt, root, comm_, r);
      });
    } else if (rank_ == root) {
      std::memcpy(out.data_ptr(), bytes_of(in) + root * n * es, n * es);
      for (int r = 0; r < size_; ++r)
        if (r != root) post_send(p, bytes_of(in) + r * n * es, n, dt, r, kFallbackTag);
    } else {
      post_recv(p, bytes_of(out), n, dt, root, kFallbackTag);
    }
    wait(p, "scatter", timeout);
  }

  void batch_p2p(std::span<const P2POp> ops, Millis timeout) override {
    const char* name = ops.size() == 1 ? (ops[0].kind == P2POp::Send ? "send" : "recv") : "batch_p2p";
    enter(name);
    Pending p;
    for (const P2POp& op : ops) {
      p.tensors.push_back(op.tensor);
      MPI_Datatype dt = mpi_type(op.tensor.dtype());
      const size_t es = op.tensor.element_size();
      char* base = bytes_of(op.tensor);
      for_chunks(op.tensor.numel(), max_count_, [&](int64_t at, int c) {
        if (op.kind == P2POp::Send) {
          post(p, "MPI_Isend", op.peer, [&](MPI_Request* r) {
            return MPI_Isend(base + at * es, c, dt, op.peer, kUserTag, comm_, r);
          });
        } else {
          post(p, "MPI_Irecv", op.peer, [&](MPI_Request* r) {
            return MPI_Irecv(base + at * es, c, dt, op.peer, kUserTag, comm_, r);
          });
          p.expect.back() = c;
          p.type.back() = dt;
        }
      });
    }
    wait(p, name, timeout);
  }

  // The cross-rank check's exchange: a receive may be longer than the message that fills
  // it. The buffers MPI touches belong to the Pending (they outlive a timed-out request).
  bool exchange(const void* message, size_t bytes, void* inbox, size_t slot_bytes,
                Millis timeout) override {
    enter("exchange");
    if (size_ == 1) return true;
    FLB_CHECK(slot_bytes <= size_t(INT_MAX), ValueError, "[mpi] exchange slots of ", slot_bytes, " bytes");
    Pending p;
    Tensor msg = empty({int64_t(bytes)}, kUInt8), box = empty({int64_t(slot_bytes) * size_}, kUInt8);
    p.tensors = {msg, box};
    std::memcpy(msg.data_ptr(), message, bytes);
    char* b = bytes_of(box);
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      post(p, "MPI_Irecv", r, [&](MPI_Request* q) {
        return MPI_Irecv(b + r * slot_bytes, int(slot_bytes), MPI_BYTE, r, kExchangeTag, comm_, q);
      });
      post(p, "MPI_Isend", r, [&](MPI_Request* q) {
        return MPI_Isend(msg.data_ptr(), int(bytes), MPI_BYTE, r, kExchangeTag, comm_, q);
      });
    }
    wait(p, "check", timeout);
    // A peer whose call matched sent as many bytes as this rank; one that did not differs in
    // its header, which is all that is read of it.
    for (int r = 0; r < size_; ++r)
      if (r != rank_) std::memcpy(static_cast<char*>(inbox) + r * slot_bytes, b + r * slot_bytes, bytes);
    return true;
  }

  void barrier(Millis timeout) override {
    enter("barrier");
    Pending p;
    post(p, "MPI_Ibarrier", -1, [&](MPI_Request* r) { return MPI_Ibarrier(comm_, r); });
    wait(p, "barrier", timeout);
  }

  void abort() override { aborted_.store(true); }

  std::unique_ptr<Backend> split(const std::vector<int>& ranks, const std::string& name) override {
    enter("split");
    // Every rank all-gathers (listed?, its index, the list's length, a hash of the list), so
    // that all of them see the same picture and agree on whether the lists are consistent
    // before the blocking MPI_Comm_split (which has no timeout).
    auto it = std::find(ranks.begin(), ranks.end(), rank_);
    const bool member = it != ranks.end();
    uint64_t hash = 1469598103934665603ull;
    for (int r : ranks) hash = (hash ^ uint64_t(r)) * 1099511628211ull;
    auto mine = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{
        member, member ? int64_t(it - ranks.begin()) : -1, member ? int64_t(ranks.size()) : 0,
        member ? int64_t(hash >> 1) : 0});
    auto all = std::make_shared<std::vector<int64_t>>(size_t(size_) * 4);
    Pending p;
    p.keep = {mine, all};
    post(p, "MPI_Iallgather", -1, [&](MPI_Request* r) {
      return MPI_Iallgather(mine->data(), 4, MPI_INT64_T, all->data(), 4, MPI_INT64_T, comm_, r);
    });
    wait(p, "split", timeout_);
    const int64_t* a = all->data();
    int64_t members = 0, length = -1, h = 0;
    bool same = true;
    std::vector<bool> seen;
    for (int r = 0; r < size_; ++r) {
      const int64_t* f = a + 4 * r;
      if (!f[0]) continue;
      if (members++ == 0) {
        length = f[2];
        h = f[3];
        seen.assign(size_t(std::max<int64_t>(length, 0)), false);
      }
      same = same && f[2] == length && f[3] == h && f[1] >= 0 && f[1] < length && !seen[f[1]];
      if (same) seen[f[1]] = true;
    }
    same = same && (members == 0 || members == length);
    if (!same) {
      std::string views;
      for (int r = 0; r < size_; ++r) {
        const int64_t* f = a + 4 * r;
        views += detail::str_cat(r ? "; " : "", "rank ", r, ": ",
                                 f[0] ? detail::str_cat("index ", f[1], " of ", f[2], " ranks")
                                      : std::string("not listed"));
      }
      throw backend_error("split: the ranks passed different lists of ranks (" + views + ")",
                          CommErrorKind::Mismatch);
    }
    MPI_Comm child = MPI_COMM_NULL;
    {
      CallLock lock(proc_);
      int rc = MPI_Comm_split(comm_, member ? 0 : MPI_UNDEFINED,
                              member ? int(it - ranks.begin()) : 0, &child);
      if (rc != MPI_SUCCESS) throw backend_error("MPI_Comm_split failed: " + mpi_error_text(rc));
    }
    if (child == MPI_COMM_NULL) return nullptr;
    return std::make_unique<MpiBackend>(child, name, timeout_, max_count_);
  }

  bool interruptible() const override { return true; }
  bool supports_reconfigure() const override { return false; }

 private:
  // Every op first: a dead or aborted communicator fails at once.
  void enter(const char* op) {
    if (aborted_.load() && !dead_) {
      dead_ = true;
      why_dead_ = "abort() was called";
    }
    if (dead_)
      throw backend_error(detail::str_cat(op, ": communicator '", name_, "' is unusable (",
                                          why_dead_, "; MPI cannot cancel a collective)"),
                          CommErrorKind::Aborted);
  }

  // Marks the communicator dead and keeps p's requests and buffers for good.
  void die(Pending& p, std::string why) {
    if (!dead_) {
      dead_ = true;
      why_dead_ = std::move(why);
    }
    bool pending = false;
    for (MPI_Request r : p.reqs) pending = pending || r != MPI_REQUEST_NULL;
    if (!pending) return;
    std::lock_guard lock(graveyard_mutex);
    graveyard().push_back(std::make_unique<Pending>(std::move(p)));
  }

  // Posts one request; when MPI refuses, the requests already posted die with the op.
  template <class F>
  void post(Pending& p, const char* call, int peer, F&& f) {
    MPI_Request req = MPI_REQUEST_NULL;
    int rc;
    {
      CallLock lock(proc_);
      rc = f(&req);
    }
    if (rc != MPI_SUCCESS) {
      std::string what = detail::str_cat(call, " failed: ", mpi_error_text(rc));
      if (!p.reqs.empty()) die(p, what);
      throw backend_error(what, CommErrorKind::Backend, peer);
    }
    p.reqs.push_back(req);
    p.peer.push_back(peer);
    p.expect.push_back(-1);
    p.type.push_back(MPI_DATATYPE_NULL);
  }

  // A chunked receive (or send) of n elements of dt; each receive is checked for its size.
  void post_recv(Pending& p, char* buf, int64_t n, MPI_Datatype dt, int peer, int tag) {
    int es = 0;
    MPI_Type_size(dt, &es);
    for_chunks(n, max_count_, [&](int64_t at, int c) {
      post(p, "MPI_Irecv", peer, [&](MPI_Request* r) {
        return MPI_Irecv(buf + at * es, c, dt, peer, tag, comm_, r);
      });
      p.expect.back() = c;
      p.type.back() = dt;
    });
  }
  void post_send(Pending& p, char* buf, int64_t n, MPI_Datatype dt, int peer, int tag) {
    int es = 0;
    MPI_Type_size(dt, &es);
    for_chunks(n, max_count_, [&](int64_t at, int c) {
      post(p, "MPI_Isend", peer, [&](MPI_Request* r) {
        return MPI_Isend(buf + at * es, c, dt, peer, tag, comm_, r);
      });
    });
  }

  // Note [MPI polling]: MPI_Testsome until every request completed, the timeout passed or
  // abort() was called. MPI progresses only inside its calls, so it spins as MPI's blocking
  // calls do (yielding after 10 us): a 20 us sleep per test made a 16 MiB all_reduce 6x
  // slower. With more local ranks than cores (mpirun --oversubscribe) spinning ranks starve
  // each other, so there it sleeps 20 us between tests after the first 200 us.
  void wait(Pending& p, const char* op, Millis timeout) {
    const int n = int(p.reqs.size());
    std::vector<int> done(size_t(std::max(n, 1)));
    std::vector<MPI_Status> status(size_t(std::max(n, 1)));
    const auto t0 = Clock::now();
    const auto deadline = t0 + timeout;
    int left = n;
    while (left > 0) {
      int outcount = 0, rc;
      {
        CallLock lock(proc_);
        rc = MPI_Testsome(n, p.reqs.data(), &outcount, done.data(), status.data());
      }
      if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        std::string what = detail::str_cat(op, ": MPI_Testsome failed: ", mpi_error_text(rc));
        die(p, what);
        throw backend_error(what);
      }
      if (outcount == MPI_UNDEFINED) break;
      for (int k = 0; k < outcount; ++k) {
        const int i = done[k], peer = p.peer[i];
        const MPI_Status& st = status[k];
        if (rc == MPI_ERR_IN_STATUS && st.MPI_ERROR != MPI_SUCCESS) {
          std::string what = detail::str_cat(op, ": ", mpi_error_text(st.MPI_ERROR),
                                             peer >= 0 ? detail::str_cat(" (peer ", peer, ")") : "");
          die(p, what);  // moves p away
          throw backend_error(what, CommErrorKind::Backend, peer);
        }
        if (p.expect[i] >= 0) {
          int count = 0;
          MPI_Get_count(&st, p.type[i], &count);
          if (count != p.expect[i]) {
            // The message matched and completed; the other requests may still be pending.
            std::string what = detail::str_cat(
                op, ": rank ", peer, " sent a message of ", count, " elements where ",
                p.expect[i], " were expected (the two ranks passed tensors of different sizes)");
            die(p, what);  // moves p away
            throw backend_error(what, CommErrorKind::Backend, peer);
          }
        }
      }
      left -= outcount;
      if (left <= 0) break;
      if (aborted_.load()) {
        const int peer = pending_peer(p);
        die(p, "abort() was called");
        throw backend_error(detail::str_cat(op, " was aborted"), CommErrorKind::Aborted, peer);
      }
      const auto now = Clock::now();
      if (now >= deadline) {
        const int peer = pending_peer(p);
        std::string what = detail::str_cat(op, " timed out after ", timeout.count(), " ms",
                                           peer >= 0 ? detail::str_cat(" waiting for rank ", peer) : "");
        die(p, what);
        throw backend_error(what + " (the communicator is now unusable: MPI cannot cancel it)",
                            CommErrorKind::Timeout, peer);
      }
      const auto waited = now - t0;
      if (waited < std::chrono::microseconds(10)) continue;
      if (!oversubscribed() || waited < std::chrono::microseconds(200)) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  // The peer of the first point-to-point request still pending (-1 when none or unknown).
  static int pending_peer(const Pending& p) {
    for (size_t i = 0; i < p.reqs.size(); ++i)
      if (p.reqs[i] != MPI_REQUEST_NULL && p.peer[i] >= 0) return p.peer[i];
    return -1;
  }

  MPI_Comm comm_;
  std::string name_;
  Millis timeout_;
  int64_t max_count_;
  MpiProcess& proc_;
  int rank_ = 0, size_ = 1;
  std::atomic<bool> aborted_{false};
  bool dead_ = false;  // touched by the communicator's thread only
  std::string why_dead_;
};

// Note [MPI counts]: FLAMBEAU_MPI_MAX_COUNT lowers the largest count of one MPI call (a
// testing knob: it runs the chunked paths on small tensors). Read when a communicator is
// made; its splits inherit it.
int64_t max_count_from_env() {
  const char* v = std::getenv("FLAMBEAU_MPI_MAX_COUNT");
  if (!v || !*v) return INT_MAX;
  long long n = std::atoll(v);
  return n >= 1 && n <= INT_MAX ? int64_t(n) : INT_MAX;
}

}  // namespace

std::unique_ptr<Backend> make_mpi_backend(const BackendInit& init) {
  MpiProcess& proc = mpi_process();
  int rank = 0, size = 1;
  {
    CallLock lock(proc);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
  }
  if (init.rank >= 0 && init.rank != rank)
    throw ValueError(detail::str_cat("[new_comm] backend 'mpi': rank ", init.rank,
                                     " was given but MPI says this process is rank ", rank));
  if (init.size >= 0 && init.size != size)
    throw ValueError(detail::str_cat("[new_comm] backend 'mpi': size ", init.size,
                                     " was given but MPI's world has ", size, " processes"));
  // MPI_Comm_idup, polled, so that a rank that never calls new_comm makes a timeout rather
  // than a hang.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc;
  {
    CallLock lock(proc);
    rc = MPI_Comm_idup(MPI_COMM_WORLD, &comm, &req);
  }
  if (rc != MPI_SUCCESS)
    throw DistError("[new_comm] backend 'mpi': MPI_Comm_idup failed: " + mpi_error_text(rc));
  const auto t0 = Clock::now();
  for (;;) {
    int flag = 0;
    {
      CallLock lock(proc);
      rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS)
      throw DistError("[new_comm] backend 'mpi': MPI_Comm_idup failed: " + mpi_error_text(rc));
    if (flag) break;
    const auto waited = Clock::now() - t0;
    if (init.timeout.count() > 0 && waited >= init.timeout)
      throw DistBackendError(
          detail::str_cat("[new_comm] backend 'mpi': communicator '", init.name, "': rank ", rank,
                          " waited ", init.timeout.count(),
                          " ms for every rank of MPI_COMM_WORLD to make it (MPI_Comm_idup)"),
          CommErrorKind::Timeout, "new_comm", -1, -1);
    if (waited < std::chrono::microseconds(200)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return std::make_unique<MpiBackend>(comm, init.name, init.timeout, max_count_from_env());
}

}  // namespace flambeau::distributed
