// flambeau.Tensor: properties, conversions, views, operators and indexing. Kernels run
// with the GIL released; in-place methods return the same Python object.
#include "bindings.h"
#include "def_op.h"

namespace flambeau::python {
namespace {

nb::tuple to_tuple(const Dims& d) {
  nb::list l;
  for (int64_t v : d) l.append(v);
  return nb::tuple(l);
}

// Runs op(self) without the GIL and returns self's own Python object.
template <class F>
nb::object inplace(nb::handle self, F&& op) {
  Tensor& t = nb::cast<Tensor&>(self);
  {
    nb::gil_scoped_release release;
    op(t);
  }
  return nb::borrow(self);
}

// x.op(y) for the binary operators; reflected forms swap the operands.
template <Tensor (*Op)(const Tensor&, const Tensor&)>
void def_binary(nb::class_<Tensor>& cls, const char* name, const char* rname) {
  cls.def(name, [](const Tensor& a, const Operand& b) { return Op(a, b.t); }, release_gil());
  if (rname) cls.def(rname, [](const Tensor& a, const Operand& b) { return Op(b.t, a); }, release_gil());
}
template <Tensor& (*Op)(Tensor&, const Tensor&)>
void def_inplace(nb::class_<Tensor>& cls, const char* name) {
  cls.def(name, [](nb::handle self, const Operand& b) { return inplace(self, [&](Tensor& t) { Op(t, b.t); }); });
}

Tensor add2(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor sub2(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor div2(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor& add2_(Tensor& a, const Tensor& b) { return add_(a, b); }
Tensor& sub2_(Tensor& a, const Tensor& b) { return sub_(a, b); }
Tensor& div2_(Tensor& a, const Tensor& b) { return div_(a, b); }
Tensor bitand2(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor bitor2(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor bitxor2(const Tensor& a, const Tensor& b) { return logical_xor(a, b); }

void check_bool_operands(const char* op, const Tensor& a, const Tensor& b) {
  FLB_CHECK(a.dtype() == kBool && b.dtype() == kBool, NotImplementedError, "[", op,
            "] bitwise ops are only supported on bool tensors here");
}

}  // namespace

Dims dims_from_args(const nb::args& args) {
  if (args.size() == 1 && !PyLong_Check(args[0].ptr())) return dims_from(args[0]);
  return dims_from(args);
}

void bind_tensor(nb::module_& m, nb::class_<Tensor>& cls) {
  // Tensor(t) shares t's data (no copy, no history): what nn.Parameter builds on.
  cls.def("__init__", [](Tensor* self, const Tensor& t) { new (self) Tensor(t.detach()); }, "data"_a);
  // self now views other's data (dtype and shape included), keeping its own identity and
  // autograd state: what `param.data = x` does in PyTorch (Module.to() relies on it).
  cls.def("_set_data", &Tensor::set_data, "other"_a);
  cls.def_prop_ro("shape", [](const Tensor& t) { return to_tuple(t.sizes()); })
      .def_prop_ro("dtype", [](const Tensor& t) { return t.dtype(); })
      .def_prop_ro("device", [](const Tensor& t) { return t.device(); })
      .def_prop_ro("ndim", &Tensor::dim)
      .def_prop_ro("T", [](const Tensor& t) {
        Dims order;
        for (int64_t d = t.dim() - 1; d >= 0; --d) order.push_back(d);
        return t.permute(order);
      })
      .def_prop_ro("is_cpu", [](const Tensor& t) { return t.device().is_cpu(); })
      .def("size", [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
        if (dim) return nb::int_(t.size(*dim));
        return to_tuple(t.sizes());
      }, "dim"_a = nb::none())
      .def("stride", [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
        if (dim) return nb::int_(t.stride(*dim));
        return to_tuple(t.strides());
      }, "dim"_a = nb::none())
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("element_size", [](const Tensor& t) { return t.element_size(); })
      .def("storage_offset", &Tensor::storage_offset)
      .def("data_ptr", [](const Tensor& t) { return uintptr_t(t.data_ptr()); })
      .def("is_contiguous", [](const Tensor& t, MemoryFormat f) { return t.is_contiguous(f); }, nb::kw_only(),
           "memory_format"_a = nb::borrow(memory_format_object(MemoryFormat::Contiguous)))
      .def("is_floating_point", &Tensor::is_floating_point)
      .def("item", [](const Tensor& t) { return t.item(); })
      .def("tolist", &to_list)
      .def("numpy", &to_numpy)
      .def("__array__", [](const Tensor& t, nb::handle dtype, nb::handle copy) {
        nb::object a = to_numpy(t);
        return dtype.is_none() ? a : a.attr("astype")(dtype);
      }, "dtype"_a = nb::none(), "copy"_a = nb::none())
      .def("__repr__", &Tensor::str, release_gil())
      .def("__len__", [](const Tensor& t) {
        FLB_CHECK(t.dim() > 0, TypeError, "len() of a 0-d tensor");
        return t.size(0);
      })
      .def("__bool__", [](const Tensor& t) {
        FLB_CHECK(t.numel() == 1, ValueError, "Boolean value of Tensor with more than one value is ambiguous");
        return t.item().to_bool();
      })
      .def("__float__", [](const Tensor& t) { return t.item().to_double(); })
      .def("__int__", [](const Tensor& t) { return t.item().to_int(); })
      .def("__index__", [](const Tensor& t) {
        FLB_CHECK(t.numel() == 1 && !t.is_floating_point() && t.dtype() != kBool, TypeError,
                  "only integer tensors of a single element can be converted to an index");
        return t.item().to_int();
      })
      .def("__hash__", [](nb::handle self) { return nb::hash(nb::int_(uintptr_t(self.ptr()))); })
      .def("__dlpack__", [](const Tensor& t, nb::kwargs) { return to_dlpack(t); })
      .def("__dlpack_device__", [](const Tensor&) { return nb::make_tuple(1, 0); })
      // .none(): nanobind refuses None arguments unless told; t[None] adds a dim.
      .def("__getitem__", &getitem, "key"_a.none())
      .def("__setitem__", &setitem, "key"_a.none(), "value"_a)
      // Copies and conversions.
      // to(dtype=None, non_blocking=False, copy=False, *, memory_format=preserve_format): a
      // dtype conversion keeps a channels-last layout; another format is made as asked.
      .def("to", [](const Tensor& t, std::optional<DType> dt, bool, bool copy, MemoryFormat f) {
        Tensor r = dt && *dt != t.dtype() ? t.to(*dt) : copy ? t.clone(f) : t;
        return f == MemoryFormat::Preserve ? r : r.contiguous(f);
      }, "dtype"_a = nb::none(), "non_blocking"_a = false, "copy"_a = false, nb::kw_only(),
           "memory_format"_a = nb::borrow(memory_format_object(MemoryFormat::Preserve)), release_gil())
      .def("float", [](const Tensor& t) { return t.to(kFloat32); }, release_gil())
      .def("double", [](const Tensor& t) { return t.to(kFloat64); }, release_gil())
      .def("half", [](const Tensor& t) { return t.to(kFloat16); }, release_gil())
      .def("bfloat16", [](const Tensor& t) { return t.to(kBFloat16); }, release_gil())
      .def("long", [](const Tensor& t) { return t.to(kInt64); }, release_gil())
      .def("int", [](const Tensor& t) { return t.to(kInt32); }, release_gil())
      .def("bool", [](const Tensor& t) { return t.to(kBool); }, release_gil())
      // Views.
      .def("view", [](const Tensor& t, nb::args shape) { return t.view(dims_from_args(shape)); })
      .def("reshape", [](const Tensor& t, nb::args shape) { return t.reshape(dims_from_args(shape)); })
      .def("permute", [](const Tensor& t, nb::args dims) { return t.permute(dims_from_args(dims)); })
      .def("expand", [](const Tensor& t, nb::args shape) { return t.expand(dims_from_args(shape)); });
  // The function forms take one sequence (torch.reshape(x, (2, 3))).
  def_op<schemas::reshape>(m, cls, [](const Tensor& t, nb::handle shape) { return t.reshape(dims_from(shape)); });
  def_op<schemas::permute>(m, cls, [](const Tensor& t, nb::handle dims) { return t.permute(dims_from(dims)); });
  def_op<schemas::contiguous>(m, cls, [](const Tensor& t, MemoryFormat f) { return t.contiguous(f); },
                              release_gil());
  def_op<schemas::clone>(m, cls, [](const Tensor& t, std::optional<MemoryFormat> f) {
    return t.clone(f.value_or(MemoryFormat::Preserve));
  }, release_gil());
  def_op<schemas::copy_>(m, cls, [](nb::handle self, const Tensor& src) {
    return inplace(self, [&](Tensor& t) { t.copy_(src); });
  });
  def_op<schemas::fill_>(m, cls, [](nb::handle self, Scalar v) { return inplace(self, [&](Tensor& t) { t.fill_(v); }); });
  def_op<schemas::zero_>(m, cls, [](nb::handle self) { return inplace(self, [](Tensor& t) { t.zero_(); }); });
  def_op<schemas::transpose>(m, cls, [](const Tensor& t, int64_t a, int64_t b) { return t.transpose(a, b); });
  def_op<schemas::t>(m, cls, [](const Tensor& t) { return t.t(); });
  def_op<schemas::unsqueeze>(m, cls, [](const Tensor& t, int64_t dim) { return t.unsqueeze(dim); });
  def_op<schemas::squeeze>(m, cls, [](const Tensor& t, std::optional<int64_t> dim) {
    return dim ? t.squeeze(*dim) : t.squeeze();
  });
  def_op<schemas::flatten>(m, cls, [](const Tensor& t, int64_t start, int64_t end) { return t.flatten(start, end); });
  def_op<schemas::unflatten>(m, cls, [](const Tensor& t, int64_t dim, nb::handle sizes) {
    return t.unflatten(dim, dims_from(sizes));
  });
  def_op<schemas::select>(m, cls, [](const Tensor& t, int64_t dim, int64_t i) { return t.select(dim, i); });
  def_op<schemas::narrow>(m, cls, [](const Tensor& t, int64_t dim, int64_t start, int64_t length) {
    return t.narrow(dim, start, length);
  });
  def_op<schemas::expand_as>(m, cls, [](const Tensor& t, const Tensor& o) { return t.expand(o.sizes()); });
  def_op<schemas::view_as>(m, cls, [](const Tensor& t, const Tensor& o) { return t.view(o.sizes()); });
  def_op<schemas::as_strided>(m, cls, [](const Tensor& t, nb::handle size, nb::handle stride,
                                         std::optional<int64_t> offset) {
    return t.as_strided(dims_from(size), dims_from(stride), offset);
  });

  // Operators (Python numbers are weak scalars, as in PyTorch).
  def_binary<add2>(cls, "__add__", "__radd__");
  def_binary<sub2>(cls, "__sub__", "__rsub__");
  def_binary<flambeau::mul>(cls, "__mul__", "__rmul__");
  def_binary<div2>(cls, "__truediv__", "__rtruediv__");
  def_binary<flambeau::floor_divide>(cls, "__floordiv__", "__rfloordiv__");
  def_binary<flambeau::remainder>(cls, "__mod__", "__rmod__");
  def_binary<flambeau::pow>(cls, "__pow__", "__rpow__");
  def_binary<flambeau::matmul>(cls, "__matmul__", "__rmatmul__");
  def_binary<flambeau::eq>(cls, "__eq__", nullptr);
  def_binary<flambeau::ne>(cls, "__ne__", nullptr);
  def_binary<flambeau::lt>(cls, "__lt__", nullptr);
  def_binary<flambeau::le>(cls, "__le__", nullptr);
  def_binary<flambeau::gt>(cls, "__gt__", nullptr);
  def_binary<flambeau::ge>(cls, "__ge__", nullptr);
  def_inplace<add2_>(cls, "__iadd__");
  def_inplace<sub2_>(cls, "__isub__");
  def_inplace<flambeau::mul_>(cls, "__imul__");
  def_inplace<div2_>(cls, "__itruediv__");
  def_inplace<flambeau::floor_divide_>(cls, "__ifloordiv__");
  def_inplace<flambeau::remainder_>(cls, "__imod__");
  def_inplace<flambeau::pow_>(cls, "__ipow__");
  // In-place forms: the arguments of the op's schema.
  def_method<schemas::add>(cls, [](nb::handle self, const Operand& b, Scalar alpha) {
    return inplace(self, [&](Tensor& t) { add_(t, b.t, alpha); });
  }, "add_");
  def_method<schemas::sub>(cls, [](nb::handle self, const Operand& b, Scalar alpha) {
    return inplace(self, [&](Tensor& t) { sub_(t, b.t, alpha); });
  }, "sub_");
  def_method<schemas::div>(cls, [](nb::handle self, const Operand& b, std::optional<std::string> mode) {
    return inplace(self, [&](Tensor& t) { div_(t, b.t, mode.value_or("")); });
  }, "div_");
#define FLB_BIND_INPLACE(name)                                                                            \
  def_method<schemas::name>(cls, [](nb::handle self, const Operand& b) {                                  \
    return inplace(self, [&](Tensor& t) { flambeau::name##_(t, b.t); });                                  \
  }, #name "_");
  FLB_BIND_INPLACE(mul)
  FLB_BINARY_INPLACE_OPS(FLB_BIND_INPLACE)
#undef FLB_BIND_INPLACE
  def_method<schemas::clamp>(cls, [](nb::handle self, std::optional<Operand> lo, std::optional<Operand> hi) {
    return inplace(self, [&](Tensor& t) {
      clamp_(t, lo ? std::optional<Tensor>(lo->t) : std::nullopt, hi ? std::optional<Tensor>(hi->t) : std::nullopt);
    });
  }, "clamp_");
  cls.def("__neg__", [](const Tensor& t) { return neg(t); }, release_gil())
      .def("__pos__", [](const Tensor& t) { return t; })
      .def("__abs__", [](const Tensor& t) { return abs(t); }, release_gil())
      .def("__invert__", [](const Tensor& t) {
        FLB_CHECK(t.dtype() == kBool, NotImplementedError, "[bitwise_not] only bool tensors are supported here");
        return logical_not(t);
      }, release_gil());
  for (auto [name, rname, f] : {std::tuple{"__and__", "__rand__", &bitand2}, std::tuple{"__or__", "__ror__", &bitor2},
                                std::tuple{"__xor__", "__rxor__", &bitxor2}}) {
    cls.def(name, [f](const Tensor& a, const Operand& b) {
      check_bool_operands("bitwise", a, b.t);
      return f(a, b.t);
    }, release_gil());
    cls.def(rname, [f](const Tensor& a, const Operand& b) {
      check_bool_operands("bitwise", a, b.t);
      return f(b.t, a);
    }, release_gil());
  }
}

}  // namespace flambeau::python
