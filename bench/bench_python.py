"""Python-level per-call overhead, flambeau vs PyTorch 2.13 in one process: `a + b` on
4-element tensors and the view `t[1:3, None]`. Alternating batches, medians, 1 thread.
Usage: PYTHONPATH=python .venv/bin/python bench/bench_python.py  (prints a Markdown table)"""
import statistics
import time

import torch

import flambeau as fl


def per_call_ns(fn, calls):
    t0 = time.perf_counter_ns()
    fn(calls)
    return (time.perf_counter_ns() - t0) / calls


def main(reps=21, calls=20000):
    fl.set_num_threads(1)
    torch.set_num_threads(1)
    fa, fb, ft = fl.ones(4), fl.ones(4), fl.ones(4, 4)
    ta, tb, tt = torch.ones(4), torch.ones(4), torch.ones(4, 4)

    def fl_add(n):
        for _ in range(n):
            fa + fb

    def torch_add(n):
        for _ in range(n):
            ta + tb

    def fl_index(n):
        for _ in range(n):
            ft[1:3, None]

    def torch_index(n):
        for _ in range(n):
            tt[1:3, None]

    def empty_loop(n):
        for _ in range(n):
            pass

    print("| op (Python, 1 thread) | flambeau ns | torch ns | torch/flambeau |")
    print("|---|---|---|---|")
    loop = statistics.median(per_call_ns(empty_loop, calls) for _ in range(reps))
    for name, f, t in [("a + b, 4 elements", fl_add, torch_add), ("t[1:3, None]", fl_index, torch_index)]:
        f(1000), t(1000)
        fs, ts = [], []
        for _ in range(reps):
            fs.append(per_call_ns(f, calls) - loop)
            ts.append(per_call_ns(t, calls) - loop)
        mf, mt = statistics.median(fs), statistics.median(ts)
        print(f"| {name} | {mf:.0f} | {mt:.0f} | {mt / mf:.2f} |")


if __name__ == "__main__":
    main()
