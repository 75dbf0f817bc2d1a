// The communicator (torchcomms' TorchComm): collectives and P2P on a backend, with
// torchcomms' fault-tolerance contract. Each communicator runs its operations in issue
// order on its own thread, so work on different communicators (FSDP's all-gather and
// reduce-scatter) progresses concurrently, and async_op=true returns at once.
//
// Errors: arguments that are wrong on this rank (sizes, dtypes, ranks) throw at the call,
// before anything is queued or written. Arguments that differ between ranks (shapes, dtypes,
// ops: a desync) make the op fail on every rank with a DistBackendError that lists each
// rank's view; the communicator stays usable. A timeout, a dead peer or abort() breaks it:
// the op and everything queued after it fail with DistBackendError naming the op, the
// collective sequence number and the peer when known. With
// abort_process_on_timeout_or_error (the default) the abort hooks run, the flight recorder
// is dumped and the process aborts; otherwise the caller may reconfigure() (when made with
// enable_reconfigure) or make a new communicator.
#pragma once
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "flambeau/core/device.h"
#include "flambeau/distributed/backend.h"
#include "flambeau/distributed/flight_recorder.h"
#include "flambeau/distributed/work.h"

namespace flambeau::distributed {

using WorkPtr = std::shared_ptr<Work>;

// What pre- and post-hooks see. They run on the communicator's thread.
struct OpEvent {
  OpName op;
  int64_t seq;  // collective or P2P sequence number
  const std::vector<Tensor>& inputs;
  const std::vector<Tensor>& outputs;
  std::exception_ptr error;  // post-hooks: the op's error, if any
};
using OpHook = std::function<void(const OpEvent&)>;

class Communicator : public std::enable_shared_from_this<Communicator> {
 public:
  ~Communicator();
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return options_.name; }
  const std::string& backend_name() const { return backend_name_; }
  std::string backend_version() const;
  const CommOptions& options() const { return options_; }
  // Global ranks (of the root communicator) of the members, in rank order.
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  Device device() const { return kCPU; }

