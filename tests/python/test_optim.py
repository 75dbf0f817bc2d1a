"""flambeau.optim against torch.optim: 10 steps on the same parameters and gradients give
the same parameters (float32 within a few ulps, float64 to 1e-12)."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=1e-2)),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.95), weight_decay=0.1, eps=1e-6)),
    ("AdamW", dict(lr=1e-2)),
    ("AdamW", dict(lr=3e-3, weight_decay=0.3, maximize=True)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_ten_steps_match_torch(name, kw, dtype):
    r = np.random.default_rng(3)
    shapes = [(5, 7), (7,), (3, 1, 4), (70000,)]  # the last spans several threads' chunks
    fps = [fl.tensor(r.standard_normal(s), dtype=getattr(fl, dtype), requires_grad=True) for s in shapes]
    tps = [torch.tensor(p.numpy(), requires_grad=True) for p in fps]
    fopt = getattr(fl.optim, name)(fps, **kw)
    topt = getattr(torch.optim, name)(tps, **kw)
    for step in range(10):
        grads = [r.standard_normal(s) for s in shapes]
        for fp, tp, g in zip(fps, tps, grads):
            fp.grad = fl.tensor(g, dtype=fp.dtype)
            tp.grad = torch.tensor(g, dtype=tp.dtype)
        fopt.step()
        topt.step()
    tol = 1e-12 if dtype == "float64" else 2e-6
    for fp, tp in zip(fps, tps):
        assert_close(fp.detach(), tp.detach(), rtol=tol, atol=tol)
    fopt.zero_grad()
    assert all(p.grad is None for p in fps)


def test_training_loop_reduces_the_loss():
    r = np.random.default_rng(4)
    x = fl.tensor(r.standard_normal((64, 3))).float()
    y = x @ fl.tensor([[1.0], [-2.0], [0.5]]) + 0.3
    w = fl.zeros(3, 1, requires_grad=True)
    b = fl.zeros(1, requires_grad=True)
    opt = fl.optim.AdamW([w, b], lr=0.1, weight_decay=0.0)
    for _ in range(200):
        loss = ((x @ w + b - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-3
    assert np.allclose(w.detach().numpy().ravel(), [1.0, -2.0, 0.5], atol=0.02)
