// The collectives and P2P ops of Communicator: each checks its arguments on the calling
// thread (nothing is queued or written when they are wrong), describes itself, and queues
// a body that runs the backend on contiguous buffers. Also split and new_comm.
#include <cstring>
#include <numeric>

#include "flambeau/distributed/comm_internal.h"
#include "flambeau/ops/ops.h"

namespace flambeau::distributed {

namespace {

std::string shape_str(const Tensor& t) {
  std::string s = "(";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.sizes()[i]);
  return s + (t.dim() == 1 ? ",)" : ")");
}

void check_defined(OpName op, const Tensor& t, const char* what) {
  FLB_CHECK(t.defined(), ValueError, "[", op_name(op), "] ", what, " is an undefined tensor");
  FLB_CHECK(t.device().is_cpu(), ValueError, "[", op_name(op), "] ", what,
            " must be on the CPU, got ", t.device().str());
}

// An output the backend writes into: it must be contiguous.
void check_output(OpName op, const Tensor& t, const char* what) {
  check_defined(op, t, what);
  FLB_CHECK(t.is_contiguous(), ValueError, "[", op_name(op), "] ", what, " ", shape_str(t),
            " must be contiguous");
}

void check_same_dtype(OpName op, const Tensor& a, const Tensor& b, const char* what) {
  FLB_CHECK(a.dtype() == b.dtype(), TypeError, "[", op_name(op), "] ", what, " has dtype ",
            dtype_name(b.dtype()), " but the input is ", dtype_name(a.dtype()));
}

void check_rank(OpName op, int r, int size, const char* what) {
  FLB_CHECK(r >= 0 && r < size, IndexError, "[", op_name(op), "] ", what, " ", r,
            " is out of range for a communicator of size ", size);
}

void check_red_op(OpName op, ReduceOp red, DType dtype) {
  bool bitwise = red.type == RedOpType::BAND || red.type == RedOpType::BOR ||
                 red.type == RedOpType::BXOR;
  FLB_CHECK(!bitwise || is_integral(dtype, true), TypeError, "[", op_name(op), "] ReduceOp.",
            red_op_name(red.type), " needs an integer or bool tensor, got ", dtype_name(dtype));
  bool scaled = red.type == RedOpType::AVG || red.type == RedOpType::PREMUL_SUM;
  FLB_CHECK(!scaled || is_floating(dtype), TypeError, "[", op_name(op), "] ReduceOp.",
            red_op_name(red.type), " needs a floating-point tensor, got ", dtype_name(dtype));
}

// What the backend runs for a reduce op (AVG and PREMUL_SUM are SUMs).
RedOpType base_op(ReduceOp red) {
  return red.type == RedOpType::AVG || red.type == RedOpType::PREMUL_SUM ? RedOpType::SUM
                                                                         : red.type;
}

// Whether an op on t may be done within the cross-rank check's exchange.
bool eager_size(const Tensor& t) {
  return t.numel() > 0 && t.numel() * t.element_size() <= kEagerBytes;
}

// A contiguous tensor with t's values: t itself when it already is.
Tensor dense(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

// Flattens a list into one contiguous 1-D tensor.
Tensor pack(const std::vector<Tensor>& ts, DType dtype) {
  int64_t n = 0;
  for (const Tensor& t : ts) n += t.numel();
  Tensor flat = empty({n}, dtype);
  int64_t at = 0;
  for (const Tensor& t : ts) {
    if (t.numel()) flat.narrow(0, at, t.numel()).copy_(t.reshape({t.numel()}));
    at += t.numel();
  }
  return flat;
}

// Copies consecutive blocks of flat into the tensors of a list.
void unpack(const Tensor& flat, const std::vector<Tensor>& ts) {
  int64_t at = 0;
  for (const Tensor& t : ts) {
    Tensor out = t;
    if (t.numel()) out.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
    at += t.numel();
  }
}

// Writes buf back into t when buf is t's contiguous copy.
void write_back(const Tensor& t, const Tensor& buf) {
  if (buf.data_ptr() != t.data_ptr() || !t.is_contiguous()) {
    Tensor out = t;
    out.copy_(buf);
  }
}

}  // namespace

WorkPtr Communicator::all_reduce(const Tensor& t, ReduceOp red, bool async_op,
                                 const OpOptions& o) {
  const OpName op = OpName::all_reduce;
  check_defined(op, t, "tensor");
  check_red_op(op, red, t.dtype());
  Desc d{op, false, {t}, {t}, t.dtype(), t.sizes(), -1, red.type};
  if (eager_size(t) && red.type != RedOpType::PREMUL_SUM) {
    d.eager_input = t;
    d.eager_finish = [this, t, red](const std::vector<const char*>& blocks) {
      // Every rank reduces the same blocks in rank order: the same bits everywhere.
      Tensor buf = dense(t);
      std::memcpy(buf.data_ptr(), blocks[0], buf.numel() * buf.element_size());
      for (int r = 1; r < size_; ++r)
        reduce_buffers(buf.data_ptr(), buf.data_ptr(), blocks[r], buf.numel(), buf.dtype(), base_op(red));
      if (red.type == RedOpType::AVG) scale_buffer(buf.data_ptr(), buf.numel(), buf.dtype(), size_, true);
      write_back(t, buf);
    };
  }
  return submit(std::move(d), [this, t, red](Millis timeout) {
    Tensor buf = dense(t);
    if (red.type == RedOpType::PREMUL_SUM) scale_buffer(buf.data_ptr(), buf.numel(), buf.dtype(), red.factor, false);
    if (buf.numel()) backend_->all_reduce(buf, base_op(red), timeout);
    if (red.type == RedOpType::AVG) scale_buffer(buf.data_ptr(), buf.numel(), buf.dtype(), size_, true);
    write_back(t, buf);
  }, async_op, o);
}

WorkPtr Communicator::all_gather_single(const Tensor& output, const Tensor& input,
                                        bool async_op, const OpOptions& o) {
  const OpName op = OpName::all_gather_single;
  check_defined(op, input, "input");
  check_output(op, output, "output");
  check_same_dtype(op, input, output, "output");
  FLB_CHECK(output.numel() == input.numel() * size_, ValueError, "[", op_name(op),
            "] output ", shape_str(output), " must hold world_size (", size_,
            ") x input ", shape_str(input), " = ", input.numel() * size_, " elements, got ",
            output.numel());
  Desc d{op, false, {input}, {output}, input.dtype(), input.sizes()};
  if (eager_size(input)) {
    d.eager_input = input;
    d.eager_finish = [this, output](const std::vector<const char*>& blocks) {
      const size_t bytes = output.numel() / size_ * output.element_size();
      for (int r = 0; r < size_; ++r) std::memcpy(static_cast<char*>(output.data_ptr()) + r * bytes, blocks[r], bytes);
    };
  }
  return submit(std::move(d), [this, output, in = dense(input)](Millis timeout) {
    if (in.numel()) backend_->all_gather_single(output, in, timeout);
  }, async_op, o);
}

WorkPtr Communicator::all_gather(const std::vector<Tensor>& outputs, const Tensor& input,
                                 bool async_op, const OpOptions& o) {
  const OpName op = OpName::all_gather;
  check_defined(op, input, "input");
  FLB_CHECK(int(outputs.size()) == size_, ValueError, "[", op_name(op), "] the output list has ",
            outputs.size(), " tensors; it needs world_size = ", size_);
  for (const Tensor& t : outputs) {
    check_defined(op, t, "an output");
    check_same_dtype(op, input, t, "an output");
    FLB_CHECK(t.numel() == input.numel(), ValueError, "[", op_name(op), "] output ",
              shape_str(t), " and input ", shape_str(input), " differ in size");
  }
  Desc d{op, false, {input}, outputs, input.dtype(), input.sizes()};
  return submit(std::move(d), [this, outputs, in = dense(input)](Millis timeout) {
    Tensor flat = empty({in.numel() * size_}, in.dtype());
    if (in.numel()) backend_->all_gather_single(flat, in, timeout);
    unpack(flat, outputs);
  }, async_op, o);
}

WorkPtr Communicator::reduce_scatter_single(const Tensor& output, const Tensor& input,
                                            ReduceOp red, bool async_op, const OpOptions& o) {
  const OpName op = OpName::reduce_scatter_single;
  check_defined(op, input, "input");
  check_output(op, output, "output");
  check_same_dtype(op, input, output, "output");
  check_red_op(op, red, input.dtype());
  FLB_CHECK(input.numel() == output.numel() * size_, ValueError, "[", op_name(op), "] input ",
            shape_str(input), " must hold world_size (", size_, ") x output ",
            shape_str(output), " = ", output.numel() * size_, " elements, got ",
            input.numel());
  Desc d{op, false, {input}, {output}, input.dtype(), input.sizes(), -1, red.type};
  return submit(std::move(d), [this, output, input, red](Millis timeout) {
    Tensor in = red.type == RedOpType::PREMUL_SUM ? input.contiguous().clone() : dense(input);
    if (red.type == RedOpType::PREMUL_SUM) scale_buffer(in.data_ptr(), in.numel(), in.dtype(), red.factor, false);
    if (output.numel()) backend_->reduce_scatter_single(output, in, base_op(red), timeout);
    if (red.type == RedOpType::AVG) scale_buffer(output.data_ptr(), output.numel(), output.dtype(), size_, true);
  }, async_op, o);
}

WorkPtr Communicator::reduce_scatter(const Tensor& output, const std::vector<Tensor>& inputs,
                                     ReduceOp red, bool async_op, const OpOptions& o) {
  const OpName op = OpName::reduce_scatter;
  check_output(op, output, "output");
  check_red_op(op, red, output.dtype());
  FLB_CHECK(int(inputs.size()) == size_, ValueError, "[", op_name(op), "] the input list has ",
            inputs.size(), " tensors; it needs world_size = ", size_);
  for (const Tensor& t : inputs) {
    check_defined(op, t, "an input");
    check_same_dtype(op, output, t, "an input");
    FLB_CHECK(t.numel() == output.numel(), ValueError, "[", op_name(op), "] input ",
              shape_str(t), " and output ", shape_str(output), " differ in size");
  }
  Desc d{op, false, inputs, {output}, output.dtype(), output.sizes(), -1, red.type};
  return submit(std::move(d), [this, output, inputs, red](Millis timeout) {
    Tensor in = pack(inputs, output.dtype());
    if (red.type == RedOpType::PREMUL_SUM) scale_buffer(in.data_ptr(), in.numel(), in.dtype(), red.factor, false);
    if (output.numel()) backend_->reduce_scatter_single(output, in, base_op(red), timeout);
    if (red.type == RedOpType::AVG) scale_buffer(output.data_ptr(), output.numel(), output.dtype(), size_, true);
  }, async_op, o);
}

namespace {
// Element counts per rank from dim-0 split sizes (empty: equal parts).
std::vector<int64_t> split_counts(OpName op, const Tensor& t, std::vector<int64_t> splits,
                                  int size, const char* what) {
  int64_t rows = t.dim() ? t.sizes()[0] : 1;
  int64_t row = rows ? t.numel() / rows : 0;
  if (splits.empty()) {
    FLB_CHECK(rows % size == 0, ValueError, "[", op_name(op), "] ", what, " ", shape_str(t),
              ": dim 0 must divide by world_size ", size, " when no split sizes are given");
    splits.assign(size, rows / size);
  }
  FLB_CHECK(int(splits.size()) == size, ValueError, "[", op_name(op), "] ", what,
            " split sizes have ", splits.size(), " entries; they need world_size = ", size);
  int64_t total = 0;
  for (int64_t s : splits) {
    FLB_CHECK(s >= 0, ValueError, "[", op_name(op), "] ", what, " split sizes must be >= 0");
    total += s;
  }
  FLB_CHECK(total == rows, ValueError, "[", op_name(op), "] ", what, " split sizes sum to ",
            total, " but ", what, " ", shape_str(t), " has ", rows, " rows");
  for (int64_t& s : splits) s *= row;
  return splits;
}
}  // namespace

WorkPtr Communicator::all_to_all_single(const Tensor& output, const Tensor& input,
                                        std::vector<int64_t> output_split_sizes,
                                        std::vector<int64_t> input_split_sizes, bool async_op,
                                        const OpOptions& o) {
  const OpName op = OpName::all_to_all_single;
  check_defined(op, input, "input");
  check_output(op, output, "output");
  check_same_dtype(op, input, output, "output");
  auto out_counts = split_counts(op, output, std::move(output_split_sizes), size_, "output");
  auto in_counts = split_counts(op, input, std::move(input_split_sizes), size_, "input");
  Desc d{op, false, {input}, {output}, input.dtype(), std::nullopt};
  return submit(std::move(d), [this, output, in = dense(input), out_counts, in_counts](Millis timeout) {
    backend_->all_to_all_single(output, in, out_counts, in_counts, timeout);
  }, async_op, o);
}

WorkPtr Communicator::all_to_all(const std::vector<Tensor>& outputs,
                                 const std::vector<Tensor>& inputs, bool async_op,
                                 const OpOptions& o) {
  const OpName op = OpName::all_to_all;
  FLB_CHECK(int(outputs.size()) == size_ && int(inputs.size()) == size_, ValueError, "[",
            op_name(op), "] the lists have ", outputs.size(), " outputs and ", inputs.size(),
            " inputs; both need world_size = ", size_);
  std::vector<int64_t> out_counts, in_counts;
  for (int r = 0; r < size_; ++r) {
    check_defined(op, inputs[r], "an input");
    check_defined(op, outputs[r], "an output");
    check_same_dtype(op, inputs[0], inputs[r], "an input");
    check_same_dtype(op, inputs[0], outputs[r], "an output");
    in_counts.push_back(inputs[r].numel());
    out_counts.push_back(outputs[r].numel());
  }
  Desc d{op, false, inputs, outputs, inputs[0].dtype(), std::nullopt};
  return submit(std::move(d), [this, outputs, inputs, out_counts, in_counts](Millis timeout) {
    DType dt = inputs[0].dtype();
    Tensor in = pack(inputs, dt);
    Tensor out = empty({std::accumulate(out_counts.begin(), out_counts.end(), int64_t(0))}, dt);
    backend_->all_to_all_single(out, in, out_counts, in_counts, timeout);
    unpack(out, outputs);
  }, async_op, o);
}

WorkPtr Communicator::broadcast(const Tensor& t, int root, bool async_op, const OpOptions& o) {
  const OpName op = OpName::broadcast;
  check_defined(op, t, "tensor");
  check_rank(op, root, size_, "root");
  Desc d{op, false, {t}, {t}, t.dtype(), t.sizes(), root};
  return submit(std::move(d), [this, t, root](Millis timeout) {
    Tensor buf = dense(t);
    if (buf.numel()) backend_->broadcast(buf, root, timeout);
    write_back(t, buf);
  }, async_op, o);
}

WorkPtr Communicator::reduce(const Tensor& t, int root, ReduceOp red, bool async_op,
                             const OpOptions& o) {
  const OpName op = OpName::reduce;
  check_defined(op, t, "tensor");
  check_rank(op, root, size_, "root");
  check_red_op(op, red, t.dtype());
  Desc d{op, false, {t}, {t}, t.dtype(), t.sizes(), root, red.type};
  return submit(std::move(d), [this, t, root, red](Millis timeout) {
    // Only root's tensor changes (torch's contract), so the others reduce a copy.
    Tensor buf = rank_ == root ? dense(t) : t.contiguous().clone();
    if (red.type == RedOpType::PREMUL_SUM) scale_buffer(buf.data_ptr(), buf.numel(), buf.dtype(), red.factor, false);
    if (buf.numel()) backend_->reduce(buf, root, base_op(red), timeout);
    if (rank_ != root) return;
    if (red.type == RedOpType::AVG) scale_buffer(buf.data_ptr(), buf.numel(), buf.dtype(), size_, true);
    write_back(t, buf);
  }, async_op, o);
}

WorkPtr Communicator::gather(const std::vector<Tensor>& outputs, const Tensor& input, int root,
                             bool async_op, const OpOptions& o) {
  const OpName op = OpName::gather;
  check_defined(op, input, "input");
  check_rank(op, root, size_, "root");
  if (rank_ == root) {
    FLB_CHECK(int(outputs.size()) == size_, ValueError, "[", op_name(op),
              "] on the root the output list needs world_size = ", size_, " tensors, got ",
              outputs.size());
    for (const Tensor& t : outputs) {
      check_defined(op, t, "an output");
      check_same_dtype(op, input, t, "an output");
      FLB_CHECK(t.numel() == input.numel(), ValueError, "[", op_name(op), "] output ",
                shape_str(t), " and input ", shape_str(input), " differ in size");
    }
  } else {
    FLB_CHECK(outputs.empty(), ValueError, "[", op_name(op),
              "] only the root (rank ", root, ") passes an output list; rank ", rank_,
              " passed ", outputs.size(), " tensors");
  }
  Desc d{op, false, {input}, outputs, input.dtype(), input.sizes(), root};
  return submit(std::move(d), [this, outputs, in = dense(input), root](Millis timeout) {
    Tensor flat = rank_ == root ? empty({in.numel() * size_}, in.dtype()) : Tensor();
    if (in.numel()) backend_->gather_single(flat, in, root, timeout);
    if (rank_ == root) unpack(flat, outputs);
  }, async_op, o);
}

WorkPtr Communicator::scatter(const Tensor& output, const std::vector<Tensor>& inputs, int root,
                              bool async_op, const OpOptions& o) {
  const OpName op = OpName::scatter;
  check_output(op, output, "output");
  check_rank(op, root, size_, "root");
  if (rank_ == root) {
    FLB_CHECK(int(inputs.size()) == size_, ValueError, "[", op_name(op),
              "] on the root the input list needs world_size = ", size_, " tensors, got ",
              inputs.size());
    for (const Tensor& t : inputs) {
      check_defined(op, t, "an input");
      check_same_dtype(op, output, t, "an input");
      FLB_CHECK(t.numel() == output.numel(), ValueError, "[", op_name(op), "] input ",
                shape_str(t), " and output ", shape_str(output), " differ in size");
    }
  } else {
    FLB_CHECK(inputs.empty(), ValueError, "[", op_name(op), "] only the root (rank ", root,
              ") passes an input list; rank ", rank_, " passed ", inputs.size(), " tensors");
  }
  Desc d{op, false, inputs, {output}, output.dtype(), output.sizes(), root};
  return submit(std::move(d), [this, output, inputs, root](Millis timeout) {
    Tensor flat = rank_ == root ? pack(inputs, output.dtype()) : Tensor();
    if (output.numel()) backend_->scatter_single(output, flat, root, timeout);
  }, async_op, o);
}

WorkPtr Communicator::batch_p2p(const std::vector<P2POp>& ops, bool async_op,
                                const OpOptions& o) {
  const OpName op = ops.size() == 1 ? (ops[0].kind == P2POp::Send ? OpName::send : OpName::recv)
                                    : OpName::batch_p2p;
  std::vector<Tensor> ins, outs;
  std::vector<P2POp> dense_ops;
  for (const P2POp& p : ops) {
    bool send = p.kind == P2POp::Send;
    check_defined(op, p.tensor, "tensor");
    check_rank(op, p.peer, size_, send ? "destination rank" : "source rank");
    FLB_CHECK(p.peer != rank_, ValueError, "[", op_name(op), "] rank ", rank_, " cannot ",
              send ? "send to" : "receive from", " itself");
    (send ? ins : outs).push_back(p.tensor);
    dense_ops.push_back({p.kind, dense(p.tensor), p.peer});
  }
  Desc d{op, true, ins, outs, std::nullopt, std::nullopt};
  return submit(std::move(d), [this, ops, dense_ops](Millis timeout) {
    backend_->batch_p2p(dense_ops, timeout);
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].kind == P2POp::Recv) write_back(ops[i].tensor, dense_ops[i].tensor);
  }, async_op, o);
}

