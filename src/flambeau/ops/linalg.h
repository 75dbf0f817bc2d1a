// torch.linalg: factorizations and solvers on LAPACK (kernels/cpu/lapack.h) over batches of
// matrices (*, m, n), float32 and float64, with autograd; norms composed of reductions.
// A matrix that is singular (inv, solve) or not positive-definite (cholesky) raises
// LinAlgError naming the op and the batch element, as torch's do.
#pragma once
#include <optional>
#include <string>
#include <tuple>

#include "flambeau/core/tensor.h"

namespace flambeau::linalg {

Tensor det(const Tensor& A);
std::tuple<Tensor, Tensor> slogdet(const Tensor& A);  // (sign, log |det|)
Tensor inv(const Tensor& A);
// A X = B (left) or X A = B; B is a vector when it has one dim or A's batch shape plus n.
Tensor solve(const Tensor& A, const Tensor& B, bool left = true);
Tensor cholesky(const Tensor& A, bool upper = false);
// mode: "reduced" (Q m x k, R k x n), "complete" (Q m x m, R m x n) or "r" (Q empty).
std::tuple<Tensor, Tensor> qr(const Tensor& A, const std::string& mode = "reduced");
std::tuple<Tensor, Tensor, Tensor> svd(const Tensor& A, bool full_matrices = true);  // U, S, Vh
Tensor svdvals(const Tensor& A);
std::tuple<Tensor, Tensor> eigh(const Tensor& A, const std::string& UPLO = "L");  // ascending eigenvalues, vectors
Tensor eigvalsh(const Tensor& A, const std::string& UPLO = "L");
// The cutoff of small singular values: max(atol, rtol * largest); rtol defaults to
// eps * max(m, n) when neither is given, else 0.
Tensor pinv(const Tensor& A, std::optional<double> atol = {}, std::optional<double> rtol = {}, bool hermitian = false);
// (solution, residuals, rank, singular_values) as torch fills them for the driver (default
// gelsy); every driver solves by the SVD (the minimum-norm solution).
std::tuple<Tensor, Tensor, Tensor, Tensor> lstsq(const Tensor& A, const Tensor& B, std::optional<double> rcond = {},
                                                 std::optional<std::string> driver = {});
Tensor vector_norm(const Tensor& x, double ord = 2, const std::optional<Dims>& dim = {}, bool keepdim = false,
                   std::optional<DType> dtype = {});
// ord: "fro", "nuc", or +-1, +-2, +-inf.
Tensor matrix_norm(const Tensor& A, const std::string& ord = "fro", const Dims& dim = {-2, -1}, bool keepdim = false,
                   std::optional<DType> dtype = {});
Tensor matrix_norm(const Tensor& A, double ord, const Dims& dim = {-2, -1}, bool keepdim = false,
                   std::optional<DType> dtype = {});

// torch.linalg.norm: no ord: the 2-norm of the (flattened) input, or Frobenius over two
// dims; an ord: a vector norm over one dim (or of a 1-D input), a matrix norm over two (or
// of a 2-D one); "fro" and "nuc": matrix norms.
Tensor norm(const Tensor& A, std::optional<double> ord = {}, const std::optional<Dims>& dim = {}, bool keepdim = false,
            std::optional<DType> dtype = {});
Tensor norm(const Tensor& A, const std::string& ord, const std::optional<Dims>& dim = {}, bool keepdim = false,
            std::optional<DType> dtype = {});

}  // namespace flambeau::linalg
