// Work: the handle of an operation a communicator queued (torchcomms' TorchWork, c10d's
// Work). Thread-safe: any thread may wait on it.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "flambeau/distributed/types.h"

namespace flambeau::distributed {

class Work {
 public:
  enum class Status : uint8_t { NOT_STARTED, INPROGRESS, COMPLETED, TIMEDOUT, ERROR, CANCELED };

  Work(OpName op, int64_t seq) : op_(op), seq_(seq) {}
  Status status() const;
  bool is_completed() const { return status() == Status::COMPLETED; }
  // Done one way or another (completed, failed, timed out or canceled).
  bool is_finished() const;
  // Blocks until the work is finished; rethrows its error. With a timeout shorter than the
  // op's own, throws DistBackendError (Timeout) when it runs out; the op goes on.
  void wait(std::optional<Millis> timeout = std::nullopt);
  // The error it finished with (null while running or when it completed).
  std::exception_ptr exception() const;
  OpName op() const { return op_; }
  int64_t seq() const { return seq_; }
  // Runs fn when the work finishes (at once when it already has), on the finishing thread.
  void then(std::function<void(Work&)> fn);

  // The communicator's side.
  void start();
  void finish(Status status, std::exception_ptr error = nullptr);

 private:
  OpName op_;
  int64_t seq_;
  mutable std::mutex mutex_;
  std::condition_variable done_;
  Status status_ = Status::NOT_STARTED;
  std::exception_ptr error_;
  std::vector<std::function<void(Work&)>> callbacks_;
};

const char* work_status_name(Work::Status s);  // "COMPLETED"

}  // namespace flambeau::distributed
