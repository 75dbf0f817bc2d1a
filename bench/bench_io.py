"""safetensors I/O, flambeau vs PyTorch 2.13 and the safetensors package in one process:
load a file and read every byte (sum of every tensor, warm page cache), open-only time of
the lazy path, and save. 2 threads; alternating runs, medians; ratio = fastest other /
flambeau. flambeau.save fsyncs (atomic and durable); the others do not.
Usage: .venv/bin/python bench/bench_io.py [GiB] [reps]   (prints a Markdown table;
defaults 1 GiB, 5 reps; writes under $TMPDIR)"""
import os
import statistics
import sys
import tempfile
import time

import safetensors
import safetensors.torch
import torch

import flambeau as fl


def median_time(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def read_all_fl(d):
    return sum(t.sum().item() for t in d.values())


def read_all_torch(d):
    return sum(t.sum().item() for t in d.values())


def main(gib=1.0, reps=5):
    fl.set_num_threads(2)
    torch.set_num_threads(2)
    n_tensors = 16
    per = int(gib * 2**30) // 4 // n_tensors
    src = {f"layer{i}.weight": torch.randn(per) for i in range(n_tensors)}
    ours = {k: fl.from_dlpack(v) for k, v in src.items()}
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "bench.safetensors")
    safetensors.torch.save_file(src, path)
    rows = []

    def row(name, f, others):
        tf = median_time(f, reps)
        to = {k: median_time(g, reps) for k, g in others.items()}
        best = min(to, key=to.get)
        rows.append((name, tf, to, best, to[best] / tf))

    row(f"load {gib:g} GiB + read every byte", lambda: read_all_fl(fl.load(path)),
        {"torch.load": lambda: read_all_torch(torch.load(path)),
         "safetensors load_file": lambda: read_all_torch(safetensors.torch.load_file(path))})
    row("open only (keys of the lazy file)", lambda: fl.safetensors.safe_open(path).keys(),
        {"safetensors safe_open": lambda: safetensors.safe_open(path, framework="pt").keys()})
    out = os.path.join(tmp, "out.safetensors")
    row(f"save {gib:g} GiB", lambda: fl.save(ours, out),
        {"safetensors save_file": lambda: safetensors.torch.save_file(src, out),
         "torch.save (zip)": lambda: torch.save(src, out)})

    print(f"threads 2, {n_tensors} float32 tensors of {per * 4 / 2**20:.0f} MiB, {reps} reps, medians")
    print("| case | flambeau | others | ratio (fastest other / flambeau) |")
    print("|---|---|---|---|")
    for name, tf, to, best, ratio in rows:
        others = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in to.items())
        print(f"| {name} | {tf * 1e3:.1f} ms | {others} | {ratio:.2f}x vs {best} |")
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0, int(sys.argv[2]) if len(sys.argv) > 2 else 5)
