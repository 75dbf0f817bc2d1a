"""flambeau.compile against flambeau eager, torch eager and torch.compile (inductor), in one
process, the four alternating call by call, medians; each compiled result is checked
against its eager one in the same run (flambeau's cpp backend: bitwise). Cases:
- a 10-op pointwise chain on 4M float32 elements, and on 1K elements;
- RMSNorm written with ops (x * rsqrt(mean(x^2) + eps) * w) on [4096, 1024], next to
  flambeau's fused rms_norm;
- flex_attention with a mask_mod written in Python (window 256, S=8192) against the native
  sliding_window mod, create_block_mask included;
- flex_attention with a score_mod written in Python (tanh softcap: causal S=2048, window 256
  S=8192), forward and forward + backward, against the native tanh_softcap mod.
- GEMM templates (mlp_template, llama_template): an MLP 1024-4096-1024 (bias, GELU) on 512
  tokens and a Llama-style block (d 512, 8 heads, T 128, B 4: RMSNorm, q/k/v/o projections,
  causal SDPA, SwiGLU 1536, residual adds) in inference, flambeau.compile with
  gemm_backends ["blas"], ["template"] and the default, checked against eager within the
  GEMM's rounding (BLAS blocks may regroup the sum over k);
Then compile times: flambeau cold (an empty cache directory) and warm (a new process, the
same cache: no compiler run), torch.compile cold (fresh inductor cache). 2 threads.
- an MLP (1024-4096-1024) and a Llama-style block (d 512, 8 heads, T 128, B 4), inference
  and train step (forward and backward; compiled training: aot.h), checked within 1e-4;
Usage: .venv/bin/python bench/bench_compile.py [reps] [score_mod | models | templates]  (that case only)"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from timing import timed  # noqa: E402

import torch  # noqa: E402

import flambeau as fl  # noqa: E402


CHAIN = """
def chain(lib):
    def ten(x, y):
        return ((((lib.sin(x) * 1.5 + y).tanh() * 0.5).exp() - 1).sigmoid() * x).relu() + y
    return ten
"""
_ns = {}
exec(CHAIN, _ns)  # the same source runs in the compile-time subprocesses
chain = _ns["chain"]


def rms(lib):
    def norm(x, w):
        return x * lib.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    return norm


def models(lib):
    """The MLP (1024-4096-1024, GELU) and a Llama-style block (RMSNorm, causal attention with
    8 heads, SwiGLU) as lib's modules."""
    nn, F = lib.nn, lib.nn.functional

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.down = nn.Linear(1024, 4096), nn.Linear(4096, 1024)

        def forward(self, x):
            return self.down(F.gelu(self.up(x)))

    class Block(nn.Module):
        def __init__(self, d=512, heads=8):
            super().__init__()
            self.heads = heads
            self.n1, self.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
            self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
            self.gate, self.up = nn.Linear(d, 4 * d, bias=False), nn.Linear(d, 4 * d, bias=False)
            self.down = nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.n1(x)).split(C, dim=-1)
            q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(B, T, C))
            h = self.n2(x)
            return x + self.down(F.silu(self.gate(h)) * self.up(h))

    return {"mlp": Mlp, "block": Block}


def model_case(name, kind, shape, reps, train):
    """A model's inference (no_grad) or train step (forward, backward of the sum): the four
    side by side; flambeau's weights are torch's."""
    torch.manual_seed(0)
    tm = models(torch)[kind]()
    fm = models(fl)[kind]()
    with fl.no_grad():
        for p, q in zip(fm.parameters(), tm.parameters()):
            p.copy_(fl.from_dlpack(q.detach().clone()))
    tx = torch.randn(*shape, generator=torch.Generator().manual_seed(1), requires_grad=train)
    fx = fl.from_dlpack(tx.detach().clone()).requires_grad_(train)
    fc, tc = fl.compile(fm), torch.compile(tm)

    def step(lib, model, x):
        if not train:
            with lib.no_grad():
                return model(x)
        for p in model.parameters():
            p.grad = None
        y = model(x)
        y.sum().backward()
        return y

    got, want = step(fl, fc, fx), step(fl, fm, fx)
    err = float((got - want).abs().max().item())
    assert err <= 1e-4 * (1 + float(want.abs().max().item())), f"{name}: flambeau.compile differs from eager ({err})"
    fns = [lambda: step(fl, fm, fx), lambda: step(fl, fc, fx), lambda: step(torch, tm, tx), lambda: step(torch, tc, tx)]
    t = medians(fns, reps)
    print(f"| {name} | {t[0] * 1e3:.3f} | {t[1] * 1e3:.3f} | {t[2] * 1e3:.3f} | {t[3] * 1e3:.3f} | "
          f"{t[0] / t[1]:.2f}x | {t[3] / t[1]:.2f}x |", flush=True)


