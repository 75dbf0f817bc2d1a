// Internal types of the communicator shared by communicator.cpp and collectives.cpp.
#pragma once
#include <optional>

#include "flambeau/distributed/communicator.h"

namespace flambeau::distributed {

// What an op is, for the flight recorder, hooks and the cross-rank argument check.
struct Communicator::Desc {
  Desc() = default;
  Desc(OpName op, bool p2p = false, std::vector<Tensor> inputs = {}, std::vector<Tensor> outputs = {},
       std::optional<DType> dtype = std::nullopt, std::optional<Dims> shape = std::nullopt, int root = -1,
       RedOpType red = RedOpType::SUM)
      : op(op), p2p(p2p), inputs(std::move(inputs)), outputs(std::move(outputs)), dtype(dtype),
        shape(std::move(shape)), root(root), red(red) {}
  OpName op = OpName::barrier;
  bool p2p = false;
  std::vector<Tensor> inputs, outputs;
  std::optional<DType> dtype;  // compared across ranks when set
  std::optional<Dims> shape;   // compared across ranks when set
  int root = -1;
  RedOpType red = RedOpType::SUM;
  // A small op done within the cross-rank check's exchange (Note [Cross-rank argument
  // check]): eager_input's bytes travel with the fingerprint and eager_finish gets every
  // rank's copy, in rank order, instead of running the body.
  Tensor eager_input;
  std::function<void(const std::vector<const char*>&)> eager_finish;
};

// Ops whose input is at most this many bytes may be done eagerly.
inline constexpr size_t kEagerBytes = 64 << 10;

struct Communicator::Private {};

struct Communicator::Item {
  Desc desc;
  std::function<void(Millis)> body;
  WorkPtr work;
  Millis timeout{};
  int64_t record_id = 0;
};

// data[i] *= factor (or /= factor when divide), in the dtype's arithmetic (reduced floats
// through float32).
void scale_buffer(void* data, size_t n, DType dtype, double factor, bool divide);

}  // namespace flambeau::distributed

namespace flambeau::distributed {
// The TCPStore of env:// (MASTER_ADDR, MASTER_PORT; rank 0 serves it).
std::shared_ptr<Store> env_store(int rank, int size, Millis timeout);
}  // namespace flambeau::distributed
