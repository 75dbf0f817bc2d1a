// Stands in for the Gloo engine when CMake did not find Gloo (libgloo-dev).
#include "flambeau/distributed/engines.h"

namespace flambeau::distributed {

bool gloo_available() { return false; }

std::unique_ptr<Backend> make_gloo_backend(const BackendInit&) {
  throw DistError(
      "[new_comm] backend 'gloo': flambeau was built without Gloo (install libgloo-dev, then "
      "rebuild)");
}

}  // namespace flambeau::distributed
