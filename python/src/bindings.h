// Shared declarations of the nanobind module flambeau._C (one file per part).
#pragma once
#include "casters.h"

namespace flambeau::python {

// Sets the Python error of a flambeau exception (flambeau.ValueError, ...; module.cpp) and
// returns true; false for any other exception.
bool set_python_error(const std::exception_ptr& p);

// A new tensor from a Python number, (nested) list/tuple, Tensor or DLPack-capable array
// (torch.tensor's rules: bool, int64 or float32 unless dtype is given).
Tensor tensor_from_data(nb::handle data, std::optional<DType> dtype);

Tensor getitem(const Tensor& self, nb::handle key);
// value: a tensor, a number, or data tensor() accepts (lists, numpy arrays).
void setitem(Tensor& self, nb::handle key, nb::handle value);

// DLPack: a "dltensor" capsule viewing t, and a tensor viewing any object with __dlpack__.
nb::object to_dlpack(const Tensor& t);
Tensor from_dlpack(nb::handle obj);
// A numpy array sharing t's memory.
nb::object to_numpy(const Tensor& t);
// Nested Python lists of t's values.
nb::object to_list(const Tensor& t);

// The named tuple type (values, indices) returned by max(dim), sort, topk ...
extern nb::handle g_values_indices;

// The Tensor a Python callback returned (None gives an undefined Tensor); anything else
// raises TypeError "[what] ... must return a Tensor or None, got str".
Tensor callback_tensor(nb::handle r, const char* what);

// Dims from an int, a sequence of ints, or *args of ints.
Dims dims_from(nb::handle h);

// Dims from *args (f(2, 3)) or one sequence argument (f((2, 3))).
Dims dims_from_args(const nb::args& args);

using release_gil = nb::call_guard<nb::gil_scoped_release>;

// A Python list of the tensors.
inline nb::list to_list_of(const std::vector<Tensor>& v) {
  nb::list l;
  for (const Tensor& t : v) l.append(t);
  return l;
}

// f(args...) with the GIL released.
template <class F, class... A>
auto release_call_t(F&& f, A&&... args) {
  nb::gil_scoped_release release;
  return f(std::forward<A>(args)...);
}

void bind_tensor(nb::module_& m, nb::class_<Tensor>& cls);
void bind_ops(nb::module_& m, nb::class_<Tensor>& cls);
// flambeau.ops: ops by qualified name and custom-op libraries (extension.cpp).
void bind_extension(nb::module_& m);
void bind_more_ops(nb::module_& m, nb::class_<Tensor>& cls);
void bind_shape_ops(nb::module_& m, nb::class_<Tensor>& cls);
void bind_autograd(nb::module_& m, nb::class_<Tensor>& cls);
void bind_optim(nb::module_& m);
void bind_nn(nb::module_& m);
// torch.convolution and nn.functional's convolutions and pad, after bind_nn (conv.cpp).
void bind_conv(nb::module_& m, nb::class_<Tensor>& cls);
// nn.functional's pooling, after bind_conv (pool.cpp).
void bind_pool(nb::module_& m, nb::class_<Tensor>& cls);
// nn.functional's resampling: interpolate, pixel_shuffle (resample.cpp).
void bind_resample(nb::module_& m, nb::class_<Tensor>& cls);
// The recurrent layers' functions in flambeau._C._nn, after bind_nn (rnn.cpp).
void bind_rnn(nb::module_& m);
// torch.linalg's functions as _C.linalg_<name> (linalg.cpp).
void bind_linalg(nb::module_& m, nb::class_<Tensor>& cls);
// The C++ layers made by name, in flambeau._C._nn (nn_layers.cpp).
void bind_cpp_layers(nb::module_& nm);
void bind_io(nb::module_& m);
void bind_flex(nb::module_& m);
void bind_distributed(nb::module_& m);
void bind_compile(nb::module_& m);
// CPU telemetry and the build configuration, in flambeau._C._cpu (telemetry.cpp).
void bind_telemetry(nb::module_& m);
void bind_profiler(nb::module_& m);
void bind_graphs(nb::module_& m);
// DistributedDataParallel's Reducer, in flambeau._C._distributed (ddp.cpp).
void bind_ddp(nb::module_& d);

}  // namespace flambeau::python
