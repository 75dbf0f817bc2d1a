// Shared vocabulary of flambeau::distributed: reduce ops, op names, P2P ops and the options
// a communicator is made with (torchcomms' CommOptions).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flambeau/core/tensor.h"
#include "flambeau/distributed/store.h"

namespace flambeau::distributed {

// torch.distributed.ReduceOp's kinds. AVG and PREMUL_SUM are done by the communicator
// around a SUM; backends see the other seven.
enum class RedOpType : uint8_t { SUM, PRODUCT, MIN, MAX, BAND, BOR, BXOR, AVG, PREMUL_SUM };
const char* red_op_name(RedOpType t);  // "SUM"

struct ReduceOp {
  RedOpType type = RedOpType::SUM;
  double factor = 1.0;  // PREMUL_SUM's multiplier
  ReduceOp() = default;
  ReduceOp(RedOpType t) : type(t) {}  // NOLINT: ReduceOp op = RedOpType::MAX reads well
  static ReduceOp premul_sum(double factor) {
    ReduceOp op(RedOpType::PREMUL_SUM);
    op.factor = factor;
    return op;
  }
};

// Every operation a communicator runs, as hooks, logs and the flight recorder name it.
#define FLB_COMM_OPS(X)                                                                      \
  X(all_reduce) X(all_gather) X(all_gather_single) X(reduce_scatter) X(reduce_scatter_single) \
  X(all_to_all_single) X(all_to_all) X(broadcast) X(reduce) X(gather) X(scatter) X(send)      \
  X(recv) X(batch_p2p) X(barrier) X(split) X(reconfigure)
enum class OpName : uint8_t {
#define FLB_ENUM(n) n,
  FLB_COMM_OPS(FLB_ENUM)
#undef FLB_ENUM
};
const char* op_name(OpName op);  // "all_reduce"

// One send or recv of a batch (torch's P2POp): peer is a rank of the communicator.
struct P2POp {
  enum Kind : uint8_t { Send, Recv } kind;
  Tensor tensor;
  int peer;
};

using Hints = std::map<std::string, std::string>;

// How a communicator is made (torchcomms' CommOptions). The defaults read the environment:
// TORCHCOMM_ABORT_ON_ERROR ("true"), TORCHCOMM_TIMEOUT_SECONDS ("600"); rank and size come
// from the store's rendezvous or the environment (RANK, WORLD_SIZE) when left at -1.
struct CommOptions {
  CommOptions();
  bool abort_process_on_timeout_or_error;
  Millis timeout;
  std::shared_ptr<Store> store;  // null: env:// rendezvous (MASTER_ADDR, MASTER_PORT)
  std::string name;              // unique among the process's communicators
  bool enable_reconfigure = false;
  Hints hints;
  int rank = -1;
  int size = -1;
};

// Per-call options (torchcomms' `timeout=` and `hints=` keywords).
struct OpOptions {
  std::optional<Millis> timeout;
  Hints hints;
};

}  // namespace flambeau::distributed
