// The backend interface: what an engine (Gloo, MPI, later NCCL) implements. The
// communicator validates arguments, orders work on its own thread, keeps sequence numbers,
// hooks and the flight recorder; a backend only moves bytes. Its calls run on that one
// thread, get contiguous tensors of matching dtype and valid sizes, and must return or
// throw within `timeout`. abort() may be called from any thread and must make the call in
// progress fail soon.
#pragma once
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "flambeau/distributed/types.h"

namespace flambeau::distributed {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string version() const = 0;  // "gloo 2022.05", "Open MPI 4.1.4"
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place on t. op: SUM, PRODUCT, MIN, MAX, BAND, BOR or BXOR.
  virtual void all_reduce(const Tensor& t, RedOpType op, Millis timeout) = 0;
  // out holds size() blocks of in.numel() elements, rank order.
  virtual void all_gather_single(const Tensor& out, const Tensor& in, Millis timeout) = 0;
  // in holds size() blocks of out.numel() elements; out gets the reduction of block rank().
  virtual void reduce_scatter_single(const Tensor& out, const Tensor& in, RedOpType op,
                                     Millis timeout) = 0;
  // in_counts[r] elements go to rank r, out_counts[r] come from it (in rank order).
  virtual void all_to_all_single(const Tensor& out, const Tensor& in,
                                 const std::vector<int64_t>& out_counts,
                                 const std::vector<int64_t>& in_counts, Millis timeout) = 0;
  virtual void broadcast(const Tensor& t, int root, Millis timeout) = 0;
  // The reduction lands in t on root; other ranks' t is left as the engine leaves it.
  virtual void reduce(const Tensor& t, int root, RedOpType op, Millis timeout) = 0;
  // On root, out holds size() blocks of in.numel(); elsewhere out is undefined.
  virtual void gather_single(const Tensor& out, const Tensor& in, int root, Millis timeout) = 0;
  // On root, in holds size() blocks of out.numel(); elsewhere in is undefined.
  virtual void scatter_single(const Tensor& out, const Tensor& in, int root,
                              Millis timeout) = 0;
  // All sends and recvs of the batch are posted, then all complete (or the call throws).
  virtual void batch_p2p(std::span<const P2POp> ops, Millis timeout) = 0;
  virtual void barrier(Millis timeout) = 0;

  // Sends `bytes` of `message` to every other rank and receives theirs, each at most
  // `slot_bytes` long, into inbox slot r (rank r's; this rank's own slot is left alone).
  // Messages may differ in length across ranks (the cross-rank check uses it, carrying the
  // data of a small op along). Returns false when the engine has no such exchange.
  virtual bool exchange(const void* message, size_t bytes, void* inbox, size_t slot_bytes,
                        Millis timeout) {
    return false;
  }

  // Thread-safe: the call in progress and every later call fail soon.
  virtual void abort() = 0;
  // Whether abort() really ends a call in progress (MPI polls for it; Gloo cannot). Only
  // then may a blocking op run on the caller's thread instead of the communicator's.
  virtual bool interruptible() const { return false; }
  // A backend over the ranks listed (ranks of this backend), or null when this rank is not
  // among them. Every rank calls it with the same list (MPI needs all of them).
  virtual std::unique_ptr<Backend> split(const std::vector<int>& ranks,
                                         const std::string& name) = 0;
  // Whether reconfigure can make a new group after a failure (Gloo yes, Open MPI 4 no).
  virtual bool supports_reconfigure() const = 0;
  // A fresh backend of new_size ranks (this process is new_rank) meeting under `key`: the
  // group reconfigure() builds from the survivors and joiners. Engines that cannot throw.
  virtual std::unique_ptr<Backend> remake(int new_rank, int new_size, const std::string& key,
                                          Millis timeout);
};

// What a backend factory gets: the rendezvous store (already prefixed for this
// communicator), this process's rank and the world size, the default timeout and hints.
struct BackendInit {
  std::shared_ptr<Store> store;
  int rank = -1;
  int size = -1;
  std::string name;
  Millis timeout{};
  Hints hints;
};
using BackendFactory = std::function<std::unique_ptr<Backend>(const BackendInit&)>;

// The engines this build knows, by name ("gloo", "mpi"). A factory of an engine the build
// lacks throws DistError saying which library is missing.
void register_backend(const std::string& name, BackendFactory factory);
bool is_backend_registered(const std::string& name);
// Whether the engine's library is part of this build.
bool is_backend_available(const std::string& name);
std::vector<std::string> backend_names();
std::unique_ptr<Backend> make_backend(const std::string& name, const BackendInit& init);

// Elementwise reduction of raw buffers: out[i] = op(a[i], b[i]) for n elements of dtype
// (out may alias a or b). bfloat16/float16 reduce in float32 and round once per element.
void reduce_buffers(void* out, const void* a, const void* b, size_t n, DType dtype,
                    RedOpType op);

}  // namespace flambeau::distributed
