"""flambeau.linalg against torch.linalg 2.13 in float64: values (factors compared up to
their sign conventions: through reconstructions and invariant products), gradients of
gauge-invariant functions of the results, batching, errors on singular and
non-positive-definite input (LinAlgError naming the op and the batch element), bad shapes
and dtypes. Tolerances: 1e-10 relative, which well-conditioned (seeded) inputs of size <= 6
keep with orders of magnitude to spare."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close, assert_raises_naming

TOL = dict(rtol=1e-10, atol=1e-10)


def rand(shape, seed, spd=False):
    a = np.random.default_rng(seed).standard_normal(shape)
    if spd:
        a = a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])
    return a


def pair(a):
    return fl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def check_grad(fn_fl, fn_torch, a, seed=9):
    """Gradient of sum(w * f(A)) with a fixed random w, flambeau against torch."""
    f, t = pair(a)
    yf, yt = fn_fl(f), fn_torch(t)
    w = np.random.default_rng(seed).standard_normal(tuple(yt.shape))
    (yf * fl.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    assert_close(f.grad, t.grad, **TOL)


SQUARE = [(4, 4), (3, 5, 5), (2, 2, 3, 3), (1, 1)]


@pytest.mark.parametrize("shape", SQUARE, ids=str)
def test_det_slogdet_inv(shape):
    a = rand(shape, 1)
    f, t = pair(a)
    assert_close(fl.linalg.det(f), torch.linalg.det(t).detach(), **TOL)
    sf, st = fl.linalg.slogdet(f), torch.linalg.slogdet(t)
    assert_close(sf.sign, st.sign.detach(), **TOL)
    assert_close(sf.logabsdet, st.logabsdet.detach(), **TOL)
    assert_close(fl.linalg.inv(f), torch.linalg.inv(t).detach(), **TOL)
    check_grad(fl.linalg.det, torch.linalg.det, a)
    check_grad(lambda x: fl.linalg.slogdet(x).logabsdet, lambda x: torch.linalg.slogdet(x).logabsdet, a)
    check_grad(fl.linalg.inv, torch.linalg.inv, a)


@pytest.mark.parametrize("ashape,bshape,left", [((4, 4), (4, 2), True), ((4, 4), (4,), True), ((3, 4, 4), (3, 4), True),
                                                ((3, 4, 4), (4, 2), True), ((4, 4), (3, 4, 1), True),
                                                ((4, 4), (2, 4), False), ((2, 3, 3), (2, 5, 3), False)], ids=str)
def test_solve(ashape, bshape, left):
    a, b = rand(ashape, 2), rand(bshape, 3)
    fa, ta = pair(a)
    fb, tb = pair(b)
    xf, xt = fl.linalg.solve(fa, fb, left=left), torch.linalg.solve(ta, tb, left=left)
    assert_close(xf, xt.detach(), **TOL)
    w = np.random.default_rng(4).standard_normal(tuple(xt.shape))
    (xf * fl.tensor(w)).sum().backward()
    (xt * torch.tensor(w)).sum().backward()
    assert_close(fa.grad, ta.grad, **TOL)
    assert_close(fb.grad, tb.grad, **TOL)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5)], ids=str)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(shape, upper):
    a = rand(shape, 5, spd=True)
    f, t = pair(a)
    assert_close(fl.linalg.cholesky(f, upper=upper), torch.linalg.cholesky(t, upper=upper).detach(), **TOL)
    # A symmetric perturbation direction: torch and flambeau symmetrize the gradient alike.
    check_grad(lambda x: fl.linalg.cholesky(x, upper=upper), lambda x: torch.linalg.cholesky(x, upper=upper), a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 6, 4)], ids=str)
@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
def test_qr(shape, mode):
    a = rand(shape, 6)
    f, t = pair(a)
    qf, rf = fl.linalg.qr(f, mode)
    qt, rt = torch.linalg.qr(t, mode)
    # LAPACK's Householder QR on both sides: the same signs.
    assert_close(rf, rt.detach(), **TOL)
    if mode != "r":
        assert_close(qf, qt.detach(), **TOL)
        assert_close(fl.matmul(qf, rf), torch.tensor(a) if mode == "reduced" or shape[-2] <= shape[-1]
                     else torch.matmul(qt, rt).detach(), **TOL)
    if mode == "reduced" or (mode == "complete" and shape[-2] <= shape[-1]):
        check_grad(lambda x: fl.linalg.qr(x, mode).Q, lambda x: torch.linalg.qr(x, mode).Q, a)
        check_grad(lambda x: fl.linalg.qr(x, mode).R, lambda x: torch.linalg.qr(x, mode).R, a)


def test_qr_backward_refused_where_torch_refuses():
    f = fl.tensor(rand((5, 3), 7), requires_grad=True)
    with pytest.raises(NotImplementedError, match="linalg.qr"):
        fl.linalg.qr(f, "complete").Q.sum().backward()


@pytest.mark.parametrize("shape", [(5, 3), (3, 3), (3, 5), (2, 4, 6)], ids=str)
@pytest.mark.parametrize("full", [False, True])
def test_svd(shape, full):
    a = rand(shape, 8)
    f, t = pair(a)
    uf, sf, vf = fl.linalg.svd(f, full_matrices=full)
    ut, st, vt = torch.linalg.svd(t, full_matrices=full)
    assert_close(sf, st.detach(), **TOL)
    assert tuple(uf.shape) == tuple(ut.shape) and tuple(vf.shape) == tuple(vt.shape)
    k = min(shape[-2:])
    recon = fl.matmul(uf[..., :k] * sf.unsqueeze(-2), vf[..., :k, :])
    assert_close(recon, torch.tensor(a), **TOL)
    eye_u = torch.eye(uf.shape[-1], dtype=torch.float64).expand(tuple(uf.shape[:-2]) + (uf.shape[-1],) * 2)
    assert_close(fl.matmul(uf.transpose(-2, -1), uf), eye_u, **TOL)
    assert_close(fl.linalg.svdvals(f), st.detach(), **TOL)
    # Gauge-invariant functions of the factors: S, and U diag(S) Vh's pieces |U|, |Vh|
    # (columns are defined up to sign) through U S Vh itself and through (U * U).
    check_grad(lambda x: fl.linalg.svd(x, full_matrices=full).S, lambda x: torch.linalg.svd(x, full_matrices=full).S, a)
    check_grad(fl.linalg.svdvals, torch.linalg.svdvals, a)
    if not full:
        check_grad(lambda x: fl.linalg.svd(x, False).U ** 2, lambda x: torch.linalg.svd(x, False).U ** 2, a)
        check_grad(lambda x: fl.linalg.svd(x, False).Vh ** 2, lambda x: torch.linalg.svd(x, False).Vh ** 2, a)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5, 5)], ids=str)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(shape, uplo):
    a = rand(shape, 10)
    a = a + np.swapaxes(a, -1, -2)
    f, t = pair(a)
    lf, vf = fl.linalg.eigh(f, uplo)
    lt, vt = torch.linalg.eigh(t, uplo)
    assert_close(lf, lt.detach(), **TOL)
    assert_close(fl.linalg.eigvalsh(f, uplo), lt.detach(), **TOL)
    assert_close(fl.matmul(vf * lf.unsqueeze(-2), vf.transpose(-2, -1)), torch.tensor(a), **TOL)
    check_grad(lambda x: fl.linalg.eigh(x, uplo).eigenvalues, lambda x: torch.linalg.eigh(x, uplo).eigenvalues, a)
    check_grad(lambda x: fl.linalg.eigh(x, uplo).eigenvectors ** 2, lambda x: torch.linalg.eigh(x, uplo).eigenvectors ** 2, a)
    check_grad(lambda x: fl.linalg.eigvalsh(x, uplo), lambda x: torch.linalg.eigvalsh(x, uplo), a)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)], ids=str)
@pytest.mark.parametrize("hermitian", [False, True])
def test_pinv(shape, hermitian):
    a = rand(shape, 11)
    if hermitian:
        if shape[-1] != shape[-2]:
            return
        a = a + np.swapaxes(a, -1, -2)
    f, t = pair(a)
    assert_close(fl.linalg.pinv(f, hermitian=hermitian), torch.linalg.pinv(t, hermitian=hermitian).detach(), **TOL)
    check_grad(lambda x: fl.linalg.pinv(x, hermitian=hermitian), lambda x: torch.linalg.pinv(x, hermitian=hermitian), a)


def test_pinv_cuts_small_singular_values():
    a = np.diag([3.0, 1e-20, 2.0])
    assert_close(fl.linalg.pinv(fl.tensor(a)), torch.linalg.pinv(torch.tensor(a)), **TOL)
    assert_close(fl.linalg.pinv(fl.tensor(a), atol=2.5), torch.linalg.pinv(torch.tensor(a), atol=2.5), **TOL)
    assert_close(fl.linalg.pinv(fl.tensor(a), rtol=0.9), torch.linalg.pinv(torch.tensor(a), rtol=0.9), **TOL)


@pytest.mark.parametrize("driver", [None, "gelsy", "gelsd", "gelss", "gels"])
@pytest.mark.parametrize("ashape,bshape", [((6, 3), (6, 2)), ((6, 3), (6,)), ((2, 5, 4), (2, 5, 3))], ids=str)
def test_lstsq(driver, ashape, bshape):
    a, b = rand(ashape, 12), rand(bshape, 13)
    rf = fl.linalg.lstsq(fl.tensor(a), fl.tensor(b), driver=driver)
    rt = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    for name in ("solution", "residuals", "rank", "singular_values"):
        got, want = getattr(rf, name), getattr(rt, name)
        assert tuple(got.shape) == tuple(want.shape), (name, got.shape, want.shape)
        if want.numel():
            assert_close(got, want, **TOL)
    check_grad(lambda x: fl.linalg.lstsq(x, fl.tensor(b)).solution, lambda x: torch.linalg.lstsq(x, torch.tensor(b)).solution, a)


def test_lstsq_rank_deficient_gives_the_minimum_norm_solution():
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    b = np.array([[1.0], [2.0], [3.1]])
    r = fl.linalg.lstsq(fl.tensor(a), fl.tensor(b), driver="gelsd")
    t = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver="gelsd")
    assert r.rank.item() == 1 == t.rank.item()
    assert_close(r.solution, t.solution, **TOL)


@pytest.mark.parametrize("ord", [2, 1, 0, 3.5, -1.5, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, True), ((0, 2), False)])
def test_vector_norm(ord, dim, keepdim):
    a = rand((3, 4, 5), 14)
    f, t = pair(a)
    assert_close(fl.linalg.vector_norm(f, ord, dim, keepdim), torch.linalg.vector_norm(t, ord, dim, keepdim).detach(), **TOL)
    if ord != 0:
        check_grad(lambda x: fl.linalg.vector_norm(x, ord, dim, keepdim), lambda x: torch.linalg.vector_norm(x, ord, dim, keepdim), a)


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, float("inf"), -float("inf")])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((0, 2), True)])
def test_matrix_norm(ord, dim, keepdim):
    a = rand((3, 4, 5), 15)
    f, t = pair(a)
    assert_close(fl.linalg.matrix_norm(f, ord, dim, keepdim), torch.linalg.matrix_norm(t, ord, dim, keepdim).detach(), **TOL)
    check_grad(lambda x: fl.linalg.matrix_norm(x, ord, dim, keepdim), lambda x: torch.linalg.matrix_norm(x, ord, dim, keepdim), a)


@pytest.mark.parametrize("args", [{}, {"ord": 3}, {"ord": "nuc", "dim": (0, 1)}, {"dim": 1}, {"dim": (1, 2)},
                                  {"ord": float("inf"), "dim": (1, 2), "keepdim": True}], ids=str)
def test_norm(args):
    a = rand((2, 3, 4), 16)
    x = a[0] if "ord" in args and "dim" not in args else a
    if args.get("ord") == 3:
        x = a[0, 0]
    assert_close(fl.linalg.norm(fl.tensor(x), **args), torch.linalg.norm(torch.tensor(x), **args), **TOL)


def test_float32_and_threads_are_deterministic():
    a = rand((8, 6, 6), 17).astype(np.float32)
    out = []
    for n in (1, 2):
        fl.set_num_threads(n)
        f = fl.tensor(a)
        out.append([fl.linalg.det(f).numpy(), fl.linalg.inv(f).numpy(), fl.linalg.svdvals(f).numpy(),
                    fl.linalg.qr(f).R.numpy()])
    fl.set_num_threads(2)
    for x, y in zip(*out):
        np.testing.assert_array_equal(x, y)
    assert_close(fl.linalg.inv(fl.tensor(a)), torch.linalg.inv(torch.tensor(a)), rtol=1e-4, atol=1e-4)


def test_singular_and_indefinite_input():
    assert_raises_naming(lambda: fl.linalg.inv(fl.zeros(2, 2)), fl.linalg.LinAlgError, ["linalg.inv", "singular"])
    assert_raises_naming(lambda: fl.linalg.solve(fl.zeros(2, 2), fl.ones(2)), fl.linalg.LinAlgError,
                         ["linalg.solve", "singular"])
    assert_raises_naming(lambda: fl.linalg.cholesky(fl.stack([fl.eye(2), -fl.eye(2)])), fl.linalg.LinAlgError,
                         ["linalg.cholesky", "Batch element 1", "not positive-definite", "order 1"])
    assert issubclass(fl.linalg.LinAlgError, RuntimeError)
    assert fl.linalg.det(fl.zeros(3, 3)).item() == 0.0
    assert fl.linalg.slogdet(fl.zeros(3, 3)).logabsdet.item() == -float("inf")


def test_bad_shapes_and_dtypes():
    assert_raises_naming(lambda: fl.linalg.det(fl.ones(2, 3)), ValueError, ["linalg.det", "square", "2 by 3"])
    assert_raises_naming(lambda: fl.linalg.det(fl.ones(3)), ValueError, ["linalg.det", "at least 2 dimensions", "(3,)"])
    assert_raises_naming(lambda: fl.linalg.inv(fl.ones(2, 2, dtype=fl.int64)), TypeError, ["linalg.inv", "int64"])
    assert_raises_naming(lambda: fl.linalg.solve(fl.eye(3), fl.ones(4, 2)), ValueError, ["linalg.solve", "(3, 3)", "(4, 2)"])
    assert_raises_naming(lambda: fl.linalg.qr(fl.ones(3, 3), "full"), ValueError, ["linalg.qr", "full"])
    assert_raises_naming(lambda: fl.linalg.eigh(fl.eye(3), "X"), ValueError, ["linalg.eigh", "UPLO"])
    assert_raises_naming(lambda: fl.linalg.lstsq(fl.ones(4, 2), fl.ones(3, 1)), ValueError, ["linalg.lstsq", "(4, 2)"])
    assert_raises_naming(lambda: fl.linalg.matrix_norm(fl.ones(3, 3), 3), ValueError, ["linalg.matrix_norm", "3"])
    assert_raises_naming(lambda: fl.linalg.norm(fl.ones(2, 2, 2), 2), ValueError, ["linalg.norm", "1D or 2D"])


def test_empty_batches():
    assert fl.linalg.inv(fl.ones(0, 3, 3)).shape == (0, 3, 3)
    assert fl.linalg.det(fl.ones(0, 2, 2)).shape == (0,)
    assert fl.linalg.svdvals(fl.ones(2, 0, 3)).shape == (2, 0)
