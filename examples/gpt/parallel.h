// flambeau-gpt's data parallelism under flambeau-run: a gloo communicator from the
// launcher's environment (env://) and each rank's rows of the global batch, with
//   --parallel ddp: the Reducer of DistributedDataParallel over the model's parameters;
//   --parallel fsdp: FullyShardedModel (a group per block and the root's), the optimizer
//     stepping this rank's shards.
// With --parallel none it is one process and everything here is a no-op.
#pragma once
#include <memory>

#include "config.h"
#include "data.h"
#include "flambeau/distributed/ddp.h"
#include "flambeau/distributed/fully_shard.h"
#include "model.h"

namespace gpt {

class DataParallel {
 public:
  // Joins the group (ddp: broadcasting rank 0's weights; fsdp: sharding the current ones,
  // which every rank has from the same seed or checkpoint).
  DataParallel(const Config& c, Gpt& model);
  int rank() const { return rank_; }
  int world() const { return world_; }
  // Rank 0 writes the log, the checkpoints and the report.
  bool is_main() const { return rank_ == 0; }
  // What the optimizer steps: the model's parameters, or under fsdp this rank's shards (in
  // the same order).
  std::vector<flambeau::Tensor> parameters() const;
  // Before each training forward (the next backward averages the gradients).
  void before_forward();
  // clip_grad_norm_ of the gradients of parameters() (the norm over all ranks' shards).
  void clip_grad_norm(double max_norm) const;
  // A tensor shaped like parameter i: whole from this rank's part (a collective under fsdp),
  // and this rank's part of a whole one.
  flambeau::Tensor full(size_t i, const flambeau::Tensor& part) const;
  flambeau::Tensor part(size_t i, const flambeau::Tensor& whole) const;
  // This rank's rows of a global batch (batch_size must divide by the world size).
  Batch shard(const Batch& b) const;
  // The mean of v over the ranks (the logged loss).
  double mean(double v) const;
  // Waits until every rank is here (before rank 0 ends the run).
  void barrier() const;

 private:
  Gpt& model_;
  int rank_ = 0, world_ = 1;
  std::shared_ptr<flambeau::distributed::Communicator> comm_;
  std::unique_ptr<flambeau::distributed::Reducer> reducer_;
  std::unique_ptr<flambeau::distributed::FullyShardedModel> fsdp_;
};

}  // namespace gpt
