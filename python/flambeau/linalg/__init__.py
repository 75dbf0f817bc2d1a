"""torch.linalg: factorizations, solvers and norms (the C++ flambeau::linalg, bound as
flambeau._C.linalg_<name>). LinAlgError (a RuntimeError) reports singular or
non-positive-definite input."""
from flambeau import _C

LinAlgError = _C.LinAlgError

det = _C.linalg_det
slogdet = _C.linalg_slogdet
inv = _C.linalg_inv
solve = _C.linalg_solve
cholesky = _C.linalg_cholesky
qr = _C.linalg_qr
svd = _C.linalg_svd
svdvals = _C.linalg_svdvals
eigh = _C.linalg_eigh
eigvalsh = _C.linalg_eigvalsh
pinv = _C.linalg_pinv
lstsq = _C.linalg_lstsq
vector_norm = _C.linalg_vector_norm
matrix_norm = _C.linalg_matrix_norm
norm = _C.linalg_norm

__all__ = ["LinAlgError", "det", "slogdet", "inv", "solve", "cholesky", "qr", "svd", "svdvals", "eigh", "eigvalsh", "pinv",
           "lstsq", "vector_norm", "matrix_norm", "norm"]
