"""The OpInfo database, part 2: ops written once against a library handle `L` (flambeau
or torch) and run on both with the same numpy data: indexing, sorting, scans, reductions
with dims, matrix products, joins. Contiguous, transposed (non-contiguous) and empty
samples; results (tensors, or tuples of them) compared in value, dtype and shape."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close

R = np.random.default_rng(7)
X = R.standard_normal((5, 6)).astype(np.float32)
XT = R.standard_normal((6, 5)).astype(np.float32)  # used transposed: a non-contiguous (5, 6)
IDX = R.integers(0, 5, (4, 6))
IDX1 = R.integers(0, 6, (5, 3))
ROWS = np.array([4, 0, 2, 2])
MASK = R.random((5, 6)) > 0.5
INTS = R.integers(-3, 4, (5, 6))
SEQ = np.sort(R.standard_normal(10)).astype(np.float32)


def T(L, a):
    """numpy -> tensor of library L (fresh memory)."""
    t = torch.from_numpy(np.ascontiguousarray(a).copy())
    return t if L is torch else fl.from_dlpack(t)


def both(L):
    """The (5, 6) float input, contiguous and non-contiguous."""
    return [T(L, X), T(L, XT).t()]


CASES = {
    "index_select": lambda L, x: L.index_select(x, 0, T(L, ROWS)),
    "index_select_dim1_int32": lambda L, x: L.index_select(x, 1, T(L, np.array([5, 1], dtype=np.int32))),
    "gather_dim0": lambda L, x: L.gather(x, 0, T(L, IDX)),
    "gather_dim1": lambda L, x: L.gather(x, 1, T(L, IDX1)),
    "scatter": lambda L, x: L.scatter(L.zeros(5, 6), 0, T(L, IDX), x[:4]),
    "scatter_value": lambda L, x: x.scatter(1, T(L, IDX1), 2.5),
    "scatter_add": lambda L, x: L.scatter_add(x, 0, T(L, IDX), x[:4]),
    **{f"scatter_reduce_{r}_{s}": (lambda r, s: lambda L, x: L.scatter_reduce(x, 0, T(L, IDX), x[:4] * 2, r,
                                                                                include_self=s))(r, s)
       for r in ["sum", "prod", "mean", "amax", "amin"] for s in [True, False]},
    "index_add": lambda L, x: L.index_add(x, 0, T(L, ROWS), x[:4], alpha=0.5),
    "index_copy": lambda L, x: L.index_copy(x, 1, T(L, np.array([3, 0])), x[:, :2] * 3),
    "index_fill": lambda L, x: L.index_fill(x, 1, T(L, np.array([-1, 2])), -7.0),
    "masked_fill": lambda L, x: L.masked_fill(x, T(L, MASK), 0.25),
    "masked_fill_broadcast": lambda L, x: L.masked_fill(x, T(L, MASK[0]), 1.0),
    "masked_select": lambda L, x: L.masked_select(x, T(L, MASK)),
    "masked_scatter": lambda L, x: L.masked_scatter(x, T(L, MASK), x * 10),
    "nonzero": lambda L, x: L.nonzero(x > 0.3),
    "take": lambda L, x: L.take(x, T(L, np.array([[0, 29], [-1, 7]]))),
    "one_hot": lambda L, x: L.nn.functional.one_hot(T(L, IDX), 6),
    "embedding": lambda L, x: L.nn.functional.embedding(T(L, IDX), x),
    "advanced_index": lambda L, x: x[T(L, ROWS), 1:4][:, None],
    "mask_index": lambda L, x: x[x > 0],
    "sort": lambda L, x: tuple(L.sort(x, dim=0, descending=True, stable=True)),
    "argsort": lambda L, x: L.argsort(x, dim=1, stable=True),
    "topk": lambda L, x: tuple(L.topk(x, 3, dim=1)),
    "topk_smallest": lambda L, x: tuple(L.topk(x, 2, dim=0, largest=False)),
    "kthvalue": lambda L, x: tuple(L.kthvalue(x, 2, dim=1)),
    "unique": lambda L, x: tuple(L.unique(T(L, INTS), return_inverse=True, return_counts=True)),
    "searchsorted": lambda L, x: L.searchsorted(T(L, SEQ), x),
    "searchsorted_right": lambda L, x: L.searchsorted(T(L, SEQ), x, right=True),
    "cummax": lambda L, x: tuple(L.cummax(x, 1)),
    "cummin": lambda L, x: tuple(L.cummin(x, 0)),
    "cumsum_int": lambda L, x: L.cumsum(T(L, INTS), 1),
    "sum_dims": lambda L, x: L.sum(x, dim=(0, 1), keepdim=True),
    "sum_int_dtype": lambda L, x: L.sum(T(L, INTS), 0, dtype=L.float64),
    "mean_dim": lambda L, x: L.mean(x, 1),
    "amax_dims": lambda L, x: L.amax(x, dim=(0,)),
    "max_dim": lambda L, x: tuple(L.max(x, 1, keepdim=True)),
    "min_dim": lambda L, x: tuple(L.min(x, 0)),
    "argmax": lambda L, x: L.argmax(x, 1),
    "argmin_all": lambda L, x: L.argmin(x),
    "any_all": lambda L, x: (L.any(x > 1, 1), L.all(x > -2, 0)),
    "count_nonzero": lambda L, x: L.count_nonzero(x > 0, 1),
    "std_correction": lambda L, x: L.std(x, 1, correction=0),
    "var_unbiased": lambda L, x: L.var(x, 0),
    "norm_1": lambda L, x: L.norm(x, 1),
    "norm_inf_dim": lambda L, x: L.norm(x, float("inf"), 1),
    "logsumexp_dim": lambda L, x: L.logsumexp(x, 0),
    "softmax_dim0": lambda L, x: L.softmax(x, 0),
    "mm": lambda L, x: L.mm(x, x.t()),
    "matmul_broadcast": lambda L, x: L.matmul(x.reshape(5, 2, 3), x[:3, :4]),
    "matmul_vec": lambda L, x: L.matmul(x, x[0]),
    "bmm": lambda L, x: L.bmm(x.reshape(5, 2, 3), x.reshape(5, 3, 2)),
    "addmm": lambda L, x: L.addmm(x[0, :5], x, x.t(), beta=0.5, alpha=2),
    "baddbmm": lambda L, x: L.baddbmm(L.ones(5, 2, 2), x.reshape(5, 2, 3), x.reshape(5, 3, 2), beta=2),
    "outer": lambda L, x: L.outer(x[0], x[1]),
    "dot": lambda L, x: L.dot(x[0], x[1]),
    "cat": lambda L, x: L.cat([x, x[:2]], 0),
    "stack": lambda L, x: L.stack([x, x], 2),
    "split": lambda L, x: tuple(L.split(x, [2, 4], 1)),
    "chunk": lambda L, x: tuple(L.chunk(x, 3, 0)),
    "where_scalar": lambda L, x: L.where(x > 0, x, 0.0),
    "clamp_tensor": lambda L, x: L.clamp(x, min=x[0], max=x[1] + 1),
    "int_true_div": lambda L, x: T(L, INTS) / 2,
    "int_pow": lambda L, x: T(L, np.abs(INTS)) ** 2,
    "mixed_promotion": lambda L, x: T(L, INTS).to(L.int32) * x.to(L.float16),
    "bool_sum": lambda L, x: (x > 0).sum(),
    "empty_sum": lambda L, x: L.sum(x[:0], 0),
    "empty_index": lambda L, x: x[T(L, np.array([], dtype=np.int64))],
    "empty_cat": lambda L, x: L.cat([x[:0], x], 0),
}


@pytest.mark.parametrize("name", list(CASES), ids=str)
def test_matches_torch(name):
    for f_in, t_in in zip(both(fl), both(torch)):
        got, want = CASES[name](fl, f_in), CASES[name](torch, t_in)
        if not isinstance(want, tuple):
            got, want = (got,), (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_numpy_reference_for_unary_and_binary_ops():
    for name, np_fn in [("exp", np.exp), ("sin", np.sin), ("tanh", np.tanh), ("sqrt", lambda v: np.sqrt(np.abs(v))),
                        ("abs", np.abs)]:
        arg = np.abs(X) if name == "sqrt" else X
        got = getattr(fl, name)(fl.tensor(arg)).numpy()
        np.testing.assert_allclose(got, np_fn(arg), rtol=2e-6, atol=1e-7)
    a, b = fl.tensor(X), fl.tensor(X[::-1].copy())
    np.testing.assert_allclose((a * b + a / (b * b + 1)).numpy(), X * X[::-1] + X / (X[::-1] ** 2 + 1), rtol=1e-6)
    np.testing.assert_allclose(fl.tensor(X).sum(dim=1).numpy(), X.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(fl.argsort(fl.tensor(X), dim=1, stable=True).numpy(),
                                  np.argsort(X, axis=1, kind="stable"))
