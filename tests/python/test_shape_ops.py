"""The shape ops of issue 22 item 4 (ops/shape.cpp): gradients (gradcheck in float64, and
against torch's), views that share memory, edge sizes, and bad input naming the op and the
shapes. Values against torch are in test_opinfo_more.CASES (bitwise: the ops only move data)."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_raises_naming

R = np.random.default_rng(4)
X = R.standard_normal((3, 4, 5))

# name -> f(L, x) for an input x of shape (3, 4, 5).
OPS = {
    "flip": lambda L, x: L.flip(x, (0, 2)),
    "roll": lambda L, x: L.roll(x, (1, -3), (0, 2)),
    "roll_flat": lambda L, x: L.roll(x, 11),
    "rot90": lambda L, x: L.rot90(x, 1, (1, 2)),
    "tril": lambda L, x: L.tril(x, 1),
    "triu": lambda L, x: L.triu(x, -1),
    "repeat": lambda L, x: x.repeat(1, 2, 1, 2),
    "tile": lambda L, x: L.tile(x, (2, 1)),
    "repeat_interleave": lambda L, x: L.repeat_interleave(x, L.tensor([2, 0, 1, 3]), dim=1),
    "movedim": lambda L, x: L.movedim(x, (0, 2), (1, 0)) * 1,
    "unbind": lambda L, x: L.unbind(x, 2)[3] * 1,
    "diagonal": lambda L, x: L.diagonal(x, -1, 2, 1) * 1,
    "diag_embed": lambda L, x: L.diag_embed(x, 2, 0, 3),
    "diag": lambda L, x: L.diag(x[0], 1),
    "diag_vector": lambda L, x: L.diag(x[0, 0], -1),
    "trace": lambda L, x: L.trace(x[1]),
    "take_along_dim": lambda L, x: L.take_along_dim(x, L.tensor([[[4, 0]], [[1, 1]], [[2, 3]]]), dim=2),
    "kron": lambda L, x: L.kron(x[0, :2, :3], x[1]),
    "block_diag": lambda L, x: L.block_diag(x[0], x[1, 0], x[2, :2, :2]),
    "cartesian_prod": lambda L, x: L.cartesian_prod(x[0, 0], x[1, 1, :3]),
    "meshgrid": lambda L, x: L.meshgrid(x[0, 0], x[1, :, 0], indexing="xy")[0] * 1,
}


@pytest.mark.parametrize("name", list(OPS), ids=str)
def test_gradient_matches_torch_and_gradcheck(name):
    f = OPS[name]
    fx, tx = fl.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    fy, ty = f(fl, fx), f(torch, tx)
    g = R.standard_normal(tuple(ty.shape))
    (fy * fl.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(fy.detach().numpy(), ty.detach().numpy())
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-14, atol=1e-15)
    small = fl.tensor(X, requires_grad=True)
    assert fl.autograd.gradcheck(lambda x: f(fl, x), [small])


def test_views_share_memory():
    x = fl.tensor(X)
    for view in [fl.diagonal(x, 1, 1, 2), fl.movedim(x, 0, 2), fl.swapaxes(x, 0, 1), fl.unbind(x, 1)[2],
                 fl.meshgrid(x[0, 0], x[0, :, 0])[0]]:
        assert view.data_ptr() >= x.data_ptr() and view.data_ptr() < x.data_ptr() + x.numel() * 8
    d = fl.diagonal(x, 0, 1, 2)
    d.fill_(7.0)
    assert all(float(x[i, j, j]) == 7.0 for i in range(3) for j in range(4))


def test_edge_sizes():
    e = fl.zeros(0, 3)
    assert fl.flip(e, (0, 1)).shape == (0, 3) and fl.roll(e, 2, 0).shape == (0, 3)
    assert fl.diagonal(fl.zeros(2, 3), 5).shape == (0,) and fl.diagonal(fl.zeros(2, 3), -5).shape == (0,)
    assert fl.tril_indices(0, 3).shape == (2, 0) and fl.repeat_interleave(fl.ones(3), 0).shape == (0,)
    assert fl.tile(fl.tensor(2.0), (2, 3)).shape == (2, 3) and fl.ones(2).repeat(3, 0).shape == (3, 0)
    assert fl.block_diag().shape == (1, 0)
    np.testing.assert_array_equal(fl.rot90(fl.tensor(X), 4).numpy(), X)
    np.testing.assert_array_equal(fl.tril_indices(3, 3, -1).numpy(), torch.tril_indices(3, 3, -1).numpy())
    assert fl.bucketize(fl.tensor(0.5), fl.tensor([0.0, 1.0])).shape == ()
    i = fl.tensor(X).movedim(0, -1)
    assert i.shape == (4, 5, 3)


@pytest.mark.parametrize("call, error, words", [
    (lambda x: fl.flip(x, (0, 0)), ValueError, ["flip", "multiple times"]),
    (lambda x: fl.flip(x, (3,)), IndexError, ["flip"]),
    (lambda x: fl.fliplr(x[0, 0]), ValueError, ["fliplr", "(5,)"]),
    (lambda x: fl.roll(x, (1, 2), (0,)), ValueError, ["roll", "shifts: 2", "dims: 1"]),
    (lambda x: fl.rot90(x, 1, (0,)), ValueError, ["rot90", "dims = 1"]),
    (lambda x: fl.tril(x[0, 0]), ValueError, ["tril", "(5,)"]),
    (lambda x: fl.tril_indices(-1, 3), ValueError, ["tril_indices", "-1"]),
    (lambda x: x.repeat(2, 2), ValueError, ["repeat", "(2, 2)", "(3, 4, 5)"]),
    (lambda x: x.repeat(1, -1, 1), ValueError, ["repeat", "negative"]),
    (lambda x: fl.repeat_interleave(x, fl.tensor([1, 2]), dim=0), ValueError, ["repeat_interleave", "(2,)"]),
    (lambda x: fl.repeat_interleave(x, fl.tensor([1, -1, 1]), dim=0), ValueError, ["repeat_interleave", "-1"]),
    (lambda x: fl.movedim(x, (0, 1), (1,)), ValueError, ["movedim", "same number"]),
    (lambda x: fl.diagonal(x, 0, 1, 1), ValueError, ["diagonal", "identical"]),
    (lambda x: fl.diag(x), ValueError, ["diag", "(3, 4, 5)"]),
    (lambda x: fl.trace(x), ValueError, ["trace", "(3, 4, 5)"]),
    (lambda x: fl.take_along_dim(x, fl.zeros(2, 2, dtype=fl.int64), dim=0), ValueError, ["take_along_dim", "(2, 2)"]),
    (lambda x: fl.meshgrid(x[0], x[1]), ValueError, ["meshgrid", "(4, 5)"]),
    (lambda x: fl.meshgrid(x[0, 0], indexing="yx"), ValueError, ["meshgrid", "yx"]),
    (lambda x: fl.cartesian_prod(x[0]), ValueError, ["cartesian_prod", "(4, 5)"]),
    (lambda x: fl.block_diag(x), ValueError, ["block_diag", "(3, 4, 5)"]),
    (lambda x: fl.bucketize(x, x), ValueError, ["bucketize", "(3, 4, 5)"]),
])
def test_bad_input_names_the_op_and_the_shapes(call, error, words):
    x = fl.tensor(X)
    assert_raises_naming(lambda: call(x), error, words, unchanged=[(x, X)])


def test_unique_consecutive_edges():
    v, inv, cnt = fl.unique_consecutive(fl.tensor([], dtype=fl.int64), return_inverse=True, return_counts=True)
    assert v.shape == (0,) and inv.shape == (0,) and cnt.shape == (0,)
    nan = float("nan")
    v, cnt = fl.unique_consecutive(fl.tensor([nan, nan, 1.0, 1.0, -0.0, 0.0]), return_counts=True)
    assert cnt.tolist() == [1, 1, 2, 2]  # NaN differs from NaN; -0.0 equals 0.0 (IEEE comparison)
    big = fl.tensor([2**62 + 1, 2**62, 2**62])  # compared as int64, not through double
    assert fl.unique_consecutive(big).tolist() == [2**62 + 1, 2**62]
    with pytest.raises(IndexError):
        fl.unique_consecutive(fl.ones(2, 2), dim=2)


def test_unique_compares_in_the_dtype_and_sorts_slices():
    big = fl.tensor([2**62 + 1, 2**62, 2**62, 2**62 + 1])  # not merged through double
    values, inverse, counts = fl.unique(big, return_inverse=True, return_counts=True)
    assert values.tolist() == [2**62, 2**62 + 1] and inverse.tolist() == [1, 0, 0, 1] and counts.tolist() == [2, 2]
    rows = np.array([[3, 1], [1, 2], [3, 1], [1, 1]])
    values, inverse = fl.unique(fl.tensor(rows), return_inverse=True, dim=0)
    assert values.tolist() == [[1, 1], [1, 2], [3, 1]] and inverse.tolist() == [2, 1, 2, 0]
    assert fl.unique(fl.zeros(0, 3), dim=0).shape == (0, 3)
    with pytest.raises(IndexError):
        fl.unique(fl.ones(2, 2), dim=2)
