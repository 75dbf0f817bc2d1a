// flambeau._C._distributed: the communicator (torchcomms' TorchComm), Work, the stores and
// the DistError family. flambeau/distributed/ builds torch.distributed's API on top.
// Blocking calls release the GIL; hooks called from a communicator's thread take it.
#include <nanobind/stl/chrono.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/tuple.h>

#include "bindings.h"
#include "flambeau/distributed/communicator.h"

namespace flambeau::python {
namespace {

namespace dist = flambeau::distributed;
using dist::Millis;
using dist::WorkPtr;

PyObject* g_dist_error;
PyObject* g_backend_error;
PyObject* g_store_error;
PyObject* g_network_error;

std::optional<Millis> millis(std::optional<double> seconds) {
  if (!seconds) return std::nullopt;
  return Millis(int64_t(*seconds * 1000.0));
}

dist::OpOptions op_options(std::optional<double> timeout, std::optional<dist::Hints> hints) {
  dist::OpOptions o;
  o.timeout = millis(timeout);
  if (hints) o.hints = *hints;
  return o;
}

dist::ReduceOp red_op(int type, double factor) {
  FLB_CHECK(type >= 0 && type <= int(dist::RedOpType::PREMUL_SUM), ValueError,
            "[ReduceOp] unknown reduce op ", type);
  dist::ReduceOp op(static_cast<dist::RedOpType>(type));
  op.factor = factor;
  return op;
}

dist::Bytes to_bytes(nb::handle v) {
  if (nb::isinstance<nb::bytes>(v)) {
    nb::bytes b = nb::borrow<nb::bytes>(v);
    const uint8_t* p = static_cast<const uint8_t*>(b.data());
    return dist::Bytes(p, p + b.size());
  }
  if (nb::isinstance<nb::str>(v)) {
    std::string s = nb::cast<std::string>(v);
    return dist::Bytes(s.begin(), s.end());
  }
  if (PyByteArray_Check(v.ptr())) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(PyByteArray_AsString(v.ptr()));
    return dist::Bytes(p, p + PyByteArray_Size(v.ptr()));
  }
  throw TypeError("[Store] values must be str or bytes");
}

nb::bytes from_bytes(const dist::Bytes& b) {
  return nb::bytes(reinterpret_cast<const char*>(b.data()), b.size());
}

// A Python callable as a hook run on a communicator's thread.
dist::OpHook py_op_hook(nb::object fn) {
  auto holder = std::make_shared<nb::object>(std::move(fn));
  return [holder](const dist::OpEvent& ev) {
    nb::gil_scoped_acquire gil;
    try {
      (*holder)(dist::op_name(ev.op), ev.seq, ev.inputs, ev.outputs, ev.error != nullptr);
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("flambeau.distributed hook");
    }
  };
}

}  // namespace

