// The communicator: argument checks, the per-communicator work queue and its thread,
// sequence numbers, the cross-rank argument check, hooks, the flight recorder, and the
// failure path (break, abort, or end the process). The collectives themselves are in
// collectives.cpp.
#include "flambeau/distributed/communicator.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "flambeau/autograd/node.h"
#include "flambeau/ops/ops.h"
#include "flambeau/distributed/comm_internal.h"
#include "flambeau/profiler/profiler.h"

namespace flambeau::distributed {

const char* comm_error_kind_name(CommErrorKind k) {
  switch (k) {
    case CommErrorKind::Timeout: return "timeout";
    case CommErrorKind::PeerFailed: return "peer failed";
    case CommErrorKind::Aborted: return "aborted";
    case CommErrorKind::Mismatch: return "arguments differ across ranks";
    case CommErrorKind::Backend: return "backend error";
  }
  return "?";
}

const char* op_name(OpName op) {
  switch (op) {
#define FLB_CASE(n) \
  case OpName::n: return #n;
    FLB_COMM_OPS(FLB_CASE)
#undef FLB_CASE
  }
  return "?";
}

const char* red_op_name(RedOpType t) {
  static const char* names[] = {"SUM", "PRODUCT", "MIN", "MAX", "BAND",
                                "BOR", "BXOR",    "AVG", "PREMUL_SUM"};
  return names[int(t)];
}

namespace {
bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::string s(v);
  return !(s == "0" || s == "false" || s == "False" || s == "FALSE" || s == "no");
}
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}
std::vector<std::vector<int64_t>> sizes_of(const std::vector<Tensor>& ts) {
  std::vector<std::vector<int64_t>> out;
  for (const Tensor& t : ts)
    out.emplace_back(t.defined() ? std::vector<int64_t>(t.sizes().begin(), t.sizes().end())
                                 : std::vector<int64_t>{});
  return out;
}
std::vector<std::string> dtypes_of(const std::vector<Tensor>& ts) {
  std::vector<std::string> out;
  for (const Tensor& t : ts) out.emplace_back(t.defined() ? dtype_name(t.dtype()) : "");
  return out;
}
// How long a sync caller waits past the op's own timeout before it aborts the
// communicator itself (a backend that does not honour its timeout).
constexpr Millis kWaitGrace{5000};
}  // namespace

CommOptions::CommOptions()
    : abort_process_on_timeout_or_error(env_flag("TORCHCOMM_ABORT_ON_ERROR", true)),
      timeout([] {
        const char* v = std::getenv("TORCHCOMM_TIMEOUT_SECONDS");
        double s = v && *v ? std::atof(v) : 600.0;
        return Millis(int64_t(s * 1000));
      }()) {}

Communicator::Communicator(Private, std::unique_ptr<Backend> backend, std::string backend_name,
                           CommOptions options, std::vector<int> global_ranks)
    : backend_(std::move(backend)),
      backend_name_(std::move(backend_name)),
      options_(std::move(options)),
      global_ranks_(std::move(global_ranks)),
      rank_(backend_->rank()),
      size_(backend_->size()),
      check_args_(env_flag("FLAMBEAU_COMM_CHECK_ARGS", true) &&
                  !(options_.hints.count("check_args") && options_.hints.at("check_args") == "0")),
      log_(env_flag("FLAMBEAU_COMM_LOG", false)) {
  static std::atomic<int64_t> made{0};
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  init_handle_ = detail::str_cat(host, "/", ::getpid(), "/", options_.name, "/", made++);
  thread_ = std::thread([this] {
    run_loop();
    std::shared_ptr<Communicator> self;  // set by finalize() for a stuck op; the last owner
    std::lock_guard lock(mutex_);
    self = std::move(keep_alive_);
    // `self` may destroy the communicator as this scope ends: nothing runs after.
  });
}

