// Loading extensions: dlopen, the ABI version check, the library's init with the function
// table, then its ops registered all together (none when init fails). Libraries stay
// loaded: their kernels are called for the rest of the process.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <mutex>

#include "flambeau/core/error.h"
#include "flambeau/stable/extension.h"

// The library being initialised: the ops it registered, kept until its init returns.
struct FlbLibraryOpaque {
  struct PendingOp {
    std::string schema;
    flambeau::OpSchema parsed;
    FlbKernel kernel;
    FlbBackwardKernel backward;
    FlbShapeFn shape;
    void* user_data;
  };
  std::string path;
  std::vector<PendingOp> ops;
  bool initialising = true;
};

namespace flambeau {

namespace stable {

FlbStatus register_op_from_library(FlbLibrary library, const char* schema, FlbKernel kernel,
                                   FlbBackwardKernel backward, FlbShapeFn shape, void* user_data) {
  return guarded_call([&] {
    FLB_CHECK(library && library->initialising, ValueError,
              "[register_op] ops are registered during flambeau_extension_init only, with the library handle it "
              "was given");
    FLB_CHECK(schema, ValueError, "[register_op] the schema is NULL");
    OpSchema parsed = check_c_op(schema, kernel);
    for (const auto& op : library->ops)
      FLB_CHECK(op.parsed.qualified_name() != parsed.qualified_name(), ValueError, "[register_op] an op named '",
                parsed.qualified_name(), "' is already registered");
    library->ops.push_back({schema, std::move(parsed), kernel, backward, shape, user_data});
  });
}

}  // namespace stable

namespace {

struct Loaded {
  std::mutex mutex;
  std::vector<std::string> paths;
};
Loaded& loaded() {
  static Loaded* l = new Loaded;  // never destroyed: the libraries stay loaded
  return *l;
}

const char* status_name(FlbStatus s) {
  switch (s) {
    case FLB_VALUE_ERROR: return "FLB_VALUE_ERROR";
    case FLB_TYPE_ERROR: return "FLB_TYPE_ERROR";
    case FLB_INDEX_ERROR: return "FLB_INDEX_ERROR";
    case FLB_NOT_IMPLEMENTED: return "FLB_NOT_IMPLEMENTED";
    default: return "FLB_ERROR";
  }
}

}  // namespace

void load_library(const std::string& path) {
  char resolved[PATH_MAX];
  FLB_CHECK(realpath(path.c_str(), resolved), Error, "[load_library] cannot load '", path, "': no such file");
  const std::string canonical = resolved;
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  for (const std::string& p : l.paths)
    if (p == canonical) return;

  void* handle = dlopen(canonical.c_str(), RTLD_NOW | RTLD_LOCAL);
  FLB_CHECK(handle, Error, "[load_library] cannot load '", path, "': ", dlerror());
  bool keep = false;
  struct Closer {
    void* h;
    bool& keep;
    ~Closer() {
      if (!keep) dlclose(h);
    }
  } closer{handle, keep};

  auto version = reinterpret_cast<FlbAbiVersionFn>(dlsym(handle, "flambeau_extension_abi_version"));
  auto init = reinterpret_cast<FlbInitFn>(dlsym(handle, "flambeau_extension_init"));
  FLB_CHECK(version && init, ValueError, "[load_library] '", path,
            "' is not a flambeau extension: it defines no flambeau_extension_abi_version and "
            "flambeau_extension_init (see FLAMBEAU_EXTENSION in flambeau/stable/c_api.h)");
  const uint32_t v = version();
  FLB_CHECK(v >= 1 && v <= FLB_ABI_VERSION, Error, "[load_library] '", path, "' was built for flambeau C ABI version ",
            v, ", but this flambeau provides version ", FLB_ABI_VERSION, " (extensions of versions 1 to ",
            FLB_ABI_VERSION, " load)");

  FlbLibraryOpaque library{canonical, {}, true};
  stable::api().set_error("");  // a message after init is init's
  const FlbStatus status = init(&stable::api(), &library);
  library.initialising = false;
  if (status != FLB_OK) {
    const std::string& msg = stable::last_error();
    stable::raise_status(status, detail::str_cat("[load_library] '", path, "': flambeau_extension_init failed (",
                                                 status_name(status), "): ", msg.empty() ? "(no message)" : msg));
  }
  // All names are checked before any op is registered, so a clash registers none.
  for (const auto& op : library.ops) stable::check_c_op(op.schema, op.kernel);
  for (const auto& op : library.ops)
    register_op(op.schema, stable::c_op_kernel(op.parsed, op.kernel, op.backward, op.shape, op.user_data));
  keep = true;
  l.paths.push_back(canonical);
}

std::vector<std::string> loaded_libraries() {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.paths;
}

}  // namespace flambeau