void bind_distributed(nb::module_& m) {
  nb::module_ d = m.def_submodule("_distributed", "Collectives: communicators, work, stores");
  auto make_error = [&](const char* name, PyObject* base) {
    std::string qual = std::string("flambeau.distributed.") + name;
    PyObject* t = PyErr_NewException(qual.c_str(), base, nullptr);
    d.attr(name) = nb::handle(t);
    return t;
  };
  g_dist_error = make_error("DistError", PyExc_RuntimeError);
  g_backend_error = make_error("DistBackendError", g_dist_error);
  g_store_error = make_error("DistStoreError", g_dist_error);
  g_network_error = make_error("DistNetworkError", g_dist_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const dist::DistBackendError& e) {
      nb::object exc = nb::steal(PyObject_CallFunction(g_backend_error, "s", e.what()));
      if (!exc.is_valid()) return;
      exc.attr("kind") = dist::comm_error_kind_name(e.kind);
      exc.attr("op") = e.op;
      exc.attr("seq") = e.seq;
      exc.attr("peer") = e.peer >= 0 ? nb::object(nb::int_(e.peer)) : nb::object(nb::none());
      PyErr_SetObject(g_backend_error, exc.ptr());
    } catch (const dist::DistStoreError& e) {
      PyErr_SetString(g_store_error, e.what());
    } catch (const dist::DistNetworkError& e) {
      PyErr_SetString(g_network_error, e.what());
    } catch (const dist::DistError& e) {
      PyErr_SetString(g_dist_error, e.what());
    }
  });

  // Stores (c10d's API: values are bytes; str is accepted and stored as UTF-8).
  nb::class_<dist::Store>(d, "Store")
      .def("set", [](dist::Store& s, const std::string& k, nb::handle v) {
        dist::Bytes b = to_bytes(v);
        nb::gil_scoped_release r;
        s.set(k, b);
      }, "key"_a, "value"_a)
      .def("get", [](dist::Store& s, const std::string& k) {
        dist::Bytes b;
        {
          nb::gil_scoped_release r;
          b = s.get(k);
        }
        return from_bytes(b);
      }, "key"_a)
      .def("add", &dist::Store::add, "key"_a, "value"_a, release_gil())
      .def("compare_set", [](dist::Store& s, const std::string& k, nb::handle e, nb::handle v) {
        dist::Bytes eb = to_bytes(e), vb = to_bytes(v), out;
        {
          nb::gil_scoped_release r;
          out = s.compare_set(k, eb, vb);
        }
        return from_bytes(out);
      }, "key"_a, "expected_value"_a, "desired_value"_a)
      .def("wait", [](dist::Store& s, const std::vector<std::string>& keys, std::optional<Millis> t) {
        nb::gil_scoped_release r;
        s.wait(keys, t.value_or(s.timeout()));
      }, "keys"_a, "timeout"_a = nb::none())
      .def("check", &dist::Store::check, "keys"_a, release_gil())
      .def("delete_key", &dist::Store::delete_key, "key"_a, release_gil())
      .def("num_keys", &dist::Store::num_keys, release_gil())
      .def("set_timeout", &dist::Store::set_timeout, "timeout"_a)
      .def_prop_ro("timeout", &dist::Store::timeout);
  nb::class_<dist::TCPStore, dist::Store>(d, "TCPStore")
      .def("__init__", [](dist::TCPStore* self, const std::string& host, int port,
                          std::optional<int> world_size, bool is_master, Millis timeout,
                          bool wait_for_workers) {
        dist::TCPStoreOptions o;
        o.port = port;
        o.is_master = is_master;
        o.world_size = world_size.value_or(-1);
        o.timeout = timeout;
        o.wait_for_workers = wait_for_workers;
        nb::gil_scoped_release r;
        new (self) dist::TCPStore(host, o);
      }, "host_name"_a, "port"_a, "world_size"_a = nb::none(), "is_master"_a = false,
         "timeout"_a = Millis(300000), "wait_for_workers"_a = true)
      .def_prop_ro("host", &dist::TCPStore::host)
      .def_prop_ro("port", &dist::TCPStore::port);
  nb::class_<dist::FileStore, dist::Store>(d, "FileStore")
      .def(nb::init<std::string, int>(), "file_name"_a, "world_size"_a = -1)
      .def_prop_ro("path", &dist::FileStore::path);
  nb::class_<dist::HashStore, dist::Store>(d, "HashStore").def(nb::init<>());
  nb::class_<dist::PrefixStore, dist::Store>(d, "PrefixStore")
      .def(nb::init<std::string, std::shared_ptr<dist::Store>>(), "prefix"_a, "store"_a)
      .def_prop_ro("underlying_store", &dist::PrefixStore::base);

  nb::class_<dist::Work>(d, "Work")
      .def("wait", [](dist::Work& w, std::optional<double> timeout) {
        w.wait(millis(timeout));
        return true;
      }, "timeout"_a = nb::none(), release_gil())
      .def("is_completed", &dist::Work::is_completed)
      .def("is_finished", &dist::Work::is_finished)
      .def("is_success", [](dist::Work& w) { return w.is_completed(); })
      // Raises the work's error (translated to its Python type); Python's exception() catches it.
      .def("_raise_error", [](dist::Work& w) {
        if (std::exception_ptr e = w.exception()) std::rethrow_exception(e);
      })
      .def_prop_ro("status", [](dist::Work& w) { return dist::work_status_name(w.status()); })
      .def_prop_ro("seq", &dist::Work::seq)
      .def_prop_ro("op", [](dist::Work& w) { return dist::op_name(w.op()); });

  using C = dist::Communicator;
  using T = std::optional<double>;
  using H = std::optional<dist::Hints>;
  auto co = [](T t, H h) { return op_options(t, h); };
  nb::class_<C>(d, "Communicator")
      .def_prop_ro("rank", &C::rank)
      .def_prop_ro("size", &C::size)
      .def_prop_ro("name", &C::name)
      .def_prop_ro("backend", &C::backend_name)
      .def_prop_ro("backend_version", &C::backend_version)
      .def_prop_ro("global_ranks", &C::global_ranks)
      .def_prop_ro("timeout", [](C& c) { return c.options().timeout.count() / 1000.0; })
      .def_prop_ro("abort_process_on_timeout_or_error", [](C& c) { return c.options().abort_process_on_timeout_or_error; })
      .def_prop_ro("enable_reconfigure", [](C& c) { return c.options().enable_reconfigure; })
      .def("all_reduce", [co](C& c, const Tensor& t, int op, double f, bool a, T to, H h) {
        return c.all_reduce(t, red_op(op, f), a, co(to, h));
      }, "tensor"_a, "op"_a, "factor"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("all_gather", [co](C& c, const std::vector<Tensor>& outs, const Tensor& in, bool a, T to, H h) {
        return c.all_gather(outs, in, a, co(to, h));
      }, "tensor_list"_a, "tensor"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("all_gather_single", [co](C& c, const Tensor& out, const Tensor& in, bool a, T to, H h) {
        return c.all_gather_single(out, in, a, co(to, h));
      }, "output"_a, "input"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("reduce_scatter", [co](C& c, const Tensor& out, const std::vector<Tensor>& ins, int op, double f, bool a, T to, H h) {
        return c.reduce_scatter(out, ins, red_op(op, f), a, co(to, h));
      }, "output"_a, "input_list"_a, "op"_a, "factor"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("reduce_scatter_single", [co](C& c, const Tensor& out, const Tensor& in, int op, double f, bool a, T to, H h) {
        return c.reduce_scatter_single(out, in, red_op(op, f), a, co(to, h));
      }, "output"_a, "input"_a, "op"_a, "factor"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("all_to_all_single", [co](C& c, const Tensor& out, const Tensor& in, std::vector<int64_t> os,
                                     std::vector<int64_t> is, bool a, T to, H h) {
        return c.all_to_all_single(out, in, std::move(os), std::move(is), a, co(to, h));
      }, "output"_a, "input"_a, "output_split_sizes"_a, "input_split_sizes"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("all_to_all", [co](C& c, const std::vector<Tensor>& outs, const std::vector<Tensor>& ins, bool a, T to, H h) {
        return c.all_to_all(outs, ins, a, co(to, h));
      }, "output_tensor_list"_a, "input_tensor_list"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("broadcast", [co](C& c, const Tensor& t, int root, bool a, T to, H h) {
        return c.broadcast(t, root, a, co(to, h));
      }, "tensor"_a, "root"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("reduce", [co](C& c, const Tensor& t, int root, int op, double f, bool a, T to, H h) {
        return c.reduce(t, root, red_op(op, f), a, co(to, h));
      }, "tensor"_a, "root"_a, "op"_a, "factor"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("gather", [co](C& c, const std::vector<Tensor>& outs, const Tensor& in, int root, bool a, T to, H h) {
        return c.gather(outs, in, root, a, co(to, h));
      }, "output_tensor_list"_a, "input_tensor"_a, "root"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("scatter", [co](C& c, const Tensor& out, const std::vector<Tensor>& ins, int root, bool a, T to, H h) {
        return c.scatter(out, ins, root, a, co(to, h));
      }, "output_tensor"_a, "input_tensor_list"_a, "root"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("send", [co](C& c, const Tensor& t, int dst, bool a, T to, H h) {
        return c.send(t, dst, a, co(to, h));
      }, "tensor"_a, "dst"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("recv", [co](C& c, const Tensor& t, int src, bool a, T to, H h) {
        return c.recv(t, src, a, co(to, h));
      }, "tensor"_a, "src"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("batch_p2p", [co](C& c, const std::vector<std::tuple<bool, Tensor, int>>& ops, bool a, T to, H h) {
        std::vector<dist::P2POp> ps;
        for (auto& [is_send, t, peer] : ops) ps.push_back({is_send ? dist::P2POp::Send : dist::P2POp::Recv, t, peer});
        return c.batch_p2p(ps, a, co(to, h));
      }, "ops"_a, "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("barrier", [co](C& c, bool a, T to, H h) { return c.barrier(a, co(to, h)); },
           "async_op"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("split", [co](C& c, const std::vector<int>& ranks, const std::string& name, T to, H h) {
        return c.split(ranks, name, co(to, h));
      }, "ranks"_a, "name"_a, "timeout"_a = nb::none(), "hints"_a = nb::none(), release_gil())
      .def("get_init_handle", &C::init_handle)
      .def("reconfigure", [](C& c, const std::string& uuid, const std::vector<std::string>& handles, T to) {
        return c.reconfigure(uuid, handles, millis(to));
      }, "uuid"_a, "init_handles"_a, "timeout"_a = nb::none(), release_gil())
      .def("abort", &C::abort, release_gil())
      .def("is_aborted", &C::is_aborted)
      .def("set_timeout", [](C& c, double s) { c.set_timeout(Millis(int64_t(s * 1000))); }, "seconds"_a)
      .def("finalize", &C::finalize, release_gil())
      .def("register_pre_hook", [](C& c, nb::object fn) { return c.register_pre_hook(py_op_hook(std::move(fn))); }, "hook"_a)
      .def("register_post_hook", [](C& c, nb::object fn) { return c.register_post_hook(py_op_hook(std::move(fn))); }, "hook"_a)
      .def("register_abort_hook", [](C& c, nb::object fn) {
        auto holder = std::make_shared<nb::object>(std::move(fn));
        return c.register_abort_hook([holder] {
          nb::gil_scoped_acquire gil;
          try {
            (*holder)();
          } catch (nb::python_error& e) {
            e.discard_as_unraisable("flambeau.distributed abort hook");
          }
        });
      }, "hook"_a)
      .def("remove_hook", &C::remove_hook, "id"_a)
      .def("dump_flight_recorder", &C::dump_flight_recorder, "include_completed"_a = true)
      .def("dump_flight_recorder_file", &C::dump_flight_recorder_file, "dir"_a, "include_completed"_a = true)
      .def("flight_recorder_size", [](C& c) { return c.flight_recorder().size(); })
      .def("reset_flight_recorder", [](C& c) { c.flight_recorder().reset(); });

  d.def("new_comm", [](const std::string& backend, const std::string& device, std::optional<bool> abort_process,
                       std::optional<double> timeout, std::shared_ptr<dist::Store> store,
                       std::optional<std::string> name, bool enable_reconfigure,
                       std::optional<dist::Hints> hints, int rank, int size) {
    dist::CommOptions o;
    if (abort_process) o.abort_process_on_timeout_or_error = *abort_process;
    if (timeout) o.timeout = Millis(int64_t(*timeout * 1000.0));
    o.store = std::move(store);
    if (name) o.name = *name;
    o.enable_reconfigure = enable_reconfigure;
    if (hints) o.hints = *hints;
    o.rank = rank;
    o.size = size;
    nb::gil_scoped_release r;
    return dist::new_comm(backend, Device(device), std::move(o));
  }, "backend"_a, "device"_a = "cpu", "abort_process_on_timeout_or_error"_a = nb::none(),
     "timeout"_a = nb::none(), "store"_a = nb::none(), "name"_a = nb::none(),
     "enable_reconfigure"_a = false, "hints"_a = nb::none(), "rank"_a = -1, "size"_a = -1);
  d.def("is_backend_available", &dist::is_backend_available, "backend"_a);
  d.def("backend_names", &dist::backend_names);
  bind_ddp(d);
}

}  // namespace flambeau::python
