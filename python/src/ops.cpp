// flambeau.<op> functions and their Tensor methods: elementwise, reductions, scans,
// sorting, matrix products. Every kernel runs with the GIL released.
#include "bindings.h"

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
  def_both(m, cls, #name, [](const Tensor& t) { return flambeau::name(t); }, release_gil());          \
  cls.def(#name "_", [](nb::handle self) {                                                           \
    Tensor& t = nb::cast<Tensor&>(self);                                                             \
    {                                                                                                \
      nb::gil_scoped_release release;                                                                \
      flambeau::name##_(t);                                                                          \
    }                                                                                                \
    return nb::borrow(self);                                                                         \
  });
  FLB_UNARY_OPS(FLB_BIND_UNARY)
#undef FLB_BIND_UNARY
  // The unary op schema as data for the tests: (name, kind, lo, hi) per op (core/op_list.h).
  nb::list unary_schema;
#define FLB_SCHEMA_ROW(name, kind, lo, hi) unary_schema.append(nb::make_tuple(#name, #kind, double(lo), double(hi)));
  FLB_UNARY_OPS(FLB_SCHEMA_ROW)
#undef FLB_SCHEMA_ROW
  m.attr("_unary_op_schema") = unary_schema;
  def_both(m, cls, "gelu", [](const Tensor& t, const std::string& approximate) { return gelu(t, approximate); },
           "input"_a, "approximate"_a = "none", release_gil());
  def_both(m, cls, "softplus", [](const Tensor& t, double beta, double threshold) { return softplus(t, beta, threshold); },
           "input"_a, "beta"_a = 1.0, "threshold"_a = 20.0, release_gil());
  def_both(m, cls, "logical_not", [](const Tensor& t) { return logical_not(t); }, release_gil());
  def_both(m, cls, "isnan", [](const Tensor& t) { return isnan(t); }, release_gil());
  def_both(m, cls, "isinf", [](const Tensor& t) { return isinf(t); }, release_gil());
  def_both(m, cls, "isfinite", [](const Tensor& t) { return isfinite(t); }, release_gil());

  // Binary and ternary elementwise ops.
  def_both(m, cls, "add", [](const Operand& a, const Operand& b, Scalar alpha) { return add(a.t, b.t, alpha); },
           "input"_a, "other"_a, nb::kw_only(), "alpha"_a = 1, release_gil());
  def_both(m, cls, "sub", [](const Operand& a, const Operand& b, Scalar alpha) { return sub(a.t, b.t, alpha); },
           "input"_a, "other"_a, nb::kw_only(), "alpha"_a = 1, release_gil());
  def_both(m, cls, "div", [](const Operand& a, const Operand& b, std::optional<std::string> mode) {
    return div(a.t, b.t, mode.value_or(""));
  }, "input"_a, "other"_a, nb::kw_only(), "rounding_mode"_a = nb::none(), release_gil());
