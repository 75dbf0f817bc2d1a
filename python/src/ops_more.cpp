// flambeau.<op> functions and Tensor methods: indexing, joining, factories and random
// sampling.
#include "bindings.h"
#include "def_op.h"

namespace flambeau::python {
namespace {

// The method form of an in-place op fi(Tensor&, args...): runs without the GIL and
// returns self's own Python object.
template <class FI, class... A>
auto inplace_method(FI fi, void (FI::*)(Tensor&, A...) const) {
  return [fi](nb::handle self, A... args) {
    Tensor& t = nb::cast<Tensor&>(self);
    {
      nb::gil_scoped_release release;
      fi(t, args...);
    }
    return nb::borrow(self);
  };
}

// Binds op S (function and method) and its in-place method <op>_ (same arguments).
template <const OpSchemaText& S, class F, class FI>
void def_pair(nb::module_& m, nb::class_<Tensor>& cls, F f, FI fi) {
  def_op<S>(m, cls, f, release_gil());
  static const std::string iname = op_schema(S.name).name + "_";
  def_method<S>(cls, inplace_method(fi, &FI::operator()), iname.c_str());
}

}  // namespace

void bind_more_ops(nb::module_& m, nb::class_<Tensor>& cls) {
  // Indexing.
  def_op<schemas::index_select>(m, cls, [](const Tensor& t, int64_t dim, const Tensor& i) {
    return index_select(t, dim, i);
  }, release_gil());
  def_op<schemas::gather>(m, cls, [](const Tensor& t, int64_t dim, const Tensor& i) { return gather(t, dim, i); },
                          release_gil());
  def_pair<schemas::scatter>(m, cls,
           [](const Tensor& t, int64_t dim, const Tensor& i, const Operand& src) { return scatter(t, dim, i, src.t); },
           [](Tensor& t, int64_t dim, const Tensor& i, const Operand& src) { scatter_(t, dim, i, src.t); });
  def_pair<schemas::scatter_add>(m, cls,
           [](const Tensor& t, int64_t dim, const Tensor& i, const Tensor& src) { return scatter_add(t, dim, i, src); },
           [](Tensor& t, int64_t dim, const Tensor& i, const Tensor& src) { scatter_add_(t, dim, i, src); });
  def_pair<schemas::scatter_reduce>(m, cls,
           [](const Tensor& t, int64_t dim, const Tensor& i, const Tensor& src, const std::string& r, bool self) {
             return scatter_reduce(t, dim, i, src, r, self);
           },
           [](Tensor& t, int64_t dim, const Tensor& i, const Tensor& src, const std::string& r, bool self) {
             scatter_reduce_(t, dim, i, src, r, self);
           });
  def_pair<schemas::index_add>(m, cls,
           [](const Tensor& t, int64_t dim, const Tensor& i, const Tensor& src, Scalar alpha) {
             return index_add(t, dim, i, src, alpha);
           },
           [](Tensor& t, int64_t dim, const Tensor& i, const Tensor& src, Scalar alpha) { index_add_(t, dim, i, src, alpha); });
  def_pair<schemas::index_copy>(m, cls,
           [](const Tensor& t, int64_t dim, const Tensor& i, const Tensor& src) { return index_copy(t, dim, i, src); },
           [](Tensor& t, int64_t dim, const Tensor& i, const Tensor& src) { index_copy_(t, dim, i, src); });
  def_pair<schemas::index_fill>(m, cls,
           [](const Tensor& t, int64_t dim, const Tensor& i, const Operand& v) { return index_fill(t, dim, i, v.t); },
           [](Tensor& t, int64_t dim, const Tensor& i, const Operand& v) { index_fill_(t, dim, i, v.t); });
  def_pair<schemas::masked_fill>(m, cls,
           [](const Tensor& t, const Tensor& mask, const Operand& v) { return masked_fill(t, mask, v.t); },
           [](Tensor& t, const Tensor& mask, const Operand& v) { masked_fill_(t, mask, v.t); });
  def_pair<schemas::masked_scatter>(m, cls,
           [](const Tensor& t, const Tensor& mask, const Tensor& s) { return masked_scatter(t, mask, s); },
           [](Tensor& t, const Tensor& mask, const Tensor& s) { masked_scatter_(t, mask, s); });
  def_op<schemas::masked_select>(m, cls, [](const Tensor& t, const Tensor& mask) { return masked_select(t, mask); },
                                 release_gil());
  def_op<schemas::nonzero>(m, cls, [](const Tensor& t) { return nonzero(t); }, release_gil());
  def_op<schemas::take>(m, cls, [](const Tensor& t, const Tensor& i) { return take(t, i); }, release_gil());

  // Joining and splitting.
  def_op<schemas::cat>(m, cls, [](const std::vector<Tensor>& ts, int64_t dim) { return cat(ts, dim); }, release_gil());
  def_op<schemas::stack>(m, cls, [](const std::vector<Tensor>& ts, int64_t dim) { return stack(ts, dim); },
                         release_gil());
  def_op<schemas::split>(m, cls, [](const Tensor& t, nb::handle size, int64_t dim) {
    int64_t n;
    if (nb::try_cast<int64_t>(size, n)) return to_list_of(split(t, n, dim));
    const Dims d = dims_from(size);
    return to_list_of(split(t, std::vector<int64_t>(d.begin(), d.end()), dim));
  });
  def_op<schemas::chunk>(m, cls, [](const Tensor& t, int64_t chunks, int64_t dim) {
    return to_list_of(chunk(t, chunks, dim));
  });

  // Factories.
  auto device_of = [](nb::handle device) {
    return device.is_none() ? kCPU : Device(nb::cast<std::string>(nb::str(device)));
  };
  for (auto [name, f] : {std::pair{"zeros", &zeros}, std::pair{"ones", &ones}})
    m.def(name, [f, device_of](nb::args size, std::optional<DType> dtype, nb::handle device) {
      return release_call_t(f, dims_from_args(size), dtype.value_or(kFloat32), device_of(device));
    }, "size"_a, "dtype"_a = nb::none(), "device"_a = nb::none());
  m.def("empty", [device_of](nb::args size, std::optional<DType> dtype, nb::handle device, MemoryFormat format) {
    const Dims s = dims_from_args(size);
    const DType dt = dtype.value_or(kFloat32);
    if (format != MemoryFormat::Contiguous) return empty(s, dt, format);
    return release_call_t([](const Dims& s, DType dt, Device d) { return empty(s, dt, d); }, s, dt, device_of(device));
  }, "size"_a, "dtype"_a = nb::none(), "device"_a = nb::none(),
        "memory_format"_a = nb::borrow(memory_format_object(MemoryFormat::Contiguous)));
  m.def("full", [](nb::handle size, Scalar v, std::optional<DType> dtype) { return full(dims_from(size), v, dtype); },
        "size"_a, "fill_value"_a, nb::kw_only(), "dtype"_a = nb::none());
  m.def("arange", [](Scalar a, std::optional<Scalar> b, Scalar step, std::optional<DType> dtype) {
    return b ? arange(a, *b, step, dtype) : arange(Scalar(0), a, step, dtype);
  }, "start"_a, "end"_a = nb::none(), "step"_a = 1, nb::kw_only(), "dtype"_a = nb::none());
  m.def("linspace", [](double a, double b, int64_t steps, std::optional<DType> dtype) {
    return linspace(a, b, steps, dtype.value_or(kFloat32));
  }, "start"_a, "end"_a, "steps"_a, nb::kw_only(), "dtype"_a = nb::none());
  m.def("eye", [](int64_t n, std::optional<int64_t> mm, std::optional<DType> dtype) {
    return eye(n, mm.value_or(-1), dtype.value_or(kFloat32));
  }, "n"_a, "m"_a = nb::none(), nb::kw_only(), "dtype"_a = nb::none());
  // memory_format defaults to preserve_format, as torch's.
  const nb::object preserve = nb::borrow(memory_format_object(MemoryFormat::Preserve));
  m.def("empty_like", [](const Tensor& t, std::optional<DType> d, MemoryFormat f) { return empty_like(t, d, f); },
        "input"_a, nb::kw_only(), "dtype"_a = nb::none(), "memory_format"_a = preserve);
  m.def("zeros_like", [](const Tensor& t, std::optional<DType> d, MemoryFormat f) { return zeros_like(t, d, f); },
        "input"_a, nb::kw_only(), "dtype"_a = nb::none(), "memory_format"_a = preserve);
  m.def("ones_like", [](const Tensor& t, std::optional<DType> d, MemoryFormat f) { return ones_like(t, d, f); },
        "input"_a, nb::kw_only(), "dtype"_a = nb::none(), "memory_format"_a = preserve);
  m.def("full_like", [](const Tensor& t, Scalar v, std::optional<DType> d, MemoryFormat f) {
    return full_like(t, v, d, f);
  }, "input"_a, "fill_value"_a, nb::kw_only(), "dtype"_a = nb::none(), "memory_format"_a = preserve);
  m.def("tensor", [](nb::handle data, std::optional<DType> dtype) {
    // Reported as the factory "tensor" (its inner ops are not user-level calls).
    return op_hook::call("tensor", [&] { return tensor_from_data(data, dtype); });
  }, "data"_a,
        nb::kw_only(), "dtype"_a = nb::none());
  m.def("as_tensor", [](nb::handle data, std::optional<DType> dtype) {
    if (nb::isinstance<Tensor>(data) || nb::hasattr(data, "__dlpack__")) {
      const Tensor t = from_dlpack(data);
      return dtype && *dtype != t.dtype() ? t.to(*dtype) : t;
    }
    return tensor_from_data(data, dtype);
  }, "data"_a, "dtype"_a = nb::none());
  m.def("from_dlpack", &from_dlpack, "ext_tensor"_a);
  m.def("from_numpy", [](nb::handle a) {
    FLB_CHECK(nb::hasattr(a, "__array_interface__") && nb::hasattr(a, "__dlpack__"), TypeError,
              "[from_numpy] expected a numpy.ndarray, got ", nb::type_name(a.type()).c_str());
    return from_dlpack(a);
  }, "ndarray"_a);

  // Random sampling.
  m.def("rand", [](nb::args size, std::optional<Generator> g, std::optional<DType> dtype) {
    const Dims s = dims_from_args(size);
    return release_call_t(rand, s, dtype.value_or(kFloat32), g);
  }, "size"_a, "generator"_a = nb::none(), "dtype"_a = nb::none());
  m.def("randn", [](nb::args size, std::optional<Generator> g, std::optional<DType> dtype) {
    const Dims s = dims_from_args(size);
    return release_call_t(randn, s, dtype.value_or(kFloat32), g);
  }, "size"_a, "generator"_a = nb::none(), "dtype"_a = nb::none());
  m.def("randint", [](int64_t a, std::optional<int64_t> b, nb::handle size, std::optional<Generator> g,
                      std::optional<DType> dtype) {
    const Dims s = dims_from(size);
    return b ? randint(a, *b, s, dtype.value_or(kInt64), g) : randint(a, s, dtype.value_or(kInt64), g);
  }, "low"_a, "high"_a, "size"_a, nb::kw_only(), "generator"_a = nb::none(), "dtype"_a = nb::none());
  m.def("randperm", [](int64_t n, std::optional<Generator> g, std::optional<DType> dtype) {
    return randperm(n, dtype.value_or(kInt64), g);
  }, "n"_a, nb::kw_only(), "generator"_a = nb::none(), "dtype"_a = nb::none(), release_gil());
  def_op<schemas::multinomial>(m, cls, [](const Tensor& p, int64_t n, bool replacement, std::optional<Generator> g) {
    return multinomial(p, n, replacement, g);
  }, release_gil());
  def_op<schemas::bernoulli>(m, cls, [](const Tensor& p, std::optional<Generator> g) { return bernoulli(p, g); },
                             release_gil());
  auto sampler = [&](const char* name, auto fn, auto... names) {
    cls.def(name, [fn](nb::handle self, double a, double b, std::optional<Generator> g) {
      Tensor& t = nb::cast<Tensor&>(self);
      {
        nb::gil_scoped_release release;
        fn(t, a, b, g);
      }
      return nb::borrow(self);
    }, names...);
  };
  sampler("uniform_", [](Tensor& t, double a, double b, std::optional<Generator> g) { uniform_(t, a, b, g); }, "from_"_a = 0.0,
          "to"_a = 1.0, nb::kw_only(), "generator"_a = nb::none());
  sampler("normal_", [](Tensor& t, double a, double b, std::optional<Generator> g) { normal_(t, a, b, g); }, "mean"_a = 0.0,
          "std"_a = 1.0, nb::kw_only(), "generator"_a = nb::none());
  cls.def("exponential_", [](nb::handle self, double l, std::optional<Generator> g) {
    Tensor& t = nb::cast<Tensor&>(self);
    {
      nb::gil_scoped_release release;
      exponential_(t, l, g);
    }
    return nb::borrow(self);
  }, "lambd"_a = 1.0, nb::kw_only(), "generator"_a = nb::none());
  cls.def("bernoulli_", [](nb::handle self, double p, std::optional<Generator> g) {
    Tensor& t = nb::cast<Tensor&>(self);
    {
      nb::gil_scoped_release release;
      bernoulli_(t, p, g);
    }
    return nb::borrow(self);
  }, "p"_a = 0.5, nb::kw_only(), "generator"_a = nb::none());
}

}  // namespace flambeau::python
