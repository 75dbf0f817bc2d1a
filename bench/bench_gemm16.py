"""16-bit GEMM against PyTorch 2.13, side by side in one process: bf16 and fp16 matmul at
n = 1024 / 2048 / 4096, linear [8192, 4096] x [4096, 4096]^T, and flambeau's own float32 at
the same sizes (the goal on CPUs without 16-bit hardware). Prints medians in GFLOP/s and the
ratios torch_time / flambeau_time.

    .venv/bin/python bench/bench_gemm16.py [--sizes 1024,2048,4096] [--reps 5] [--threads 2]
"""
import argparse
import statistics

import torch
import flambeau as fl

from timing import pair, timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1024,2048,4096")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-budget", type=float, default=20.0,
                    help="seconds one torch call may take before its row is timed once only")
    ap.add_argument("--torch-skip", type=float, default=60.0,
                    help="torch calls predicted (from the last size's rate) to take longer are not run")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    fl.set_num_threads(args.threads)
    caps = fl.backends.cpu.capabilities()
    print(caps["line"])
    print(f"threads {args.threads}, medians of {args.reps}; ratio = torch_time / flambeau_time\n")
    print(f"| op | dtype | flambeau GFLOP/s | torch GFLOP/s | ratio | flambeau vs own fp32 |")
    print(f"|---|---|---|---|---|---|")
    g = torch.Generator().manual_seed(0)
    shapes = [("matmul", n, n, n) for n in map(int, args.sizes.split(","))]
    shapes.append(("linear", 8192, 4096, 4096))
    torch_rate = {}  # (op, dtype) -> the last GFLOP/s torch gave
    for op, m, k, n in shapes:
        a32 = torch.randn(m, k, generator=g)
        b32 = torch.randn(k, n, generator=g) if op == "matmul" else torch.randn(n, k, generator=g)
        flops = 2.0 * m * n * k
        own32 = None
        for dt in ("float32", "bfloat16", "float16"):
            ta, tb = a32.to(getattr(torch, dt)), b32.to(getattr(torch, dt))
            fa, fb = fl.from_dlpack(ta), fl.from_dlpack(tb)
            if op == "matmul":
                f, t = (lambda: fl.matmul(fa, fb)), (lambda: torch.matmul(ta, tb))
            else:
                f, t = (lambda: fl.nn.functional.linear(fa, fb)), (lambda: torch.nn.functional.linear(ta, tb))
            rate = torch_rate.get(("matmul", dt)) if op == "matmul" else None
            if rate and flops / rate / 1e9 > args.torch_skip:  # torch's path would take minutes
                tf = statistics.median(timed(f) for _ in range(args.reps))
                est = flops / rate / 1e9
                torch_col, ratio = f"not run (~{est:,.0f} s per call at {rate:.1f})", f">{est / tf:,.0f}x (est.)"
            else:
                once = timed(t)
                if once > args.torch_budget:  # too slow to repeat: flambeau's median against one call
                    tf, tt = statistics.median(timed(f) for _ in range(args.reps)), once
                else:
                    tf, tt = pair(f, t, args.reps)
                torch_rate[(op, dt)] = flops / tt / 1e9
                torch_col, ratio = f"{flops / tt / 1e9:,.1f}", f"{tt / tf:.2f}x"
            if dt == "float32":
                own32 = tf
            vs32 = "" if dt == "float32" else f"{own32 / tf:.2f}x"
            print(f"| {op} {m}x{k}x{n} | {dt} | {flops / tf / 1e9:,.0f} | {torch_col} | {ratio} | {vs32} |",
                  flush=True)


if __name__ == "__main__":
    main()
