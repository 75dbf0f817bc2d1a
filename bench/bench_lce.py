"""linear_cross_entropy benchmarks: flambeau's fused (chunked) path against its unfused
cross_entropy(linear(...)) and PyTorch 2.13 (F.linear_cross_entropy with chunked options on
and off, and torch's unfused cross_entropy(linear(...))). float32, bias on, class-index
targets, forward + backward, 2 threads.

Memory (--memory, e.g. the big shape): every variant in its own subprocess, timed once too. flambeau: the peak of
flambeau.memory.max_allocated() (everything flambeau allocated, inputs included) against the
floor = x, W, b, target and the gradients of x, W, b; plus the peak RSS of every variant.
Speed (--speed): all variants in one process, alternating, medians of --reps runs, and the
ratios other_time / fused_time (> 1: fused is faster).

Usage: .venv/bin/python bench/bench_lce.py [--shapes small,big] [--reps N] [--memory] [--speed]
  shapes: small = N 4096, D 768, V 50257 (GPT-2 head); big = N 8192, D 2048, V 131072.
  Default: --speed --shapes small --reps 3. The big shape takes minutes per run on 2 cores."""
import argparse
import gc
import json
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

SHAPES = {"small": (4096, 768, 50257), "big": (8192, 2048, 131072)}
VARIANTS = ["fl_fused", "fl_unfused", "torch_unfused", "torch_lce_chunked", "torch_lce_reference"]
LABELS = {
    "fl_fused": "flambeau linear_cross_entropy (fused)",
    "fl_unfused": "flambeau cross_entropy(linear(...))",
    "torch_unfused": "torch cross_entropy(linear(...))",
    "torch_lce_chunked": "torch LinearCrossEntropyLoss, chunked options on",
    "torch_lce_reference": "torch LinearCrossEntropyLoss, options=None",
}
GiB = 1 << 30


def inputs(shape, seed=0):
    n, d, v = shape
    r = np.random.default_rng(seed)
    x = r.standard_normal((n, d), dtype=np.float32)
    w = (r.standard_normal((v, d), dtype=np.float32) * np.float32(d ** -0.5))
    b = r.standard_normal(v, dtype=np.float32) * np.float32(0.1)
    t = r.integers(0, v, n)
    return x, w, b, t


def step_fn(variant, x, w, b, t):
    """A function running forward + backward of `variant` on tensors made from the arrays."""
    if variant.startswith("fl"):
        import flambeau as fl
        fx, fw, fb = (fl.tensor(a, requires_grad=True) for a in (x, w, b))
        ft = fl.tensor(t)
        F = fl.nn.functional

        def run():
            for p in (fx, fw, fb):
                p.grad = None
            if variant == "fl_fused":
                loss = F.linear_cross_entropy(fx, fw, ft, linear_bias=fb)
            else:
                loss = F.cross_entropy(F.linear(fx, fw, fb), ft)
            loss.backward()
        return run, (fx, fw, fb, ft)
    import torch
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    tt = torch.tensor(t)
    TF = torch.nn.functional
    opts = torch.nn.LinearCrossEntropyOptions() if variant == "torch_lce_chunked" else None

    def run():
        for p in (tx, tw, tb):
            p.grad = None
        if variant == "torch_unfused":
            loss = TF.cross_entropy(TF.linear(tx, tw, tb), tt)
        else:
            loss = TF.linear_cross_entropy(tx, tw, tt, linear_bias=tb, options=opts)
        loss.backward()
    return run, (tx, tw, tb, tt)


def worker(variant, shape_name):
    """One memory measurement (run in a subprocess): prints a JSON line."""
    shape = SHAPES[shape_name]
    x, w, b, t = inputs(shape)
    out = {"variant": variant}
    if variant.startswith("fl"):
        import flambeau as fl
        fl.set_num_threads(2)
        run, tensors = step_fn(variant, x, w, b, t)
        del x, w, b
        gc.collect()
        fl.memory.reset_peak_stats()
        out["inputs"] = fl.memory.allocated()
        out["rss_before"] = rss_now()
        t0, c0 = time.perf_counter(), cpu_now()
        run()
        out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, cpu_now() - c0
        out["peak"] = fl.memory.max_allocated()
    else:
        import torch
        torch.set_num_threads(2)
        run, tensors = step_fn(variant, x, w, b, t)
        del x, w, b
        gc.collect()
        out["rss_before"] = rss_now()
        t0, c0 = time.perf_counter(), cpu_now()
        run()
        out["seconds"], out["cpu_seconds"] = time.perf_counter() - t0, cpu_now() - c0
    out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print("RESULT " + json.dumps(out), flush=True)


