"""Parity with PyTorch 2.13: a pre-norm transformer block (LayerNorm, causal SDPA, MLP)
with identical weights gives the same outputs and gradients (float32, 1e-5 relative),
and 10 AdamW steps on it give the same weights (in float64: in float32, Adam's division
by sqrt(v) turns last-bit gradient differences of near-zero gradients into lr-sized
steps, so only a float64 run shows whether the two trainings are the same)."""
import numpy as np
import torch

import flambeau as fl
from conftest import assert_close


def block(nn, F, d=64, heads=4):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q, k, v = (z.reshape(b, t, heads, d // heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(a)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
    return Block()


def test_block_forward_backward_and_adamw_steps_match_torch():
    torch.manual_seed(0)
    tb, fb = block(torch.nn, torch.nn.functional), block(fl.nn, fl.nn.functional)
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
