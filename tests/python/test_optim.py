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


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_state_dict_matches_torch_and_resumes(name, kw):
    r = np.random.default_rng(5)
    shapes = [(4, 3), (6,)]
    fps = [fl.tensor(r.standard_normal(s), requires_grad=True) for s in shapes]
    tps = [torch.tensor(p.numpy(), requires_grad=True) for p in fps]
    fopt = getattr(fl.optim, name)(fps, **kw)
    topt = getattr(torch.optim, name)(tps, **kw)
    grads = [[r.standard_normal(s) for s in shapes] for _ in range(6)]

    def step(opt, ps, lib, g):
        for p, gi in zip(ps, g):
            p.grad = lib.tensor(gi, dtype=p.dtype)
        opt.step()

    for g in grads[:3]:
        step(fopt, fps, fl, g)
        step(topt, tps, torch, g)
    fsd, tsd = fopt.state_dict(), topt.state_dict()
    assert sorted(fsd["state"]) == sorted(tsd["state"])
    for i, ts in tsd["state"].items():
        assert sorted(fsd["state"][i]) == sorted(ts)
        for k, v in ts.items():
            assert_close(fsd["state"][i][k], v, rtol=1e-6, atol=1e-6)
    fg, tg = fsd["param_groups"][0], tsd["param_groups"][0]
    for k in fg:
        assert fg[k] == pytest.approx(tg[k]) if not isinstance(fg[k], tuple) else tuple(fg[k]) == tuple(tg[k]), k

    # A new optimizer on copies of the parameters, loaded with the state, continues identically.
    copies = [fl.tensor(p.detach().numpy(), requires_grad=True) for p in fps]
    resumed = getattr(fl.optim, name)(copies, lr=123.0)
    resumed.load_state_dict(fsd)
    assert resumed.param_groups[0]["lr"] == kw["lr"]
    for g in grads[3:]:
        step(fopt, fps, fl, g)
        step(resumed, copies, fl, g)
    for a, b in zip(fps, copies):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())


def test_param_groups_write_through_and_bad_state():
    p = fl.zeros(3, requires_grad=True)
    opt = fl.optim.AdamW([p], lr=0.1)
    g = opt.param_groups[0]
    assert g["params"][0] is p and g["betas"] == (0.9, 0.999) and g["weight_decay"] == 0.01
    for group in opt.param_groups:
        group["lr"] *= 0.5
        group["betas"] = (0.8, 0.99)
    assert opt.lr == 0.05 and opt.param_groups[0]["betas"] == (0.8, 0.99)
    with pytest.raises(ValueError, match="invalid betas"):
        opt.param_groups[0]["betas"] = (1.5, 0.9)
    sd = opt.state_dict()
    sd["param_groups"][0]["params"] = [0, 1]
    with pytest.raises(ValueError, match="parameter groups do not match"):
        opt.load_state_dict(sd)
    p.grad = fl.ones(3)
    opt.step()
    sd = opt.state_dict()
    sd["state"][0]["exp_avg"] = fl.zeros(4)
    with pytest.raises(ValueError, match="must be a floating tensor of shape"):
        opt.load_state_dict(sd)
    assert opt.state_dict()["state"][0]["exp_avg"].shape == (3,)
