// flambeau-gpt's data parallelism (--parallel ddp under flambeau-run): a gloo communicator
// from the launcher's environment (env://), the Reducer of DistributedDataParallel over
// the model's parameters, each rank's rows of the global batch. With --parallel none it is
// one process and everything here is a no-op.
#pragma once
#include <memory>

#include "config.h"
#include "data.h"
#include "flambeau/distributed/ddp.h"
#include "model.h"

namespace gpt {

class DataParallel {
 public:
  // Joins the group (broadcasting rank 0's weights) when c.parallel is "ddp".
  DataParallel(const Config& c, Gpt& model);
  int rank() const { return rank_; }
  int world() const { return world_; }
  // Rank 0 writes the log, the checkpoints and the report.
  bool is_main() const { return rank_ == 0; }
  // Before each training forward (the next backward averages the gradients).
  void before_forward();
  // This rank's rows of a global batch (batch_size must divide by the world size).
  Batch shard(const Batch& b) const;
  // The mean of v over the ranks (the logged loss).
  double mean(double v) const;
  // Waits until every rank is here (before rank 0 ends the run).
  void barrier() const;

 private:
  int rank_ = 0, world_ = 1;
  std::shared_ptr<flambeau::distributed::Communicator> comm_;
  std::unique_ptr<flambeau::distributed::Reducer> reducer_;
};

}  // namespace gpt
