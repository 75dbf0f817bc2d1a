// See fully_shard.h.
#include "flambeau/distributed/fully_shard.h"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "flambeau/autograd/autograd.h"
#include "flambeau/distributed/fsdp.h"
#include "flambeau/nn/clip_grad.h"
#include "flambeau/core/shape.h"
#include "flambeau/ops/ops.h"

namespace flambeau::distributed {

namespace {

// How one parameter is cut: dim 0 into chunks of `chunk` rows, rank r holding rows
// [r chunk, min((r + 1) chunk, dim0)); in the flat buffers of the group's collectives its
// chunk takes `padded` elements at `offset` of each rank's part.
struct Cut {
  int64_t dim0 = 1, row = 1, chunk = 1, padded = 1, offset = 0;
  int64_t rows_of(int r) const { return std::max<int64_t>(0, std::min(chunk, dim0 - r * chunk)); }
};

Cut cut_of(const Tensor& p, int world, int64_t offset) {
  Cut c;
  c.dim0 = p.size(0);
  c.row = c.dim0 ? p.numel() / c.dim0 : 0;
  c.chunk = (c.dim0 + world - 1) / world;
  c.padded = c.chunk * c.row;
  c.offset = offset;
  return c;
}

}  // namespace

// The parameters of one block (or the root's rest): one all-gather, one reduce-scatter.
class FSDPGroup : public std::enable_shared_from_this<FSDPGroup> {
 public:
  FSDPGroup(std::vector<Tensor> params, std::shared_ptr<Communicator> comm, std::shared_ptr<Communicator> rs_comm,
            bool reshard_after_forward)
      : comm_(std::move(comm)), rs_comm_(std::move(rs_comm)), rank_(comm_->rank()), world_(comm_->size()),
        reshard_after_forward_(reshard_after_forward), unsharded_(std::move(params)) {
    autograd::NoGradGuard no_grad;
    for (const Tensor& p : unsharded_) {
      FLB_CHECK(p.dtype() == unsharded_[0].dtype() && p.dim() > 0 && p.is_contiguous() && p.storage_offset() == 0,
                ValueError, "[fully_shard] a group's parameters must be whole contiguous tensors of one dtype with a dim "
                "0, got ", shape_str(p.sizes()), " ", dtype_name(p.dtype()));
      const Cut c = cut_of(p, world_, total_);
      total_ += c.padded;
      Tensor shard = p.narrow(0, std::min(c.dim0, rank_ * c.chunk), c.rows_of(rank_)).clone();
      shard.requires_grad_(p.requires_grad());
      cuts_.push_back(c);
      shards_.push_back(shard);
      needs_grads_ += p.requires_grad();
    }
    for (const Tensor& p : unsharded_) fsdp::release_memory(p);
  }

  // Hooks need the shared pointer, so they are set up after construction.
  void add_grad_hooks() {
    std::weak_ptr<FSDPGroup> weak = weak_from_this();
    for (const Tensor& p : unsharded_)
      if (p.requires_grad())
        autograd::register_post_accumulate_grad_hook(p, [weak](Tensor&) {
          if (auto g = weak.lock()) g->grad_ready();
        });
  }

  const std::vector<Tensor>& shards() const { return shards_; }
  const Tensor& unsharded(size_t i) const { return unsharded_[i]; }
  const Cut& cut(size_t i) const { return cuts_[i]; }
  void set_neighbours(FSDPGroup* next, FSDPGroup* previous) { next_ = next, previous_ = previous; }

  void start_gather() {
    if (unsharded_now_ || gather_ || unsharded_.empty()) return;
    autograd::NoGradGuard no_grad;
    const DType dt = unsharded_[0].dtype();
    Tensor in = zeros({total_}, dt);
    for (size_t i = 0; i < shards_.size(); ++i)
      if (shards_[i].numel()) in.narrow(0, cuts_[i].offset, shards_[i].numel()).copy_(shards_[i].detach().reshape({-1}));
    Tensor out = empty({world_ * total_}, dt);
    gather_ = Pending{comm_->all_gather_single(out, in, true), out, in};
  }

  void unshard() {
    if (unsharded_now_) return;
    start_gather();
    unsharded_now_ = true;
    if (!gather_) return;  // no parameters
    gather_->work->wait();
    const Tensor out = gather_->out;
    gather_.reset();
    for (size_t i = 0; i < unsharded_.size(); ++i) {
      const Tensor& u = unsharded_[i];
      const Cut& c = cuts_[i];
      fsdp::allocate_memory(u);
      const Tensor flat = u.detach().reshape({-1});
      for (int r = 0; r < world_; ++r)
        if (const int64_t n = c.rows_of(r) * c.row)
          fsdp::fill_without_version(flat.narrow(0, r * c.chunk * c.row, n), out.narrow(0, r * total_ + c.offset, n));
    }
  }

