"""Recurrent layer benchmarks (issue 22 item 6), flambeau vs PyTorch 2.13 in one process,
float32, 2 threads: LSTM and GRU (2 layers, input 512, hidden 512, seq 128, batch 32)
forward, and forward + backward (input and all parameter gradients) from the same weights
(torch's state_dict loaded into flambeau). Alternating runs, medians; ratio = torch time /
flambeau time (> 1: flambeau faster).
Usage: .venv/bin/python bench/bench_rnn.py [reps] [seq] [batch] [hidden]   (prints a Markdown table)"""
import os
import sys

import numpy as np
import torch

import flambeau as fl

sys.path.insert(0, os.path.dirname(__file__))
from timing import pair  # noqa: E402


def rows(reps, seq, batch, hidden, layers=2):
    out = []
    r = np.random.default_rng(0)
    for kind in ("LSTM", "GRU"):
        torch.manual_seed(0)
        t = getattr(torch.nn, kind)(hidden, hidden, num_layers=layers)
        f = getattr(fl.nn, kind)(hidden, hidden, num_layers=layers)
        f.load_state_dict({k: fl.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
        x = r.standard_normal((seq, batch, hidden)).astype(np.float32)
        fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)

        def step(m, x):
            y = m(x)[0]
            y.sum().backward()
        with fl.no_grad(), torch.no_grad():
            out.append((f"{kind} forward", *pair(lambda: f(fx), lambda: t(tx), reps)))
        out.append((f"{kind} forward+backward", *pair(lambda: step(f, fx), lambda: step(t, tx), reps)))
    return out


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    seq = int(sys.argv[2]) if len(sys.argv) > 2 else 128
    batch = int(sys.argv[3]) if len(sys.argv) > 3 else 32
    hidden = int(sys.argv[4]) if len(sys.argv) > 4 else 512
    fl.set_num_threads(2)
    torch.set_num_threads(2)
    print(f"threads 2, float32, 2 layers, input = hidden = {hidden}, seq {seq}, batch {batch}, {reps} reps")
    print("| case | flambeau ms | torch ms | ratio |")
    print("|---|---|---|---|")
    for name, tf, tt in rows(reps, seq, batch, hidden):
        print(f"| {name} | {tf * 1e3:.1f} | {tt * 1e3:.1f} | {tt / tf:.2f}x |")


if __name__ == "__main__":
    main()
