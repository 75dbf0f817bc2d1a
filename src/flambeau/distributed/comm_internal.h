// Internal types of the communicator shared by communicator.cpp and collectives.cpp.
#pragma once
#include <optional>

#include "flambeau/distributed/communicator.h"

namespace flambeau::distributed {

// What an op is, for the flight recorder, hooks and the cross-rank argument check.
struct Communicator::Desc {
  OpName op;
  bool p2p = false;
  std::vector<Tensor> inputs, outputs;
  std::optional<DType> dtype;  // compared across ranks when set
  std::optional<Dims> shape;   // compared across ranks when set
  int root = -1;
  RedOpType red = RedOpType::SUM;
};

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
