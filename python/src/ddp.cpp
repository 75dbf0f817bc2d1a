// flambeau._C._distributed.Reducer and GradBucket: the C++ gradient reducer of
// DistributedDataParallel (flambeau/distributed/ddp.h); flambeau/nn/parallel builds torch's
// DistributedDataParallel module on it. A Python communication hook hook(bucket) returns
// a future; its wait() gives the reduced tensor.
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "flambeau/distributed/ddp.h"
#include "flambeau/distributed/fsdp.h"

namespace flambeau::python {

namespace dist = flambeau::distributed;

namespace {
// A Python object that C++ may drop without the GIL.
struct PyHolder {
  nb::object obj;
  explicit PyHolder(nb::object o) : obj(std::move(o)) {}
  ~PyHolder() {
    if (obj.is_valid()) {
      nb::gil_scoped_acquire gil;
      obj.reset();
    }
  }
};

Tensor future_tensor(nb::handle value) {
  if (nb::isinstance<nb::list>(value) || nb::isinstance<nb::tuple>(value)) {
    FLB_CHECK(nb::len(value) == 1, ValueError, "[register_comm_hook] the hook's future must give one tensor, got ",
              nb::len(value));
    value = value[0];
  }
  FLB_CHECK(nb::isinstance<Tensor>(value), TypeError,
            "[register_comm_hook] the hook's future must give a tensor, got ", nb::type_name(value.type()).c_str());
  return nb::cast<Tensor>(value);
}
}  // namespace

void bind_ddp(nb::module_& d) {
  // fully_shard's storage helpers (Note [FSDP's unsharded parameters]).
  d.def("_fsdp_release_memory", &dist::fsdp::release_memory, "tensor"_a);
  d.def("_fsdp_allocate_memory", &dist::fsdp::allocate_memory, "tensor"_a);
  d.def("_fsdp_has_memory", &dist::fsdp::has_memory, "tensor"_a);
  d.def("_fsdp_fill", &dist::fsdp::fill_without_version, "dst"_a, "src"_a);

  nb::class_<dist::GradBucket>(d, "GradBucket")
      .def("index", [](const dist::GradBucket& b) { return b.index; })
      .def("is_last", [](const dist::GradBucket& b) { return b.is_last; })
      .def("buffer", [](const dist::GradBucket& b) { return b.buffer; })
      .def("set_buffer", [](dist::GradBucket& b, const Tensor& t) {
        FLB_CHECK(t.sizes() == b.buffer.sizes() && t.dtype() == b.buffer.dtype(), ValueError,
                  "[GradBucket.set_buffer] expected ", shape_str(b.buffer.sizes()), ", got ", shape_str(t.sizes()));
        b.buffer.copy_(t);
      }, "tensor"_a)
      .def("gradients", &dist::GradBucket::gradients)
      .def("parameters", [](const dist::GradBucket& b) { return b.parameters; });

  using R = dist::Reducer;
  nb::class_<R>(d, "Reducer")
      .def("__init__", [](R* self, std::vector<Tensor> params, std::shared_ptr<dist::Communicator> comm,
                          int64_t bucket_cap_bytes, int64_t first_bucket_cap_bytes, bool gradient_as_bucket_view,
                          bool find_unused_parameters, bool static_graph, std::vector<std::string> names) {
        dist::DDPOptions o;
        o.bucket_cap_bytes = bucket_cap_bytes;
        o.first_bucket_cap_bytes = first_bucket_cap_bytes;
        o.gradient_as_bucket_view = gradient_as_bucket_view;
        o.find_unused_parameters = find_unused_parameters;
        o.static_graph = static_graph;
        new (self) R(std::move(params), std::move(comm), o, std::move(names));
      }, "params"_a, "comm"_a, "bucket_cap_bytes"_a, "first_bucket_cap_bytes"_a, "gradient_as_bucket_view"_a,
         "find_unused_parameters"_a, "static_graph"_a, "names"_a)
      .def("prepare_for_forward", &R::prepare_for_forward, release_gil())
      .def("set_require_sync", &R::set_require_sync, "sync"_a)
      .def("require_sync", &R::require_sync)
      .def("bucket_indices", &R::bucket_indices)
      .def("timeline", [](const R& r) {
        nb::list out;
        for (const auto& e : r.timeline()) out.append(nb::make_tuple(e.what, e.bucket, e.t_ns));
        return out;
      })
      .def("register_builtin_comm_hook", [](R& r, const std::string& name) {
        if (name == "allreduce") r.register_comm_hook(dist::allreduce_hook(r.comm()));
        else if (name == "bf16_compress") r.register_comm_hook(dist::bf16_compress_hook(r.comm()));
        else throw ValueError("[register_comm_hook] unknown built-in hook '" + name + "'");
      }, "name"_a)
      // hook(bucket) -> future with wait() (state is bound on the Python side).
      .def("register_comm_hook", [](R& r, nb::object hook) {
        auto h = std::make_shared<PyHolder>(std::move(hook));
        r.register_comm_hook([h](dist::GradBucket& bucket) -> dist::Finish {
          nb::gil_scoped_acquire gil;
          auto fut = std::make_shared<PyHolder>(h->obj(nb::cast(bucket, nb::rv_policy::copy)));
          FLB_CHECK(nb::hasattr(fut->obj, "wait"), TypeError,
                    "[register_comm_hook] the hook must return a future (an object with wait()), got ",
                    nb::type_name(fut->obj.type()).c_str());
          return [fut] {
            nb::gil_scoped_acquire gil;
            return future_tensor(fut->obj.attr("wait")());
          };
        });
      }, "hook"_a);
}

}  // namespace flambeau::python