def medians(fns, reps):
    """Median seconds of each fn, run in turn (after two untimed calls each)."""
    for f in fns:
        f(), f()
    times = [[] for _ in fns]
    for _ in range(reps):
        for i, f in enumerate(fns):
            times[i].append(timed(f))
    return [statistics.median(t) for t in times]


def case(name, make, shapes, reps, fused=None):
    gen = torch.Generator().manual_seed(0)
    tin = [torch.randn(*s, generator=gen) for s in shapes]
    fin = [fl.from_dlpack(t.clone()) for t in tin]
    fe, te = make(fl), make(torch)
    fc = fl.compile(fe)
    tc = torch.compile(te)
    got, want = fc(*fin), fe(*fin)
    assert bool((got == want).all()), f"{name}: flambeau.compile differs from eager"
    tw, tg = te(*tin), tc(*tin)
    assert torch.allclose(tg, tw, rtol=1e-5, atol=1e-5), f"{name}: torch.compile differs from eager"
    fns = [lambda: fe(*fin), lambda: fc(*fin), lambda: te(*tin), lambda: tc(*tin)]
    if fused is not None:
        fns.append(lambda: fused(*fin))
    t = medians(fns, reps)
    row = (f"| {name} | {t[0] * 1e3:.3f} | {t[1] * 1e3:.3f} | {t[2] * 1e3:.3f} | {t[3] * 1e3:.3f} | "
           f"{t[0] / t[1]:.2f}x | {t[3] / t[1]:.2f}x |")
    if fused is not None:
        row += f" fused rms_norm {t[4] * 1e3:.3f} ms: compiled / fused {t[4] / t[1]:.2f}x |"
    print(row, flush=True)


def mlp(lib):
    F = lib.nn.functional

    def run(x, w1, b1, w2, b2):
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
    return run


