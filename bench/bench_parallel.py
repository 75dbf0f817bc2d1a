"""Data-parallel training speed, flambeau against PyTorch 2.13 (gloo, the same model: bench/
gpt_reference.py), in one run on this machine: training tokens/s of flambeau-gpt's main-job
model (B=8 x T=256 per step) and of a GPT-2 124M-sized one (12 layers, d_model 768, 12
heads, vocabulary 50257; B=4 x T=64 per rank), each as 1 process x 1 thread, 1 process x 2
threads and 2 ranks x 1 thread with DistributedDataParallel and with FSDP2 (the same global
batch as the 2-thread process). AdamW and gradient clipping included, random tokens, medians of the
steps after a warm-up one.

flambeau runs `flambeau-gpt bench` (--parallel ddp or fsdp under flambeau-run for 2 ranks);
PyTorch runs this file's worker (DistributedDataParallel, or fully_shard per block and on
the root, under torchrun's launcher for 2 ranks).
Then FSDP2 against PyTorch's FSDP2 on a stack of transformer blocks written once for both
libraries (examples/transformer_block.py; 8 blocks, d_model 512, B=4 x T=64 per rank, 2
ranks x 1 thread): DDP, fully_shard per block + root, and fully_shard with the separate
reduce-scatter group; flambeau's peak memory per rank under FSDP2 against (parameters +
gradients + AdamW state) / ranks + the largest block's unsharded parameters.
Usage: .venv/bin/python bench/bench_parallel.py [steps] [--only main|124m|fsdp]"""
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


def flambeau_run(cfg, steps, ranks, threads, batch, mode="ddp"):
    args = [GPT, "bench", "--steps", str(steps), "--threads", str(threads)]
    for k in KEYS:
        args += [f"--{k}", str(batch if k == "batch_size" else cfg[k])]
    if ranks > 1:
        args = [sys.executable, "-m", "flambeau.distributed.run", "--nproc-per-node", str(ranks), *args,
                "--parallel", "fsdp" if mode.startswith("fsdp") else mode]
        if mode == "fsdp_rs":
            args += ["--fsdp_reduce_scatter", "separate"]
    return step_seconds(args, threads)


def torch_run(cfg, steps, ranks, threads, batch, mode="ddp"):
    args = [__file__, "--worker", json.dumps(cfg), str(steps), str(threads), str(batch), mode]
    if ranks > 1:
        args = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks), *args]
    return step_seconds([sys.executable, *args], threads)


