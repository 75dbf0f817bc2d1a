// Autograd in Python: Tensor.requires_grad / grad / grad_fn / backward / register_hook,
// flambeau._C grad-mode switches, autograd.backward / grad / gradcheck. Hooks written in
// Python run with the GIL taken back; the engine itself runs without it.
#include <cstdio>
#include <mutex>
#include <set>

#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/tuple.h>

#include "bindings.h"
#include "flambeau/autograd/autocast.h"
#include "flambeau/autograd/function.h"

namespace flambeau::python {
namespace {

// A Python callable as a tensor hook: its result (None keeps the gradient) replaces g.
autograd::TensorHook python_hook(nb::object fn) {
  auto holder = std::make_shared<nb::object>(std::move(fn));
  return [holder](const Tensor& g) -> Tensor {
    nb::gil_scoped_acquire gil;
    return callback_tensor((*holder)(g), "register_hook");
  };
}

std::vector<Tensor> tensors_of(nb::handle h) {
  std::vector<Tensor> out;
  if (h.is_none()) return out;
  Tensor* t = nullptr;
  if (nb::try_cast<Tensor*>(h, t) && t) return {*t};
  FLB_CHECK(nb::isinstance<nb::sequence>(h), TypeError, "[autograd] expected a Tensor or a sequence of Tensors, got ",
            nb::type_name(h.type()).c_str());
  for (nb::handle item : h) out.push_back(callback_tensor(item, "autograd"));
  return out;
}

}  // namespace

Tensor callback_tensor(nb::handle r, const char* what) {
  if (r.is_none()) return Tensor();
  Tensor* t = nullptr;
  FLB_CHECK(nb::try_cast<Tensor*>(r, t) && t, TypeError, "[", what, "] expected a Tensor or None, got ",
            nb::type_name(r.type()).c_str());
  return *t;
}

void bind_autograd(nb::module_& m, nb::class_<Tensor>& cls) {
  nb::class_<autograd::Node>(m, "Node")
      .def("name", &autograd::Node::name)
      .def_prop_ro("next_functions", [](const autograd::Node& n) {
        nb::list l;
        for (const autograd::Edge& e : n.next) l.append(nb::make_tuple(e.fn, e.input_nr));
        return nb::tuple(l);
      })
      .def("__repr__", [](const autograd::Node& n) {  // as torch: <ExpBackward0 object at 0x...>
        char addr[32];
        std::snprintf(addr, sizeof addr, "%p", static_cast<const void*>(&n));
        return "<" + n.name() + " object at " + addr + ">";
      });

  cls.def_prop_rw("requires_grad", &Tensor::requires_grad, [](Tensor& t, bool r) { t.requires_grad_(r); })
      .def("requires_grad_", [](nb::handle self, bool r) {
        nb::cast<Tensor&>(self).requires_grad_(r);
        return nb::borrow(self);
      }, "requires_grad"_a = true)
      .def_prop_rw("grad", [](const Tensor& t) -> nb::object {
        const Tensor g = t.grad();
        return g.defined() ? nb::cast(g) : nb::none();
      }, [](Tensor& t, std::optional<Tensor> g) { t.set_grad(g.value_or(Tensor())); }, nb::arg("grad").none())
      .def_prop_ro("grad_fn", &Tensor::grad_fn)
      .def_prop_ro("is_leaf", &Tensor::is_leaf)
      .def_prop_ro("_version", &Tensor::version)
      .def("detach", &Tensor::detach)
      .def("retain_grad", &Tensor::retain_grad)
      .def("backward", [](const Tensor& t, std::optional<Tensor> gradient, std::optional<bool> retain_graph,
                          bool create_graph) {
        nb::gil_scoped_release release;
        t.backward(gradient.value_or(Tensor()), retain_graph.value_or(create_graph), create_graph);
      }, "gradient"_a = nb::none(), "retain_graph"_a = nb::none(), "create_graph"_a = false)
      .def("register_hook", [](const Tensor& t, nb::object fn) {
        autograd::register_hook(t, python_hook(std::move(fn)));
      }, "hook"_a)
      .def("register_post_accumulate_grad_hook", [](const Tensor& t, nb::object fn) {
        auto holder = std::make_shared<nb::object>(std::move(fn));
        autograd::register_post_accumulate_grad_hook(t, [holder](Tensor& leaf) {
          nb::gil_scoped_acquire gil;
          nb::object r = (*holder)(leaf);
          FLB_CHECK(r.is_none(), TypeError, "[register_post_accumulate_grad_hook] the hook must return None, got ",
                    nb::type_name(r.type()).c_str());
        });
      }, "hook"_a);

  m.def("is_grad_enabled", &autograd::grad_mode_enabled);
  m.def("_set_grad_enabled", &autograd::set_grad_mode, "enabled"_a);
  // CPU autocast's per-thread state (flambeau/amp.py builds torch's API on these).
  m.def("_autocast_enter", [](DType dt, bool enabled, bool cache_enabled) {
    const autocast::State s = autocast::enter(dt, enabled, cache_enabled);
    return std::make_tuple(s.enabled, s.cache_enabled, s.dtype);
  });
  m.def("_autocast_exit", [](bool enabled, bool cache_enabled, DType dt) {
    autocast::exit({enabled, cache_enabled, dt});
  });
  m.def("_is_autocast_cpu_enabled", &autocast::is_enabled);
  m.def("_set_autocast_cpu_enabled", &autocast::set_enabled);
  m.def("_get_autocast_cpu_dtype", &autocast::dtype);
  m.def("_set_autocast_cpu_dtype", &autocast::set_dtype);
  m.def("is_autocast_cache_enabled", &autocast::is_cache_enabled);
  m.def("set_autocast_cache_enabled", &autocast::set_cache_enabled, "enabled"_a);
  m.def("clear_autocast_cache", &autocast::clear_cache);
  m.def("_backward", [](nb::handle tensors, nb::handle grads, bool retain_graph, bool create_graph) {
    const std::vector<Tensor> roots = tensors_of(tensors), gs = tensors_of(grads);
    nb::gil_scoped_release release;
    autograd::backward(roots, gs, retain_graph, create_graph);
  }, "tensors"_a, "grad_tensors"_a = nb::none(), "retain_graph"_a = false, "create_graph"_a = false);
  m.def("_grad", [](nb::handle outputs, nb::handle inputs, nb::handle grad_outputs, bool retain_graph, bool allow_unused,
                    bool create_graph) {
    const std::vector<Tensor> outs = tensors_of(outputs), ins = tensors_of(inputs), gs = tensors_of(grad_outputs);
    std::vector<Tensor> r;
    {
      nb::gil_scoped_release release;
      r = autograd::grad(outs, ins, gs, retain_graph, allow_unused, create_graph);
    }
    nb::list l;
    for (const Tensor& t : r) l.append(t.defined() ? nb::cast(t) : nb::none());
    return nb::tuple(l);
  }, "outputs"_a, "inputs"_a, "grad_outputs"_a = nb::none(), "retain_graph"_a = false, "allow_unused"_a = false,
     "create_graph"_a = false);
  // A node whose backward is a Python function: backward(*grads) -> one gradient (or None)
  // per input. What flambeau.autograd.Function and checkpoint build on.
  m.def("_record_function", [](const char* name, std::vector<Tensor> inputs, std::vector<Tensor> outputs,
                               nb::object backward) {
    auto fn = std::make_shared<nb::object>(std::move(backward));
    const size_t n_in = inputs.size();
    std::vector<const Tensor*> ins;
    for (const Tensor& t : inputs) ins.push_back(&t);
    std::vector<Tensor*> outs;
    for (Tensor& t : outputs) outs.push_back(&t);
    static std::set<std::string> names;  // node names must outlive the nodes (set: stable storage)
    static std::mutex names_mutex;
    const char* node_name;
    {
      std::lock_guard<std::mutex> lock(names_mutex);
      node_name = names.insert(name).first->c_str();
    }
    auto node = std::make_shared<autograd::FunctionNode>(
        node_name,
        [fn, n_in, node_name](const std::vector<Tensor>& grads, const std::vector<Tensor>&) {
          nb::gil_scoped_acquire gil;
          nb::list args;
          for (const Tensor& g : grads) args.append(g);
          nb::object r = (*fn)(*nb::tuple(args));
          std::vector<Tensor> out;
          if (nb::isinstance<Tensor>(r) || r.is_none()) r = nb::make_tuple(r);
          FLB_CHECK(nb::isinstance<nb::tuple>(r) || nb::isinstance<nb::list>(r), TypeError, "[", node_name,
                    "] backward must return a Tensor, None or a tuple of them, got ", nb::type_name(r.type()).c_str());
          for (nb::handle h : r) out.push_back(callback_tensor(h, node_name));
          FLB_CHECK(out.size() == n_in, Error, "[autograd.Function] backward returned ", out.size(),
                    " gradients for ", n_in, " inputs");
          return out;
        },
        std::vector<Tensor>{}, ins, outs);
    autograd::set_history(outs, node, ins);
  }, "name"_a, "inputs"_a, "outputs"_a, "backward"_a);
  // torch's Variable._execution_engine.queue_callback: cb() runs when the backward pass on
  // this thread has processed its whole graph. The callable is released under the GIL.
  m.def("_queue_callback", [](nb::object cb) {
    FLB_CHECK(PyCallable_Check(cb.ptr()), TypeError, "[queue_callback] expected a callable, got ",
              nb::type_name(cb.type()).c_str());
    struct Holder {
      nb::object fn;
      ~Holder() {
        if (fn.is_valid()) {
          nb::gil_scoped_acquire gil;
          fn.reset();
        }
      }
    };
    auto holder = std::make_shared<Holder>();
    holder->fn = std::move(cb);
    autograd::queue_callback([holder] {
      nb::gil_scoped_acquire gil;
      nb::object fn = std::move(holder->fn);
      fn();
    });
  }, "callback"_a);
  m.def("_in_backward_pass", &autograd::in_backward_pass);
  m.def("_gradcheck", [](nb::object fn, std::vector<Tensor> inputs, double eps, double atol, double rtol) {
    std::string report;
    const bool ok = autograd::gradcheck(
        [&](const std::vector<Tensor>& in) {
          nb::list args;
          for (const Tensor& t : in) args.append(t);
          Tensor r = callback_tensor(fn(*nb::tuple(args)), "gradcheck");
          FLB_CHECK(r.defined(), TypeError, "[gradcheck] the function must return a Tensor, got None");
          return r;
        },
        inputs, eps, atol, rtol, &report);
    return nb::make_tuple(ok, report);
  }, "fn"_a, "inputs"_a, "eps"_a = 1e-6, "atol"_a = 1e-5, "rtol"_a = 1e-3);
}

}  // namespace flambeau::python