def llama(lib, B=4, T=128, d=512, H=8):
    F = lib.nn.functional

    def run(x, n1, wq, wk, wv, wo, n2, wg, wu, wd):
        def heads(t):
            return t.reshape(B, T, H, d // H).transpose(1, 2)
        h = F.rms_norm(x, (d,), n1, 1e-6)
        a = F.scaled_dot_product_attention(heads(F.linear(h, wq)), heads(F.linear(h, wk)), heads(F.linear(h, wv)),
                                           is_causal=True)
        x = x + F.linear(a.transpose(1, 2).reshape(B, T, d), wo)
        h = F.rms_norm(x, (d,), n2, 1e-6)
        return x + F.linear(F.silu(F.linear(h, wg)) * F.linear(h, wu), wd)
    return run


def template_case(name, make, shapes, reps):
    """flambeau eager, flambeau.compile with gemm_backends blas / template / the default,
    torch eager, torch.compile; ratios against torch.compile."""
    gen = torch.Generator().manual_seed(0)
    tin = [torch.randn(*s, generator=gen) * (1.0 if i == 0 or len(s) == 1 else s[-1] ** -0.5)
           for i, s in enumerate(shapes)]
    fin = [fl.from_dlpack(t.clone()) for t in tin]
    fe, te = make(fl), make(torch)
    variants = {"blas": {"gemm_backends": ["blas"]}, "template": {"gemm_backends": ["template"]}, "default": None}
    fcs = {k: fl.compile(fe, options=o) for k, o in variants.items()}
    tc = torch.compile(te)
    with fl.no_grad(), torch.no_grad():
        want = fe(*fin)
        for k, f in fcs.items():
            f(*fin)
            err = float((f(*fin) - want).abs().max())
            assert err < 1e-3, f"{name}: flambeau.compile ({k}) differs from eager by {err}"
        assert torch.allclose(tc(*tin), te(*tin), rtol=1e-4, atol=1e-4)
        fns = [lambda: fe(*fin)] + [lambda f=f: f(*fin) for f in fcs.values()] + [lambda: te(*tin), lambda: tc(*tin)]
        t = medians(fns, reps)
    print(f"| {name} | {t[0] * 1e3:.2f} | {t[1] * 1e3:.2f} | {t[2] * 1e3:.2f} | {t[3] * 1e3:.2f} | "
          f"{t[4] * 1e3:.2f} | {t[5] * 1e3:.2f} | {t[5] / t[1]:.2f}x | {t[5] / t[2]:.2f}x | {t[5] / t[3]:.2f}x |",
          flush=True)


def template_cases(reps):
    print("| case | flambeau eager ms | compile blas ms | compile template ms | compile default ms | "
          "torch eager ms | torch.compile ms | vs torch.compile: blas | template | default |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    template_case("mlp_template: MLP 1024-4096-1024, 512 tokens", mlp,
                  [(512, 1024), (4096, 1024), (4096,), (1024, 4096), (1024,)], reps)
    d, f = 512, 1536
    template_case("llama_template: block d 512, 8 heads, T 128, B 4", llama,
                  [(4, 128, d), (d,), (d, d), (d, d), (d, d), (d, d), (d,), (f, d), (f, d), (d, f)], reps)


def flex_case(reps):
    """create_block_mask + flex_attention, window 256 at S=8192 (1 x 4 heads x 64), with the
    mask_mod written in Python (compiled by create_block_mask) and with the native one."""
    from flambeau.nn.attention import flex_attention as F
    S, W = 8192, 256
    gen = torch.Generator().manual_seed(0)
    q, k, v = (fl.from_dlpack(torch.randn(1, 4, S, 64, generator=gen)) for _ in range(3))

    def python_window(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx <= W)

    def run(mod):
        return F.flex_attention(q, k, v, block_mask=F.create_block_mask(mod, 1, 1, S, S))

    assert bool((run(python_window) == run(F.sliding_window(W))).all())
    tp, tn = medians([lambda: run(python_window), lambda: run(F.sliding_window(W))], reps)
    print(f"\n- flex_attention (with create_block_mask) window {W}, S={S}: Python mask_mod {tp * 1e3:.1f} ms, "
          f"native mod {tn * 1e3:.1f} ms: {tp / tn:.2f}x the native time")


def score_case(reps):
    """flex_attention with a tanh softcap score_mod written in Python (compiled by
    flex_attention) and the native tanh_softcap (1 x 4 heads x 64), forward and forward +
    backward. The two differ by eager's SIMD tanh against libm's (ulps), so checked closely,
    not bitwise."""
    from flambeau.nn.attention import flex_attention as F
    cap = 30.0

    def python_softcap(s, b, h, q_idx, kv_idx):
        return (s / cap).tanh() * cap

    for S, mask, label in ((2048, F.causal_mask, "causal"), (8192, F.sliding_window(256), "window 256")):
        gen = torch.Generator().manual_seed(0)
        q, k, v = (fl.from_dlpack(torch.randn(1, 4, S, 64, generator=gen)).requires_grad_() for _ in range(3))
        bm = F.create_block_mask(mask, 1, 1, S, S)

        def fwd(mod):
            with fl.no_grad():
                return F.flex_attention(q, k, v, score_mod=mod, block_mask=bm)

        def fwd_bwd(mod):
            F.flex_attention(q, k, v, score_mod=mod, block_mask=bm).sum().backward()

        native = F.tanh_softcap(cap)
        assert F._compiled_score_mod(python_softcap) is not None, "the Python score_mod did not compile"
        assert bool(((fwd(python_softcap) - fwd(native)).abs() < 1e-5).all())
        tp, tn = medians([lambda: fwd(python_softcap), lambda: fwd(native)], reps)
        bp, bn = medians([lambda: fwd_bwd(python_softcap), lambda: fwd_bwd(native)], reps)
        print(f"- tanh softcap score_mod, {label}, S={S}: forward Python {tp * 1e3:.1f} ms, native {tn * 1e3:.1f} ms "
              f"({tp / tn:.2f}x the native time); forward + backward Python {bp * 1e3:.1f} ms, native "
              f"{bn * 1e3:.1f} ms ({bp / bn:.2f}x)", flush=True)


def compile_time(lib, cache_env):
    """Seconds of the first call of the compiled 10-op chain in a new process (lib: "fl" for
    flambeau, "torch"), with cache_env naming its compile cache directory."""
    module, compile_fn = ("flambeau", "fl.compile") if lib == "fl" else ("torch", "torch.compile")
    code = (f"import time, {module} as {lib}\n" + CHAIN +
            f"x = {lib}.randn(4096); y = {lib}.randn(4096)\n"
            f"f = {compile_fn}(chain({lib}))\n"
            "t0 = time.perf_counter(); f(x, y); print(time.perf_counter() - t0)\n")
    env = dict(os.environ, OMP_NUM_THREADS="2", **cache_env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return float(r.stdout.strip().splitlines()[-1])


BLOCK_STEP = """
import inspect, sys, time
sys.path.insert(0, {bench!r})
import flambeau as fl
from bench_compile import models
fl.manual_seed(0)
m = models(fl)["block"]()
x = fl.randn(4, 128, 512, requires_grad=True)
m(x).sum().backward()  # the allocator's first touch is not compiling
f = fl.compile(m)
t0 = time.perf_counter()
f(x).sum().backward()
traced = time.perf_counter() - t0
t0 = time.perf_counter()
f(x).sum().backward()
print(traced - (time.perf_counter() - t0))
"""


def block_compile_time(cache_env):
    """Seconds the first train step of the compiled block takes over the second (trace,
    passes, forward and backward graphs built) in a new process, after one eager step."""
    code = BLOCK_STEP.format(bench=os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, OMP_NUM_THREADS="2", **cache_env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return float(r.stdout.strip().splitlines()[-1])


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    torch.set_num_threads(2)
    fl.set_num_threads(2)
    if sys.argv[2:] == ["score_mod"]:
        return score_case(reps)
    if sys.argv[2:] == ["models"]:
        for train in (False, True):
            model_case(f"MLP train={train}", "mlp", (512, 1024), reps, train)
            model_case(f"block train={train}", "block", (4, 128, 512), reps, train)
        return None
    if sys.argv[2:] == ["templates"]:
        return template_cases(reps)
    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/Model name: *//p' | head -1"], capture_output=True,
                         text=True).stdout.strip()
    print(f"CPU: {cpu}, {os.cpu_count()} cores, 2 threads; flambeau.compile backend "
          f"{fl.compiler.get_default_backend()}, torch.compile inductor; medians of {reps}\n")
    print("| case | flambeau eager ms | flambeau.compile ms | torch eager ms | torch.compile ms | "
          "compile / eager (flambeau) | vs torch.compile |")
    print("|---|---|---|---|---|---|---|")
    case("10-op pointwise chain, 4M fp32", chain, [(4 << 20,), (4 << 20,)], reps)
    case("10-op pointwise chain, 1K fp32", chain, [(1024,), (1024,)], reps * 20)
    case("RMSNorm with ops, [4096, 1024]", rms, [(4096, 1024), (1024,)], reps,
         fused=lambda x, w: fl.nn.functional.rms_norm(x, (1024,), w, 1e-6))
    for train in (False, True):
        what = "train step" if train else "inference"
        model_case(f"MLP 1024-4096-1024, [512, 1024], {what}", "mlp", (512, 1024), max(5, reps // 3), train)
        model_case(f"Llama-style block d512 h8, [4, 128, 512], {what}", "block", (4, 128, 512), max(5, reps // 3),
                   train)
    print()
    template_cases(reps)
    flex_case(reps)
    print()
    score_case(reps)
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as inductor:
        cold = compile_time("fl", {"FLAMBEAU_CACHE_DIR": cache})
        warm = compile_time("fl", {"FLAMBEAU_CACHE_DIR": cache})
        torch_cold = compile_time("torch", {"TORCHINDUCTOR_CACHE_DIR": inductor})
    with tempfile.TemporaryDirectory() as cache:
        block_cold = block_compile_time({"FLAMBEAU_CACHE_DIR": cache})
        block_warm = block_compile_time({"FLAMBEAU_CACHE_DIR": cache})
    print(f"\n- compile time of the 10-op chain (first call, new process): flambeau cold {cold:.2f} s, "
          f"warm {warm:.3f} s (cached library, no compiler run); torch.compile cold {torch_cold:.2f} s")
    print(f"- compile time of the block's train step (first step over the second, new process): flambeau cold "
          f"{block_cold:.2f} s, warm {block_warm:.3f} s")
    print(json.dumps({"cold_s": cold, "warm_s": warm, "block_cold_s": block_cold, "block_warm_s": block_warm}))


if __name__ == "__main__":
    main()
