// The Open MPI engine's check, run under mpirun (tests/distributed/mpi_launch_test.cpp runs
// it on 2, 3 and 4 ranks; it is not a GoogleTest source). Drives the engine through the
// communicator: every op x dtype x size against a reference each rank computes locally
// (rank r's contribution is a deterministic function of r and the element index), the
// chunked large-count paths (FLAMBEAU_MPI_MAX_COUNT lowered), split sub-communicators,
// cross-rank mismatches, a timeout (one rank skips a collective), abort(), and async work on
// two communicators at once (issued in opposite orders on even and odd ranks, which only
// completes when the communicators progress concurrently).
//
// Exit status: 0 when every check passed on this rank, 1 when some failed (each failure is
// printed), 2 on an unexpected exception (then without MPI_Finalize, so mpirun ends the job).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "flambeau/distributed/communicator.h"
#include "flambeau/ops/ops.h"

using namespace flambeau;
using namespace flambeau::distributed;
using Clock = std::chrono::steady_clock;

namespace {

int g_world_rank = -1;
int64_t g_checks = 0, g_failures = 0;

void fail(int line, const std::string& what) {
  ++g_failures;
  if (g_failures <= 30)
    std::fprintf(stderr, "[mpi_check rank %d] FAILED (line %d): %s\n", g_world_rank, line,
                 what.c_str());
}
#define CHECK(cond, ...)                                            \
  do {                                                              \
    ++g_checks;                                                     \
    if (!(cond)) fail(__LINE__, detail::str_cat(#cond, ": ", __VA_ARGS__)); \
  } while (0)

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// ---- Values: written and read through double, in the tensor's own type.
template <class T>
T to(double x) {
  if constexpr (std::is_same_v<T, bool>) return x != 0;
  else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return T(float(x));
  else return T(x);
}
template <class T>
double from(T v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) return double(float(v));
  else return double(v);
}
// x as the dtype stores it.
double quantize(double x, DType dt) {
  return visit_dtype(dt, [&]<class T>() { return from<T>(to<T>(x)); });
}
void set(const Tensor& t, int64_t i, double x) {
  visit_dtype(t.dtype(), [&]<class T>() { static_cast<T*>(t.data_ptr())[i] = to<T>(x); });
}
double get(const Tensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&]<class T>() { return from<T>(static_cast<const T*>(t.data_ptr())[i]); });
}
Tensor make(int64_t n, DType dt, const std::function<double(int64_t)>& f) {
  Tensor t = empty({n}, dt);
  for (int64_t i = 0; i < n; ++i) set(t, i, f(i));
  return t;
}
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// Compares t with want(i); one failure line per tensor.
void expect_values(int line, const std::string& what, const Tensor& t,
                   const std::function<double(int64_t)>& want) {
  ++g_checks;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double w = quantize(want(i), t.dtype()), g = get(t, i);
    if (!same(g, w)) {
      fail(line, detail::str_cat(what, " ", dtype_name(t.dtype()), " numel ", t.numel(),
                                 ": element ", i, " is ", g, ", expected ", w));
      return;
    }
  }
}

bool is_signed(DType dt) { return dt != kUInt8 && dt != kBool; }

// Rank r's input for a reduction, element i (small integers: exact in every dtype, sums of
// four fit int8).
double value(RedOpType op, DType dt, int r, int64_t i) {
  switch (op) {
    case RedOpType::PRODUCT: {
      double m = 1 + (r * i + r) % 2;
      return is_signed(dt) && (r + i) % 3 == 0 ? -m : dt == kBool ? double((r + i) % 3 != 0) : m;
    }
    case RedOpType::MIN:
    case RedOpType::MAX:
      if (is_floating(dt) && i % 13 == r) return NAN;  // NaN wins, as torch.minimum/maximum
      [[fallthrough]];
    case RedOpType::SUM: {
      double v = double((r * 7 + i * 3) % 11);
      return is_signed(dt) ? v - 5 : v;
    }
    case RedOpType::BAND:
    case RedOpType::BOR:
    case RedOpType::BXOR:
      return dt == kBool ? double((r * 3 + i) % 4 != 0) : double((r * 37 + i * 11) & 0x7f);
    case RedOpType::AVG:
    case RedOpType::PREMUL_SUM: break;
  }
  return 0;
}

