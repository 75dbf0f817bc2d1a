// Work's state machine: NOT_STARTED -> INPROGRESS -> one of COMPLETED, TIMEDOUT, ERROR,
// CANCELED; waiters and `then` callbacks are released when it finishes.
#include "flambeau/distributed/work.h"

#include "flambeau/distributed/errors.h"

namespace flambeau::distributed {

const char* work_status_name(Work::Status s) {
  switch (s) {
    case Work::Status::NOT_STARTED: return "NOT_STARTED";
    case Work::Status::INPROGRESS: return "INPROGRESS";
    case Work::Status::COMPLETED: return "COMPLETED";
    case Work::Status::TIMEDOUT: return "TIMEDOUT";
    case Work::Status::ERROR: return "ERROR";
    case Work::Status::CANCELED: return "CANCELED";
  }
  return "?";
}

Work::Status Work::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

bool Work::is_finished() const {
  Status s = status();
  return s != Status::NOT_STARTED && s != Status::INPROGRESS;
}

std::exception_ptr Work::exception() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Work::start() {
  std::lock_guard lock(mutex_);
  if (status_ == Status::NOT_STARTED) status_ = Status::INPROGRESS;
}

void Work::finish(Status status, std::exception_ptr error) {
  std::vector<std::function<void(Work&)>> callbacks;
  {
    std::lock_guard lock(mutex_);
    if (status_ != Status::NOT_STARTED && status_ != Status::INPROGRESS) return;
    status_ = status;
    error_ = error;
    callbacks.swap(callbacks_);
  }
  done_.notify_all();
  for (auto& fn : callbacks) fn(*this);
}

void Work::then(std::function<void(Work&)> fn) {
  {
    std::lock_guard lock(mutex_);
    if (status_ == Status::NOT_STARTED || status_ == Status::INPROGRESS) {
      callbacks_.push_back(std::move(fn));
      return;
    }
  }
  fn(*this);
}

void Work::wait(std::optional<Millis> timeout) {
  std::unique_lock lock(mutex_);
  auto finished = [&] { return status_ != Status::NOT_STARTED && status_ != Status::INPROGRESS; };
  if (timeout) {
    if (!done_.wait_for(lock, *timeout, finished))
      throw DistBackendError(
          detail::str_cat("[", op_name(op_), "] Work.wait timed out after ", timeout->count(),
                          " ms (collective sequence number ", seq_, "); the op goes on"),
          CommErrorKind::Timeout, op_name(op_), seq_, -1);
  } else {
    done_.wait(lock, finished);
  }
  if (error_) std::rethrow_exception(error_);
}

}  // namespace flambeau::distributed