#define FLB_BIND_BINARY(name) \
  def_both(m, cls, #name, [](const Operand& a, const Operand& b) { return flambeau::name(a.t, b.t); }, "input"_a, "other"_a, release_gil());
  FLB_BINARY_OPS(FLB_BIND_BINARY)
  FLB_COMPARE_OPS(FLB_BIND_BINARY)
  FLB_LOGICAL_OPS(FLB_BIND_BINARY)
#undef FLB_BIND_BINARY
  def_both(m, cls, "where", [](const Tensor& c, const Operand& a, const Operand& b) { return where(c, a.t, b.t); },
           "condition"_a, "input"_a, "other"_a, release_gil());
  def_both(m, cls, "clamp", [](const Tensor& t, std::optional<Operand> lo, std::optional<Operand> hi) {
    return clamp(t, lo ? std::optional<Tensor>(lo->t) : std::nullopt, hi ? std::optional<Tensor>(hi->t) : std::nullopt);
  }, "input"_a, "min"_a = nb::none(), "max"_a = nb::none(), release_gil());
  def_both(m, cls, "addcmul", [](const Tensor& s, const Tensor& a, const Tensor& b, Scalar v) { return addcmul(s, a, b, v); },
           "input"_a, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1, release_gil());
  def_both(m, cls, "addcdiv", [](const Tensor& s, const Tensor& a, const Tensor& b, Scalar v) { return addcdiv(s, a, b, v); },
           "input"_a, "tensor1"_a, "tensor2"_a, nb::kw_only(), "value"_a = 1, release_gil());
  def_both(m, cls, "lerp", [](const Tensor& s, const Tensor& e, const Operand& w) { return lerp(s, e, w.t); },
           "input"_a, "end"_a, "weight"_a, release_gil());
  m.def("result_type", [](const Operand& a, const Operand& b) { return result_type(a.t, b.t); });

  // Reductions.
  def_both(m, cls, "sum", [](const Tensor& t, nb::handle dim, bool keepdim, std::optional<DType> dtype) {
    const Dims d = opt_dims(dim);
    return release_call([&] { return sum(t, d, keepdim, dtype); });
  }, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none());
  def_both(m, cls, "mean", [](const Tensor& t, nb::handle dim, bool keepdim, std::optional<DType> dtype) {
    const Dims d = opt_dims(dim);
    return release_call([&] { return mean(t, d, keepdim, dtype); });
  }, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none());
  def_both(m, cls, "prod", [](const Tensor& t, nb::handle dim, bool keepdim, std::optional<DType> dtype) {
    const Dims d = opt_dims(dim);
    return release_call([&] { return prod(t, d, keepdim, dtype); });
  }, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none());
  for (auto [name, f] : {std::pair{"amax", &amax}, std::pair{"amin", &amin}, std::pair{"any", &any}, std::pair{"all", &all}})
    def_both(m, cls, name, [f](const Tensor& t, nb::handle dim, bool keepdim) {
      const Dims d = opt_dims(dim);
      return release_call([&] { return f(t, d, keepdim); });
    }, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);
  for (auto [name, f1, f2] : {std::tuple{"max", static_cast<Tensor (*)(const Tensor&)>(&max),
                                         static_cast<std::pair<Tensor, Tensor> (*)(const Tensor&, int64_t, bool)>(&max)},
                              std::tuple{"min", static_cast<Tensor (*)(const Tensor&)>(&min),
                                         static_cast<std::pair<Tensor, Tensor> (*)(const Tensor&, int64_t, bool)>(&min)}}) {
    def_both(m, cls, name, [f1, f2](const Tensor& t, std::optional<int64_t> dim, bool keepdim) -> nb::object {
      if (!dim) return nb::cast(release_call([&] { return f1(t); }));
      std::pair<Tensor, Tensor> r;
      {
        nb::gil_scoped_release release;
        r = f2(t, *dim, keepdim);
      }
      return values_indices(r);
    }, "input"_a, "dim"_a = nb::none(), "keepdim"_a = false);
  }
  def_both(m, cls, "argmax", [](const Tensor& t, std::optional<int64_t> dim, bool keepdim) { return argmax(t, dim, keepdim); },
           "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, release_gil());
  def_both(m, cls, "argmin", [](const Tensor& t, std::optional<int64_t> dim, bool keepdim) { return argmin(t, dim, keepdim); },
           "input"_a, "dim"_a = nb::none(), "keepdim"_a = false, release_gil());
  for (auto [name, f] : {std::pair{"var", &var}, std::pair{"std", &flambeau::std}})
    def_both(m, cls, name, [f](const Tensor& t, nb::handle dim, std::optional<bool> unbiased, bool keepdim,
                               std::optional<double> correction) {
      const Dims d = opt_dims(dim);
      const double c = correction ? *correction : unbiased.value_or(true) ? 1.0 : 0.0;
      return release_call([&] { return f(t, d, c, keepdim); });
    }, "input"_a, "dim"_a = nb::none(), "unbiased"_a = nb::none(), "keepdim"_a = false, nb::kw_only(),
             "correction"_a = nb::none());
  def_both(m, cls, "norm", [](const Tensor& t, double p, nb::handle dim, bool keepdim) {
    const Dims d = opt_dims(dim);
    return release_call([&] { return norm(t, p, d, keepdim); });
  }, "input"_a, "p"_a = 2.0, "dim"_a = nb::none(), "keepdim"_a = false);
  def_both(m, cls, "logsumexp", [](const Tensor& t, nb::handle dim, bool keepdim) {
    const Dims d = dims_from(dim);
    return release_call([&] { return logsumexp(t, d, keepdim); });
  }, "input"_a, "dim"_a, "keepdim"_a = false);
  def_both(m, cls, "count_nonzero", [](const Tensor& t, nb::handle dim) {
    const Dims d = opt_dims(dim);
    return release_call([&] { return count_nonzero(t, d); });
  }, "input"_a, "dim"_a = nb::none());
  def_both(m, cls, "softmax", [](const Tensor& t, int64_t dim, std::optional<DType> dtype) { return softmax(t, dim, dtype); },
           "input"_a, "dim"_a, "dtype"_a = nb::none(), release_gil());
  def_both(m, cls, "log_softmax", [](const Tensor& t, int64_t dim, std::optional<DType> dtype) {
    return log_softmax(t, dim, dtype);
  }, "input"_a, "dim"_a, "dtype"_a = nb::none(), release_gil());

  // Scans.
  def_both(m, cls, "cumsum", [](const Tensor& t, int64_t dim, std::optional<DType> dtype) { return cumsum(t, dim, dtype); },
           "input"_a, "dim"_a, nb::kw_only(), "dtype"_a = nb::none(), release_gil());
  def_both(m, cls, "cumprod", [](const Tensor& t, int64_t dim, std::optional<DType> dtype) { return cumprod(t, dim, dtype); },
           "input"_a, "dim"_a, nb::kw_only(), "dtype"_a = nb::none(), release_gil());
  def_both(m, cls, "logcumsumexp", [](const Tensor& t, int64_t dim) { return logcumsumexp(t, dim); }, "input"_a, "dim"_a,
           release_gil());
  for (auto [name, f] : {std::pair{"cummax", &cummax}, std::pair{"cummin", &cummin}})
    def_both(m, cls, name, [f](const Tensor& t, int64_t dim) {
      std::pair<Tensor, Tensor> r;
      {
        nb::gil_scoped_release release;
        r = f(t, dim);
      }
      return values_indices(r);
    }, "input"_a, "dim"_a);

  // Sorting.
  def_both(m, cls, "sort", [](const Tensor& t, int64_t dim, bool descending, bool stable) {
    std::pair<Tensor, Tensor> r;
    {
      nb::gil_scoped_release release;
      r = sort(t, dim, descending, stable);
    }
    return values_indices(r);
  }, "input"_a, "dim"_a = -1, "descending"_a = false, nb::kw_only(), "stable"_a = false);
  def_both(m, cls, "argsort", [](const Tensor& t, int64_t dim, bool descending, bool stable) {
    return argsort(t, dim, descending, stable);
  }, "input"_a, "dim"_a = -1, "descending"_a = false, nb::kw_only(), "stable"_a = false, release_gil());
  def_both(m, cls, "topk", [](const Tensor& t, int64_t k, int64_t dim, bool largest, bool sorted) {
    std::pair<Tensor, Tensor> r;
    {
      nb::gil_scoped_release release;
      r = topk(t, k, dim, largest, sorted);
    }
    return values_indices(r);
  }, "input"_a, "k"_a, "dim"_a = -1, "largest"_a = true, "sorted"_a = true);
  def_both(m, cls, "kthvalue", [](const Tensor& t, int64_t k, int64_t dim, bool keepdim) {
    std::pair<Tensor, Tensor> r;
    {
      nb::gil_scoped_release release;
      r = kthvalue(t, k, dim, keepdim);
    }
    return values_indices(r);
  }, "input"_a, "k"_a, "dim"_a = -1, "keepdim"_a = false);
  def_both(m, cls, "unique", [](const Tensor& t, bool sorted, bool return_inverse, bool return_counts) -> nb::object {
    std::tuple<Tensor, Tensor, Tensor> r;
    {
      nb::gil_scoped_release release;
      r = unique(t, sorted, return_inverse, return_counts);
    }
    if (!return_inverse && !return_counts) return nb::cast(std::get<0>(r));
    nb::list out;
    out.append(std::get<0>(r));
    if (return_inverse) out.append(std::get<1>(r));
    if (return_counts) out.append(std::get<2>(r));
    return nb::tuple(out);
  }, "input"_a, "sorted"_a = true, "return_inverse"_a = false, "return_counts"_a = false);
  m.def("searchsorted", [](const Tensor& s, const Operand& v, bool right) { return searchsorted(s, v.t, right); },
        "sorted_sequence"_a, "input"_a, nb::kw_only(), "right"_a = false, release_gil());

  // Matrix products.
  def_both(m, cls, "mm", [](const Tensor& a, const Tensor& b) { return mm(a, b); }, "input"_a, "mat2"_a, release_gil());
  def_both(m, cls, "bmm", [](const Tensor& a, const Tensor& b) { return bmm(a, b); }, "input"_a, "mat2"_a, release_gil());
  def_both(m, cls, "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, "input"_a, "other"_a,
           release_gil());
  def_both(m, cls, "dot", [](const Tensor& a, const Tensor& b) { return dot(a, b); }, "input"_a, "other"_a, release_gil());
  def_both(m, cls, "outer", [](const Tensor& a, const Tensor& b) { return outer(a, b); }, "input"_a, "vec2"_a,
           release_gil());
  def_both(m, cls, "addmm", [](const Tensor& s, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
    return addmm(s, a, b, beta, alpha);
  }, "input"_a, "mat1"_a, "mat2"_a, nb::kw_only(), "beta"_a = 1, "alpha"_a = 1, release_gil());
  def_both(m, cls, "baddbmm", [](const Tensor& s, const Tensor& a, const Tensor& b, Scalar beta, Scalar alpha) {
    return baddbmm(s, a, b, beta, alpha);
  }, "input"_a, "batch1"_a, "batch2"_a, nb::kw_only(), "beta"_a = 1, "alpha"_a = 1, release_gil());
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
