"""Custom autograd Functions, activation checkpointing, learning-rate schedules and
gradient clipping, against PyTorch 2.13."""
import math

import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close


class Cube(fl.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * x * scale

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * x * ctx.scale, None


def test_custom_function_and_checkpoint():
    x = fl.tensor(np.random.default_rng(0).standard_normal(5), dtype=fl.float64, requires_grad=True)
    y = Cube.apply(x, 2.0)
    assert y.grad_fn.name() == "CubeBackward"
    assert fl.autograd.gradcheck(lambda t: Cube.apply(t, 2.0), [x])

    def block(a, w):
        return fl.tanh(a @ w).sin() * a.sum()

    r = np.random.default_rng(1)
    a = fl.tensor(r.standard_normal((3, 4)), requires_grad=True)
    w = fl.tensor(r.standard_normal((4, 4)), requires_grad=True)
    ref_a, ref_w = fl.autograd.grad(block(a, w).sum(), [a, w])
    out = fl.utils.checkpoint.checkpoint(block, a, w)
    assert_close(out, torch.from_dlpack(block(a, w).detach()), rtol=0, atol=0)
    out.sum().backward()
    assert np.array_equal(a.grad.numpy(), ref_a.numpy()) and np.array_equal(w.grad.numpy(), ref_w.numpy())


def schedules(optim, lr_scheduler, opt):
    return [
        lambda: lr_scheduler.LambdaLR(opt, lambda e: 0.9 ** e),
        lambda: lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
        lambda: lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=4),
        lambda: lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.01),
    ]


@pytest.mark.parametrize("which", range(5))
def test_lr_schedules_match_torch(which):
    fp, tp = fl.zeros(2, requires_grad=True), torch.zeros(2, requires_grad=True)
    fo, to = fl.optim.SGD([fp], lr=0.5), torch.optim.SGD([tp], lr=0.5)
    if which < 4:
        fs, ts = schedules(fl.optim, fl.optim.lr_scheduler, fo)[which](), \
            schedules(torch.optim, torch.optim.lr_scheduler, to)[which]()
    else:  # warmup then cosine
        fs = fl.optim.lr_scheduler.SequentialLR(fo, [fl.optim.lr_scheduler.LinearLR(fo, 0.2, total_iters=3),
                                                     fl.optim.lr_scheduler.CosineAnnealingLR(fo, T_max=8)], [3])
        ts = torch.optim.lr_scheduler.SequentialLR(to, [torch.optim.lr_scheduler.LinearLR(to, 0.2, total_iters=3),
                                                        torch.optim.lr_scheduler.CosineAnnealingLR(to, T_max=8)], [3])
    for _ in range(12):
        assert math.isclose(fs.get_last_lr()[0], ts.get_last_lr()[0], rel_tol=1e-9, abs_tol=1e-12)
        fo.step(), to.step()
        fs.step(), ts.step()


def test_gradient_clipping_matches_torch():
    r = np.random.default_rng(5)
    grads = [r.standard_normal(s) * 3 for s in [(4, 3), (7,)]]
    fps = [fl.zeros(*g.shape, dtype=fl.float64, requires_grad=True) for g in grads]
    tps = [torch.zeros(*g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for f, t, g in zip(fps, tps, grads):
        f.grad, t.grad = fl.tensor(g), torch.tensor(g)
    fn = fl.nn.utils.clip_grad_norm_(fps, 1.5)
    tn = torch.nn.utils.clip_grad_norm_(tps, 1.5)
    assert_close(fn, tn, rtol=1e-12, atol=1e-12)
    for f, t in zip(fps, tps):
        assert_close(f.grad, t.grad, rtol=1e-12, atol=1e-12)
    fl.nn.utils.clip_grad_value_(fps, 0.1)
    torch.nn.utils.clip_grad_value_(tps, 0.1)
    for f, t in zip(fps, tps):  # values carry the last-ulp differences of the norm step
        assert_close(f.grad, t.grad, rtol=1e-12, atol=1e-12)
        assert f.grad.abs().max().item() <= 0.1
