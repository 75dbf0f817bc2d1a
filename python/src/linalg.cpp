// torch.linalg's functions (ops/linalg.h), bound from the schema table as _C.linalg_<name>;
// python/flambeau/linalg names them as torch.linalg does. Several results come back as
// named tuples with torch's field names.
#include "bindings.h"
#include "def_op.h"
#include "flambeau/ops/linalg.h"

namespace flambeau::python {
namespace {

nb::object named_tuple(const char* name, const char* fields) {
  return nb::module_::import_("collections").attr("namedtuple")(name, fields);
}

}  // namespace

void bind_linalg(nb::module_& m, nb::class_<Tensor>& cls) {
  static nb::object slogdet_t = named_tuple("linalg_slogdet", "sign logabsdet");
  static nb::object qr_t = named_tuple("linalg_qr", "Q R");
  static nb::object svd_t = named_tuple("linalg_svd", "U S Vh");
  static nb::object eigh_t = named_tuple("linalg_eigh", "eigenvalues eigenvectors");
  static nb::object lstsq_t = named_tuple("linalg_lstsq", "solution residuals rank singular_values");
  def_op<schemas::linalg_det>(m, cls, [](const Tensor& A) { return linalg::det(A); }, release_gil());
  def_op<schemas::linalg_slogdet>(m, cls, [](const Tensor& A) {
    auto [s, l] = linalg::slogdet(A);
    return slogdet_t(s, l);
  });
  def_op<schemas::linalg_inv>(m, cls, [](const Tensor& A) { return linalg::inv(A); }, release_gil());
  def_op<schemas::linalg_solve>(m, cls, [](const Tensor& A, const Tensor& B, bool left) { return linalg::solve(A, B, left); },
                                release_gil());
  def_op<schemas::linalg_cholesky>(m, cls, [](const Tensor& A, bool upper) { return linalg::cholesky(A, upper); },
                                   release_gil());
  def_op<schemas::linalg_qr>(m, cls, [](const Tensor& A, const std::string& mode) {
    auto [q, r] = linalg::qr(A, mode);
    return qr_t(q, r);
  });
  def_op<schemas::linalg_svd>(m, cls, [](const Tensor& A, bool full, std::optional<std::string>) {
    auto [u, s, vh] = linalg::svd(A, full);
    return svd_t(u, s, vh);
  });
  def_op<schemas::linalg_svdvals>(m, cls, [](const Tensor& A, std::optional<std::string>) { return linalg::svdvals(A); },
                                  release_gil());
  def_op<schemas::linalg_eigh>(m, cls, [](const Tensor& A, const std::string& uplo) {
    auto [l, v] = linalg::eigh(A, uplo);
    return eigh_t(l, v);
  });
  def_op<schemas::linalg_eigvalsh>(m, cls, [](const Tensor& A, const std::string& uplo) { return linalg::eigvalsh(A, uplo); },
                                   release_gil());
  def_op<schemas::linalg_pinv>(m, cls, &linalg::pinv, release_gil());
  def_op<schemas::linalg_lstsq>(m, cls, [](const Tensor& A, const Tensor& B, std::optional<double> rcond,
                                           std::optional<std::string> driver) {
    auto [x, res, rank, sv] = linalg::lstsq(A, B, rcond, driver);
    return lstsq_t(x, res, rank, sv);
  });
  def_op<schemas::linalg_vector_norm>(m, cls, [](const Tensor& x, double ord, nb::handle dim, bool keepdim,
                                                 std::optional<DType> dtype) {
    return linalg::vector_norm(x, ord, dim.is_none() ? std::nullopt : std::optional(dims_from(dim)), keepdim, dtype);
  });
  def_op<schemas::linalg_matrix_norm>(m, cls, [](const Tensor& A, nb::handle ord, nb::handle dim, bool keepdim,
                                                 std::optional<DType> dtype) {
    if (nb::isinstance<nb::str>(ord)) return linalg::matrix_norm(A, nb::cast<std::string>(ord), dims_from(dim), keepdim, dtype);
    return linalg::matrix_norm(A, nb::cast<double>(ord), dims_from(dim), keepdim, dtype);
  });
  def_op<schemas::linalg_norm>(m, cls, [](const Tensor& A, nb::handle ord, nb::handle dim, bool keepdim,
                                          std::optional<DType> dtype) {
    const std::optional<Dims> d = dim.is_none() ? std::nullopt : std::optional(dims_from(dim));
    if (nb::isinstance<nb::str>(ord)) return linalg::norm(A, nb::cast<std::string>(ord), d, keepdim, dtype);
    return linalg::norm(A, ord.is_none() ? std::nullopt : std::optional(nb::cast<double>(ord)), d, keepdim, dtype);
  });
}

}  // namespace flambeau::python