def cpu_now():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def rss_now():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def memory_table(shape_name):
    n, d, v = SHAPES[shape_name]
    floor = 2 * 4 * (n * d + v * d + v) + 8 * n  # x, W, b and their grads (float32), target (int64)
    res = {}
    for variant in VARIANTS:
        p = subprocess.run([sys.executable, __file__, "--worker", variant, "--shapes", shape_name],
                           capture_output=True, text=True)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        if p.returncode != 0 or not line:
            res[variant] = {"error": (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]}
        else:
            res[variant] = json.loads(line[0][7:])
        print(f"  {variant}: {res[variant]}", file=sys.stderr, flush=True)
    lines = [f"### Memory, N={n}, D={d}, V={v}, float32, forward+backward (each variant in its own process)",
             "", f"Floor (x, W, b, target and the gradients of x, W, b): {floor / GiB:.3f} GiB", "",
             "| variant | flambeau.memory peak (GiB) | peak / floor | peak RSS (GiB) | RSS before fwd (GiB) |",
             "|---|---|---|---|---|"]
    for variant in VARIANTS:
        r = res[variant]
        if "error" in r:
            lines.append(f"| {LABELS[variant]} | failed: {r['error']} | | | |")
            continue
        peak = f"{r['peak'] / GiB:.3f}" if "peak" in r else "-"
        ratio = f"{r['peak'] / floor:.3f}" if "peak" in r else "-"
        lines.append(f"| {LABELS[variant]} | {peak} | {ratio} | {r['peak_rss'] / GiB:.3f} | "
                     f"{r['rss_before'] / GiB:.3f} |")
    f, u = res.get("fl_fused", {}), res.get("fl_unfused", {})
    if "peak" in f and "peak" in u:
        lines += ["", f"flambeau unfused / fused peak: {u['peak'] / f['peak']:.2f}x; "
                      f"fused peak / floor: {f['peak'] / floor:.3f} (goal <= 1.1)"]
    # One timed run per variant from the same processes (the big shape is too slow, and the
    # unfused variants too large, to alternate in one process).
    flops = 3 * 2 * n * d * v
    lines += ["", f"### Speed, N={n}, D={d}, V={v}, float32, forward+backward, 2 threads, one run each "
                  "(own process; CPU s = user + system time, steadier than wall time on a shared machine)", "",
              "| variant | time (s) | CPU s | GFLOP/s (3 GEMMs, wall) | time / fused time | CPU s / fused CPU s |",
              "|---|---|---|---|---|---|"]
    for variant in VARIANTS:
        r = res[variant]
        if "seconds" in r and "seconds" in f:
            lines.append(f"| {LABELS[variant]} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | "
                         f"{flops / r['seconds'] / 1e9:.0f} | {r['seconds'] / f['seconds']:.2f} | "
                         f"{r['cpu_seconds'] / f['cpu_seconds']:.2f} |")
    return "\n".join(lines)


def speed_table(shape_name, reps):
    import flambeau as fl
    import torch
    fl.set_num_threads(2)
    torch.set_num_threads(2)
    n, d, v = SHAPES[shape_name]
    x, w, b, t = inputs(SHAPES[shape_name])
    times, cpus = {k: [] for k in VARIANTS}, {k: [] for k in VARIANTS}
    for rep in range(reps + (1 if reps > 1 else 0)):  # the first round warms up when reps > 1
        for variant in VARIANTS:
            run, tensors = step_fn(variant, x, w, b, t)
            t0, c0 = time.perf_counter(), cpu_now()
            run()
            dt, dc = time.perf_counter() - t0, cpu_now() - c0
            del run, tensors
            gc.collect()
            fl.memory.empty_cache()
            if reps == 1 or rep > 0:
                times[variant].append(dt)
                cpus[variant].append(dc)
            print(f"  {variant} round {rep}: {dt:.3f} s, {dc:.3f} CPU s", file=sys.stderr, flush=True)
    med = {k: statistics.median(vs) for k, vs in times.items()}
    cmed = {k: statistics.median(vs) for k, vs in cpus.items()}
    flops = 3 * 2 * n * d * v
    lines = [f"### Speed, N={n}, D={d}, V={v}, float32, forward+backward, 2 threads, median of {reps} "
             "(alternating in one process; CPU s = user + system time)", "",
             "| variant | time (s) | CPU s | GFLOP/s (3 GEMMs, wall) | time / fused time | CPU s / fused CPU s |",
             "|---|---|---|---|---|---|"]
    for k in VARIANTS:
        lines.append(f"| {LABELS[k]} | {med[k]:.3f} | {cmed[k]:.2f} | {flops / med[k] / 1e9:.0f} | "
                     f"{med[k] / med['fl_fused']:.2f} | {cmed[k] / cmed['fl_fused']:.2f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="small")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--worker")
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.shapes)
    if not a.memory and not a.speed:
        a.speed = True
    for shape in a.shapes.split(","):
        if a.memory:
            print(memory_table(shape) + "\n", flush=True)
        if a.speed:
            print(speed_table(shape, a.reps) + "\n", flush=True)


if __name__ == "__main__":
    main()
