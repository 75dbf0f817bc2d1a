"""Gradients of the indexing writes, masked ops, take and the scans against PyTorch 2.13:
out-of-place and in-place forms (on non-leaves), and refusal of in-place writes into
leaves that require grad."""
import zlib

import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close

DUPS = [[0, 0, 4], [1, 1, 1], [3, 2, 3], [4, 4, 0]]  # repeats along dim 1 of a (4, 5) self
UNIQ = [[0, 3, 1, 2, 0], [2, 1, 3, 0, 1]]  # distinct per column along dim 0
MASK = [[True, False, False, True, True], [False, True, False, True, True],
        [False, False, True, False, True], [True, False, True, False, False]]
ZEROS = [[1.2, 0.0, -0.7, 1.1, 0.5], [0.0, 0.9, 0.0, -1.3, 2.0], [0.8, 1.4, -0.6, 0.0, 1.1]]


def nonleaf(x):
    return x * 1.0


def inplace(method, *args, **kw):
    """f(L, x, *inputs): the in-place method on a non-leaf copy of x."""
    def f(L, x, *inputs):
        y = nonleaf(x)
        getattr(y, method)(*[a(L, inputs) if callable(a) else a for a in args], **kw)
        return y
    return f


def src(i):
    return lambda L, inputs: inputs[i]


def ix(v):
    return lambda L, inputs: L.tensor(v)


def mask(L, inputs=None):
    return L.tensor(MASK)


def setitem(L, x, s):
    y = nonleaf(x)
    y[L.tensor([3, 1])] = s
    return y


CASES = [
    ("scatter", [(4, 5), (2, 5)], lambda L, x, s: L.scatter(x, 0, L.tensor(UNIQ), s)),
    ("scatter scalar", [(4, 5)], lambda L, x: x.scatter(1, L.tensor(DUPS), 2.5)),
    ("scatter_add", [(4, 5), (4, 3)], lambda L, x, s: x.scatter_add(1, L.tensor(DUPS), s)),
    *[(f"scatter_reduce {r} include_self={inc}", [(4, 5), (4, 3)],
       lambda L, x, s, r=r, inc=inc: x.scatter_reduce(1, L.tensor(DUPS), s, r, include_self=inc))
      for r in ["sum", "mean", "prod", "amax", "amin"] for inc in [True, False]],
    ("scatter_reduce prod with zeros", [np.array(ZEROS), np.array(ZEROS)[:, :3]],
     lambda L, x, s: x.scatter_reduce(1, L.tensor(DUPS[:3]), s, "prod")),
    ("index_add alpha", [(4, 5), (3, 5)], lambda L, x, s: x.index_add(0, L.tensor([3, 0, 3]), s, alpha=2.5)),
    ("index_copy", [(4, 5), (4, 3)], lambda L, x, s: x.index_copy(1, L.tensor([4, 0, 2]), s)),
    ("index_fill tensor value", [(4, 5), ()], lambda L, x, v: x.index_fill(1, L.tensor([3, 1, 1]), v)),
    ("masked_scatter", [(4, 5), (4, 5)], lambda L, x, s: x.masked_scatter(mask(L), s)),
    ("masked_scatter broadcast mask", [(4, 5), (4, 5)], lambda L, x, s: x.masked_scatter(mask(L)[1], s)),
    ("masked_select", [(4, 5)], lambda L, x: x.masked_select(mask(L))),
    ("masked_select broadcast self", [(5,)], lambda L, x: L.masked_select(x, mask(L))),
    ("take", [(4, 5)], lambda L, x: L.take(x, L.tensor([[-1, 3, 3], [19, 0, -20]]))),
    ("cumprod", [(3, 5)], lambda L, x: x.cumprod(1)),
    ("cumprod with zeros", [np.array(ZEROS)], lambda L, x: L.cumprod(x, 1)),
    ("cumprod with zeros dim 0", [np.array(ZEROS)], lambda L, x: L.cumprod(x, 0)),
    ("prod with zeros", [np.array(ZEROS)], lambda L, x: x.prod(1)),
    ("logcumsumexp", [(3, 5)], lambda L, x: L.logcumsumexp(x * 10, 1)),
    ("cummax", [(3, 5)], lambda L, x: L.cummax(x, 1)[0]),
    ("cummin", [(3, 5)], lambda L, x: L.cummin(x, 0)[0]),
    ("scatter_ non-leaf", [(4, 5), (2, 5)], inplace("scatter_", 0, ix(UNIQ), src(0))),
    ("scatter_add_ non-leaf", [(4, 5), (4, 3)], inplace("scatter_add_", 1, ix(DUPS), src(0))),
    ("scatter_reduce_ non-leaf", [(4, 5), (4, 3)], inplace("scatter_reduce_", 1, ix(DUPS), src(0), "amin")),
    ("index_add_ non-leaf", [(4, 5), (3, 5)], inplace("index_add_", 0, ix([1, 1, 2]), src(0), alpha=-2.0)),
    ("index_copy_ non-leaf", [(4, 5), (4, 2)], inplace("index_copy_", 1, ix([3, 0]), src(0))),
    ("index_fill_ non-leaf", [(4, 5), ()], inplace("index_fill_", 0, ix([2, 0]), src(0))),
    ("masked_fill_ non-leaf", [(4, 5), ()], inplace("masked_fill_", mask, src(0))),
    ("masked_scatter_ non-leaf", [(4, 5), (4, 5)], inplace("masked_scatter_", mask, src(0))),
    ("setitem (index_put_) non-leaf", [(4, 5), (2, 5)], setitem),
]


