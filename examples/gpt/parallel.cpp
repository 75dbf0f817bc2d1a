// See parallel.h.
#include "parallel.h"

#include <stdexcept>

#include "flambeau/nn/clip_grad.h"
#include "flambeau/ops/ops.h"

namespace gpt {
using namespace flambeau;
namespace dist = flambeau::distributed;

DataParallel::DataParallel(const Config& c, Gpt& model) : model_(model) {
  if (c.parallel == "none") return;
  dist::CommOptions o;
  o.name = "flambeau-gpt";
  comm_ = dist::new_comm("gloo", kCPU, o);
  rank_ = comm_->rank();
  world_ = comm_->size();
  if (c.batch_size % world_ != 0)
    throw std::invalid_argument("--parallel " + c.parallel + ": batch_size " + std::to_string(c.batch_size) +
                                " does not divide by the world size " + std::to_string(world_));
  if (c.parallel == "fsdp") {
    std::vector<std::shared_ptr<nn::Module>> blocks(model.blocks.begin(), model.blocks.end());
    fsdp_ = std::make_unique<dist::FullyShardedModel>(model, blocks, comm_, c.fsdp_reduce_scatter == "separate");
    return;
  }
  dist::broadcast_tensors(*comm_, model.parameters(), 0);
  std::vector<std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.push_back(name);
  reducer_ = std::make_unique<dist::Reducer>(model.parameters(), comm_, dist::DDPOptions{}, names);
}

std::vector<Tensor> DataParallel::parameters() const { return fsdp_ ? fsdp_->parameters() : model_.parameters(); }

void DataParallel::before_forward() {
  if (reducer_) reducer_->prepare_for_forward();
}

void DataParallel::clip_grad_norm(double max_norm) const {
  if (fsdp_) fsdp_->clip_grad_norm_(max_norm);
  else nn::utils::clip_grad_norm_(model_.parameters(), max_norm);
}

Tensor DataParallel::full(size_t i, const Tensor& part) const { return fsdp_ ? fsdp_->full(i, part) : part; }
Tensor DataParallel::part(size_t i, const Tensor& whole) const { return fsdp_ ? fsdp_->local(i, whole) : whole; }

Batch DataParallel::shard(const Batch& b) const {
  if (world_ == 1) return b;
  const int64_t rows = b.inputs.size(0) / world_;
  auto mine = [&](const Tensor& t) { return t.narrow(0, rank_ * rows, rows).contiguous(); };
  return {mine(b.inputs), mine(b.targets), mine(b.doc_ids)};
}

double DataParallel::mean(double v) const {
  if (world_ == 1) return v;
  Tensor t = flambeau::full({1}, v, kFloat64);
  comm_->all_reduce(t, dist::ReduceOp(dist::RedOpType::AVG), false);
  return t.item<double>();
}

void DataParallel::barrier() const {
  if (comm_) comm_->barrier(false);
}

}  // namespace gpt