def step_seconds(cmd, threads, tries=2):
    """Runs cmd; the step_ms of the JSON line it prints, in seconds. A failed run is tried
    once more (torch's FSDP2 with a separate reduce-scatter group sometimes aborts at exit:
    "terminate called without an active exception")."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        if tries > 1:
            print(f"(a run failed with {r.returncode}; trying it again)", file=sys.stderr)
            return step_seconds(cmd, threads, tries - 1)
        raise RuntimeError(f"{' '.join(cmd[:6])} ... failed ({r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}")
    return json.loads(lines[-1])["step_ms"] / 1e3


def worker(cfg, steps, threads, batch, mode):
    """One PyTorch process (a rank under torchrun): batch rows of the global batch; mode
    ddp (DistributedDataParallel) or fsdp (fully_shard per block and on the root)."""
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
    if ranks > 1 and mode.startswith("fsdp"):
        from torch.distributed.fsdp import fully_shard
        for b in model.blocks:
            fully_shard(b)
        fully_shard(net)
        if mode == "fsdp_rs":
            net.set_separate_reduce_scatter_group(True)
    elif ranks > 1:
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


BLOCKS = dict(layers=8, d=512, heads=8, batch=4, seq=64)


def fsdp_worker(lib, mode, steps):
    """One rank of the block-stack benchmark: mode ddp, fsdp or fsdp_rs (separate group)."""
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from transformer_block import block
    if lib == "torch":
        import torch as L
        import torch.distributed as D
        from torch.distributed.fsdp import fully_shard
        from torch.nn.parallel import DistributedDataParallel as DDP
        L.set_num_threads(1)
    else:
        import flambeau as L
        import flambeau.distributed as D
        from flambeau.distributed.fsdp import fully_shard
        from flambeau.nn.parallel import DistributedDataParallel as DDP
        L.set_num_threads(1)
    D.init_process_group("gloo")
    c = BLOCKS
    L.manual_seed(0)
    blocks = [block(L.nn, L.nn.functional, c["d"], c["heads"]) for _ in range(c["layers"])]
    model = L.nn.Sequential(*blocks)
    if mode == "ddp":
        net = DDP(model)
    else:
        for b in blocks:
            fully_shard(b)
        net = fully_shard(model)
        if mode == "fsdp_rs":
            net.set_separate_reduce_scatter_group(True)
    opt = L.optim.AdamW(net.parameters(), lr=1e-4)
    x = L.randn(c["batch"], c["seq"], c["d"])

    def step():
        net(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()

    step()
    if lib == "flambeau":
        L._C.memory.reset_peak_stats()
        base = L._C.memory.allocated()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    out = {"step_ms": statistics.median(times) * 1e3}
    if lib == "flambeau":
        out["peak_mb"] = (L._C.memory.max_allocated()) / 2**20
        out["base_mb"] = base / 2**20
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(out), flush=True)
    D.destroy_process_group()


def fsdp_run(lib, mode, steps):
    launcher = ["-m", "flambeau.distributed.run"] if lib == "flambeau" else ["-m", "torch.distributed.run", "--standalone"]
    cmd = [sys.executable, *launcher, "--nproc-per-node", "2", __file__, "--fsdp-worker", lib, mode, str(steps)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{lib} {mode} failed ({r.returncode}):\n{(r.stdout + r.stderr)[-3000:]}")
    return json.loads(lines[-1])


def fsdp_table(steps):
    c = BLOCKS
    tokens = 2 * c["batch"] * c["seq"]
    print(f"\nblock stack: {json.dumps(c)}, 2 ranks x 1 thread, {steps} steps, medians\n")
    print("| case | flambeau tok/s | torch tok/s | torch / flambeau (time) |")
    print("|---|---|---|---|")
    res = {}
    for mode, label in (("ddp", "DDP"), ("fsdp", "FSDP2 (fully_shard per block + root)"),
                        ("fsdp_rs", "FSDP2, separate reduce-scatter group")):
        f, t = fsdp_run("flambeau", mode, steps), fsdp_run("torch", mode, steps)
        res[mode] = (f, t)
        print(f"| {label} | {tokens / f['step_ms'] * 1e3:.0f} | {tokens / t['step_ms'] * 1e3:.0f} | "
              f"{t['step_ms'] / f['step_ms']:.2f}x |", flush=True)
    (f0, t0), (f1, t1) = res["fsdp"], res["fsdp_rs"]
    print(f"- separate reduce-scatter group: flambeau {f0['step_ms'] / f1['step_ms'] - 1:+.1%}, "
          f"torch {t0['step_ms'] / t1['step_ms'] - 1:+.1%} tokens/s")
    d, h = c["d"], 4 * c["d"]
    block_params = 3 * d * d + 3 * d + d * d + d + d * h + h + h * d + d + 4 * d
    total = c["layers"] * block_params
    expect = (total * 4 * 4) / 2 / 2**20 + block_params * 4 / 2**20  # params, grads, exp_avg, exp_avg_sq
    print(f"- flambeau peak memory per rank under FSDP2: {f0['peak_mb']:.1f} MiB (of which {f0['base_mb']:.1f} "
          f"MiB held between steps); (params + grads + AdamW) / 2 + the largest block unsharded = {expect:.1f} MiB")


def table(name, cfg, steps):
    b = cfg["batch_size"]
    cases = [("1 process x 1 thread", 1, 1, b, "ddp"), ("1 process x 2 threads", 1, 2, 2 * b, "ddp"),
             ("2 ranks x 1 thread (DDP)", 2, 1, 2 * b, "ddp"), ("2 ranks x 1 thread (FSDP2)", 2, 1, 2 * b, "fsdp"),
             ("2 ranks x 1 thread (FSDP2, separate reduce-scatter group)", 2, 1, 2 * b, "fsdp_rs")]
    print(f"\n{name}: {json.dumps({k: cfg[k] for k in KEYS})}, {steps} steps, medians\n")
    print("| case | global batch | flambeau tok/s | torch tok/s | torch / flambeau (time) |")
    print("|---|---|---|---|---|")
    rates = {}
    for label, ranks, threads, batch, mode in cases:
        tokens = batch * cfg["seq_len"]
        tf = flambeau_run(cfg, steps, ranks, threads, batch, mode)
        tt = torch_run(cfg, steps, ranks, threads, batch, mode)
        rates[label] = (tokens / tf, tokens / tt)
        print(f"| {label} | {batch} x {cfg['seq_len']} | {tokens / tf:.0f} | {tokens / tt:.0f} | {tt / tf:.2f}x |",
              flush=True)
    one = rates["1 process x 1 thread"]
    for label in ("1 process x 2 threads", "2 ranks x 1 thread (DDP)", "2 ranks x 1 thread (FSDP2)"):
        f, t = rates[label]
        print(f"- {label}: scaling over 1 x 1 thread: flambeau {f / one[0]:.2f}x, torch {t / one[1]:.2f}x")
    f, t = rates["2 ranks x 1 thread (FSDP2, separate reduce-scatter group)"]
    f0, t0 = rates["2 ranks x 1 thread (FSDP2)"]
    print(f"- separate reduce-scatter group: flambeau {100 * (f / f0 - 1):+.1f}%, torch {100 * (t / t0 - 1):+.1f}% tokens/s")


def main():
    if sys.argv[1:2] == ["--fsdp-worker"]:
        return fsdp_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if sys.argv[1:2] == ["--worker"]:
        return worker(json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
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
    if only in (None, "fsdp"):
        fsdp_table(steps)


if __name__ == "__main__":
    main()
