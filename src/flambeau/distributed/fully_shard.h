// FSDP2 in C++ (the design of flambeau.distributed.fsdp.fully_shard, for C++ programs such
// as flambeau-gpt): a model's parameters sharded on dim 0 over a communicator's ranks.
//
// FullyShardedModel(root, blocks, comm) makes one group per block and one root group with
// the parameters no block owns. A group's parameters stay the modules' parameter tensors,
// whose memory is released while the group is sharded (Note [FSDP's unsharded
// parameters] in fsdp.h); the shards (this rank's rows, padded chunks of ceil(dim0 / N)
// rows) are separate leaves, the optimizer's parameters. A block is gathered by one
// all_gather_single in a forward pre-hook (the next block's gather starts then too),
// released by its forward hook, gathered again when its output's gradient arrives (the
// previous block's gather starts then) and released at the end of backward. The root group
// is gathered when one of the modules owning its parameters starts forward and kept until
// the end of backward. A group's gradients are divided by N and reduce-scattered as soon as
// the last of them is accumulated; the end of backward (a queued autograd callback) waits
// and adds each rank's rows into its shards' .grad.
//
// Every rank runs the same forwards and backwards (the collectives match in order). Blocks
// are called as modules (block->call(...)) so that their hooks run.
#pragma once
#include <memory>
#include <vector>

#include "flambeau/core/tensor.h"
#include "flambeau/distributed/communicator.h"
#include "flambeau/nn/module.h"

namespace flambeau::distributed {

class FSDPGroup;

class FullyShardedModel {
 public:
  // blocks: submodules of root in forward order. The parameters are copied into the shards
  // from their current values (every rank must hold the same ones). With
  // separate_reduce_scatter, reduce-scatters run on their own communicator (a split of
  // comm), beside the all-gathers (FSDP2's set_separate_reduce_scatter_group).
  FullyShardedModel(nn::Module& root, const std::vector<std::shared_ptr<nn::Module>>& blocks,
                    std::shared_ptr<Communicator> comm, bool separate_reduce_scatter = false);
  // The modules' parameters stay without memory (read them through full() first); a
  // forward of a module that was sharded then raises (its hooks stay to say so).
  ~FullyShardedModel();
  FullyShardedModel(const FullyShardedModel&) = delete;
  FullyShardedModel& operator=(const FullyShardedModel&) = delete;

  // The shards in root.parameters() order: what the optimizer steps.
  const std::vector<Tensor>& parameters() const { return shards_; }
  // This rank's rows of a tensor shaped like parameter i (optimizer state being loaded).
  Tensor local(size_t i, const Tensor& full) const;
  // The whole of a tensor shaped like shard i, from every rank's rows (a collective).
  Tensor full(size_t i, const Tensor& local) const;
  // clip_grad_norm_ over the shards' gradients with the 2-norm of all ranks' (a collective);
  // returns that norm.
  Tensor clip_grad_norm_(double max_norm) const;

 private:
  std::shared_ptr<Communicator> comm_;
  std::vector<std::shared_ptr<FSDPGroup>> groups_;  // the blocks' in order, then the root's
  std::vector<Tensor> shards_;
  std::vector<std::pair<FSDPGroup*, size_t>> where_;  // parameter i: its group and index there
};

}  // namespace flambeau::distributed