  void reshard() {
    if (!unsharded_now_) return;
    for (const Tensor& u : unsharded_) fsdp::release_memory(u);
    unsharded_now_ = false;
  }

  // Forward: gathered first (starting the next group's gather when this one was sharded);
  // released after when asked. A root group gathered by a forward under no_grad stays so
  // until the end of the next backward (the shards do not change in between).
  void pre_forward() {
    if (unsharded_now_) return;
    unshard();
    if (next_) next_->start_gather();
  }
  Tensor post_forward(const Tensor& out) {
    if (reshard_after_forward_) reshard();
    if (out.defined() && out.requires_grad() && autograd::grad_mode_enabled()) {
      std::weak_ptr<FSDPGroup> weak = weak_from_this();
      autograd::register_hook(out, [weak](const Tensor&) {
        if (auto g = weak.lock()) g->pre_backward();
        return Tensor();
      });
    }
    return out;
  }

 private:
  struct Pending {
    WorkPtr work;
    Tensor out, in;
  };

  void pre_backward() {
    queue_end();
    unshard();
    if (previous_) previous_->start_gather();
  }

  void queue_end() {
    if (callback_queued_) return;
    callback_queued_ = true;
    std::weak_ptr<FSDPGroup> weak = weak_from_this();
    autograd::queue_callback([weak] {
      if (auto g = weak.lock()) g->end_of_backward();
    });
  }

  void grad_ready() {
    queue_end();
    if (++ready_ == needs_grads_) start_reduce_scatter();
  }

  // Each rank's rows of the gradients, divided by N, into one buffer: reduce_scatter(SUM).
  void start_reduce_scatter() {
    if (reduce_ || unsharded_.empty()) return;
    autograd::NoGradGuard no_grad;
    const DType dt = unsharded_[0].dtype();
    Tensor in = zeros({world_ * total_}, dt);
    for (size_t i = 0; i < unsharded_.size(); ++i) {
      Tensor u = unsharded_[i];
      if (!u.grad().defined()) continue;
      const Tensor flat = u.grad().contiguous().reshape({-1});
      const Cut& c = cuts_[i];
      for (int r = 0; r < world_; ++r)
        if (const int64_t n = c.rows_of(r) * c.row)
          in.narrow(0, r * total_ + c.offset, n).copy_(flat.narrow(0, r * c.chunk * c.row, n));
      u.set_grad(Tensor());
    }
    in.div_(double(world_));
    Tensor out = empty({total_}, dt);
    reduce_ = Pending{rs_comm_->reduce_scatter_single(out, in, ReduceOp(RedOpType::SUM), true), out, in};
  }

  void end_of_backward() {
    callback_queued_ = false;
    ready_ = 0;
    start_reduce_scatter();  // parameters that got no gradient count as zero
    if (!reduce_) return;
    reduce_->work->wait();
    const Tensor out = reduce_->out;
    reduce_.reset();
    autograd::NoGradGuard no_grad;
    for (size_t i = 0; i < shards_.size(); ++i) {
      Tensor s = shards_[i];
      if (!s.requires_grad()) continue;
      const Tensor piece = out.narrow(0, cuts_[i].offset, s.numel()).reshape(s.sizes());
      if (s.grad().defined()) s.grad().add_(piece);
      else s.set_grad(piece.clone());
    }
    reshard();
  }

