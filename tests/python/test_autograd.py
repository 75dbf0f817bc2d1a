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


def test_pow_and_relu_derivatives_as_torch_at_the_edges():
    # x ** p for a non-integer number p: the derivative's p - 1 keeps float64 precision.
    a = np.array([0.7, 1.3, 2.0, 5.5])
    for p in [1 / 3, 1 / 1.5, 0.5, 2.5]:
        x = fl.tensor(a).requires_grad_()
        (x ** p).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), p * a ** (p - 1), rtol=1e-15, atol=0)
    # relu's backward selects: an inf / NaN gradient where relu's output is <= 0 gives 0, as torch.
    b = np.array([-1.0, 0.0, 2.0, np.nan])
    got, want = [], []
    for lib, out in ((fl, got), (torch, want)):
        x = lib.tensor(b).requires_grad_()
        y = lib.relu(x)
        y.backward(lib.tensor([np.inf, np.nan, 3.0, 1.0]))
        out.append(x.grad.numpy())
    np.testing.assert_array_equal(got[0], want[0])