// The reduction over ranks 0..size-1 of value(op, dt, r, i), each quantized to dt.
double reference(RedOpType op, DType dt, int size, int64_t i) {
  double acc = quantize(value(op, dt, 0, i), dt);
  for (int r = 1; r < size; ++r) {
    double v = quantize(value(op, dt, r, i), dt);
    switch (op) {
      case RedOpType::SUM: acc += v; break;
      case RedOpType::PRODUCT: acc *= v; break;
      case RedOpType::MIN: acc = std::isnan(acc) || std::isnan(v) ? NAN : std::min(acc, v); break;
      case RedOpType::MAX: acc = std::isnan(acc) || std::isnan(v) ? NAN : std::max(acc, v); break;
      case RedOpType::BAND: acc = double(int64_t(acc) & int64_t(v)); break;
      case RedOpType::BOR: acc = double(int64_t(acc) | int64_t(v)); break;
      case RedOpType::BXOR: acc = double(int64_t(acc) ^ int64_t(v)); break;
      case RedOpType::AVG:
      case RedOpType::PREMUL_SUM: break;
    }
  }
  return acc;
}

// A plain value for data movement: rank r, element i.
double plain(DType dt, int r, int64_t i) {
  if (dt == kBool) return double((r + i) % 3 == 1);
  return double((r * 13 + i * 7) % 61) - (is_signed(dt) ? 30 : 0);
}

std::vector<RedOpType> ops_for(DType dt) {
  std::vector<RedOpType> ops = {RedOpType::SUM, RedOpType::PRODUCT, RedOpType::MIN, RedOpType::MAX};
  if (is_integral(dt, true))
    ops.insert(ops.end(), {RedOpType::BAND, RedOpType::BOR, RedOpType::BXOR});
  return ops;
}

