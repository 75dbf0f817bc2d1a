// flambeau.<op> functions and Tensor methods of ops/shape.cpp (flips, rolls, triangles,
// tiling, diagonals, meshgrids) and ops/math.cpp. The functions torch takes *tensors for
// (meshgrid, cartesian_prod, block_diag) and Tensor.repeat(*sizes) take varargs or one
// sequence, as torch's.
#include "bindings.h"
#include "def_op.h"

namespace flambeau::python {
namespace {

// The tensors of f(a, b, c) or f([a, b, c]).
std::vector<Tensor> tensors_from_args(const nb::args& args) {
  nb::handle seq = args;
  if (args.size() == 1 && (PyList_Check(args[0].ptr()) || PyTuple_Check(args[0].ptr()))) seq = args[0];
  std::vector<Tensor> out;
  for (nb::handle h : seq) out.push_back(nb::cast<Tensor>(h));
  return out;
}

// einsum(equation, *operands) or einsum(equation, [operands]); torch's sublist form
// einsum(op0, [0, 1], op1, [1, 2], [0, 2]) (labels 0-51: A-Z, a-z; Ellipsis: "...") becomes
// the equation it spells. path: opt_einsum's pairs, nested or flat.
void bind_einsum(nb::module_& m) {
  m.def("einsum", [](nb::handle equation, nb::args rest, nb::handle path) {
    std::string eq;
    std::vector<Tensor> operands;
    if (nb::isinstance<nb::str>(equation)) {
      eq = nb::cast<std::string>(equation);
      operands = tensors_from_args(rest);
    } else {
      FLB_CHECK(nb::isinstance<Tensor>(equation), TypeError,
                "[einsum] expected an equation string or a tensor (sublist format) first, got ",
                nb::type_name(equation.type()).c_str());
      std::vector<nb::handle> items{equation};
      for (nb::handle h : rest) items.push_back(h);
      auto spell = [](nb::handle sublist) {
        std::string s;
        for (nb::handle l : nb::iter(sublist)) {
          if (l.is(nb::handle(Py_Ellipsis))) { s += "..."; continue; }
          const int64_t v = nb::cast<int64_t>(l);
          FLB_CHECK(v >= 0 && v < 52, ValueError, "[einsum] subscript in sublist format must be in [0, 52), got ", v);
          s += char(v < 26 ? 'A' + v : 'a' + v - 26);
        }
        return s;
      };
      size_t i = 0;
      for (; i + 1 < items.size(); i += 2) {
        operands.push_back(nb::cast<Tensor>(items[i]));
        eq += (i ? "," : "") + spell(items[i + 1]);
      }
      if (i < items.size()) eq += "->" + spell(items[i]);
    }
    std::optional<Dims> p;
    if (!path.is_none()) {
      p.emplace();
      for (nb::handle step : nb::iter(path))
        for (int64_t v : dims_from(step)) p->push_back(v);
    }
    nb::gil_scoped_release release;
    return einsum(eq, operands, p);
  }, "equation"_a, "tensors"_a, "path"_a = nb::none());
}

// repeats: an int (one count) or an integer tensor.
Tensor repeats_from(nb::handle h) {
  int64_t n;
  if (nb::try_cast<int64_t>(h, n)) return full({}, Scalar(n), kInt64);
  return nb::cast<Tensor>(h);
}

}  // namespace

void bind_shape_ops(nb::module_& m, nb::class_<Tensor>& cls) {
  def_op<schemas::flip>(m, cls, [](const Tensor& t, nb::handle dims) { return flip(t, dims_from(dims)); });
  def_op<schemas::fliplr>(m, cls, [](const Tensor& t) { return fliplr(t); }, release_gil());
  def_op<schemas::flipud>(m, cls, [](const Tensor& t) { return flipud(t); }, release_gil());
  def_op<schemas::roll>(m, cls, [](const Tensor& t, nb::handle shifts, nb::handle dims) {
    return release_call_t(roll, t, dims_from(shifts), dims_from(dims));
  });
  def_op<schemas::rot90>(m, cls, [](const Tensor& t, int64_t k, nb::handle dims) {
    return release_call_t(rot90, t, k, dims_from(dims));
  });
  def_op<schemas::tril>(m, cls, [](const Tensor& t, int64_t k) { return tril(t, k); }, release_gil());
  def_op<schemas::triu>(m, cls, [](const Tensor& t, int64_t k) { return triu(t, k); }, release_gil());
  def_op<schemas::tril_indices>(m, cls, [](int64_t r, int64_t c, int64_t k, std::optional<DType> dtype) {
    return tril_indices(r, c, k, dtype.value_or(kInt64));
  }, release_gil());
  def_op<schemas::triu_indices>(m, cls, [](int64_t r, int64_t c, int64_t k, std::optional<DType> dtype) {
    return triu_indices(r, c, k, dtype.value_or(kInt64));
  }, release_gil());
  cls.def("repeat", [](const Tensor& t, nb::args repeats) { return release_call_t(repeat, t, dims_from_args(repeats)); },
          "repeats"_a);
  def_op<schemas::tile>(m, cls, [](const Tensor& t, nb::handle dims) { return release_call_t(tile, t, dims_from(dims)); });
  def_op<schemas::repeat_interleave>(m, cls, [](const Tensor& t, nb::handle repeats, std::optional<int64_t> dim) {
    return release_call_t(repeat_interleave, t, repeats_from(repeats), dim);
  });
  def_op<schemas::movedim>(m, cls, [](const Tensor& t, nb::handle src, nb::handle dst) {
    return movedim(t, dims_from(src), dims_from(dst));
  });
  def_op<schemas::moveaxis>(m, cls, [](const Tensor& t, nb::handle src, nb::handle dst) {
    return moveaxis(t, dims_from(src), dims_from(dst));
  });
  def_op<schemas::swapaxes>(m, cls, [](const Tensor& t, int64_t a, int64_t b) { return swapaxes(t, a, b); });
  def_op<schemas::swapdims>(m, cls, [](const Tensor& t, int64_t a, int64_t b) { return swapdims(t, a, b); });
  def_op<schemas::unbind>(m, cls, [](const Tensor& t, int64_t dim) { return nb::tuple(to_list_of(unbind(t, dim))); });
  def_op<schemas::narrow_copy>(m, cls, [](const Tensor& t, int64_t dim, int64_t start, int64_t length) {
    return narrow_copy(t, dim, start, length);
  }, release_gil());
  def_op<schemas::diagonal>(m, cls, [](const Tensor& t, int64_t offset, int64_t d1, int64_t d2) {
    return diagonal(t, offset, d1, d2);
  });
  def_op<schemas::diag_embed>(m, cls, [](const Tensor& t, int64_t offset, int64_t d1, int64_t d2) {
    return diag_embed(t, offset, d1, d2);
  }, release_gil());
  def_op<schemas::diag>(m, cls, [](const Tensor& t, int64_t k) { return diag(t, k); }, release_gil());
  def_op<schemas::trace>(m, cls, [](const Tensor& t) { return trace(t); }, release_gil());
  def_op<schemas::take_along_dim>(m, cls, [](const Tensor& t, const Tensor& i, std::optional<int64_t> dim) {
    return take_along_dim(t, i, dim);
  }, release_gil());
  def_op<schemas::kron>(m, cls, [](const Tensor& a, const Tensor& b) { return kron(a, b); }, release_gil());
  def_op<schemas::bucketize>(m, cls, [](const Operand& input, const Tensor& b, bool out_int32, bool right) {
    return bucketize(input.t, b, out_int32, right);
  }, release_gil());
  // Math.
  def_op<schemas::isposinf>(m, cls, [](const Tensor& t) { return isposinf(t); }, release_gil());
  def_op<schemas::isneginf>(m, cls, [](const Tensor& t) { return isneginf(t); }, release_gil());
  def_op<schemas::nan_to_num>(m, cls, &nan_to_num, release_gil());
  def_op<schemas::logaddexp>(m, cls, [](const Tensor& a, const Operand& b) { return logaddexp(a, b.t); },
                             release_gil());
  def_op<schemas::logaddexp2>(m, cls, [](const Tensor& a, const Operand& b) { return logaddexp2(a, b.t); },
                              release_gil());
  def_op<schemas::bincount>(m, cls, &bincount, release_gil());
  def_op<schemas::histc>(m, cls, &histc, release_gil());
  def_op<schemas::cosine_similarity>(m, cls, &cosine_similarity, release_gil());
  def_op<schemas::pairwise_distance>(m, cls, &pairwise_distance, release_gil());
  def_op<schemas::cdist>(m, cls, &cdist, release_gil());
  // dims: an int (a's last dims against b's first), a pair of dim lists (or ints), or a tensor of either.
  def_op<schemas::tensordot>(m, cls, [](const Tensor& a, const Tensor& b, nb::handle dims) {
    if (nb::isinstance<Tensor>(dims)) {
      const Tensor d = nb::cast<Tensor>(dims);
      if (d.dim() == 0) return tensordot(a, b, d.item<int64_t>());
      FLB_CHECK(d.dim() == 2 && d.size(0) == 2, ValueError, "[tensordot] dims as a tensor must be a number or of shape [2, n], got ",
                shape_str(d.sizes()));
      const Tensor c = d.to(kInt64).contiguous();
      const int64_t* v = c.data<int64_t>();
      const size_t k = size_t(d.size(1));
      return tensordot(a, b, Dims(v, k), Dims(v + k, k));
    }
    int64_t n;
    if (nb::try_cast<int64_t>(dims, n)) return tensordot(a, b, n);
    FLB_CHECK(nb::len(dims) == 2, ValueError, "[tensordot] dims must be an int or a pair of dim lists, got ",
              nb::str(dims).c_str());
    return tensordot(a, b, dims_from(dims[0]), dims_from(dims[1]));
  });
  bind_einsum(m);
  m.def("meshgrid", [](nb::args tensors, std::optional<std::string> indexing) {
    return nb::tuple(to_list_of(meshgrid(tensors_from_args(tensors), indexing.value_or("ij"))));
  }, "tensors"_a, "indexing"_a = "ij");
  m.def("cartesian_prod", [](nb::args tensors) { return cartesian_prod(tensors_from_args(tensors)); }, "tensors"_a);
  m.def("block_diag", [](nb::args tensors) { return block_diag(tensors_from_args(tensors)); }, "tensors"_a);
}

}  // namespace flambeau::python
