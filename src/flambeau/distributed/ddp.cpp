// See ddp.h.
#include "flambeau/distributed/ddp.h"

#include <chrono>
#include <mutex>

#include "flambeau/autograd/autograd.h"
#include "flambeau/core/error.h"
#include "flambeau/core/shape.h"
#include "flambeau/ops/ops.h"

namespace flambeau::distributed {

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Whether g already is `view` (a gradient that lives in its bucket).
bool same_view(const Tensor& g, const Tensor& view) {
  return g.defined() && g.data_ptr() == view.data_ptr() && g.storage() == view.storage() && g.sizes() == view.sizes() &&
         g.strides() == view.strides();
}
}  // namespace

std::vector<Tensor> GradBucket::gradients() const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < parameters.size(); ++i)
    out.push_back(buffer.narrow(0, offsets[i], parameters[i].numel()).view(parameters[i].sizes()));
  return out;
}

CommHook allreduce_hook(std::shared_ptr<Communicator> comm) {
  return [comm](GradBucket& b) -> Finish {
    Tensor buf = b.buffer;
    buf.div_(comm->size());
    WorkPtr w = comm->all_reduce(buf, ReduceOp(RedOpType::SUM), /*async_op=*/true);
    return [w, buf] {
      w->wait();
      return buf;
    };
  };
}

CommHook bf16_compress_hook(std::shared_ptr<Communicator> comm) {
  return [comm](GradBucket& b) -> Finish {
    Tensor compressed = b.buffer.to(kBFloat16).clone();
    compressed.div_(comm->size());
    WorkPtr w = comm->all_reduce(compressed, ReduceOp(RedOpType::SUM), /*async_op=*/true);
    DType dt = b.buffer.dtype();
    return [w, compressed, dt] {
      w->wait();
      return compressed.to(dt);
    };
  };
}

