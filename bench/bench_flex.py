"""FlexAttention benchmarks, flambeau vs PyTorch 2.13 in one process, 2 threads, float32,
alternating runs, medians; ratio = torch time / flambeau time (> 1: flambeau faster).
Rows: (a) dense causal B=1 H=8 S=4096 D=64 vs SDPA(is_causal) and torch flex_attention;
(b) causal sliding window 256 at S=32768 (0.8% density) vs causal SDPA; (c) 8 packed
documents (document + causal) at S=8192 vs SDPA with the dense mask; (d) decode: one query
vs a 32768-long KV cache; (e) create_block_mask time and peak memory at S=131072.
GFLOP/s count only the attended (q, kv) pairs: 4*D per pair forward, 14*D forward+backward.
torch's flex_attention runs eagerly on the CPU (no backward there; its eager path
materialises the B*H*S*S scores, so it only runs where that fits).
Usage: .venv/bin/python bench/bench_flex.py [reps]   (prints a Markdown table)"""
import sys

import numpy as np
import torch
import torch.nn.functional as TF
from torch.nn.attention import flex_attention as tfa

import flambeau as fl
from flambeau.nn.attention import flex_attention as ffa
from timing import pair, timed


def qkv(B, H, L, S, D, grad, seed=0):
    r = np.random.default_rng(seed)
    a = [r.standard_normal(s).astype(np.float32) for s in ((B, H, L, D), (B, H, S, D), (B, H, S, D))]
    return [fl.tensor(x, requires_grad=grad) for x in a], [torch.tensor(x, requires_grad=grad) for x in a]


def fwd_bwd(fn):
    def run():
        fn().sum().backward()
    return run


