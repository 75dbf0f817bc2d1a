// Data-parallel training, torch.nn.parallel.DistributedDataParallel's design. The Reducer
// averages the gradients of a list of parameters over a communicator's ranks: parameters
// go into buckets (reverse parameter order, the first one 1 MiB, then 25 MiB; one dtype per
// bucket), a bucket's all_reduce starts from the parameters' post-accumulate-grad hooks
// while backward is still running, and the end of backward (a queued autograd callback)
// waits for every bucket and writes the averages into .grad. After the first iteration the
// buckets are rebuilt in the order the gradients became ready (rank 0's order, broadcast),
// so that the first bucket to fill is the first to go.
//
// Every rank must run the same iterations: forward through prepare_for_forward(), then one
// backward. Buckets are launched in index order on every rank (a bucket that fills early
// waits for the ones before it), so the collectives match across ranks.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "flambeau/core/tensor.h"
#include "flambeau/distributed/communicator.h"
#include "flambeau/nn/module.h"

namespace flambeau::distributed {

// One bucket as a communication hook sees it (torch's GradBucket).
struct GradBucket {
  int index = 0;
  bool is_last = false;  // the last bucket of the iteration
  Tensor buffer;         // flat: the gradients of `parameters`, one after another
  std::vector<Tensor> parameters;
  std::vector<int64_t> offsets;  // of each parameter's gradient in buffer
  // Views of buffer shaped like the parameters.
  std::vector<Tensor> gradients() const;
};

// A communication hook starts the reduction of a bucket and returns what completes it: a
// function that waits and returns the reduced flat tensor (the bucket's buffer or one of
// its size and dtype), which becomes the parameters' gradients.
using Finish = std::function<Tensor()>;
using CommHook = std::function<Finish(GradBucket&)>;

// The default hook (torch's allreduce_hook): divides by the world size, then all_reduce(SUM).
CommHook allreduce_hook(std::shared_ptr<Communicator> comm);
// torch's bf16_compress_hook: the all_reduce runs on a bfloat16 copy divided by the world
// size; the result is cast back.
CommHook bf16_compress_hook(std::shared_ptr<Communicator> comm);

struct DDPOptions {
  int64_t bucket_cap_bytes = int64_t(25) << 20;
  int64_t first_bucket_cap_bytes = int64_t(1) << 20;
  bool gradient_as_bucket_view = false;  // .grad are views into the buckets (no copies)
  bool find_unused_parameters = false;   // parameters without a gradient count as zero
  bool static_graph = false;             // the same graph every iteration (unused ones too)
};

class Reducer {
 public:
  // names: of the parameters, for messages (optional).
  Reducer(std::vector<Tensor> params, std::shared_ptr<Communicator> comm, DDPOptions options = {},
          std::vector<std::string> names = {});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Before each forward of the wrapped module: the next backward reduces (when sync is on).
  void prepare_for_forward();
  // no_sync(): with sync off, gradients accumulate locally and nothing is reduced.
  void set_require_sync(bool sync);
  bool require_sync() const;
  void register_comm_hook(CommHook hook);
  const std::shared_ptr<Communicator>& comm() const;

  // Parameter indices of each bucket.
  std::vector<std::vector<size_t>> bucket_indices() const;
  // What happened in the last reducing backward, with steady-clock times in ns: "launch"
  // and "done" of each bucket's reduction, "backward_end" when the callback ran.
  struct Event {
    std::string what;
    int bucket;
    int64_t t_ns;
  };
  std::vector<Event> timeline() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Broadcasts each tensor from `root`, in order (parameters and buffers at construction).
void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors, int root);

// DistributedDataParallel over a C++ module: broadcasts its parameters and buffers from
// rank 0, then reduces the gradients of every backward that follows its forward.
class DistributedDataParallel : public nn::Module {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, std::shared_ptr<Communicator> comm,
                          DDPOptions options = {}, bool broadcast_buffers = true);
  Tensor forward(const Tensor& x) override;
  nn::Module& module() { return *module_; }
  Reducer& reducer() { return *reducer_; }

  // Gradients accumulate locally while this lives (torch's no_sync()).
  class NoSync {
   public:
    explicit NoSync(Reducer& r) : r_(r), was_(r.require_sync()) { r.set_require_sync(false); }
    ~NoSync() { r_.set_require_sync(was_); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    Reducer& r_;
    bool was_;
  };
  NoSync no_sync() { return NoSync(*reducer_); }

 private:
  std::shared_ptr<nn::Module> module_;
  std::shared_ptr<Communicator> comm_;
  std::unique_ptr<Reducer> reducer_;
  bool broadcast_buffers_;
};

}  // namespace flambeau::distributed
