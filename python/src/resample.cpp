// nn.functional's resampling (nn/resample.cpp) in flambeau._C._nn: interpolate (size and
// scale_factor take a number for every spatial dim or a sequence), pixel_shuffle,
// pixel_unshuffle, unfold and fold.
#include "bindings.h"
#include "def_op.h"

namespace flambeau::python {
namespace {

bool is_sequence(nb::handle h) { return PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()); }

// torch's TypeError for a size that is not integers.
void check_integers(nb::handle h) {
  const Py_ssize_t len = PySequence_Size(h.ptr());
  std::string types;
  bool ok = true;
  for (Py_ssize_t i = 0; i < len; ++i) {
    nb::object e = nb::steal(PySequence_GetItem(h.ptr(), i));
    ok = ok && PyLong_Check(e.ptr()) && !PyBool_Check(e.ptr());
    types += std::string(i ? ", " : "") + "<class '" + Py_TYPE(e.ptr())->tp_name + "'>";
  }
  if (!ok)
    throw TypeError("[interpolate] expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                    "Tuple[int, int, int], but got size with types [" + types + "]");
}

}  // namespace

void bind_resample(nb::module_& m, nb::class_<Tensor>&) {
  namespace F = nn::functional;
  nb::module_ nm = nb::borrow<nb::module_>(m.attr("_nn"));
  def_function<schemas::interpolate>(
      nm, [](const Tensor& x, nb::handle size, nb::handle scale_factor, const std::string& mode,
             std::optional<bool> align_corners, std::optional<bool> recompute_scale_factor, bool antialias) {
        const size_t n = size_t(std::max<int64_t>(x.dim() - 2, 0));
        std::optional<Dims> s;
        if (!size.is_none()) {
          if (is_sequence(size)) check_integers(size);
          s = is_sequence(size) ? dims_from(size) : Dims(n, nb::cast<int64_t>(size));
        }
        std::optional<std::vector<double>> f;
        if (!scale_factor.is_none()) {
          if (is_sequence(scale_factor)) {
            f.emplace();
            const Py_ssize_t len = PySequence_Size(scale_factor.ptr());
            for (Py_ssize_t i = 0; i < len; ++i)
              f->push_back(nb::cast<double>(nb::steal(PySequence_GetItem(scale_factor.ptr(), i))));
          } else {
            f = std::vector<double>(n, nb::cast<double>(scale_factor));
          }
        }
        return release_call_t(F::interpolate, x, s, f, mode, align_corners, recompute_scale_factor, antialias);
      });
  def_function<schemas::pixel_shuffle>(
      nm, [](const Tensor& x, int64_t r) { return release_call_t(F::pixel_shuffle, x, r); });
  def_function<schemas::pixel_unshuffle>(
      nm, [](const Tensor& x, int64_t r) { return release_call_t(F::pixel_unshuffle, x, r); });
  def_function<schemas::unfold>(nm, [](const Tensor& x, nb::handle k, nb::handle d, nb::handle p, nb::handle s) {
    return release_call_t(F::unfold, x, dims_from(k), dims_from(d), dims_from(p), dims_from(s));
  });
  def_function<schemas::fold>(
      nm, [](const Tensor& x, nb::handle o, nb::handle k, nb::handle d, nb::handle p, nb::handle s) {
        return release_call_t(F::fold, x, dims_from(o), dims_from(k), dims_from(d), dims_from(p), dims_from(s));
      });
}

}  // namespace flambeau::python
