"""Autograd/nn/optim benchmarks, flambeau vs PyTorch 2.13 in one process, 2 threads,
SDPA causal forward and forward+backward (B=4, H=12, S=1024, D=64; float32 and bfloat16), one training
step (forward, backward, AdamW) of a pre-norm transformer block at d_model 768, and an
AdamW step over 124M parameters (float32). Alternating runs, medians.
Usage: .venv/bin/python bench/bench_nn.py [reps]   (prints a Markdown table)"""
import os
import sys

import numpy as np
import torch

import flambeau as fl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from transformer_block import block  # noqa: E402
from timing import pair  # noqa: E402


def main(reps=5):
    fl.set_num_threads(2)
    torch.set_num_threads(2)
    r = np.random.default_rng(0)
    rows = []

    q, k, v = (r.standard_normal((4, 12, 1024, 64)).astype(np.float32) for _ in range(3))
    fq, fk, fv = (fl.tensor(a, requires_grad=True) for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    sdpa_f, sdpa_t = fl.nn.functional.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention
    with fl.no_grad(), torch.no_grad():
        rows.append(("SDPA causal forward (4x12x1024x64)",
                     *pair(lambda: sdpa_f(fq, fk, fv, is_causal=True), lambda: sdpa_t(tq, tk, tv, is_causal=True), reps)))
    rows.append(("SDPA causal forward+backward",
                 *pair(lambda: sdpa_f(fq, fk, fv, is_causal=True).sum().backward(),
                       lambda: sdpa_t(tq, tk, tv, is_causal=True).sum().backward(), reps)))
    hq, hk, hv = (t.detach().to(fl.bfloat16).requires_grad_() for t in (fq, fk, fv))
    bq, bk, bv = (t.detach().to(torch.bfloat16).requires_grad_() for t in (tq, tk, tv))
    with fl.no_grad(), torch.no_grad():
        rows.append(("SDPA causal forward, bfloat16",
                     *pair(lambda: sdpa_f(hq, hk, hv, is_causal=True), lambda: sdpa_t(bq, bk, bv, is_causal=True), reps)))
    rows.append(("SDPA causal forward+backward, bfloat16",
                 *pair(lambda: sdpa_f(hq, hk, hv, is_causal=True).sum().backward(),
                       lambda: sdpa_t(bq, bk, bv, is_causal=True).sum().backward(), reps)))

    torch.manual_seed(0)
    tb, fb = block(torch.nn, torch.nn.functional, 768, 12), block(fl.nn, fl.nn.functional, 768, 12)
    fb.load_state_dict({n: fl.from_dlpack(p.detach().clone()) for n, p in tb.state_dict().items()})
    x = r.standard_normal((4, 256, 768)).astype(np.float32)
    fx, tx = fl.tensor(x), torch.tensor(x)
    fopt, topt = fl.optim.AdamW(fb.parameters(), lr=1e-4), torch.optim.AdamW(tb.parameters(), lr=1e-4)

    def step(model, opt, inp):
        opt.zero_grad()
        out = model(inp)
        (out * out).mean().backward()
        opt.step()
    rows.append(("transformer block train step (d=768, 4x256 tokens)",
                 *pair(lambda: step(fb, fopt, fx), lambda: step(tb, topt, tx), reps)))

    # GPT-2 small's weight matrices (token and position embeddings, 12 layers): 124M.
    shapes = [(50257, 768), (1024, 768)] + [(768, 2304), (768, 768), (768, 3072), (3072, 768)] * 12
    fps = [fl.randn(*s, requires_grad=True) for s in shapes]
    tps = [torch.randn(*s, requires_grad=True) for s in shapes]
    for p in fps:
        p.grad = fl.randn(*p.shape)
    for p in tps:
        p.grad = torch.randn(*p.shape)
    n = sum(int(np.prod(s)) for s in shapes)
    fo2, to2 = fl.optim.AdamW(fps, lr=1e-4), torch.optim.AdamW(tps, lr=1e-4)
    rows.append((f"AdamW step over {n / 1e6:.0f}M parameters", *pair(fo2.step, to2.step, reps)))

    print("| op (2 threads; float32 unless named) | flambeau ms | torch ms | torch/flambeau |")
    print("|---|---|---|---|")
    for name, f, t in rows:
        print(f"| {name} | {f * 1e3:.1f} | {t * 1e3:.1f} | {t / f:.2f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