  WorkPtr all_reduce(const Tensor& t, ReduceOp op, bool async_op, const OpOptions& o = {});
  WorkPtr all_gather(const std::vector<Tensor>& outputs, const Tensor& input, bool async_op,
                     const OpOptions& o = {});
  WorkPtr all_gather_single(const Tensor& output, const Tensor& input, bool async_op,
                            const OpOptions& o = {});
  WorkPtr reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                         bool async_op, const OpOptions& o = {});
  WorkPtr reduce_scatter_single(const Tensor& output, const Tensor& input, ReduceOp op,
                                bool async_op, const OpOptions& o = {});
  // Split sizes along dim 0; empty means equal parts.
  WorkPtr all_to_all_single(const Tensor& output, const Tensor& input,
                            std::vector<int64_t> output_split_sizes,
                            std::vector<int64_t> input_split_sizes, bool async_op,
                            const OpOptions& o = {});
  WorkPtr all_to_all(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                     bool async_op, const OpOptions& o = {});
  WorkPtr broadcast(const Tensor& t, int root, bool async_op, const OpOptions& o = {});
  WorkPtr reduce(const Tensor& t, int root, ReduceOp op, bool async_op,
                 const OpOptions& o = {});
  // outputs: size() tensors on root, empty elsewhere.
  WorkPtr gather(const std::vector<Tensor>& outputs, const Tensor& input, int root,
                 bool async_op, const OpOptions& o = {});
  // inputs: size() tensors on root, empty elsewhere.
  WorkPtr scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root,
                  bool async_op, const OpOptions& o = {});
  WorkPtr send(const Tensor& t, int dst, bool async_op, const OpOptions& o = {});
  WorkPtr recv(const Tensor& t, int src, bool async_op, const OpOptions& o = {});
  WorkPtr batch_p2p(const std::vector<P2POp>& ops, bool async_op, const OpOptions& o = {});
  WorkPtr barrier(bool async_op, const OpOptions& o = {});

  // A communicator over `ranks` (ranks of this one), named `name`; null for a rank not
  // listed. Every rank calls it, in the same order relative to other ops (torchcomms:
  // non-members pass an empty list).
  std::shared_ptr<Communicator> split(const std::vector<int>& ranks, const std::string& name,
                                      const OpOptions& o = {});

  // This process's handle for reconfigure(): unique per communicator and process.
  const std::string& init_handle() const { return init_handle_; }
  // Rebuilds the communicator after a failure (torchcomms' reconfigure): the processes whose
  // handles are listed (survivors, and joiners with a communicator of the same name) form
  // the new group, ranked in list order, meeting under `uuid` (the same on all of them).
  // Needs enable_reconfigure; no other thread may use the communicator meanwhile. Sequence
  // numbers restart at 1. Engines that cannot (Open MPI 4.1: no ULFM) raise.
  WorkPtr reconfigure(const std::string& uuid, const std::vector<std::string>& init_handles,
                      std::optional<Millis> timeout = std::nullopt);

  // First writer wins: pending and later work is CANCELED; the process is not ended.
  void abort();
  bool is_aborted() const { return aborted_.load(); }
  // The error that broke the communicator, if any.
  std::exception_ptr error() const;
  void set_timeout(Millis t) { options_.timeout = t; }

  // Hooks; each returns an id for remove_hook. Abort hooks run before the process aborts.
  int register_pre_hook(OpHook hook);
  int register_post_hook(OpHook hook);
  int register_abort_hook(std::function<void()> hook);
  void remove_hook(int id);

  FlightRecorder& flight_recorder() { return recorder_; }
  std::string dump_flight_recorder(bool include_completed = true) const;
  // Writes the dump to dir/<name>_rank<global rank>.json and returns the path.
  std::string dump_flight_recorder_file(const std::string& dir,
                                        bool include_completed = true) const;

  // Stops the thread once queued work is done; later calls raise.
  void finalize();

  // For new_comm and split.
  struct Private;
  Communicator(Private, std::unique_ptr<Backend> backend, std::string backend_name,
               CommOptions options, std::vector<int> global_ranks);

 private:
  struct Item;
  struct Desc;
  friend struct CommAccess;
  WorkPtr submit(Desc desc, std::function<void(Millis)> body, bool async_op,
                 const OpOptions& o);
  void run_loop();
  void run_item(Item& item);
  void on_failure(std::exception_ptr error);
  void run_abort_hooks();
  void dump_on_failure();
  void run_hooks(const std::vector<std::pair<int, OpHook>>& hooks, const Desc& d, int64_t seq,
                 std::exception_ptr error);
  static bool is_mismatch(std::exception_ptr e);
  std::exception_ptr canceled_error(const Desc& d, int64_t seq) const;
  std::string context(OpName op, int64_t seq, bool p2p) const;
  void check_usable(OpName op) const;
  // The cross-rank argument check; true when it also did the op (an eager one).
  bool check_same_everywhere(const Desc& d, Millis timeout, int64_t seq);
  FlightRecorderHeader recorder_header() const;
  bool current_busy() const;

  std::unique_ptr<Backend> backend_;
  std::string backend_name_;
  CommOptions options_;
  std::vector<int> global_ranks_;
  int rank_, size_;
  bool check_args_;  // the cross-rank check before each collective
  bool log_;         // FLAMBEAU_COMM_LOG: a line per op on stderr

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Item>> queue_;
  bool stopping_ = false, finalized_ = false;
  int64_t collective_seq_ = 0, p2p_seq_ = 0;
  int64_t last_started_ = 0, last_completed_ = 0;
  std::exception_ptr broken_;
  WorkPtr current_;  // the work the thread runs now
  std::shared_ptr<Communicator> keep_alive_;  // see Note [A stuck op after abort]
  std::atomic<bool> aborted_{false};
  std::atomic<bool> in_progress_{false};

  std::mutex hooks_mutex_;
  int next_hook_ = 0;
  std::vector<std::pair<int, OpHook>> pre_hooks_, post_hooks_;
  std::vector<std::pair<int, std::function<void()>>> abort_hooks_;

  FlightRecorder recorder_;
  std::string init_handle_;
  std::thread thread_;
};

// Makes a communicator (torchcomms' new_comm). backend: "gloo", "mpi" or a registered one.
// Rendezvous: options.store when given (rank and size from options or RANK/WORLD_SIZE),
// else env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; rank 0 serves the TCPStore);
// "mpi" takes rank and size from MPI itself.
std::shared_ptr<Communicator> new_comm(const std::string& backend, Device device,
                                       CommOptions options);

}  // namespace flambeau::distributed