WorkPtr Communicator::send(const Tensor& t, int dst, bool async_op, const OpOptions& o) {
  return batch_p2p({{P2POp::Send, t, dst}}, async_op, o);
}

WorkPtr Communicator::recv(const Tensor& t, int src, bool async_op, const OpOptions& o) {
  return batch_p2p({{P2POp::Recv, t, src}}, async_op, o);
}

WorkPtr Communicator::barrier(bool async_op, const OpOptions& o) {
  Desc d{OpName::barrier, false, {}, {}, std::nullopt, std::nullopt};
  return submit(std::move(d), [this](Millis timeout) { backend_->barrier(timeout); }, async_op, o);
}

std::shared_ptr<Communicator> Communicator::split(const std::vector<int>& ranks,
                                                  const std::string& name,
                                                  const OpOptions& o) {
  const OpName op = OpName::split;
  FLB_CHECK(!name.empty(), ValueError, "[split] the new communicator needs a name");
  std::vector<bool> seen(size_);
  for (int r : ranks) {
    check_rank(op, r, size_, "rank");
    FLB_CHECK(!seen[r], ValueError, "[split] rank ", r, " is listed twice");
    seen[r] = true;
  }
  FLB_CHECK(ranks.empty() || seen[rank_], ValueError, "[split] rank ", rank_,
            " is not in the list of ranks; a rank outside the new communicator passes an "
            "empty list");
  std::unique_ptr<Backend> child;
  Desc d{op, false, {}, {}, std::nullopt, std::nullopt};
  submit(std::move(d), [&](Millis) { child = backend_->split(ranks, options_.name + "." + name); },
         false, o);
  if (!child) return nullptr;
  CommOptions options = options_;
  options.name = name;
  options.hints.insert(o.hints.begin(), o.hints.end());
  if (o.timeout) options.timeout = *o.timeout;
  std::vector<int> global;
  for (int r : ranks) global.push_back(global_ranks_[r]);
  return std::make_shared<Communicator>(Private{}, std::move(child), backend_name_,
                                        std::move(options), std::move(global));
}