struct Reducer::State : std::enable_shared_from_this<Reducer::State> {
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    Tensor buffer;
    size_t pending = 0;  // parameters not ready yet this iteration
    Finish finish;
  };

  std::vector<Tensor> params;
  std::vector<std::string> names;
  std::shared_ptr<Communicator> comm;
  DDPOptions o;
  CommHook hook;
  std::vector<Bucket> buckets;
  std::vector<std::pair<size_t, size_t>> where;  // parameter -> (bucket, slot)
  bool sync = true, armed = false, in_backward = false, rebuilt = false;
  std::vector<char> ready;
  std::vector<size_t> ready_order;
  size_t next_launch = 0;
  mutable std::mutex timeline_mutex;  // "done" events come from the communicator's thread
  std::vector<Event> events;

  std::string name(size_t i) const {
    return i < names.size() && !names[i].empty() ? names[i] : detail::str_cat("parameter ", i);
  }

  void record(const char* what, int bucket) {
    std::lock_guard lock(timeline_mutex);
    events.push_back({what, bucket, now_ns()});
  }

  // Buckets over the parameters in `order`: a bucket closes once it holds its cap (the
  // first one a smaller cap); one dtype per bucket.
  void build(const std::vector<size_t>& order) {
    buckets.clear();
    where.assign(params.size(), {0, 0});
    std::vector<std::pair<DType, size_t>> open;  // dtype -> index of its open bucket
    std::vector<int64_t> bytes;
    for (size_t i : order) {
      DType dt = params[i].dtype();
      size_t b = buckets.size();
      for (auto& [d, k] : open)
        if (d == dt) b = k;
      if (b == buckets.size()) {
        buckets.emplace_back();
        bytes.push_back(0);
        open.emplace_back(dt, b);
      }
      Bucket& bk = buckets[b];
      int64_t offset = bk.params.empty() ? 0 : bk.offsets.back() + params[bk.params.back()].numel();
      where[i] = {b, bk.params.size()};
      bk.params.push_back(i);
      bk.offsets.push_back(offset);
      bytes[b] += params[i].numel() * int64_t(params[i].element_size());
      int64_t cap = b == 0 ? o.first_bucket_cap_bytes : o.bucket_cap_bytes;
      if (bytes[b] >= cap)
        for (size_t k = 0; k < open.size(); ++k)
          if (open[k].second == b) open.erase(open.begin() + k);
    }
    for (Bucket& bk : buckets) {
      const Tensor& last = params[bk.params.back()];
      bk.buffer = zeros({bk.offsets.back() + last.numel()}, last.dtype());
      bk.pending = bk.params.size();
    }
  }

  Tensor slot_view(size_t i) const {
    auto [b, s] = where[i];
    return buckets[b].buffer.narrow(0, buckets[b].offsets[s], params[i].numel()).view(params[i].sizes());
  }

  GradBucket grad_bucket(size_t b) const {
    GradBucket g;
    g.index = int(b);
    g.is_last = b + 1 == buckets.size();
    g.buffer = buckets[b].buffer;
    g.offsets = buckets[b].offsets;
    for (size_t i : buckets[b].params) g.parameters.push_back(params[i]);
    return g;
  }

  // A parameter's gradient is final for this backward (its post-accumulate hook).
  void mark_ready(size_t i) {
    if (!armed || !sync) return;
    FLB_CHECK(!ready[i], Error, "[DistributedDataParallel] the gradient of ", name(i),
              " became ready twice in one backward (a second backward without a forward through the "
              "DistributedDataParallel module, or a parameter used by two backward passes)");
    if (!in_backward) {
      in_backward = true;
      std::weak_ptr<State> self = weak_from_this();
      autograd::queue_callback([self] {
        if (auto s = self.lock()) s->finalize();
      });
    }
    ready[i] = 1;
    ready_order.push_back(i);
    Tensor view = slot_view(i), g = params[i].grad();
    if (!g.defined()) view.zero_();
    else if (!same_view(g, view)) view.copy_(g);
    if (o.gradient_as_bucket_view && !same_view(g, view)) params[i].set_grad(view);
    --buckets[where[i].first].pending;
    launch_ready();
  }

  // Launches the buckets that are full, in index order.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      size_t b = next_launch++;
      record("launch", int(b));
      GradBucket gb = grad_bucket(b);
      buckets[b].finish = hook ? hook(gb) : allreduce_hook(comm)(gb);
    }
  }

  // End of backward: parameters without a gradient, the remaining buckets, the waits, the
  // averages into .grad; the bucket rebuild after the first iteration.
  void finalize() {
    record("backward_end", -1);
    in_backward = false;
    armed = false;
    std::vector<size_t> missing;
    for (size_t i = 0; i < params.size(); ++i)
      if (!ready[i]) missing.push_back(i);
    if (!missing.empty() && !(o.find_unused_parameters || o.static_graph)) {
      wait_launched();
      reset();
      std::string list;
      for (size_t k = 0; k < missing.size() && k < 8; ++k) list += (k ? ", " : "") + name(missing[k]);
      if (missing.size() > 8) list += detail::str_cat(", ... (", missing.size(), " in all)");
      throw Error(detail::str_cat(
          "[DistributedDataParallel] parameters that did not receive a gradient in this backward: ", list,
          "; pass find_unused_parameters=True if the forward does not use every parameter"));
    }
    for (size_t i : missing) {
      ready[i] = 1;
      ready_order.push_back(i);
      slot_view(i).zero_();
      --buckets[where[i].first].pending;
    }
    launch_ready();
    for (size_t b = 0; b < buckets.size(); ++b) {
      Tensor r = buckets[b].finish();
      buckets[b].finish = nullptr;
      if (!(r.storage() == buckets[b].buffer.storage() && r.data_ptr() == buckets[b].buffer.data_ptr()))
        buckets[b].buffer.copy_(r);
      record("done", int(b));
      for (size_t i : buckets[b].params) write_grad(i);
    }
    if (!rebuilt) rebuild();
    reset();
  }

  void write_grad(size_t i) {
    Tensor view = slot_view(i), g = params[i].grad();
    if (o.gradient_as_bucket_view) {
      if (!same_view(g, view)) params[i].set_grad(view);
    } else if (g.defined() && g.sizes() == view.sizes() && g.dtype() == view.dtype()) {
      g.copy_(view);
    } else {
      params[i].set_grad(view.clone());
    }
  }

  void wait_launched() {
    for (size_t b = 0; b < next_launch; ++b)
      if (buckets[b].finish) {
        buckets[b].finish();
        buckets[b].finish = nullptr;
      }
  }

  void reset() {
    ready.assign(params.size(), 0);
    ready_order.clear();
    next_launch = 0;
    for (Bucket& bk : buckets) bk.pending = bk.params.size();
  }

  // Buckets in the order rank 0's gradients became ready (every rank uses rank 0's order).
  void rebuild() {
    rebuilt = true;
    Tensor order = empty({int64_t(params.size())}, kInt64);
    int64_t* p = order.data<int64_t>();
    for (size_t k = 0; k < params.size(); ++k) p[k] = int64_t(ready_order[k]);
    comm->broadcast(order, 0, /*async_op=*/false);
    std::vector<size_t> by_ready(params.size());
    for (size_t k = 0; k < params.size(); ++k) by_ready[k] = size_t(p[k]);
    std::vector<Tensor> grads;
    for (const Tensor& t : params) grads.push_back(t.grad());
    build(by_ready);
    if (o.gradient_as_bucket_view)  // the gradients move into the new buckets
      for (size_t i = 0; i < params.size(); ++i)
        if (grads[i].defined()) {
          Tensor view = slot_view(i);
          view.copy_(grads[i]);
          params[i].set_grad(view);
        }
  }
};