def main(reps=5):
    fl.set_num_threads(2)
    torch.set_num_threads(2)
    rows = []  # (name, flambeau s, torch s, flops or None, torch label)

    def add(name, f, t, r, flops, label):
        fs, ts = pair(f, t, r)
        rows.append((name, fs, ts, flops, label))
        print(f"  {name} [{label}]: {fs * 1e3:.1f} ms vs {ts * 1e3:.1f} ms", file=sys.stderr, flush=True)

    # Practical fp32 peak of this machine: a large sgemm.
    a, b = fl.randn(2048, 2048), fl.randn(2048, 2048)
    g = min(timed(lambda: a @ b) for _ in range(3))
    peak = 2 * 2048 ** 3 / g / 1e9

    # (a) dense causal.
    B, H, S, D = 1, 8, 4096, 64
    (fq, fk, fv), (tq, tk, tv) = qkv(B, H, S, S, D, False)
    fbm = ffa.create_block_mask(ffa.causal_mask, 1, 1, S, S)
    tbm = tfa.create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, S, S, device="cpu")
    flops = 4 * D * B * H * S * (S + 1) / 2
    with fl.no_grad(), torch.no_grad():
        add("(a) causal S=4096 forward", lambda: ffa.flex_attention(fq, fk, fv, block_mask=fbm),
            lambda: TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True), reps, flops, "SDPA is_causal")
        add("(a) causal S=4096 forward", lambda: ffa.flex_attention(fq, fk, fv, block_mask=fbm),
            lambda: tfa.flex_attention(tq, tk, tv, block_mask=tbm), max(2, reps // 2), flops, "torch flex_attention")
    (fq, fk, fv), (tq, tk, tv) = qkv(B, H, S, S, D, True)
    add("(a) causal S=4096 fwd+bwd", fwd_bwd(lambda: ffa.flex_attention(fq, fk, fv, block_mask=fbm)),
        fwd_bwd(lambda: TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True)), reps, 3.5 * flops,
        "SDPA is_causal")

    # (b) sliding window 256 at S=32768.
    S, W = 32768, 256
    (fq, fk, fv), (tq, tk, tv) = qkv(B, H, S, S, D, False)
    fbm = ffa.create_block_mask(ffa.sliding_window(W), 1, 1, S, S)
    pairs = sum(min(i + 1, W + 1) for i in range(S))
    flops = 4 * D * B * H * pairs
    with fl.no_grad(), torch.no_grad():
        add(f"(b) window 256 S=32768 forward ({100 - fbm.sparsity():.1f}% blocks)",
            lambda: ffa.flex_attention(fq, fk, fv, block_mask=fbm),
            lambda: TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True), 2, flops, "SDPA is_causal")
    (fq, fk, fv), (tq, tk, tv) = qkv(B, H, S, S, D, True)
    add("(b) window 256 S=32768 fwd+bwd", fwd_bwd(lambda: ffa.flex_attention(fq, fk, fv, block_mask=fbm)),
        fwd_bwd(lambda: TF.scaled_dot_product_attention(tq, tk, tv, is_causal=True)), 1, 3.5 * flops,
        "SDPA is_causal")

    # (c) 8 packed documents of random lengths at S=8192, document + causal.
    S = 8192
    r = np.random.default_rng(1)
    cuts = np.sort(r.choice(np.arange(1, S), 7, replace=False))
    doc = np.repeat(np.arange(8), np.diff(np.concatenate([[0], cuts, [S]])))
    fbm = ffa.create_block_mask(ffa.and_masks(ffa.document_mask(fl.tensor(doc)), ffa.causal_mask), 1, 1, S, S)
    td = torch.tensor(doc)
    dense = (td[:, None] == td[None, :]) & torch.tril(torch.ones(S, S, dtype=torch.bool))
    flops = 4 * D * B * H * int(dense.sum())
    (fq, fk, fv), (tq, tk, tv) = qkv(B, H, S, S, D, False)
    with fl.no_grad(), torch.no_grad():
        add("(c) 8 documents S=8192 forward", lambda: ffa.flex_attention(fq, fk, fv, block_mask=fbm),
            lambda: TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=dense), reps, flops, "SDPA bool mask")
    (fq, fk, fv), (tq, tk, tv) = qkv(B, H, S, S, D, True)
    add("(c) 8 documents S=8192 fwd+bwd", fwd_bwd(lambda: ffa.flex_attention(fq, fk, fv, block_mask=fbm)),
        fwd_bwd(lambda: TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=dense)), max(2, reps // 2),
        3.5 * flops, "SDPA bool mask")

    # (d) decode: one query against a 32768-long cache.
    S = 32768
    (fq, fk, fv), (tq, tk, tv) = qkv(B, H, 1, S, D, False)
    flops = 4 * D * B * H * S
    with fl.no_grad(), torch.no_grad():
        add("(d) decode 1 x 32768", lambda: ffa.flex_attention(fq, fk, fv),
            lambda: TF.scaled_dot_product_attention(tq, tk, tv), reps * 4, flops, "SDPA")
        add("(d) decode 1 x 32768", lambda: ffa.flex_attention(fq, fk, fv),
            lambda: tfa.flex_attention(tq, tk, tv), reps, flops, "torch flex_attention")

    # (e) create_block_mask: native mods at S=131072 (torch's eager create_block_mask would
    # materialise a 131072^2 bool mask, 17 GB), Python mask_mods vs torch at S=16384.
    mem = []
    for name, mod in (("causal", ffa.causal_mask), ("sliding_window(256)", ffa.sliding_window(256))):
        fl.memory.reset_peak_stats()
        base = fl.memory.allocated()
        t = min(timed(lambda: ffa.create_block_mask(mod, 1, 1, 131072, 131072)) for _ in range(3))
        mem.append((f"(e) create_block_mask {name} S=131072 (native)", t, (fl.memory.max_allocated() - base) / 2 ** 20))
    S = 16384
    causal_py = lambda b, h, q, kv: q >= kv  # noqa: E731
    fl.memory.reset_peak_stats()
    base = fl.memory.allocated()
    fs, ts = pair(lambda: ffa.create_block_mask(causal_py, 1, 1, S, S),
                  lambda: tfa.create_block_mask(causal_py, 1, 1, S, S, device="cpu"), 2)
    peak_py = (fl.memory.max_allocated() - base) / 2 ** 20

    print(f"2 threads, float32; practical sgemm peak of this machine: {peak:.0f} GFLOP/s (2048^3 matmul)\n")
    print("| case | vs | flambeau ms | torch ms | torch/flambeau | flambeau GFLOP/s | torch GFLOP/s |")
    print("|---|---|---|---|---|---|---|")
    for name, f, t, flops, label in rows:
        print(f"| {name} | {label} | {f * 1e3:.1f} | {t * 1e3:.1f} | {t / f:.2f} | {flops / f / 1e9:.1f} | "
              f"{flops / t / 1e9:.1f} |")
    print(f"| (e) create_block_mask Python `q >= kv` S=16384 | torch create_block_mask | {fs * 1e3:.1f} | "
          f"{ts * 1e3:.1f} | {ts / fs:.2f} | peak {peak_py:.1f} MiB | |")
    print("\n| create_block_mask | ms | peak flambeau memory (MiB) |")
    print("|---|---|---|")
    for name, t, m in mem:
        print(f"| {name} | {t * 1e3:.1f} | {m:.1f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