@pytest.mark.parametrize("name,specs,f", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_torch(name, specs, f):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    arrays = [rng.standard_normal(s) if isinstance(s, tuple) else s for s in specs]
    fx = [fl.tensor(a, dtype=fl.float64, requires_grad=True) for a in arrays]
    tx = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    fo, to = f(fl, *fx), f(torch, *tx)
    assert_close(fo, to, rtol=1e-12, atol=1e-12)
    w = rng.standard_normal(tuple(to.shape))
    (fo * fl.tensor(w, dtype=fl.float64)).sum().backward()
    (to * torch.tensor(w, dtype=torch.float64)).sum().backward()
    for a, b in zip(fx, tx):
        assert_close(a.grad, b.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("op", ["scatter_", "scatter_add_", "index_add_", "index_copy_", "index_fill_",
                                "masked_fill_", "masked_scatter_", "setitem"])
def test_inplace_on_leaf_requiring_grad_is_refused(op):
    x = fl.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    s = fl.tensor([[5.0, 6.0]])
    calls = {
        "scatter_": lambda: x.scatter_(0, fl.tensor([[1, 0]]), s),
        "scatter_add_": lambda: x.scatter_add_(0, fl.tensor([[1, 0]]), s),
        "index_add_": lambda: x.index_add_(0, fl.tensor([1]), s),
        "index_copy_": lambda: x.index_copy_(0, fl.tensor([1]), s),
        "index_fill_": lambda: x.index_fill_(1, fl.tensor([0]), 9.0),
        "masked_fill_": lambda: x.masked_fill_(fl.tensor([True, False]), 9.0),
        "masked_scatter_": lambda: x.masked_scatter_(fl.tensor([True, False]), s),
        "setitem": lambda: x.__setitem__(fl.tensor([0]), s),
    }
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        calls[op]()
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]] and x.is_leaf
    with fl.no_grad():
        calls[op]()  # allowed without grad mode, as in torch
    assert x.tolist() != [[1.0, 2.0], [3.0, 4.0]]


def test_amax_ties_share_the_gradient_like_torch():
    vals, sv = [5.0, 4.0, 1.0], [5.0, 2.0, 5.0]
    f, t = fl.tensor(vals, requires_grad=True), torch.tensor(vals, requires_grad=True)
    fs, ts = fl.tensor(sv, requires_grad=True), torch.tensor(sv, requires_grad=True)
    fl.scatter_reduce(f, 0, fl.tensor([0, 1, 0]), fs, "amax").sum().backward()
    torch.scatter_reduce(t, 0, torch.tensor([0, 1, 0]), ts, "amax").sum().backward()
    assert_close(f.grad, t.grad, rtol=1e-7, atol=0)
    assert_close(fs.grad, ts.grad, rtol=1e-7, atol=0)
