"""Observability benchmarks, flambeau beside PyTorch 2.13 on 2 threads, in one run.

1. The decode step of the main job's model (examples/gpt/fortunes.conf; one token through
   the KV cache, logits of the next): flambeau-gpt's eager decode_step, its static step
   (fixed buffers, attention over the whole cache under a mask) and that step's graph
   replay (flambeau.graphs, `flambeau-gpt bench-decode`), beside the same static step on
   bench/gpt_reference.py's model in PyTorch eager and under
   torch.compile(mode="reduce-overhead"). Time per token: the median over the positions
   0..N-1, the best of 3 rounds.
2. The profiler's overhead on a training step of the main job's model: flambeau-gpt bench
   without and with --profile, beside the PyTorch model's step without and with
   torch.profiler.profile(activities=[CPU]). Rounds alternate; medians.

Usage: .venv/bin/python bench/bench_observe.py [tokens] [steps] [rounds]"""
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import bench_gpt  # noqa: E402
import gpt_reference  # noqa: E402

ROOT = bench_gpt.ROOT
GPT = bench_gpt.GPT
CONF = os.path.join(ROOT, "examples", "gpt", "fortunes.conf")
CFG = bench_gpt.DEFAULT


def flambeau_decode(tokens):
    out = subprocess.run([GPT, "bench-decode", "--config", CONF, "--steps", str(tokens), "--threads", "2"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def torch_decoder(model, capacity):
    """The static decode step on the reference model: token [1, 1] and pos [1] tensors, the
    keys and values written at pos with index_copy_, SDPA over the whole cache under the
    mask keys <= pos (as flambeau's decode_step_static)."""
    d, H = CFG["d_model"], model.n_head
    D = d // H
    L = len(model.blocks)
    kc, vc = torch.zeros(L, 1, H, capacity, D), torch.zeros(L, 1, H, capacity, D)
    keys = torch.arange(capacity)
    half = D // 2

    def rot(x, c, s):
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)

    def step(token, pos):
        x = model.wte(token)
        c, s = model.cos[pos], model.sin[pos]
        mask = (keys <= pos).view(1, 1, 1, capacity)
        for layer, b in enumerate(model.blocks):
            h = b.attn_norm(x)
            q, k, v = (w(h).view(1, 1, H, D).transpose(1, 2) for w in (b.wq, b.wk, b.wv))
            q, k = rot(q, c, s), rot(k, c, s)
            kc[layer].index_copy_(2, pos, k)
            vc[layer].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, kc[layer], vc[layer], attn_mask=mask)
            x = x + b.wo(a.transpose(1, 2).reshape(1, 1, d))
            h = b.mlp_norm(x)
            x = x + b.w_down(F.silu(b.w_gate(h)) * b.w_up(h))
        return model.norm(x).view(d) @ model.wte.weight.T
    return step


def torch_per_token(step, tokens, rounds=3):
    ids = torch.randint(0, CFG["vocab_size"], (tokens,), generator=torch.Generator().manual_seed(0))
    best = float("inf")
    with torch.inference_mode():
        for _ in range(rounds):
            ts = []
            for i in range(tokens):
                token, pos = ids[i].view(1, 1), torch.tensor([i])
                t0 = time.perf_counter()
                step(token, pos)
                ts.append(time.perf_counter() - t0)
            best = min(best, statistics.median(ts))
    return best


def decode_table(tokens):
    torch.manual_seed(0)
    model = gpt_reference.Gpt(CFG).eval()
    eager = torch_per_token(torch_decoder(model, CFG["seq_len"]), tokens)
    try:
        compiled_step = torch.compile(torch_decoder(model, CFG["seq_len"]), mode="reduce-overhead")
        with torch.inference_mode():
            for i in range(3):  # compile (and any recompilation) outside the timing
                compiled_step(torch.zeros(1, 1, dtype=torch.long), torch.tensor([i]))
        compiled = torch_per_token(compiled_step, tokens)
        comp_text = f"{compiled * 1e3:.3f} ms"
    except Exception as e:  # noqa: BLE001 - report why compile is unavailable
        compiled, comp_text = None, f"n/a ({type(e).__name__})"
    fl = flambeau_decode(tokens)
    g, e, s = fl["graph_ms"], fl["eager_ms"], fl["static_ms"]
    print(f"decode step, main-job model ({CFG['n_layer']} layers, d_model {CFG['d_model']}, cache of "
          f"{CFG['seq_len']}), {tokens} tokens from position 0, per token (median), best of 3 rounds; "
          f"the graph holds {fl['nodes']} nodes")
    print("| flambeau eager decode_step | flambeau static step, eager | flambeau graph replay | PyTorch eager | "
          "torch.compile(reduce-overhead) | replay vs flambeau eager | replay vs PyTorch eager | "
          "replay vs torch.compile |")
    print("|---|---|---|---|---|---|---|---|")
    vs_comp = f"{compiled * 1e3 / g:.2f}x" if compiled else ""
    print(f"| {e:.3f} ms | {s:.3f} ms | {g:.3f} ms | {eager * 1e3:.3f} ms | {comp_text} | {e / g:.2f}x | "
          f"{eager * 1e3 / g:.2f}x | {vs_comp} |")


def flambeau_train(steps, profile):
    args = [GPT, "bench", "--steps", str(steps), "--threads", "2"] + (["--profile"] if profile else [])
    for k in ("vocab_size", "n_layer", "n_head", "d_model", "seq_len", "batch_size", "z_loss"):
        args += [f"--{k}", str(CFG[k])]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["step_ms"] / 1e3


def torch_train(step, steps, profile):
    if not profile:
        return bench_gpt.torch_step(step, steps)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        return bench_gpt.torch_step(step, steps)


def profiler_table(steps, rounds):
    step = bench_gpt.torch_stepper(CFG)
    t = {k: [] for k in ("fl_off", "fl_on", "th_off", "th_on")}
    for _ in range(rounds):
        t["fl_off"].append(flambeau_train(steps, False))
        t["fl_on"].append(flambeau_train(steps, True))
        t["th_off"].append(torch_train(step, steps, False))
        t["th_on"].append(torch_train(step, steps, True))
    m = {k: statistics.median(v) * 1e3 for k, v in t.items()}
    print(f"profiler overhead, training step of the main-job model (B={CFG['batch_size']}, T={CFG['seq_len']}), "
          f"{steps} steps x {rounds} rounds, medians")
    print("| flambeau off | flambeau profiling | flambeau overhead | PyTorch off | torch.profiler on | "
          "PyTorch overhead |")
    print("|---|---|---|---|---|---|")
    print(f"| {m['fl_off']:.1f} ms | {m['fl_on']:.1f} ms | {100 * (m['fl_on'] / m['fl_off'] - 1):+.1f}% | "
          f"{m['th_off']:.1f} ms | {m['th_on']:.1f} ms | {100 * (m['th_on'] / m['th_off'] - 1):+.1f}% |")


def main(tokens=128, steps=5, rounds=3):
    torch.set_num_threads(2)
    print(subprocess.run([GPT, "bench-decode", "--steps", "2", "--n_layer", "1", "--d_model", "32", "--n_head", "2"],
                         capture_output=True, text=True).stderr.strip().splitlines()[0])
    decode_table(tokens)
    print()
    profiler_table(steps, rounds)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
