// Custom-op libraries built against the stable C ABI (flambeau/stable/c_api.h): loading
// them, and the C++ side of the table they receive.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "flambeau/core/tensor.h"
#include "flambeau/ops/registry.h"
#include "flambeau/stable/c_api.h"

namespace flambeau {

// Loads the extension at `path` (dlopen), checks its ABI version and runs its init, after
// which its ops are registered: callable by name with call_op("mylib::op", ...) and from
// Python as flambeau.ops.mylib.op. Loading a library already loaded does nothing.
// RuntimeError when the file cannot be loaded, it needs a newer ABI version than this
// flambeau provides (both named), or its init fails (none of its ops is registered then);
// ValueError when it is not a flambeau extension.
void load_library(const std::string& path);
// The libraries loaded so far (their canonical paths), in load order.
std::vector<std::string> loaded_libraries();

namespace stable {

// The function table handed to extensions (c_api.cpp).
const FlbApi& api();

// Registers a C kernel as the op of `schema`, as an extension's register_op does, for code
// in the host process. ValueError for a malformed schema, one without a namespace or with
// a result that is not a Tensor, or a name already taken.
void register_c_op(const std::string& schema, FlbKernel kernel, FlbBackwardKernel backward, FlbShapeFn shape,
                   void* user_data);

// Checks a C op's registration (what register_c_op refuses) and returns its parsed schema.
OpSchema check_c_op(const std::string& schema, FlbKernel kernel);
// The boxed kernel running a C op: reported to the op hook under its name, recorded for
// autograd through its backward (c_op.cpp).
BoxedKernel c_op_kernel(const OpSchema& schema, FlbKernel kernel, FlbBackwardKernel backward, FlbShapeFn shape,
                        void* user_data);

// Handles (c_api.cpp): a FlbTensor is a Tensor* (owned ones made by new_handle), a
// FlbGenerator a Generator*.
inline Tensor& unwrap(FlbTensor t) { return *reinterpret_cast<Tensor*>(t); }
inline FlbTensor borrow(const Tensor& t) { return reinterpret_cast<FlbTensor>(const_cast<Tensor*>(&t)); }
inline FlbTensor new_handle(Tensor t) { return reinterpret_cast<FlbTensor>(new Tensor(std::move(t))); }
// Takes the tensor of an owned handle and frees the handle.
Tensor take(FlbTensor t);
inline Generator& unwrap(FlbGenerator g) { return *reinterpret_cast<Generator*>(g); }
inline FlbGenerator borrow(const Generator& g) { return reinterpret_cast<FlbGenerator>(const_cast<Generator*>(&g)); }

// dtype <-> PyTorch ScalarType number (FLB_FLOAT32, ...); ValueError for an unknown number.
int32_t dtype_code(DType dtype);
DType dtype_from_code(int32_t code, const char* op);

// Raises the exception of a C status code (FLB_VALUE_ERROR: ValueError, ...) with message.
[[noreturn]] void raise_status(FlbStatus status, const std::string& message);
// The calling thread's last C-ABI error message.
const std::string& last_error();
// Runs f: FLB_OK, or the status code of what it threw, its message kept for last_error().
FlbStatus guarded_call(const std::function<void()>& f) noexcept;

}  // namespace stable
}  // namespace flambeau
