"""In-place writes through views of tensors in the graph (torch's CopySlices): values and
gradients match torch 2.13."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close


def run(lib, a0, w0, program):
    a = lib.tensor(a0, requires_grad=True)
    w = lib.tensor(w0, requires_grad=True)
    out = program(lib, a, w)
    out.backward(lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape))))
    return out, a.grad, w.grad


PROGRAMS = {
    "setitem_row": lambda lib, a, w: _setitem(lib, a, w),
    "mul_through_column": lambda lib, a, w: _mul_column(a, w),
    "zero_block": lambda lib, a, w: _zero_block(a, w),
    "chain_of_views": lambda lib, a, w: _chain(a, w),
    "write_into_constant": lambda lib, a, w: _constant(lib, a, w),
}


def _setitem(lib, a, w):
    b = a * 2
    b[1] = w
    return b.exp()


def _mul_column(a, w):
    b = a.sin()
    b[:, 2].mul_(w[:3])
    return b * b


def _zero_block(a, w):
    b = a + w
    b[1:, :2].zero_()
    return b.tanh()


def _chain(a, w):
    b = a * 1
    v = b.t()[1:3]
    v.add_(w[:3])
    v[0].mul_(3)
    return b * v.sum()


def _constant(lib, a, w):
    x = lib.zeros(3, 4, dtype=a.dtype)
    x[0] = w
    x[2, 1:] = a[0, :3]
    return x * a


@pytest.mark.parametrize("name", PROGRAMS)
def test_matches_torch(name):
    r = np.random.default_rng(0)
    a0, w0 = r.standard_normal((3, 4)), r.standard_normal(4)
    f = run(fl, a0, w0, PROGRAMS[name])
    t = run(torch, a0, w0, PROGRAMS[name])
    for x, y in zip(f, t):
        assert_close(x.detach(), y.detach(), rtol=1e-12, atol=1e-12)


def test_view_of_leaf_is_refused():
    p = fl.ones(2, 2, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf tensor that requires grad"):
        p[0].mul_(2)
    with fl.no_grad():
        p[0].mul_(2)
    assert p.tolist() == [[2.0, 2.0], [1.0, 1.0]]