WorkPtr Communicator::reconfigure(const std::string& uuid, const std::vector<std::string>& handles,
                                  std::optional<Millis> timeout) {
  FLB_CHECK(options_.enable_reconfigure, ValueError, "[reconfigure] communicator '", name(),
            "' was made without enable_reconfigure=True");
  FLB_CHECK(backend_->supports_reconfigure(), NotImplementedError, "[reconfigure] communicator '",
            name(), "' (", backend_->version(), ") cannot rebuild its group after a failure",
            backend_name_ == "mpi" ? ": Open MPI 4.1 has no ULFM (fault-tolerant MPI)" : "");
  FLB_CHECK(!uuid.empty(), ValueError, "[reconfigure] uuid must not be empty");
  auto me = std::find(handles.begin(), handles.end(), init_handle_);
  FLB_CHECK(me != handles.end(), ValueError, "[reconfigure] this process's handle '", init_handle_,
            "' is not among the ", handles.size(), " init_handles");
  for (size_t i = 0; i < handles.size(); ++i)
    FLB_CHECK(std::find(handles.begin() + i + 1, handles.end(), handles[i]) == handles.end(),
              ValueError, "[reconfigure] handle '", handles[i], "' is listed twice");
  // Let the thread finish or cancel everything queued before: it then sits idle.
  auto drained = std::make_shared<Work>(OpName::reconfigure, 0);
  {
    std::lock_guard lock(mutex_);
    if (finalized_)
      throw DistError(detail::str_cat("[reconfigure] communicator '", name(), "' was finalized"));
    auto item = std::make_unique<Item>();
    item->desc.op = OpName::reconfigure;
    item->body = [](Millis) {};
    item->work = drained;
    item->timeout = options_.timeout;
    item->record_id = -1;
    queue_.push_back(std::move(item));
  }
  wake_.notify_one();
  while (!drained->is_finished()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  std::unique_ptr<Backend> fresh =
      backend_->remake(int(me - handles.begin()), int(handles.size()),
                       options_.name + "/reconfigure/" + uuid, timeout.value_or(options_.timeout));
  std::unique_ptr<Backend> old;
  {
    std::lock_guard lock(mutex_);
    old = std::move(backend_);
    backend_ = std::move(fresh);
    rank_ = backend_->rank();
    size_ = backend_->size();
    global_ranks_.resize(size_);
    std::iota(global_ranks_.begin(), global_ranks_.end(), 0);
    collective_seq_ = p2p_seq_ = last_started_ = last_completed_ = 0;
    broken_ = nullptr;
    aborted_ = false;
  }
  auto work = std::make_shared<Work>(OpName::reconfigure, 0);
  work->finish(Work::Status::COMPLETED);
  return work;
}

Communicator::~Communicator() { finalize(); }

std::string Communicator::backend_version() const { return backend_->version(); }

void Communicator::finalize() {
  {
    std::lock_guard lock(mutex_);
    if (finalized_) return;
    finalized_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (!thread_.joinable()) return;
  // Note [A stuck op after abort]: Gloo cannot interrupt an op in progress, so after abort()
  // the thread may sit in the backend until the op's timeout. finalize() then lets it go:
  // the thread keeps the communicator alive and releases it when the op returns. (From the
  // destructor there is no one to keep it alive: it waits.)
  if (aborted_) {
    auto until = std::chrono::steady_clock::now() + Millis(200);
    while (current_busy() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(Millis(1));
    std::shared_ptr<Communicator> self = weak_from_this().lock();
    if (current_busy() && self) {
      std::lock_guard lock(mutex_);
      keep_alive_ = std::move(self);
      thread_.detach();
      return;
    }
  }
  thread_.join();
}

bool Communicator::current_busy() const {
  std::lock_guard lock(mutex_);
  return current_ != nullptr;
}

std::exception_ptr Communicator::error() const {
  std::lock_guard lock(mutex_);
  return broken_;
}

std::string Communicator::context(OpName op, int64_t seq, bool p2p) const {
  return detail::str_cat("[", op_name(op), "] communicator '", name(), "' (", backend_name_,
                         "), rank ", rank_, " of ", size_, ", ",
                         p2p ? "P2P" : "collective", " #", seq);
}

void Communicator::check_usable(OpName op) const {
  std::lock_guard lock(mutex_);
  if (finalized_)
    throw DistError(detail::str_cat("[", op_name(op), "] communicator '", name(),
                                    "' was finalized"));
  if (broken_) {
    std::string why;
    try {
      std::rethrow_exception(broken_);
    } catch (const std::exception& e) {
      why = e.what();
    }
    throw DistBackendError(
        detail::str_cat("[", op_name(op), "] communicator '", name(), "' is ",
                        aborted_ ? "aborted" : "broken", " (", why,
                        "); make a new communicator or reconfigure()"),
        aborted_ ? CommErrorKind::Aborted : CommErrorKind::Backend, op_name(op), -1, -1);
  }
}

WorkPtr Communicator::submit(Desc desc, std::function<void(Millis)> body, bool async_op,
                             const OpOptions& o) {
  check_usable(desc.op);
  Millis timeout = o.timeout.value_or(options_.timeout);
  FLB_CHECK(timeout.count() > 0, ValueError, "[", op_name(desc.op), "] timeout must be > 0, got ",
            timeout.count(), " ms");
  auto item = std::make_unique<Item>();
  WorkPtr work;
  bool run_here = false;
  {
    std::lock_guard lock(mutex_);
    int64_t seq = desc.p2p ? ++p2p_seq_ : ++collective_seq_;
    work = std::make_shared<Work>(desc.op, seq);
    FlightRecord r;
    r.collective_seq_id = desc.p2p ? 0 : seq;
    r.p2p_seq_id = desc.p2p ? seq : 0;
    r.profiling_name = backend_name_ + ":" + op_name(desc.op);
    r.input_sizes = sizes_of(desc.inputs);
    r.output_sizes = sizes_of(desc.outputs);
    r.input_dtypes = dtypes_of(desc.inputs);
    r.output_dtypes = dtypes_of(desc.outputs);
    r.time_created_ns = now_ns();
    r.timeout_ms = timeout.count();
    r.is_p2p = desc.p2p;
    item->record_id = recorder_.record(std::move(r));
    item->desc = std::move(desc);
    item->body = std::move(body);
    item->work = work;
    item->timeout = timeout;
    // Note [Blocking ops on the caller's thread]: with nothing queued or running, a blocking
    // op on an engine that abort() can interrupt runs right here: no hand-off to the
    // communicator's thread and back (two wake-ups, a large part of a small op's time).
    run_here = !async_op && backend_->interruptible() && queue_.empty() && !current_;
    if (run_here) current_ = work;
    else queue_.push_back(std::move(item));
  }
  if (run_here) {
    {
      autograd::NoGradGuard no_grad;
      run_item(*item);
    }
    {
      std::lock_guard lock(mutex_);
      current_ = nullptr;
    }
    wake_.notify_all();
    work->wait();
    return work;
  }
  wake_.notify_one();
  if (!async_op) {
    try {
      work->wait(timeout + kWaitGrace);
    } catch (const DistBackendError&) {
      if (work->is_finished()) throw;
      abort();  // the backend did not honour its timeout
      work->wait();
    }
  }
  return work;
}

void Communicator::run_loop() {
  autograd::NoGradGuard no_grad;  // collectives write tensors' memory, autograd sees nothing
  for (;;) {
    std::unique_ptr<Item> item;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return !current_ && (stopping_ || !queue_.empty()); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
      current_ = item->work;
    }
    run_item(*item);
    std::lock_guard lock(mutex_);
    current_ = nullptr;
  }
}

void Communicator::run_item(Item& item) {
  const Desc& d = item.desc;
  Work& work = *item.work;
  if (std::exception_ptr e = error()) {
    recorder_.finished(item.record_id, "canceled");
    work.finish(Work::Status::CANCELED, canceled_error(d, work.seq()));
    return;
  }
  if (d.op == OpName::reconfigure) {  // reconfigure's drain marker
    work.finish(Work::Status::COMPLETED);
    return;
  }
  work.start();
  recorder_.started(item.record_id);
  if (!d.p2p) last_started_ = work.seq();
  auto t0 = std::chrono::steady_clock::now();
  profiler::Scope scope(op_name(d.op), profiler::EventKind::Collective);
  if (profiler::Event* e = scope.event(); e && !d.p2p) e->collective_seq = work.seq();
  run_hooks(pre_hooks_, d, work.seq(), nullptr);
  std::exception_ptr error;
  Work::Status status = Work::Status::COMPLETED;
  try {
    bool done = check_args_ && !d.p2p && check_same_everywhere(d, item.timeout, work.seq());
    if (!done) item.body(item.timeout);
  } catch (const DistBackendError& e) {
    if (e.kind == CommErrorKind::Mismatch) {
      error = std::current_exception();  // every rank saw it; the communicator stays usable
      status = Work::Status::ERROR;
    } else {
      CommErrorKind kind = aborted_ ? CommErrorKind::Aborted : e.kind;
      error = std::make_exception_ptr(DistBackendError(
          context(d.op, work.seq(), d.p2p) + ": " + e.what(), kind, op_name(d.op), work.seq(),
          e.peer));
      status = kind == CommErrorKind::Aborted   ? Work::Status::CANCELED
               : kind == CommErrorKind::Timeout ? Work::Status::TIMEDOUT
                                                : Work::Status::ERROR;
    }
  } catch (const std::exception& e) {
    CommErrorKind kind = aborted_ ? CommErrorKind::Aborted : CommErrorKind::Backend;
    error = std::make_exception_ptr(DistBackendError(
        context(d.op, work.seq(), d.p2p) + ": " + e.what(), kind, op_name(d.op), work.seq(), -1));
    status = kind == CommErrorKind::Aborted ? Work::Status::CANCELED : Work::Status::ERROR;
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::string message;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    }
  }
  const char* state = status == Work::Status::COMPLETED  ? "completed"
                      : status == Work::Status::CANCELED ? "canceled"
                                                         : "failed";
  recorder_.finished(item.record_id, state, message);
  if (!d.p2p && status == Work::Status::COMPLETED) last_completed_ = work.seq();
  if (log_)
    std::fprintf(stderr, "[flambeau.distributed] rank=%d comm=%s op=%s seq=%lld state=%s %.3f ms%s%s\n",
                 global_ranks_[rank_], name().c_str(), op_name(d.op), (long long)work.seq(), state,
                 ms, message.empty() ? "" : " error=", message.c_str());
  run_hooks(post_hooks_, d, work.seq(), error);
  bool breaks = error && status != Work::Status::ERROR ? true
                : error                                ? !is_mismatch(error)
                                                       : false;
  if (breaks) on_failure(error);
  work.finish(status, error);
}

bool Communicator::is_mismatch(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const DistBackendError& b) {
    return b.kind == CommErrorKind::Mismatch;
  } catch (...) {
    return false;
  }
}

