"""Autograd from Python against PyTorch 2.13: gradients of a small network, grad(),
hooks, no_grad, retain_graph, in-place checks, gradcheck."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close


def both(a, requires_grad=True):
    t = torch.tensor(a, dtype=torch.float64, requires_grad=requires_grad)
    f = fl.tensor(a, dtype=fl.float64, requires_grad=requires_grad)
    return f, t


def test_mlp_gradients_match_torch():
    r = np.random.default_rng(0)
    (x, tx), (w1, tw1), (b1, tb1), (w2, tw2) = [both(r.standard_normal(s)) for s in [(4, 5), (5, 7), (7,), (7, 3)]]
    target = [0, 2, 1, 2]

    def loss(L, x, w1, b1, w2):
        h = L.tanh(x @ w1 + b1)
        logits = h @ w2
        lp = L.log_softmax(logits, 1)
        return -(lp[L.arange(4), L.tensor(target)]).mean() + (w1 * w1).sum() * 0.01

    lf, lt = loss(fl, x, w1, b1, w2), loss(torch, tx, tw1, tb1, tw2)
    assert_close(lf, lt, rtol=1e-12, atol=1e-12)
    lf.backward()
    lt.backward()
    for f, t in [(x, tx), (w1, tw1), (b1, tb1), (w2, tw2)]:
        assert_close(f.grad, t.grad, rtol=1e-10, atol=1e-12)
    assert lf.grad_fn is not None and w1.is_leaf and not lf.is_leaf


def test_grad_api_hooks_and_modes():
    x = fl.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    (g,) = fl.autograd.grad(y, [x], retain_graph=True)
    assert g.tolist() == [2.0, 4.0, 6.0] and x.grad is None
    seen = []
    x.register_hook(lambda grad: seen.append(grad.tolist()) or grad * 2)
    y.backward()
    assert seen == [[2.0, 4.0, 6.0]] and x.grad.tolist() == [4.0, 8.0, 12.0]
    with pytest.raises(RuntimeError, match="a second time"):
        y.backward()
    with fl.no_grad():
        z = x * 2
    assert not z.requires_grad and fl.is_grad_enabled()

    @fl.no_grad()
    def f(t):
        return t * 3
    assert not f(x).requires_grad
    h = x.exp()
    h.add_(1)  # changes a tensor exp saved for backward
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        h.sum().backward()
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        x.add_(1)
    x.grad = None
    assert x.grad is None


def test_gradcheck_from_python():
    x = fl.tensor(np.random.default_rng(1).standard_normal((3, 4)), dtype=fl.float64, requires_grad=True)
    assert fl.autograd.gradcheck(lambda t: (t.softmax(-1) * t).sum(dim=0), [x])
    assert fl.autograd.gradcheck(lambda t: t[fl.tensor([2, 0])] @ t.T, [x])
