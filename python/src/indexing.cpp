// Python indexing of tensors (t[key] and t[key] = value) with PyTorch's rules: ints select,
// slices and None make views, `...` stands for the remaining dims, and integer or bool
// tensors (or lists) index through flambeau::index / index_put_.
#include "bindings.h"
#include "flambeau/compile/trace.h"

namespace flambeau::python {
namespace {

// An index tensor from a tensor, or from a (nested) list of ints or bools.
Tensor index_tensor(nb::handle h) {
  Tensor* t = nullptr;
  if (nb::try_cast<Tensor*>(h, t) && t) return *t;
  return tensor_from_data(h, std::nullopt);
}

bool is_tensor_like(nb::handle h) {
  return nb::isinstance<Tensor>(h) || PyList_Check(h.ptr());
}

struct Basic {
  Tensor view;          // self after ints, slices, None and ...
  IndexList advanced;   // tensors by dim of `view` (empty: none)
};

Basic apply_key(const Tensor& self, nb::handle key) {
  const bool is_tuple = PyTuple_Check(key.ptr());
  const Py_ssize_t n = is_tuple ? PyTuple_GET_SIZE(key.ptr()) : 1;
  auto item = [&](Py_ssize_t i) { return is_tuple ? nb::handle(PyTuple_GET_ITEM(key.ptr(), i)) : key; };
  // Dims the key consumes, to size the ellipsis.
  std::vector<Tensor> tensors(static_cast<size_t>(n));
  int64_t consumed = 0;
  bool ellipsis = false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    nb::handle k = item(i);
    if (k.is_none() || PyBool_Check(k.ptr())) continue;
    if (k.ptr() == Py_Ellipsis) {
      if (ellipsis) throw IndexError("[index] an index can only have a single ellipsis ('...')");
      ellipsis = true;
    } else if (is_tensor_like(k)) {
      tensors[size_t(i)] = index_tensor(k);
      consumed += tensors[size_t(i)].dtype() == kBool ? tensors[size_t(i)].dim() : 1;
    } else {
      ++consumed;
    }
  }
  FLB_CHECK(consumed <= self.dim(), IndexError, "[index] too many indices for tensor of dimension ", self.dim(),
            " (got ", consumed, ")");
  Basic out{self, {}};
  Tensor& r = out.view;
  int64_t d = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    nb::handle k = item(i);
    if (k.is_none()) {
      r = r.unsqueeze(d++);
    } else if (PyBool_Check(k.ptr())) {  // True adds a dim of size 1, False one of size 0
      r = r.unsqueeze(d);
      if (k.ptr() == Py_False) r = r.narrow(d, 0, 0);
      ++d;
    } else if (k.ptr() == Py_Ellipsis) {
      d += self.dim() - consumed;
    } else if (PySlice_Check(k.ptr())) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(k.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
      FLB_CHECK(step > 0, ValueError, "[index] step must be greater than zero");
      const Py_ssize_t len = PySlice_AdjustIndices(Py_ssize_t(r.size(d)), &start, &stop, step);
      r = r.slice(d, start, len > 0 ? stop : start, step);
      ++d;
    } else if (tensors[size_t(i)].defined()) {
      const Tensor& t = tensors[size_t(i)];
      // A 0-dim integer tensor acts as an int, except in a trace (an index the graph keeps, as
      // PyTorch's tracer does).
      if (t.dim() == 0 && t.dtype() != kBool && !is_floating(t.dtype()) && !compiler::is_tracing()) {
        const int64_t v = t.item<int64_t>();
        FLB_CHECK(v >= -r.size(d) && v < r.size(d), IndexError, "[index] index ", v,
                  " is out of bounds for dimension ", d, " with size ", r.size(d));
        r = r.select(d, v);
        continue;
      }
      if (int64_t(out.advanced.size()) < d) out.advanced.resize(size_t(d));
      out.advanced.push_back(t);
      for (int64_t extra = 1; t.dtype() == kBool && extra < t.dim(); ++extra) out.advanced.push_back(std::nullopt);
      d += t.dtype() == kBool ? t.dim() : 1;
    } else {
      int64_t v;
      if (!nb::try_cast<int64_t>(k, v))
        throw TypeError(std::string("[index] only integers, slices, None, ..., and integer or boolean tensors are "
                                    "valid indices, got ") + nb::type_name(k.type()).c_str());
      FLB_CHECK(v >= -r.size(d) && v < r.size(d), IndexError, "[index] index ", v, " is out of bounds for dimension ",
                d, " with size ", r.size(d));
      r = r.select(d, v);
    }
  }
  // A bool mask covers several dims: index() wants the mask at its first dim only.
  IndexList compact;
  for (size_t j = 0; j < out.advanced.size(); ++j) {
    compact.push_back(out.advanced[j]);
    if (out.advanced[j] && out.advanced[j]->dtype() == kBool) j += size_t(std::max<int64_t>(out.advanced[j]->dim() - 1, 0));
  }
  out.advanced = compact;
  return out;
}

bool has_tensor(const IndexList& l) {
  for (const auto& t : l)
    if (t) return true;
  return false;
}

}  // namespace

Tensor getitem(const Tensor& self, nb::handle key) {
  Basic b = apply_key(self, key);
  if (!has_tensor(b.advanced)) return b.view;
  nb::gil_scoped_release release;
  return index(b.view, b.advanced);
}

void setitem(Tensor& self, nb::handle key, nb::handle value_obj) {
  Operand value;
  Tensor* vt = nullptr;
  Scalar s;
  if (nb::try_cast<Tensor*>(value_obj, vt) && vt) value.t = *vt;
  else if (scalar_from_python(value_obj, s)) value.t = Tensor(s);
  else value.t = tensor_from_data(value_obj, self.dtype());  // lists, numpy arrays
  Basic b = apply_key(self, key);
  nb::gil_scoped_release release;
  if (!has_tensor(b.advanced)) {
    if (value.t.impl()->wrapped_number) b.view.fill_(value.t.item());
    else b.view.copy_(value.t);
    return;
  }
  index_put_(b.view, b.advanced, value.t.impl()->wrapped_number ? value.t : value.t.to(self.dtype()));
}

}  // namespace flambeau::python