// Every op on one communicator, for each dtype and size.
void suite(Communicator& c, const std::vector<DType>& dtypes, const std::vector<int64_t>& sizes) {
  const int me = c.rank(), P = c.size();
  const std::string where = detail::str_cat("comm '", c.name(), "' rank ", me, "/", P, ":");
  for (DType dt : dtypes) {
    for (int64_t n : sizes) {
      const std::string tag = detail::str_cat(where, " n=", n);
      for (RedOpType op : ops_for(dt)) {
        Tensor t = make(n, dt, [&](int64_t i) { return value(op, dt, me, i); });
        c.all_reduce(t, op, false);
        expect_values(__LINE__, detail::str_cat(tag, " all_reduce ", red_op_name(op)), t,
                      [&](int64_t i) { return reference(op, dt, P, i); });
      }
      {
        Tensor in = make(n, dt, [&](int64_t i) { return plain(dt, me, i); });
        Tensor out = zeros({n * P}, dt);
        c.all_gather_single(out, in, false);
        expect_values(__LINE__, tag + " all_gather_single", out,
                      [&](int64_t j) { return plain(dt, int(j / std::max<int64_t>(n, 1)), j % std::max<int64_t>(n, 1)); });
      }
      for (RedOpType op : {RedOpType::SUM, RedOpType::MAX}) {
        // Rank r's block b holds value(op, dt, r, b * n + i).
        Tensor in = make(n * P, dt, [&](int64_t j) { return value(op, dt, me, j); });
        Tensor out = zeros({n}, dt);
        c.reduce_scatter_single(out, in, op, false);
        expect_values(__LINE__, detail::str_cat(tag, " reduce_scatter_single ", red_op_name(op)), out,
                      [&](int64_t i) { return reference(op, dt, P, me * n + i); });
      }
      {
        // Uneven splits: rank r sends count(r, s) elements to rank s.
        auto count = [&](int r, int s) { return n * (1 + (r + 2 * s) % 3) / 3; };
        std::vector<int64_t> in_split(P), out_split(P);
        int64_t in_n = 0, out_n = 0;
        for (int s = 0; s < P; ++s) {
          in_split[s] = count(me, s);
          out_split[s] = count(s, me);
          in_n += in_split[s];
          out_n += out_split[s];
        }
        auto sent = [&](int r, int s, int64_t j) { return plain(dt, r * 5 + s, j); };
        Tensor in = empty({in_n}, dt);
        for (int s = 0, at = 0; s < P; at += int(in_split[s]), ++s)
          for (int64_t j = 0; j < in_split[s]; ++j) set(in, at + j, sent(me, s, j));
        Tensor out = zeros({out_n}, dt);
        c.all_to_all_single(out, in, out_split, in_split, false);
        std::vector<std::pair<int, int64_t>> src;  // (from rank, index) of each output element
        for (int r = 0; r < P; ++r)
          for (int64_t j = 0; j < out_split[r]; ++j) src.emplace_back(r, j);
        expect_values(__LINE__, tag + " all_to_all_single", out,
                      [&](int64_t k) { return sent(src[k].first, me, src[k].second); });
      }
      {
        const int root = int(n % P);
        Tensor t = me == root ? make(n, dt, [&](int64_t i) { return plain(dt, root + 100, i); })
                              : zeros({n}, dt);
        c.broadcast(t, root, false);
        expect_values(__LINE__, detail::str_cat(tag, " broadcast root ", root), t,
                      [&](int64_t i) { return plain(dt, root + 100, i); });
      }
      {
        const int root = int((n + 1) % P);
        for (RedOpType op : {RedOpType::SUM, RedOpType::MIN}) {
          Tensor t = make(n, dt, [&](int64_t i) { return value(op, dt, me, i); });
          c.reduce(t, root, op, false);
          if (me == root)
            expect_values(__LINE__, detail::str_cat(tag, " reduce ", red_op_name(op), " root ", root), t,
                          [&](int64_t i) { return reference(op, dt, P, i); });
          else  // torch's contract: only root's tensor changes
            expect_values(__LINE__, detail::str_cat(tag, " reduce (non-root unchanged)"), t,
                          [&](int64_t i) { return value(op, dt, me, i); });
        }
      }
      {
        const int root = int((n + 2) % P);
        Tensor in = make(n, dt, [&](int64_t i) { return plain(dt, me, i); });
        std::vector<Tensor> outs;
        if (me == root)
          for (int r = 0; r < P; ++r) outs.push_back(zeros({n}, dt));
        c.gather(outs, in, root, false);
        for (int r = 0; r < int(outs.size()); ++r)
          expect_values(__LINE__, detail::str_cat(tag, " gather root ", root, " block ", r), outs[r],
                        [&](int64_t i) { return plain(dt, r, i); });
      }
      {
        const int root = int((n + 3) % P);
        std::vector<Tensor> ins;
        if (me == root)
          for (int r = 0; r < P; ++r)
            ins.push_back(make(n, dt, [&](int64_t i) { return plain(dt, r + 50, i); }));
        Tensor out = zeros({n}, dt);
        c.scatter(out, ins, root, false);
        expect_values(__LINE__, detail::str_cat(tag, " scatter root ", root), out,
                      [&](int64_t i) { return plain(dt, me + 50, i); });
      }
      if (P > 1) {
        // A ring: send to the next rank, receive from the previous, in one batch.
        const int next = (me + 1) % P, prev = (me + P - 1) % P;
        Tensor s = make(n, dt, [&](int64_t i) { return plain(dt, me + 7, i); });
        Tensor r = zeros({n}, dt);
        c.batch_p2p({{P2POp::Send, s, next}, {P2POp::Recv, r, prev}}, false);
        expect_values(__LINE__, tag + " batch_p2p ring", r, [&](int64_t i) { return plain(dt, prev + 7, i); });
        // Plain send/recv, rank 0 -> rank P-1 (async send, sync recv).
        if (me == 0) {
          auto w = c.send(s, P - 1, true);
          w->wait();
        } else if (me == P - 1) {
          Tensor got = zeros({n}, dt);
          c.recv(got, 0, false);
          expect_values(__LINE__, tag + " send/recv", got, [&](int64_t i) { return plain(dt, 7, i); });
        }
      }
      c.barrier(false);
    }
  }
}

