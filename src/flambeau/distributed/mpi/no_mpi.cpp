// Stands in for the MPI engine when CMake did not find Open MPI (libopenmpi-dev).
#include "flambeau/distributed/engines.h"

namespace flambeau::distributed {

bool mpi_available() { return false; }

std::unique_ptr<Backend> make_mpi_backend(const BackendInit&) {
  throw DistError(
      "[new_comm] backend 'mpi': flambeau was built without MPI (install libopenmpi-dev and "
      "openmpi-bin, then rebuild)");
}

}  // namespace flambeau::distributed
