// flambeau.<op> functions and their Tensor methods: elementwise, reductions, scans,
// sorting, matrix products. Every kernel runs with the GIL released.
#include "bindings.h"
#include "def_op.h"

namespace flambeau::python {
namespace {

// dim=None | int | sequence of ints.
Dims opt_dims(nb::handle dim) { return dim.is_none() ? Dims{} : dims_from(dim); }

// A (values, indices) pair as torch.return_types-like named tuple.
nb::object values_indices(std::pair<Tensor, Tensor> p) {
  return g_values_indices(p.first, p.second);
}

Tensor release_call(auto&& f) {
  nb::gil_scoped_release release;
  return f();
}

}  // namespace

void bind_ops(nb::module_& m, nb::class_<Tensor>& cls) {
  // Unary elementwise ops, with in-place forms as methods.
#define FLB_BIND_UNARY(name, kind, ...)                                                               \
  def_op<schemas::name>(m, cls, [](const Tensor& t) { return flambeau::name(t); }, release_gil());   \
  def_method<schemas::name>(cls, [](nb::handle self) {                                               \
    Tensor& t = nb::cast<Tensor&>(self);                                                             \
    {                                                                                                \
      nb::gil_scoped_release release;                                                                \
      flambeau::name##_(t);                                                                          \
    }                                                                                                \
    return nb::borrow(self);                                                                         \
  }, #name "_");
  FLB_UNARY_OPS(FLB_BIND_UNARY)
#undef FLB_BIND_UNARY
  // The unary op schema as data for the tests: (name, kind, lo, hi) per op (core/op_list.h).
  nb::list unary_schema;
#define FLB_SCHEMA_ROW(name, kind, lo, hi) unary_schema.append(nb::make_tuple(#name, #kind, double(lo), double(hi)));
  FLB_UNARY_OPS(FLB_SCHEMA_ROW)
#undef FLB_SCHEMA_ROW
  m.attr("_unary_op_schema") = unary_schema;
  // Every public op's schema (ops/schema.h) as data for the tests.
  m.def("_op_schemas", [] {
    nb::list out;
    auto arg = [](const SchemaArg& a) {
      nb::dict d;
      d["name"] = a.name, d["kind"] = arg_kind_name(a.kind), d["list"] = a.list, d["optional"] = a.optional;
      d["kwarg_only"] = a.kwarg_only;
      d["default"] = a.default_value ? nb::cast(*a.default_value) : nb::none();
      return d;
    };
    for (const OpSchema& op : op_schemas()) {
      nb::dict d;
      nb::list args, rets;
      for (const SchemaArg& a : op.arguments) args.append(arg(a));
      for (const SchemaArg& a : op.returns) rets.append(arg(a));
      d["name"] = op.qualified_name(), d["text"] = op.text;
      d["function"] = op.variants == OpVariants::Function || op.variants == OpVariants::Both;
      d["method"] = op.variants == OpVariants::Method || op.variants == OpVariants::Both;
      d["functional"] = op.variants == OpVariants::Functional;
      d["arguments"] = args, d["returns"] = rets;
      out.append(d);
    }
    return out;
  });
  m.def("_parse_schema", [](const std::string& text) { return parse_schema(text).qualified_name(); }, "text"_a);
  def_op<schemas::gelu>(m, cls, [](const Tensor& t, const std::string& approximate) { return gelu(t, approximate); },
                        release_gil());
  def_op<schemas::softplus>(m, cls, [](const Tensor& t, double beta, double threshold) {
    return softplus(t, beta, threshold);
  }, release_gil());
  def_op<schemas::logical_not>(m, cls, [](const Tensor& t) { return logical_not(t); }, release_gil());
  def_op<schemas::isnan>(m, cls, [](const Tensor& t) { return isnan(t); }, release_gil());
  def_op<schemas::isinf>(m, cls, [](const Tensor& t) { return isinf(t); }, release_gil());
  def_op<schemas::isfinite>(m, cls, [](const Tensor& t) { return isfinite(t); }, release_gil());

  // Binary and ternary elementwise ops.
  def_op<schemas::add>(m, cls, [](const Operand& a, const Operand& b, Scalar alpha) { return add(a.t, b.t, alpha); },
                       release_gil());
  def_op<schemas::sub>(m, cls, [](const Operand& a, const Operand& b, Scalar alpha) { return sub(a.t, b.t, alpha); },
                       release_gil());
  def_op<schemas::div>(m, cls, [](const Operand& a, const Operand& b, std::optional<std::string> mode) {
    return div(a.t, b.t, mode.value_or(""));
  }, release_gil());
#define FLB_BIND_BINARY(name)                                                                                 \
  def_op<schemas::name>(m, cls, [](const Operand& a, const Operand& b) { return flambeau::name(a.t, b.t); }, \
                        release_gil());
  FLB_BINARY_OPS(FLB_BIND_BINARY)
  FLB_COMPARE_OPS(FLB_BIND_BINARY)
  FLB_LOGICAL_OPS(FLB_BIND_BINARY)
#undef FLB_BIND_BINARY
  def_op<schemas::where>(m, cls, [](const Tensor& c, const Operand& a, const Operand& b) { return where(c, a.t, b.t); },
                         release_gil());
  def_op<schemas::clamp>(m, cls, [](const Tensor& t, std::optional<Operand> lo, std::optional<Operand> hi) {
    return clamp(t, lo ? std::optional<Tensor>(lo->t) : std::nullopt, hi ? std::optional<Tensor>(hi->t) : std::nullopt);
  }, release_gil());
  def_op<schemas::addcmul>(m, cls, [](const Tensor& s, const Tensor& a, const Tensor& b, Scalar v) {
    return addcmul(s, a, b, v);
  }, release_gil());
  def_op<schemas::addcdiv>(m, cls, [](const Tensor& s, const Tensor& a, const Tensor& b, Scalar v) {
    return addcdiv(s, a, b, v);
  }, release_gil());
  def_op<schemas::lerp>(m, cls, [](const Tensor& s, const Tensor& e, const Operand& w) { return lerp(s, e, w.t); },
                        release_gil());
  m.def("result_type", [](const Operand& a, const Operand& b) { return result_type(a.t, b.t); });

  // Reductions.
  using Reduce = Tensor (*)(const Tensor&, const Dims&, bool, std::optional<DType>);
  auto reduce_with_dtype = [](Reduce f) {
    return [f](const Tensor& t, nb::handle dim, bool keepdim, std::optional<DType> dtype) {
      const Dims d = opt_dims(dim);
      return release_call([&] { return f(t, d, keepdim, dtype); });
    };
  };
  def_op<schemas::sum>(m, cls, reduce_with_dtype(&sum));
  def_op<schemas::mean>(m, cls, reduce_with_dtype(&mean));
  def_op<schemas::prod>(m, cls, reduce_with_dtype(&prod));
  auto reduce = [](Tensor (*f)(const Tensor&, const Dims&, bool)) {
    return [f](const Tensor& t, nb::handle dim, bool keepdim) {
      const Dims d = opt_dims(dim);
      return release_call([&] { return f(t, d, keepdim); });
    };
  };
  def_op<schemas::amax>(m, cls, reduce(&amax));
  def_op<schemas::amin>(m, cls, reduce(&amin));
  def_op<schemas::any>(m, cls, reduce(&any));
  def_op<schemas::all>(m, cls, reduce(&all));
  // max(input) or max(input, dim, keepdim) -> (values, indices).
  auto max_min = [](Tensor (*all)(const Tensor&), std::pair<Tensor, Tensor> (*along)(const Tensor&, int64_t, bool)) {
    return [all, along](const Tensor& t, std::optional<int64_t> dim, bool keepdim) -> nb::object {
      if (!dim) return nb::cast(release_call([&] { return all(t); }));
      std::pair<Tensor, Tensor> r;
      {
        nb::gil_scoped_release release;
        r = along(t, *dim, keepdim);
      }
      return values_indices(r);
    };
  };
  def_op<schemas::max>(m, cls, max_min(&max, &max));
  def_op<schemas::min>(m, cls, max_min(&min, &min));
  def_op<schemas::argmax>(m, cls, [](const Tensor& t, std::optional<int64_t> dim, bool keepdim) {
    return argmax(t, dim, keepdim);
  }, release_gil());
  def_op<schemas::argmin>(m, cls, [](const Tensor& t, std::optional<int64_t> dim, bool keepdim) {
    return argmin(t, dim, keepdim);
  }, release_gil());
  auto moment = [](Tensor (*f)(const Tensor&, const Dims&, double, bool)) {
    return [f](const Tensor& t, nb::handle dim, std::optional<bool> unbiased, bool keepdim,
               std::optional<double> correction) {
      const Dims d = opt_dims(dim);
      const double c = correction ? *correction : unbiased.value_or(true) ? 1.0 : 0.0;
      return release_call([&] { return f(t, d, c, keepdim); });
    };
  };
  def_op<schemas::var>(m, cls, moment(&var));
  def_op<schemas::std>(m, cls, moment(&flambeau::std));
  def_op<schemas::norm>(m, cls, [](const Tensor& t, double p, nb::handle dim, bool keepdim) {
    const Dims d = opt_dims(dim);
    return release_call([&] { return norm(t, p, d, keepdim); });
  });
  def_op<schemas::logsumexp>(m, cls, [](const Tensor& t, nb::handle dim, bool keepdim) {
    const Dims d = dims_from(dim);
    return release_call([&] { return logsumexp(t, d, keepdim); });
  });
  def_op<schemas::count_nonzero>(m, cls, [](const Tensor& t, nb::handle dim) {
    const Dims d = opt_dims(dim);
    return release_call([&] { return count_nonzero(t, d); });
  });
  def_op<schemas::softmax>(m, cls, [](const Tensor& t, int64_t dim, std::optional<DType> dtype) {
    return softmax(t, dim, dtype);
  }, release_gil());
  def_op<schemas::log_softmax>(m, cls, [](const Tensor& t, int64_t dim, std::optional<DType> dtype) {
    return log_softmax(t, dim, dtype);
  }, release_gil());

  // Scans.
  def_op<schemas::cumsum>(m, cls, [](const Tensor& t, int64_t dim, std::optional<DType> dtype) {
    return cumsum(t, dim, dtype);
  }, release_gil());
  def_op<schemas::cumprod>(m, cls, [](const Tensor& t, int64_t dim, std::optional<DType> dtype) {
    return cumprod(t, dim, dtype);
  }, release_gil());
  def_op<schemas::logcumsumexp>(m, cls, [](const Tensor& t, int64_t dim) { return logcumsumexp(t, dim); },
                                release_gil());
  auto cumulative = [](std::pair<Tensor, Tensor> (*f)(const Tensor&, int64_t)) {
    return [f](const Tensor& t, int64_t dim) {
      std::pair<Tensor, Tensor> r;
      {
        nb::gil_scoped_release release;
        r = f(t, dim);
      }
      return values_indices(r);
    };
  };
  def_op<schemas::cummax>(m, cls, cumulative(&cummax));
  def_op<schemas::cummin>(m, cls, cumulative(&cummin));

  // Sorting.
  def_op<schemas::sort>(m, cls, [](const Tensor& t, int64_t dim, bool descending, bool stable) {
    std::pair<Tensor, Tensor> r;
    {
      nb::gil_scoped_release release;
      r = sort(t, dim, descending, stable);
    }
    return values_indices(r);
  });
  def_op<schemas::argsort>(m, cls, [](const Tensor& t, int64_t dim, bool descending, bool stable) {
    return argsort(t, dim, descending, stable);
  }, release_gil());
  def_op<schemas::topk>(m, cls, [](const Tensor& t, int64_t k, int64_t dim, bool largest, bool sorted) {
    std::pair<Tensor, Tensor> r;
    {
      nb::gil_scoped_release release;
      r = topk(t, k, dim, largest, sorted);
    }
    return values_indices(r);
  });
  def_op<schemas::kthvalue>(m, cls, [](const Tensor& t, int64_t k, int64_t dim, bool keepdim) {
    std::pair<Tensor, Tensor> r;
    {
      nb::gil_scoped_release release;
      r = kthvalue(t, k, dim, keepdim);
    }
    return values_indices(r);
  });
  // unique's results as torch returns them: the values alone, or a tuple with the inverse and/or counts.
  auto unique_result = [](const std::tuple<Tensor, Tensor, Tensor>& r, bool return_inverse,
                          bool return_counts) -> nb::object {
    if (!return_inverse && !return_counts) return nb::cast(std::get<0>(r));
    nb::list out;
    out.append(std::get<0>(r));
    if (return_inverse) out.append(std::get<1>(r));
    if (return_counts) out.append(std::get<2>(r));
    return nb::tuple(out);
  };
  def_op<schemas::unique>(m, cls, [=](const Tensor& t, bool sorted, bool return_inverse, bool return_counts,
                                      std::optional<int64_t> dim) {
    return unique_result(release_call_t(unique, t, sorted, return_inverse, return_counts, dim), return_inverse,
                         return_counts);
  });
  def_op<schemas::unique_consecutive>(m, cls, [=](const Tensor& t, bool return_inverse, bool return_counts,
                                                  std::optional<int64_t> dim) {
    return unique_result(release_call_t(unique_consecutive, t, return_inverse, return_counts, dim), return_inverse,
                         return_counts);
  });
  def_op<schemas::searchsorted>(m, cls, [](const Tensor& s, const Operand& v, bool right) {
    return searchsorted(s, v.t, right);
  }, release_gil());

  // Matrix products.
  def_op<schemas::mm>(m, cls, [](const Tensor& a, const Tensor& b) { return mm(a, b); }, release_gil());
  def_op<schemas::bmm>(m, cls, [](const Tensor& a, const Tensor& b) { return bmm(a, b); }, release_gil());
  def_op<schemas::matmul>(m, cls, [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, release_gil());
  def_op<schemas::dot>(m, cls, [](const Tensor& a, const Tensor& b) { return dot(a, b); }, release_gil());
  def_op<schemas::outer>(m, cls, [](const Tensor& a, const Tensor& b) { return outer(a, b); }, release_gil());
  def_op<schemas::addmm>(m, cls, [](const Tensor& s, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
    return addmm(s, a, b, beta, alpha);
  }, release_gil());
  def_op<schemas::baddbmm>(m, cls, [](const Tensor& s, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
    return baddbmm(s, a, b, beta, alpha);
  }, release_gil());
  m.def("bf16_matmul_backend", &bf16_matmul_backend);
  m.def("_cpu_capabilities", [] {
    const backends::cpu::Capabilities c = backends::cpu::capabilities();
    nb::dict isa;
    for (const auto& [name, on] : cpu_isa_flags(c.cpu)) isa[name] = on;
    isa["amx_permitted"] = c.cpu.amx_permitted;
    nb::dict caches, gemm, out;
    caches["l1d"] = c.cpu.l1d_bytes, caches["l2"] = c.cpu.l2_bytes, caches["l3"] = c.cpu.l3_bytes;
    gemm["float32"] = c.gemm_f32, gemm["float64"] = c.gemm_f64, gemm["bfloat16"] = c.gemm_bf16,
    gemm["float16"] = c.gemm_f16;
    out["vendor"] = c.cpu.vendor, out["model"] = c.cpu.model, out["logical_cpus"] = c.cpu.logical_cpus;
    out["isa"] = isa, out["caches"] = caches, out["simd_target"] = c.simd_target, out["gemm"] = gemm;
    out["line"] = backends::cpu::capabilities_line();
    out["cpu_capability"] = backends::cpu::get_cpu_capability();
    return out;
  });
}

}  // namespace flambeau::python
