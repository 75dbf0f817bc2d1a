// The Open MPI engine's process-wide state (one MPI_Init_thread, the 2-byte datatype of
// bfloat16/float16, the user-defined reductions) and the mapping of dtypes and ReduceOps
// onto MPI's (Note [MPI datatypes]).
#pragma once
#include <mpi.h>

#include <climits>
#include <mutex>
#include <string>

#include "flambeau/distributed/types.h"

namespace flambeau::distributed::mpi_detail {

std::string mpi_error_text(int rc);

constexpr int kUserOps = 4;  // SUM, PRODUCT, MIN, MAX (in RedOpType's order)

struct MpiProcess {
  int provided = 0;
  bool we_initialized = false;
  // With less than MPI_THREAD_MULTIPLE (MPI initialized by someone else), one MPI call at a
  // time, under call_mutex.
  bool serialize = false;
  std::mutex call_mutex;
  MPI_Datatype two_bytes = MPI_DATATYPE_NULL;  // bfloat16, float16
  MPI_Op user_ops[kNumDTypes][kUserOps];
  int64_t max_count = INT_MAX;

  MpiProcess() {
    for (auto& row : user_ops)
      for (MPI_Op& op : row) op = MPI_OP_NULL;
  }
};

// Made (MPI initialised) on the first call; lives for the whole process.
MpiProcess& mpi_process();

// Held around each MPI call when MPI gives less than MPI_THREAD_MULTIPLE.
struct CallLock {
  std::unique_lock<std::mutex> lock;
  explicit CallLock(MpiProcess& p) {
    if (p.serialize) lock = std::unique_lock(p.call_mutex);
  }
};

// The element type of each dtype.
MPI_Datatype mpi_type(DType dtype);
// The reduction of op on dtype: native where MPI's matches PyTorch's, else a user op.
MPI_Op mpi_op(DType dtype, RedOpType op);
// "Open MPI 4.1.4"
std::string library_version();

}  // namespace flambeau::distributed::mpi_detail
