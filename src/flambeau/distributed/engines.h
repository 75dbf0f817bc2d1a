// The engines built into flambeau. Each lives in its own folder; when CMake does not find
// an engine's library, a no_<engine>.cpp defines the same names and says what is missing.
#pragma once
#include <memory>

#include "flambeau/distributed/backend.h"

namespace flambeau::distributed {

std::unique_ptr<Backend> make_gloo_backend(const BackendInit& init);
bool gloo_available();
std::unique_ptr<Backend> make_mpi_backend(const BackendInit& init);
bool mpi_available();

}  // namespace flambeau::distributed