std::exception_ptr Communicator::canceled_error(const Desc& d, int64_t seq) const {
  std::string why;
  try {
    std::rethrow_exception(error());
  } catch (const std::exception& e) {
    why = e.what();
  }
  return std::make_exception_ptr(DistBackendError(
      context(d.op, seq, d.p2p) + ": canceled, the communicator is " +
          (aborted_ ? "aborted" : "broken") + " (" + why + ")",
      CommErrorKind::Aborted, op_name(d.op), seq, -1));
}

void Communicator::run_hooks(const std::vector<std::pair<int, OpHook>>& hooks, const Desc& d,
                             int64_t seq, std::exception_ptr error) {
  std::vector<OpHook> fns;
  {
    std::lock_guard lock(hooks_mutex_);
    for (auto& [id, fn] : hooks) fns.push_back(fn);
  }
  if (fns.empty()) return;
  OpEvent ev{d.op, seq, d.inputs, d.outputs, error};
  for (auto& fn : fns) {
    try {
      fn(ev);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[flambeau.distributed] a hook of %s raised: %s\n", op_name(d.op),
                   e.what());
    }
  }
}

void Communicator::on_failure(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (!broken_) broken_ = error;
  }
  if (options_.abort_process_on_timeout_or_error && !options_.enable_reconfigure && !aborted_) {
    std::string why;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      why = e.what();
    }
    std::fprintf(stderr,
                 "[flambeau.distributed] %s\n[flambeau.distributed] aborting the process "
                 "(abort_process_on_timeout_or_error=True)\n",
                 why.c_str());
    run_abort_hooks();
    dump_on_failure();
    std::fflush(nullptr);
    std::abort();
  }
  backend_->abort();  // close the connections: peers waiting on this rank fail fast
  dump_on_failure();
}