template <class F>
CommErrorKind error_kind(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const DistBackendError& e) {
    if (message) *message = e.what();
    return e.kind;
  }
  throw std::runtime_error("expected a DistBackendError, nothing was thrown");
}

CommOptions options(const std::string& name, Millis timeout) {
  CommOptions o;
  o.abort_process_on_timeout_or_error = false;
  o.timeout = timeout;
  o.name = name;
  return o;
}

int run() {
  ::setenv("FLAMBEAU_FR_DUMP_DIR", "/tmp/flambeau_mpi_check_fr", 0);
  const auto t0 = Clock::now();
  auto world = new_comm("mpi", kCPU, options("world", Millis(20000)));
  const int me = world->rank(), P = world->size();
  g_world_rank = me;
  CHECK(world->backend_version().rfind("Open MPI ", 0) == 0, "version is '",
        world->backend_version(), "'");
  CHECK(P >= 1 && me >= 0 && me < P, "rank ", me, " size ", P);

  // A rank that contradicts MPI's is refused.
  {
    CommOptions o = options("bad_rank", Millis(5000));
    o.rank = me + P;
    bool threw = false;
    try {
      new_comm("mpi", kCPU, o);
    } catch (const ValueError& e) {
      threw = std::string(e.what()).find(std::to_string(me + P)) != std::string::npos;
    }
    CHECK(threw, "new_comm with rank ", me + P, " did not raise a ValueError naming it");
  }

  const std::vector<DType> all_dtypes = {kFloat32, kFloat64, kBFloat16, kFloat16,
                                         kInt64,   kInt32,   kInt16,    kInt8,
                                         kUInt8,   kBool};
  suite(*world, all_dtypes, {0, 1, 7, 1000, 100003});
  const double t_suite = ms_since(t0);

  // The chunked paths of Note [MPI counts]: at most 1000 elements per MPI call.
  ::setenv("FLAMBEAU_MPI_MAX_COUNT", "1000", 1);
  auto chunked = new_comm("mpi", kCPU, options("chunked", Millis(20000)));
  ::unsetenv("FLAMBEAU_MPI_MAX_COUNT");
  suite(*chunked, {kFloat32, kBFloat16, kInt64, kBool}, {999, 1000, 1001, 2500});

  // Splits: evens and odds, and all ranks in reverse order (child of the chunked comm too).
  {
    std::vector<int> evens, odds, reversed;
    for (int r = 0; r < P; ++r) (r % 2 ? odds : evens).push_back(r);
    for (int r = P - 1; r >= 0; --r) reversed.push_back(r);
    auto e = world->split(me % 2 == 0 ? evens : std::vector<int>{}, "evens");
    auto o = world->split(me % 2 == 1 ? odds : std::vector<int>{}, "odds");
    CHECK(bool(e) == (me % 2 == 0), "evens split returned ", bool(e));
    CHECK(bool(o) == (me % 2 == 1), "odds split returned ", bool(o));
    auto mine = me % 2 == 0 ? e : o;
    if (mine) {
      CHECK(mine->rank() == me / 2, "split rank ", mine->rank());
      CHECK(mine->size() == int((me % 2 ? odds : evens).size()), "split size ", mine->size());
      suite(*mine, {kFloat32, kBFloat16, kInt32}, {0, 7, 1000});
      // Values are of the sub-communicator's ranks; check the global ranks too.
      Tensor g = zeros({int64_t(mine->size())}, kInt64);
      mine->all_gather_single(g, full({1}, int64_t(me), kInt64), false);
      expect_values(__LINE__, "split all_gather of world ranks", g,
                    [&](int64_t i) { return double(me % 2 + 2 * i); });
    }
    auto rev = chunked->split(reversed, "reversed");
    CHECK(rev && rev->rank() == P - 1 - me, "reversed split rank ", rev ? rev->rank() : -1);
    if (rev) suite(*rev, {kFloat64, kFloat16}, {7, 2500});

    // Lists that differ across ranks: every rank gets the mismatch; the parent stays usable.
    if (P > 1) {
      std::vector<int> list = me == 0 ? std::vector<int>{0, 1} : std::vector<int>{1, 0};
      if (P > 2 && me >= 2) list = {};
      std::string msg;
      CommErrorKind k = error_kind([&] { world->split(list, "mismatched"); }, &msg);
      CHECK(k == CommErrorKind::Mismatch, "mismatched split gave ", comm_error_kind_name(k), ": ", msg);
    }
  }

  // A collective whose shapes differ across ranks fails everywhere as a mismatch.
  if (P > 1) {
    Tensor t = zeros({me == 0 ? 3 : 4}, kFloat32);
    std::string msg;
    CommErrorKind k = error_kind([&] { world->all_reduce(t, RedOpType::SUM, false); }, &msg);
    CHECK(k == CommErrorKind::Mismatch, "mismatched all_reduce gave ", comm_error_kind_name(k), ": ", msg);
    world->barrier(false);
  }

  // Async work on two communicators at once, issued in opposite orders on even and odd ranks.
  {
    auto second = new_comm("mpi", kCPU, options("second", Millis(20000)));
    std::vector<Tensor> a, b;
    std::vector<WorkPtr> works;
    auto issue = [&](Communicator& c, std::vector<Tensor>& ts, double scale) {
      for (int k = 0; k < 16; ++k) {
        ts.push_back(full({int64_t(1 + 997 * k)}, scale * (me + k), kFloat32));
        works.push_back(c.all_reduce(ts.back(), RedOpType::SUM, true));
      }
    };
    if (me % 2 == 0) {
      issue(*world, a, 1.0);
      issue(*second, b, 2.0);
    } else {
      issue(*second, b, 2.0);
      issue(*world, a, 1.0);
    }
    for (auto& w : works) w->wait();
    const double ranks_sum = P * (P - 1) / 2.0;
    for (int k = 0; k < 16; ++k) {
      expect_values(__LINE__, "async world", a[k], [&](int64_t) { return ranks_sum + P * k; });
      expect_values(__LINE__, "async second", b[k], [&](int64_t) { return 2 * (ranks_sum + P * k); });
    }
    // Each rank blocks on one communicator while its async op on the other is pending; the
    // peers do the opposite, so this completes only when both progress concurrently.
    Tensor x = full({100003}, 1.0, kFloat32), y = full({100003}, 2.0, kFloat32);
    Communicator& first = me % 2 == 0 ? *world : *second;
    Communicator& other = me % 2 == 0 ? *second : *world;
    Tensor& fx = me % 2 == 0 ? x : y;
    Tensor& ox = me % 2 == 0 ? y : x;
    auto w = first.all_reduce(fx, RedOpType::SUM, true);
    other.all_reduce(ox, RedOpType::SUM, false);
    w->wait();
    expect_values(__LINE__, "crossed world", x, [&](int64_t) { return P; });
    expect_values(__LINE__, "crossed second", y, [&](int64_t) { return 2 * P; });
    second->barrier(false);
  }

  // A timeout: the last rank skips a collective; the others fail within timeout + 0.5 s, and
  // the communicator is unusable afterwards.
  if (P > 1) {
    auto t = new_comm("mpi", kCPU, options("timeout", Millis(300)));
    world->barrier(false);
    if (me != P - 1) {
      Tensor x = full({8}, 1.0, kFloat32);
      auto start = Clock::now();
      std::string msg;
      CommErrorKind k = error_kind([&] { t->all_reduce(x, RedOpType::SUM, false); }, &msg);
      double ms = ms_since(start);
      CHECK(k == CommErrorKind::Timeout, "skipped collective gave ", comm_error_kind_name(k), ": ", msg);
      CHECK(ms >= 290 && ms <= 800, "the timeout took ", ms, " ms");
      CHECK(msg.find("timed out after 300 ms") != std::string::npos, "message: ", msg);
      start = Clock::now();
      error_kind([&] { t->barrier(false); }, &msg);
      CHECK(ms_since(start) < 100, "a call on the dead communicator took ", ms_since(start), " ms");
    }
    world->barrier(false);
  }

  // abort(): rank 0's pending op fails at once; the communicator is unusable afterwards.
  {
    auto ab = new_comm("mpi", kCPU, options("abort", Millis(20000)));
    if (me == 0 && P > 1) {
      Tensor x = full({8}, 1.0, kFloat32);
      auto w = ab->all_reduce(x, RedOpType::SUM, true);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      auto start = Clock::now();
      ab->abort();
      std::string msg;
      CommErrorKind k = error_kind([&] { w->wait(); }, &msg);
      CHECK(k == CommErrorKind::Aborted, "aborted op gave ", comm_error_kind_name(k), ": ", msg);
      CHECK(ms_since(start) < 500, "abort took ", ms_since(start), " ms to fail the op");
      k = error_kind([&] { ab->barrier(false); }, &msg);
      CHECK(k == CommErrorKind::Aborted, "op after abort gave ", comm_error_kind_name(k), ": ", msg);
    }
    world->barrier(false);
  }

  // A receive whose size differs from the message: an error naming the sizes (shorter) or
  // MPI's truncation error (longer), on a communicator of its own (the receiver's breaks).
  if (P > 1) {
    for (int64_t sent : {3, 10}) {
      auto c = new_comm("mpi", kCPU, options(detail::str_cat("p2p_size_", sent), Millis(5000)));
      if (me == 0) {
        c->send(full({sent}, 1.0, kFloat32), 1, false);
      } else if (me == 1) {
        Tensor r = zeros({5}, kFloat32);
        std::string msg;
        CommErrorKind k = error_kind([&] { c->recv(r, 0, false); }, &msg);
        CHECK(k == CommErrorKind::Backend, "recv of ", sent, " into 5 gave ", comm_error_kind_name(k), ": ", msg);
        if (sent < 5)
          CHECK(msg.find("message of 3 elements where 5 were expected") != std::string::npos, msg);
        else
          CHECK(msg.find("MPI_ERR_TRUNCATE") != std::string::npos || msg.find("truncat") != std::string::npos, msg);
      }
      world->barrier(false);
    }
  }

  // Everyone's verdict, so that every rank exits with the same status.
  Tensor bad = full({1}, int64_t(g_failures), kInt64);
  world->all_reduce(bad, RedOpType::SUM, false);
  const int64_t total_failures = bad.data<int64_t>()[0];
  std::printf("[mpi_check rank %d/%d] %s: %lld checks, %lld failures here, %lld in all; suite "
              "%.0f ms, total %.0f ms\n",
              me, P, world->backend_version().c_str(), (long long)g_checks, (long long)g_failures,
              (long long)total_failures, t_suite, ms_since(t0));
  std::fflush(stdout);
  return total_failures == 0 ? 0 : 1;
}

}  // namespace

int main() {
  ::alarm(120);  // never hang a test run: SIGALRM ends the process, and mpirun the job
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[mpi_check rank %d] unexpected exception: %s\n", g_world_rank, e.what());
    std::fflush(nullptr);
    std::_Exit(2);
  }
}
