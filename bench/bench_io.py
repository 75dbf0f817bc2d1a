"""safetensors I/O, flambeau vs PyTorch 2.13 and the safetensors package in one process:
load a file and read every byte (sum of every tensor, warm page cache), open-only time of
the lazy path, and save. 2 threads; runs alternate between the contenders, medians;
ratio = fastest other / flambeau. flambeau.save fsyncs (atomic and durable); the others
do not, so the save rows add the disk's floor: the same bytes written with os.write and
fsync'ed. Every save starts with nothing left to write back (os.sync, untimed).
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


def median_times(fns, reps, before=lambda: None):
    """Median seconds of each function, running them in turn so that drift hits all alike;
    `before` runs untimed ahead of each call."""
    for f in fns.values():
        f()
    ts = {k: [] for k in fns}
    for _ in range(reps):
        for k, f in fns.items():
            before()
            t0 = time.perf_counter()
            f()
            ts[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in ts.items()}


def write_fsync(path, nbytes):
    """The disk's floor for a durable write of nbytes: os.write of one buffer, fsync."""
    buf = bytes(nbytes)

    def run():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(buf)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    return run


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

    def row(name, f, others, reps=reps, before=lambda: None):
        t = median_times({"flambeau": f, **others}, reps, before)
        tf = t.pop("flambeau")
        best = min(t, key=t.get)
        rows.append((name, tf, t, best, t[best] / tf))

    row(f"load {gib:g} GiB + read every byte", lambda: read_all_fl(fl.load(path)),
        {"torch.load": lambda: read_all_torch(torch.load(path)),
         "safetensors load_file": lambda: read_all_torch(safetensors.torch.load_file(path))})
    row("open only (keys of the lazy file)", lambda: fl.safetensors.safe_open(path).keys(),
        {"safetensors safe_open": lambda: safetensors.safe_open(path, framework="pt").keys()}, reps=200)
    out = os.path.join(tmp, "out.safetensors")
    row(f"save {gib:g} GiB", lambda: fl.save(ours, out),
        {"safetensors save_file": lambda: safetensors.torch.save_file(src, out),
         "torch.save (zip)": lambda: torch.save(src, out)}, before=os.sync)
    nbytes = os.path.getsize(path)
    floor = median_times({"floor": write_fsync(os.path.join(tmp, "floor.bin"), nbytes)}, reps, os.sync)["floor"]

    print(f"threads 2, {n_tensors} float32 tensors of {per * 4 / 2**20:.0f} MiB, {reps} reps, medians")
    print("| case | flambeau | others | ratio (fastest other / flambeau) |")
    print("|---|---|---|---|")
    for name, tf, to, best, ratio in rows:
        others = ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in to.items())
        print(f"| {name} | {tf * 1e3:.2f} ms | {others} | {ratio:.2f}x vs {best} |")
    print(f"| disk floor: os.write + fsync of the same {nbytes / 2**30:.2f} GiB | {floor * 1e3:.1f} ms | | "
          f"flambeau.save at {floor / rows[-1][1]:.2f}x of the floor |")
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0, int(sys.argv[2]) if len(sys.argv) > 2 else 5)
