"""Data-parallel training speed, flambeau against PyTorch 2.13 (gloo, the same model: bench/
gpt_reference.py), in one run on this machine: training tokens/s of flambeau-gpt's main-job
model (B=8 x T=256 per step) and of a GPT-2 124M-sized one (12 layers, d_model 768, 12
heads, vocabulary 50257; B=4 x T=64 per rank), each as 1 process x 1 thread, 1 process x 2
threads and 2 ranks x 1 thread with DistributedDataParallel (the same global batch as the
2-thread process). AdamW and gradient clipping included, random tokens, medians of the
steps after a warm-up one.

flambeau runs `flambeau-gpt bench` (--parallel ddp under flambeau-run for 2 ranks); PyTorch
runs this file's worker (torch.nn.parallel.DistributedDataParallel under torchrun's
launcher for 2 ranks).
Usage: .venv/bin/python bench/bench_parallel.py [steps] [--only main|124m]"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
GPT = os.environ.get("FLAMBEAU_GPT", os.path.join(ROOT, "build", "release", "flambeau-gpt"))
sys.path.insert(0, os.path.dirname(__file__))

MAIN = dict(vocab_size=256, n_layer=4, n_head=4, d_model=192, seq_len=256, batch_size=8, window=0,
            rope_theta=10000.0, z_loss=1e-4)
GPT2 = dict(vocab_size=50257, n_layer=12, n_head=12, d_model=768, seq_len=64, batch_size=4, window=0,
            rope_theta=10000.0, z_loss=1e-4)
KEYS = ("vocab_size", "n_layer", "n_head", "d_model", "seq_len", "batch_size", "z_loss")


def flambeau_run(cfg, steps, ranks, threads, batch):
    args = [GPT, "bench", "--steps", str(steps), "--threads", str(threads)]
    for k in KEYS:
        args += [f"--{k}", str(batch if k == "batch_size" else cfg[k])]
    if ranks > 1:
        args = [sys.executable, "-m", "flambeau.distributed.run", "--nproc-per-node", str(ranks), *args,
                "--parallel", "ddp"]
    return step_seconds(args, threads)


def torch_run(cfg, steps, ranks, threads, batch):
    args = [__file__, "--worker", json.dumps(cfg), str(steps), str(threads), str(batch)]
    if ranks > 1:
        args = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), *args]
    return step_seconds([sys.executable, *args], threads)


def step_seconds(cmd, threads):
    """Runs cmd; the step_ms of the JSON line it prints, in seconds."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed ({r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}")
    return json.loads(lines[-1])["step_ms"] / 1e3


def worker(cfg, steps, threads, batch):
    """One PyTorch process (a rank under torchrun): batch rows of the global batch."""
    import torch
    import torch.distributed as dist
    import gpt_reference
    torch.set_num_threads(threads)
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    if ranks > 1:
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = gpt_reference.Gpt(cfg)

    class Loss(torch.nn.Module):  # DDP hooks the forward
        def __init__(self):
            super().__init__()
            self.gpt = model

        def forward(self, x, y, d):
            return self.gpt.loss(x, y, d, cfg["z_loss"])

    net = Loss()
    if ranks > 1:
        net = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    rows = batch // ranks
    x = torch.randint(0, cfg["vocab_size"], (rows, cfg["seq_len"]))
    y = torch.randint(0, cfg["vocab_size"], (rows, cfg["seq_len"]))
    d = torch.zeros(rows, cfg["seq_len"], dtype=torch.long)

    def step():
        loss = net(x, y, d)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    median = statistics.median(times)
    if ranks > 1:
        t = torch.tensor([median], dtype=torch.float64)
        dist.all_reduce(t)
        median = float(t) / ranks
        dist.destroy_process_group()
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({"step_ms": median * 1e3}), flush=True)


def table(name, cfg, steps):
    b = cfg["batch_size"]
    cases = [("1 process x 1 thread", 1, 1, b), ("1 process x 2 threads", 1, 2, 2 * b),
             ("2 ranks x 1 thread (DDP)", 2, 1, 2 * b)]
    print(f"\n{name}: {json.dumps({k: cfg[k] for k in KEYS})}, {steps} steps, medians\n")
    print("| case | global batch | flambeau tok/s | torch tok/s | torch / flambeau (time) |")
    print("|---|---|---|---|---|")
    rates = {}
    for label, ranks, threads, batch in cases:
        tokens = batch * cfg["seq_len"]
        tf = flambeau_run(cfg, steps, ranks, threads, batch)
        tt = torch_run(cfg, steps, ranks, threads, batch)
        rates[label] = (tokens / tf, tokens / tt)
        print(f"| {label} | {batch} x {cfg['seq_len']} | {tokens / tf:.0f} | {tokens / tt:.0f} | {tt / tf:.2f}x |",
              flush=True)
    one = rates["1 process x 1 thread"]
    for label in ("1 process x 2 threads", "2 ranks x 1 thread (DDP)"):
        f, t = rates[label]
        print(f"- {label}: scaling over 1 x 1 thread: flambeau {f / one[0]:.2f}x, torch {t / one[1]:.2f}x")


def main():
    if sys.argv[1:2] == ["--worker"]:
        return worker(json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    args = [a for a in args if a != only]
    steps = int(args[0]) if args else 5
    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/Model name: *//p' | head -1"], capture_output=True,
                         text=True).stdout.strip()
    print(f"CPU: {cpu}, {os.cpu_count()} cores; 127.0.0.1, gloo")
    if only in (None, "main"):
        table("main-job model", MAIN, steps)
    if only in (None, "124m"):
        table("GPT-2 124M-sized model", GPT2, max(3, steps // 2))


if __name__ == "__main__":
    main()
