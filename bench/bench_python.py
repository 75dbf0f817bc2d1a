"""Python-level per-call overhead, flambeau vs PyTorch 2.13 in one process: `a + b` on
4-element tensors, the view `t[1:3, None]`, and calls through the schema-made bindings
(`exp(a)`, `sum(a, dim=0)`, `a.add_(b)`). Alternating batches, medians, 1 thread.
Usage: PYTHONPATH=python .venv/bin/python bench/bench_python.py  (prints a Markdown table)"""
import statistics
import time

import torch

import flambeau as fl


def per_call_ns(fn, calls):
    t0 = time.perf_counter_ns()
    fn(calls)
    return (time.perf_counter_ns() - t0) / calls


def loops(lib, a, b, t):
    """name -> a function running the call n times."""
    def add(n):
        for _ in range(n):
            a + b

    def index(n):
        for _ in range(n):
            t[1:3, None]

    def exp(n):
        f = lib.exp
        for _ in range(n):
            f(a)

    def sum_dim(n):
        f = lib.sum
        for _ in range(n):
            f(a, dim=0)

    def add_(n):
        for _ in range(n):
            a.add_(b)
    return {"a + b, 4 elements": add, "t[1:3, None]": index, "exp(a)": exp, "sum(a, dim=0)": sum_dim,
            "a.add_(b)": add_}


def main(reps=21, calls=20000):
    fl.set_num_threads(1)
    torch.set_num_threads(1)
    ours = loops(fl, fl.ones(4), fl.ones(4), fl.ones(4, 4))
    theirs = loops(torch, torch.ones(4), torch.ones(4), torch.ones(4, 4))

    def empty_loop(n):
        for _ in range(n):
            pass

    print("| op (Python, 1 thread) | flambeau ns | torch ns | torch/flambeau |")
    print("|---|---|---|---|")
    loop = statistics.median(per_call_ns(empty_loop, calls) for _ in range(reps))
    for name in ours:
        f, t = ours[name], theirs[name]
        f(1000), t(1000)
        fs, ts = [], []
        for _ in range(reps):
            fs.append(per_call_ns(f, calls) - loop)
            ts.append(per_call_ns(t, calls) - loop)
        mf, mt = statistics.median(fs), statistics.median(ts)
        print(f"| {name} | {mf:.0f} | {mt:.0f} | {mt / mf:.2f} |")


if __name__ == "__main__":
    main()
