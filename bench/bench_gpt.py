"""flambeau-gpt's training speed against the same model in PyTorch 2.13 (bench/gpt_reference.py),
2 threads, in one run: training tokens/s of the main job's config (examples/gpt/fortunes.conf),
on random tokens with one document per row (PyTorch's SDPA takes its causal fast path) and
on the main job's own batches (packed fortunes with document masks; PyTorch's SDPA takes
the dense bool mask), flambeau eager and --compile, PyTorch eager and, if it works here,
torch.compile; then the step time of a GPT-2 124M-sized configuration (12
layers, d_model 768, 12 heads, vocabulary 50257; B=4, T=64) with its GFLOP/s next to the
machine's float32 GEMM rate (torch.mm 2048^3, 2 threads).

flambeau runs as `flambeau-gpt bench` (AdamW step and gradient clipping included, as in
the PyTorch loop); rounds alternate between the two, medians.
Usage: .venv/bin/python bench/bench_gpt.py [steps] [rounds]"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import safetensors.torch

import torch

sys.path.insert(0, os.path.dirname(__file__))
import gpt_reference  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
GPT = os.environ.get("FLAMBEAU_GPT", os.path.join(ROOT, "build", "release", "flambeau-gpt"))
# The main job's model and batch (examples/gpt/fortunes.conf; the rest are flambeau-gpt's defaults).
with open(os.path.join(ROOT, "examples", "gpt", "fortunes.conf")) as f:
    _conf = gpt_reference.parse_config(f.read())
DEFAULT = dict(vocab_size=256, n_layer=4, n_head=4, d_model=256, seq_len=256, window=0, rope_theta=10000.0,
               batch_size=16, z_loss=1e-4)
DEFAULT.update({k: v for k, v in _conf.items() if k in DEFAULT})


def flambeau_step(cfg, steps, fortunes=False, dtype="fp32", compiled=False):
    args = [GPT, "bench", "--steps", str(steps), "--threads", "2", "--dtype", dtype] + (["--fortunes"] if fortunes else [])
    args += ["--compile"] if compiled else []
    for k in ("vocab_size", "n_layer", "n_head", "d_model", "seq_len", "batch_size", "z_loss"):
        args += [f"--{k}", str(cfg[k])]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["step_ms"] / 1e3


def fortunes_batch(cfg):
    """The main job's first training batch (packed fortunes and their document ids), as
    flambeau-gpt makes it: dumped by `flambeau-gpt grads`."""
    args = [GPT, "grads", "--config", os.path.join(ROOT, "examples", "gpt", "fortunes.conf")]
    for k in ("vocab_size", "n_layer", "n_head", "d_model", "seq_len", "batch_size"):
        args += [f"--{k}", str(cfg[k])]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(args + ["--out", os.path.join(d, "b.safetensors")], check=True, capture_output=True)
        t = safetensors.torch.load_file(os.path.join(d, "b.safetensors"))
    return t["inputs"], t["targets"], t["doc_ids"]


def torch_stepper(cfg, compiled=False, batch=None, autocast=False):
    torch.manual_seed(0)
    model = gpt_reference.Gpt(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    B, T = cfg["batch_size"], cfg["seq_len"]
    if batch is not None:
        x, y, docs = batch
    else:
        x = torch.randint(0, cfg["vocab_size"], (B, T))
        y = torch.randint(0, cfg["vocab_size"], (B, T))
        docs = torch.zeros(B, T, dtype=torch.long)
    loss_fn = torch.compile(model.loss) if compiled else model.loss

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(x, y, docs, cfg["z_loss"])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return step


def torch_step(step, steps):
    step()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def flops(cfg):
    d, h, L, V, T = cfg["d_model"], (cfg["d_model"] * 8 // 3 + 63) // 64 * 64, cfg["n_layer"], cfg["vocab_size"], cfg["seq_len"]
    weights = L * (4 * d * d + 3 * d * h) + V * d
    return 3 * (2 * weights + L * 4 * T * d) * cfg["batch_size"] * T


def gemm_gflops():
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    torch.mm(a, b)
    t = min(timeit_once(lambda: torch.mm(a, b)) for _ in range(5))
    return 2 * 2048**3 / t / 1e9


def timeit_once(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main_job_row(name, steps, rounds, batch=None):
    """flambeau eager and --compile, PyTorch eager (alternating rounds, medians), then torch.compile."""
    tokens = DEFAULT["batch_size"] * DEFAULT["seq_len"]
    eager = torch_stepper(DEFAULT, batch=batch)
    fl_t, flc_t, th_t = [], [], []
    for _ in range(rounds):
        th_t.append(torch_step(eager, steps))
        fl_t.append(flambeau_step(DEFAULT, steps, fortunes=batch is not None))
        flc_t.append(flambeau_step(DEFAULT, steps, fortunes=batch is not None, compiled=True))
    fl, flc, th = statistics.median(fl_t), statistics.median(flc_t), statistics.median(th_t)
    try:
        comp = torch_step(torch_stepper(DEFAULT, compiled=True, batch=batch), steps)
        comp_text, vs_comp = f"{tokens / comp:.0f} tok/s ({comp * 1e3:.0f} ms/step)", f"{comp / flc:.2f}x"
    except Exception as e:  # noqa: BLE001 - report why compile is unavailable
        comp_text, vs_comp = f"n/a ({type(e).__name__})", ""
    rate = lambda t: f"{tokens / t:.0f} tok/s ({t * 1e3:.0f} ms/step)"  # noqa: E731
    print(f"| {name} | {rate(fl)} | {rate(flc)} | {rate(th)} | {comp_text} | {th / fl:.2f}x | {vs_comp} |")


def main(steps=5, rounds=2):
    torch.set_num_threads(2)
    print(f"threads 2; default config {DEFAULT}; {steps} steps x {rounds} rounds, medians")
    print("| case | flambeau | flambeau --compile | PyTorch eager | torch.compile | PyTorch eager / flambeau | "
          "torch.compile / flambeau --compile |")
    print("|---|---|---|---|---|---|---|")
    main_job_row(f"train tokens/s, main-job config (B={DEFAULT['batch_size']}, T={DEFAULT['seq_len']})", steps, rounds)
    batch = fortunes_batch(DEFAULT)
    docs_per_row = float((batch[2].diff(dim=1) != 0).sum(1).float().mean() + 1)
    main_job_row(f"same, on the main job's batches (packed fortunes, {docs_per_row:.1f} documents per row: document "
                 "masks; PyTorch SDPA with the bool mask)", steps, rounds, batch)
    big = dict(DEFAULT, vocab_size=50257, n_layer=12, n_head=12, d_model=768, seq_len=64, batch_size=4)
    fl_big = flambeau_step(big, max(2, steps // 2))
    th_big = torch_step(torch_stepper(big), max(2, steps // 2))
    peak = gemm_gflops()
    f = flops(big)
    print(f"| GPT-2 124M-sized step (B=4, T=64) | {fl_big * 1e3:.0f} ms, {f / fl_big / 1e9:.1f} GFLOP/s | "
          f"| {th_big * 1e3:.0f} ms, {f / th_big / 1e9:.1f} GFLOP/s | | {th_big / fl_big:.2f}x | |")
    fl_bf16 = flambeau_step(big, max(2, steps // 2), dtype="bf16")
    th_bf16 = torch_step(torch_stepper(big, autocast=True), max(2, steps // 2))
    print(f"| same, bf16 (flambeau --dtype bf16: bf16 GEMM operands, fp32 master weights; PyTorch eager under "
          f"torch.autocast(bfloat16)) | {fl_bf16 * 1e3:.0f} ms ({fl_big / fl_bf16:.2f}x flambeau's fp32) | "
          f"| {th_bf16 * 1e3:.0f} ms | | {th_bf16 / fl_bf16:.2f}x | |")
    print(f"machine: torch.mm 2048^3 float32 on 2 threads = {peak:.1f} GFLOP/s (the practical peak)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
