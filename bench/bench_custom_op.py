"""Per-call overhead of a custom op (issue 23), flambeau vs PyTorch 2.13 in one process.

flambeau: the C ops of bench/ext_add.c (compiled here against the installed header) next to
the built-in add doing the same work: bench::add (add through api->call_op) and
bench::add_loop (a C loop), from Python (flambeau.ops.bench.*) and from C++
(build/release/flambeau-bench-custom-op: call_op on the op found once, against
flambeau::add and call_op(add)). torch: a torch.library.custom_op whose Python body is
a + b, next to torch.add. Tiny float32 tensors, so the time is the call's overhead.
Usage: .venv/bin/python bench/bench_custom_op.py [numel] [calls]   (prints Markdown tables)"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import flambeau as fl

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def build_extension(tmp):
    out = os.path.join(tmp, "libbench_ext_add.so")
    includes = [f"-I{i}" for i in fl.utils.cpp_extension.include_paths()]
    subprocess.run([shutil.which("cc"), "-std=c11", "-O2", "-shared", "-fPIC", *includes,
                    os.path.join(ROOT, "bench", "ext_add.c"), "-o", out], check=True)
    return out


def per_call_ns(cases, calls, rounds=15):
    """Median ns per call of each case, the cases run in turn each round."""
    for f in cases:
        for _ in range(calls // 10):
            f()
    times = [[] for _ in cases]
    for _ in range(rounds):
        for f, t in zip(cases, times):
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            t.append((time.perf_counter() - t0) / calls * 1e9)
    return [statistics.median(t) for t in times]


@torch.library.custom_op("bench::add", mutates_args=())
def torch_custom_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


def main():
    numel = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    fl.set_num_threads(2)
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_extension(tmp)
        fl.ops.load_library(path)
        a, b = fl.randn(numel), fl.randn(numel)
        ta, tb = torch.randn(numel), torch.randn(numel)
        custom, loop = fl.ops.bench.add, fl.ops.bench.add_loop
        ns = per_call_ns([lambda: fl.add(a, b), lambda: custom(a, b), lambda: loop(a, b),
                          lambda: torch.add(ta, tb), lambda: torch_custom_add(ta, tb)], calls)
        print(f"float32, {numel} elements, 2 threads, {calls} calls x 15 rounds, medians")
        print("\nFrom Python (ns per call; overhead = custom / built-in - 1):\n")
        print("| op | ns/call | vs built-in |")
        print("|---|---|---|")
        print(f"| flambeau.add (built-in) | {ns[0]:.0f} | |")
        print(f"| flambeau.ops.bench.add (C op, add via call_op) | {ns[1]:.0f} | {ns[1] / ns[0] - 1:+.0%} |")
        print(f"| flambeau.ops.bench.add_loop (C op, C loop) | {ns[2]:.0f} | {ns[2] / ns[0] - 1:+.0%} |")
        print(f"| torch.add (built-in) | {ns[3]:.0f} | |")
        print(f"| torch.library.custom_op bench::add | {ns[4]:.0f} | {ns[4] / ns[3] - 1:+.0%} |")
        exe = os.path.join(ROOT, "build", "release", "flambeau-bench-custom-op")
        if not os.path.exists(exe):
            print(f"\nC++: skipped ({exe} not built: cmake --build --preset release)")
            return
        out = subprocess.run([exe, path, str(numel), str(calls)], check=True, capture_output=True, text=True).stdout
        rows = [line.rsplit(" ", 1) for line in out.strip().splitlines()]
        base = float(rows[0][1])
        print("\nFrom C++ (ns per call):\n")
        print("| call | ns/call | vs flambeau::add |")
        print("|---|---|---|")
        for name, v in rows:
            v = float(v)
            print(f"| {name} | {v:.0f} | {'' if v == base else f'{v / base - 1:+.0%}'} |")


if __name__ == "__main__":
    main()
