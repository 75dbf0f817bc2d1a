"""Resampling benchmarks (issue 22), flambeau vs PyTorch 2.13 in one process, 2 threads,
float32: F.interpolate bilinear 2x up and nearest 2x up on [32, 64, 56, 56], forward and
forward + backward, and pixel_shuffle / unfold at the same size. Alternating runs, medians;
ratio = torch time / flambeau time (> 1: flambeau faster).
Usage: .venv/bin/python bench/bench_resample.py [reps] [batch]   (prints a Markdown table)"""
import os
import sys

import numpy as np
import torch

import flambeau as fl

sys.path.insert(0, os.path.dirname(__file__))
from timing import pair  # noqa: E402


def rows(batch, reps, r):
    x = r.standard_normal((batch, 64, 56, 56)).astype(np.float32)
    fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = []
    cases = [("bilinear 2x up", dict(scale_factor=2, mode="bilinear")),
             ("nearest 2x up", dict(scale_factor=2, mode="nearest"))]
    for name, kw in cases:
        with fl.no_grad(), torch.no_grad():
            out.append((f"interpolate {name}, forward",
                        *pair(lambda: fl.nn.functional.interpolate(fx, **kw),
                              lambda: torch.nn.functional.interpolate(tx, **kw), reps)))

        def step(lib, x):
            y = lib.nn.functional.interpolate(x, **kw)
            y.backward(lib.ones_like(y))
        out.append((f"interpolate {name}, forward+backward", *pair(lambda: step(fl, fx), lambda: step(torch, tx), reps)))
    with fl.no_grad(), torch.no_grad():
        out.append(("pixel_shuffle r=2", *pair(lambda: fl.nn.functional.pixel_shuffle(fx, 2),
                                               lambda: torch.nn.functional.pixel_shuffle(tx, 2), reps)))
        out.append(("unfold 3x3 pad 1", *pair(lambda: fl.nn.functional.unfold(fx[:8], 3, padding=1),
                                              lambda: torch.nn.functional.unfold(tx[:8], 3, padding=1), reps)))
    return out


def main(reps=5, batch=32):
    fl.set_num_threads(2)
    torch.set_num_threads(2)
    r = np.random.default_rng(0)
    table = rows(batch, reps, r)
    print(f"[{batch}, 64, 56, 56] float32 (unfold: batch 8), 2 threads, median of {reps}\n")
    print("| case | flambeau ms | torch ms | ratio |\n|---|---|---|---|")
    for name, f, t in table:
        print(f"| {name} | {f * 1e3:.1f} | {t * 1e3:.1f} | {t / f:.2f}x |")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
