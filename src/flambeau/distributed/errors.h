// The exceptions of flambeau::distributed, mapped in Python to flambeau.distributed's
// DistError family (as torch.distributed's: DistError, DistBackendError, DistStoreError,
// DistNetworkError).
#pragma once
#include <cstdint>
#include <string>
#include <utility>

#include "flambeau/core/error.h"

namespace flambeau::distributed {

class DistError : public Error {
 public:
  using Error::Error;
};
// A key-value store operation failed or timed out.
class DistStoreError : public DistError {
 public:
  using DistError::DistError;
};
// A socket could not be opened, bound or connected (port in use, host unreachable).
class DistNetworkError : public DistError {
 public:
  using DistError::DistError;
};

// Why a communicator operation failed.
enum class CommErrorKind : uint8_t {
  Timeout,     // the op ran past its timeout (a stopped or slow peer)
  PeerFailed,  // a peer closed its connection or died
  Aborted,     // abort() was called: pending and later work is canceled
  Mismatch,    // the ranks passed different shapes, dtypes or ops (the comm stays usable)
  Backend,     // the engine reported another error
};
const char* comm_error_kind_name(CommErrorKind k);  // "timeout", "peer failed", ...

// A collective or P2P operation failed. The message names the op, the communicator, the
// collective sequence number and the peer when known.
class DistBackendError : public DistError {
 public:
  DistBackendError(const std::string& what, CommErrorKind kind, std::string op, int64_t seq,
                   int peer)
      : DistError(what), kind(kind), op(std::move(op)), seq(seq), peer(peer) {}
  CommErrorKind kind;
  std::string op;
  int64_t seq;
  int peer;  // -1 when unknown
};

}  // namespace flambeau::distributed
