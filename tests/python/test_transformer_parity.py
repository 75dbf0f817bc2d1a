"""Parity with PyTorch 2.13: a pre-norm transformer block (LayerNorm, causal SDPA, MLP)
with identical weights gives the same outputs and gradients (float32, 1e-5 relative),
and 10 AdamW steps on it give the same weights (in float64: in float32, Adam's division
by sqrt(v) turns last-bit gradient differences of near-zero gradients into lr-sized
steps, so only a float64 run shows whether the two trainings are the same)."""
import importlib.util
import os

import numpy as np
import torch

import flambeau as fl
from conftest import assert_close


spec = importlib.util.spec_from_file_location(
    "transformer_block", os.path.join(os.path.dirname(__file__), "..", "..", "examples", "transformer_block.py"))
transformer_block = importlib.util.module_from_spec(spec)
spec.loader.exec_module(transformer_block)


def test_block_forward_backward_and_adamw_steps_match_torch():
    torch.manual_seed(0)
    tb, fb = (transformer_block.block(torch.nn, torch.nn.functional, 64, 4),
              transformer_block.block(fl.nn, fl.nn.functional, 64, 4))
    fb.load_state_dict({k: fl.from_dlpack(v.detach().clone()) for k, v in tb.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 48, 64)).astype(np.float32)
    tx, fx = torch.tensor(x), fl.tensor(x)
    to, fo = tb(tx), fb(fx)
    assert_close(fo, to, rtol=1e-5, atol=1e-5)
    (to * to).mean().backward()
    (fo * fo).mean().backward()
    tparams = dict(tb.named_parameters())
    for name, p in fb.named_parameters():
        t = tparams[name].grad
        scale = float(t.abs().max())
        assert_close(p.grad, t, rtol=1e-5, atol=1e-5 * scale)
    tb, fb, tx, fx = tb.double(), fb.double(), tx.double(), fx.double()
    tparams = dict(tb.named_parameters())
    topt = torch.optim.AdamW(tb.parameters(), lr=1e-3)
    fopt = fl.optim.AdamW(fb.parameters(), lr=1e-3)
    for step in range(10):
        for opt, model, inp in ((topt, tb, tx), (fopt, fb, fx)):
            opt.zero_grad()
            out = model(inp)
            (out * out).mean().backward()
            opt.step()
    for name, p in fb.named_parameters():
        assert_close(p.detach(), tparams[name].detach(), rtol=1e-9, atol=1e-10)


def mlp(nn):
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 10))


def test_mlp_forward_backward_and_adamw_steps_match_torch():
    torch.manual_seed(1)
    tm, fm = mlp(torch.nn), mlp(fl.nn)
    fm.load_state_dict({k: fl.from_dlpack(v.detach().clone()) for k, v in tm.state_dict().items()})
    r = np.random.default_rng(1)
    x = r.standard_normal((16, 32)).astype(np.float32)
    y = r.integers(0, 10, 16)
    tx, fx, ty, fy = torch.tensor(x), fl.tensor(x), torch.tensor(y), fl.tensor(y)
    tloss = torch.nn.functional.cross_entropy(tm(tx), ty)
    floss = fl.nn.functional.cross_entropy(fm(fx), fy)
    assert_close(floss, tloss, rtol=1e-5, atol=1e-6)
    tloss.backward()
    floss.backward()
    tparams = dict(tm.named_parameters())
    for name, p in fm.named_parameters():
        t = tparams[name].grad
        assert_close(p.grad, t, rtol=1e-5, atol=1e-5 * float(t.abs().max()))
    tm, fm, tx, fx = tm.double(), fm.double(), tx.double(), fx.double()
    tparams = dict(tm.named_parameters())
    topt = torch.optim.AdamW(tm.parameters(), lr=1e-2)
    fopt = fl.optim.AdamW(fm.parameters(), lr=1e-2)
    for _ in range(10):
        for opt, model, inp, lib, tgt in ((topt, tm, tx, torch, ty), (fopt, fm, fx, fl, fy)):
            opt.zero_grad()
            lib.nn.functional.cross_entropy(model(inp), tgt).backward()
            opt.step()
    for name, p in fm.named_parameters():
        assert_close(p.detach(), tparams[name].detach(), rtol=1e-9, atol=1e-10)