namespace {
int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
int64_t g_unnamed = 0;
}  // namespace

std::shared_ptr<Communicator> new_comm(const std::string& backend, Device device,
                                       CommOptions options) {
  FLB_CHECK(device.is_cpu(), NotImplementedError, "[new_comm] device ", device.str(),
            ": only CPU communicators exist in this build");
  if (options.name.empty()) options.name = "comm" + std::to_string(g_unnamed++);
  if (options.rank < 0) options.rank = env_int("RANK", -1);
  if (options.size < 0) options.size = env_int("WORLD_SIZE", -1);
  BackendInit init;
  init.rank = options.rank;
  init.size = options.size;
  init.name = options.name;
  init.timeout = options.timeout;
  init.hints = options.hints;
  if (backend != "mpi") {
    FLB_CHECK(options.size > 0 && options.rank >= 0 && options.rank < options.size, ValueError,
              "[new_comm] rank ", options.rank, " and size ", options.size,
              " are not valid: pass rank= and size= or set RANK and WORLD_SIZE");
    if (!options.store) options.store = env_store(options.rank, options.size, options.timeout);
    init.store = options.store;
  }
  std::unique_ptr<Backend> b = make_backend(backend, init);
  std::vector<int> global(b->size());
  std::iota(global.begin(), global.end(), 0);
  return std::make_shared<Communicator>(Communicator::Private{}, std::move(b), backend,
                                        std::move(options), std::move(global));
}

std::shared_ptr<Store> env_store(int rank, int size, Millis timeout) {
  const char* addr = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  FLB_CHECK(addr && *addr && port && *port, ValueError,
            "[new_comm] env:// rendezvous needs MASTER_ADDR and MASTER_PORT (or pass store=)");
  TCPStoreOptions so;
  so.port = std::atoi(port);
  so.is_master = rank == 0;
  so.world_size = size;
  so.timeout = timeout;
  so.wait_for_workers = false;
  return std::make_shared<TCPStore>(addr, so);
}

}  // namespace flambeau::distributed