void Communicator::run_abort_hooks() {
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard lock(hooks_mutex_);
    for (auto& [id, fn] : abort_hooks_) fns.push_back(fn);
  }
  for (auto& fn : fns) {
    try {
      fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[flambeau.distributed] an abort hook raised: %s\n", e.what());
    }
  }
}

std::string flight_recorder_dir() {
  const char* v = std::getenv("FLAMBEAU_FR_DUMP_DIR");
  return v && *v ? v : "/tmp/flambeau_flight_recorder";
}

void Communicator::dump_on_failure() {
  try {
    std::string dir = flight_recorder_dir();
    ::mkdir(dir.c_str(), 0755);
    std::string path = dump_flight_recorder_file(dir);
    std::fprintf(stderr, "[flambeau.distributed] flight recorder dumped to %s\n", path.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[flambeau.distributed] flight recorder dump failed: %s\n", e.what());
  }
}

void Communicator::abort() {
  if (aborted_.exchange(true)) return;  // first writer wins
  {
    std::lock_guard lock(mutex_);
    if (!broken_)
      broken_ = std::make_exception_ptr(DistBackendError(
          detail::str_cat("communicator '", name(), "' was aborted"), CommErrorKind::Aborted, "abort",
          -1, -1));
  }
  backend_->abort();
  // The op in progress and everything queued finish now as CANCELED, even where the engine
  // cannot interrupt its op (Gloo): see Note [A stuck op after abort].
  std::vector<std::pair<WorkPtr, const Desc*>> cancel;
  {
    std::lock_guard lock(mutex_);
    for (auto& item : queue_) cancel.emplace_back(item->work, &item->desc);
    if (current_) cancel.emplace_back(current_, nullptr);
  }
  for (auto& [work, desc] : cancel) {
    Desc d{work->op(), false, {}, {}, std::nullopt, std::nullopt};
    work->finish(Work::Status::CANCELED, canceled_error(desc ? *desc : d, work->seq()));
  }
  run_abort_hooks();
  dump_on_failure();
  wake_.notify_all();
}

int Communicator::register_pre_hook(OpHook hook) {
  std::lock_guard lock(hooks_mutex_);
  pre_hooks_.emplace_back(++next_hook_, std::move(hook));
  return next_hook_;
}
int Communicator::register_post_hook(OpHook hook) {
  std::lock_guard lock(hooks_mutex_);
  post_hooks_.emplace_back(++next_hook_, std::move(hook));
  return next_hook_;
}
int Communicator::register_abort_hook(std::function<void()> hook) {
  std::lock_guard lock(hooks_mutex_);
  abort_hooks_.emplace_back(++next_hook_, std::move(hook));
  return next_hook_;
}
void Communicator::remove_hook(int id) {
  std::lock_guard lock(hooks_mutex_);
  auto drop = [id](auto& v) { std::erase_if(v, [id](auto& p) { return p.first == id; }); };
  drop(pre_hooks_);
  drop(post_hooks_);
  drop(abort_hooks_);
}

FlightRecorderHeader Communicator::recorder_header() const {
  FlightRecorderHeader h;
  h.comm_name = name();
  h.backend = backend_name_;
  h.rank = rank_;
  h.size = size_;
  h.global_rank = global_ranks_[rank_];
  h.ranks = global_ranks_;
  std::lock_guard lock(mutex_);
  h.last_enqueued = collective_seq_;
  h.last_started = last_started_;
  h.last_completed = last_completed_;
  return h;
}

std::string Communicator::dump_flight_recorder(bool include_completed) const {
  return recorder_.dump_json(recorder_header(), include_completed);
}

std::string Communicator::dump_flight_recorder_file(const std::string& dir,
                                                    bool include_completed) const {
  std::string path = detail::str_cat(dir, "/", name(), "_rank", global_ranks_[rank_], ".json");
  recorder_.dump_file(path, recorder_header(), include_completed);
  return path;
}

// Note [Cross-rank argument check]: before each collective, the ranks exchange a small
// fingerprint of their call (op, dtype, shape, root, reduce op). A mismatch is an error on
// every rank at once, with each rank's view in the message, where the engines would hang,
// read garbage or crash on a size they did not expect. It costs one exchange per
// collective, so a small all_reduce or all_gather (up to kEagerBytes) sends its data along
// and is done within it, where the engine supports messages of different lengths (Gloo);
// FLAMBEAU_COMM_CHECK_ARGS=0 or hints={"check_args": "0"} turns the check off.
bool Communicator::check_same_everywhere(const Desc& d, Millis timeout, int64_t seq) {
  constexpr int kLen = 16, kMaxDims = 10;
  constexpr size_t kHeader = kLen * sizeof(int64_t);
  Tensor eager = d.eager_input.defined() ? d.eager_input.contiguous() : Tensor();
  const size_t payload = eager.defined() ? eager.numel() * eager.element_size() : 0;
  // Every rank posts the same slot size whatever its call (Gloo aborts on a message longer
  // than the receive posted for it).
  const size_t slot = kHeader + kEagerBytes;
  Tensor message = empty({int64_t(slot * size_)}, kUInt8);
  char* base = static_cast<char*>(message.data_ptr());
  char* mine_at = base + rank_ * slot;
  int64_t f[kLen] = {};
  f[0] = int64_t(d.op);
  f[1] = d.dtype ? int64_t(*d.dtype) : -1;
  f[2] = d.root;
  f[3] = int64_t(d.red);
  f[4] = d.shape ? int64_t(d.shape->size()) : -1;
  if (d.shape) {
    int64_t numel = 1;
    for (size_t i = 0; i < d.shape->size(); ++i) {
      if (i < kMaxDims) f[5 + i] = (*d.shape)[i];
      numel *= (*d.shape)[i];
    }
    f[15] = numel;
  }
  std::memcpy(mine_at, f, kHeader);
  if (payload) std::memcpy(mine_at + kHeader, eager.data_ptr(), payload);
  bool eager_sent = backend_->exchange(mine_at, kHeader + payload, base, slot, timeout);
  Tensor all;
  if (eager_sent) {
    all = empty({int64_t(size_) * kLen}, kInt64);
    for (int r = 0; r < size_; ++r) std::memcpy(all.data<int64_t>() + r * kLen, base + r * slot, kHeader);
  } else {
    Tensor fp = empty({kLen}, kInt64);
    std::memcpy(fp.data_ptr(), f, kHeader);
    all = empty({int64_t(size_) * kLen}, kInt64);
    backend_->all_gather_single(all, fp, timeout);
  }
  const int64_t* a = all.data<int64_t>();
  bool same = true;
  for (int r = 0; r < size_ && same; ++r)
    for (int i = 0; i < kLen; ++i) same = same && a[r * kLen + i] == f[i];
  if (same) {
    if (!eager_sent || !d.eager_finish) return false;
    std::vector<const char*> blocks;
    for (int r = 0; r < size_; ++r) blocks.push_back(base + r * slot + kHeader);
    d.eager_finish(blocks);
    return true;
  }
  auto describe = [&](const int64_t* g) {
    std::string s = op_name(OpName(g[0]));
    if (g[4] >= 0) {
      s += " (";
      for (int64_t i = 0; i < g[4] && i < kMaxDims; ++i) s += (i ? ", " : "") + std::to_string(g[5 + i]);
      s += g[4] == 1 ? ",)" : ")";
    }
    if (g[1] >= 0) s += std::string(" ") + dtype_name(DType(g[1]));
    if (g[2] >= 0) s += " root " + std::to_string(g[2]);
    if (OpName(g[0]) == OpName::all_reduce || OpName(g[0]) == OpName::reduce ||
        OpName(g[0]) == OpName::reduce_scatter || OpName(g[0]) == OpName::reduce_scatter_single)
      s += std::string(" ") + red_op_name(RedOpType(g[3]));
    return s;
  };
  std::string views;
  for (int r = 0; r < size_; ++r)
    views += detail::str_cat(r ? "; " : "", "rank ", r, ": ", describe(a + r * kLen));
  throw DistBackendError(detail::str_cat(context(d.op, seq, false),
                                         ": the ranks called different collectives or passed "
                                         "different shapes, dtypes, roots or reduce ops: ",
                                         views),
                         CommErrorKind::Mismatch, op_name(d.op), seq, -1);
}

}  // namespace flambeau::distributed