Reducer::Reducer(std::vector<Tensor> params, std::shared_ptr<Communicator> comm, DDPOptions options,
                 std::vector<std::string> names)
    : state_(std::make_shared<State>()) {
  FLB_CHECK(comm, ValueError, "[DistributedDataParallel] no communicator");
  FLB_CHECK(options.bucket_cap_bytes > 0 && options.first_bucket_cap_bytes > 0, ValueError,
            "[DistributedDataParallel] bucket caps must be > 0, got ", options.first_bucket_cap_bytes, " and ",
            options.bucket_cap_bytes, " bytes");
  State& s = *state_;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& t = params[i];
    FLB_CHECK(t.defined() && t.requires_grad() && t.is_leaf(), ValueError,
              "[DistributedDataParallel] parameter ", i, " is not a leaf tensor that requires grad");
    FLB_CHECK(t.is_contiguous(), ValueError, "[DistributedDataParallel] parameter ", i, " of shape ",
              shape_str(t.sizes()), " is not contiguous");
    for (size_t j = 0; j < i; ++j)
      FLB_CHECK(params[j].impl() != t.impl(), ValueError, "[DistributedDataParallel] parameter ", i,
                " is listed twice");
  }
  s.params = std::move(params);
  s.names = std::move(names);
  s.comm = std::move(comm);
  s.o = options;
  std::vector<size_t> reverse;
  for (size_t i = s.params.size(); i-- > 0;) reverse.push_back(i);
  s.build(reverse);
  s.reset();
  if (s.params.empty()) s.rebuilt = true;
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i)
    autograd::register_post_accumulate_grad_hook(s.params[i], [weak, i](Tensor&) {
      if (auto st = weak.lock()) st->mark_ready(i);
    });
}

Reducer::~Reducer() = default;

void Reducer::prepare_for_forward() {
  State& s = *state_;
  FLB_CHECK(!s.in_backward, Error, "[DistributedDataParallel] forward called during a backward pass");
  s.armed = s.sync && !s.params.empty();
  if (s.armed) {
    std::lock_guard lock(s.timeline_mutex);
    s.events.clear();
  }
}

void Reducer::set_require_sync(bool sync) { state_->sync = sync; }
bool Reducer::require_sync() const { return state_->sync; }
void Reducer::register_comm_hook(CommHook hook) {
  FLB_CHECK(!state_->hook, Error, "[register_comm_hook] a communication hook is already registered");
  state_->hook = std::move(hook);
}
const std::shared_ptr<Communicator>& Reducer::comm() const { return state_->comm; }

std::vector<std::vector<size_t>> Reducer::bucket_indices() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : state_->buckets) out.push_back(b.params);
  return out;
}

std::vector<Reducer::Event> Reducer::timeline() const {
  std::lock_guard lock(state_->timeline_mutex);
  return state_->events;
}

void broadcast_tensors(Communicator& comm, const std::vector<Tensor>& tensors, int root) {
  autograd::NoGradGuard no_grad;
  for (const Tensor& t : tensors) {
    if (t.is_contiguous()) {
      comm.broadcast(t, root, /*async_op=*/false);
    } else {
      Tensor c = t.contiguous();
      comm.broadcast(c, root, /*async_op=*/false);
      Tensor(t).copy_(c);
    }
  }
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 std::shared_ptr<Communicator> comm, DDPOptions options,
                                                 bool broadcast_buffers)
    : nn::Module("DistributedDataParallel"), module_(std::move(module)), comm_(std::move(comm)),
      broadcast_buffers_(broadcast_buffers) {
  FLB_CHECK(module_, ValueError, "[DistributedDataParallel] no module");
  register_module("module", module_);
  std::vector<Tensor> state = module_->parameters();
  for (const Tensor& b : module_->buffers()) state.push_back(b);
  broadcast_tensors(*comm_, state, 0);
  std::vector<Tensor> params;
  std::vector<std::string> names;
  for (const auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) {
      params.push_back(p);
      names.push_back(name);
    }
  reducer_ = std::make_unique<Reducer>(std::move(params), comm_, options, std::move(names));
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (broadcast_buffers_ && reducer_->require_sync()) broadcast_tensors(*comm_, module_->buffers(), 0);
  reducer_->prepare_for_forward();
  return (*module_)(x);
}

}  // namespace flambeau::distributed