  std::shared_ptr<Communicator> comm_, rs_comm_;  // all-gathers, reduce-scatters (maybe the same)
  const int rank_, world_;
  const bool reshard_after_forward_;
  std::vector<Tensor> unsharded_, shards_;
  std::vector<Cut> cuts_;
  int64_t total_ = 0;  // elements of one rank's part of the flat buffers
  int needs_grads_ = 0, ready_ = 0;
  bool unsharded_now_ = false, callback_queued_ = false;
  std::optional<Pending> gather_, reduce_;
  FSDPGroup *next_ = nullptr, *previous_ = nullptr;
};

namespace {

// Each module of the tree under m (m included) with its own parameters.
void owners(const std::shared_ptr<nn::Module>& m, std::vector<std::shared_ptr<nn::Module>>& out) {
  if (!m->parameters(false).empty()) out.push_back(m);
  for (const auto& child : m->children()) owners(child, out);
}

}  // namespace

FullyShardedModel::FullyShardedModel(nn::Module& root, const std::vector<std::shared_ptr<nn::Module>>& blocks,
                                      std::shared_ptr<Communicator> comm, bool separate_reduce_scatter)
    : comm_(std::move(comm)) {
  std::vector<int> all(comm_->size());
  for (int r = 0; r < comm_->size(); ++r) all[r] = r;
  const auto rs_comm = separate_reduce_scatter ? comm_->split(all, comm_->name() + ".reduce_scatter") : comm_;
  std::unordered_set<const TensorImpl*> in_blocks;
  for (const auto& b : blocks) {
    groups_.push_back(std::make_shared<FSDPGroup>(b->parameters(), comm_, rs_comm, true));
    for (const Tensor& p : b->parameters()) in_blocks.insert(p.impl());
  }
  std::vector<Tensor> rest;
  for (const Tensor& p : root.parameters())
    if (!in_blocks.count(p.impl())) rest.push_back(p);
  auto root_group = std::make_shared<FSDPGroup>(rest, comm_, rs_comm, false);
  for (size_t i = 0; i < blocks.size(); ++i)
    groups_[i]->set_neighbours(i + 1 < blocks.size() ? groups_[i + 1].get() : nullptr,
                               i ? groups_[i - 1].get() : nullptr);
  root_group->set_neighbours(groups_.empty() ? nullptr : groups_[0].get(), nullptr);
  groups_.push_back(root_group);

  for (auto& g : groups_) g->add_grad_hooks();
  // Forward hooks: each block's own; the root's on every module owning one of its parameters.
  auto add_hooks = [&](nn::Module& m, const std::shared_ptr<FSDPGroup>& group, bool post) {
    std::weak_ptr<FSDPGroup> weak = group;
    m.register_forward_pre_hook([weak](nn::Module& m, const nn::TensorList&) {
      auto g = weak.lock();
      FLB_CHECK(g, Error, "[fully_shard] ", m.type_name(), "'s parameters were sharded by a FullyShardedModel that no "
                "longer exists: their values are gone (keep the model, or save them with full() before)");
      g->pre_forward();
      return std::optional<nn::TensorList>();
    });
    if (post)
      m.register_forward_hook([weak](nn::Module&, const nn::TensorList&, const Tensor& out) {
        if (auto g = weak.lock()) return std::optional<Tensor>(g->post_forward(out));
        return std::optional<Tensor>();
      });
  };
  for (size_t i = 0; i < blocks.size(); ++i) add_hooks(*blocks[i], groups_[i], true);
  std::unordered_set<const TensorImpl*> root_params;
  for (const Tensor& p : rest) root_params.insert(p.impl());
  std::vector<std::shared_ptr<nn::Module>> mods;
  for (const auto& child : root.children()) owners(child, mods);
  for (const auto& m : mods)
    for (const Tensor& p : m->parameters(false))
      if (root_params.count(p.impl())) {
        add_hooks(*m, root_group, false);
        break;
      }

  // The shards in root.parameters() order.
  std::unordered_map<const TensorImpl*, std::pair<FSDPGroup*, size_t>> place;
  for (auto& g : groups_)
    for (size_t k = 0; k < g->shards().size(); ++k) place[g->unsharded(k).impl()] = {g.get(), k};
  for (const Tensor& p : root.parameters()) {
    const auto [g, k] = place.at(p.impl());
    shards_.push_back(g->shards()[k]);
    where_.emplace_back(g, k);
  }
}

FullyShardedModel::~FullyShardedModel() = default;

Tensor FullyShardedModel::local(size_t i, const Tensor& full) const {
  const auto [g, k] = where_.at(i);
  const Cut& c = g->cut(k);
  if (!full.dim()) return full.clone();  // not row-shaped (AdamW's step): the same everywhere
  return full.narrow(0, std::min(c.dim0, comm_->rank() * c.chunk), shards_[i].size(0)).clone();
}

Tensor FullyShardedModel::full(size_t i, const Tensor& local) const {
  const auto [g, k] = where_.at(i);
  const Cut& c = g->cut(k);
  const int world = comm_->size();
  if (!local.dim()) return local.clone();  // not row-shaped: the same everywhere
  autograd::NoGradGuard no_grad;
  Tensor in = zeros({c.padded}, local.dtype());
  if (local.numel()) in.narrow(0, 0, local.numel()).copy_(local.detach().reshape({-1}));
  Tensor out = empty({world * c.padded}, local.dtype());
  comm_->all_gather_single(out, in, false);
  std::vector<Tensor> rows;
  for (int r = 0; r < world; ++r) rows.push_back(out.narrow(0, r * c.padded, c.rows_of(r) * c.row));
  Dims shape = local.sizes();
  shape[0] = c.dim0;
  return cat(rows, 0).reshape(shape);
}

Tensor FullyShardedModel::clip_grad_norm_(double max_norm) const {
  std::vector<Tensor> grads;
  for (const Tensor& s : shards_)
    if (s.grad().defined()) grads.push_back(s.grad());
  Tensor squared = nn::utils::get_total_norm(grads).to(kFloat64).pow(2.0).reshape({1});
  comm_->all_reduce(squared, ReduceOp(RedOpType::SUM), false);
  const Tensor total = squared.sqrt().reshape({}).to(kFloat32);
  nn::utils::clip_grads_with_norm_(shards_, max_norm, total);
  return total;
}

}  // namespace flambeau::distributed
