"""One rank of a DistributedDataParallel scenario (run by dist/harness.py with
script=DDP_WORKER). Every rank draws the same global batch of each step from a seeded
generator and trains on its slice; the references (one process on the whole batch, or
gradients averaged by hand) are computed by each rank alone. Exit code 0: every check
passed."""
import os
import sys
import time
import warnings

import flambeau as fl
import flambeau.distributed as dist
import flambeau.nn as nn
import flambeau.distributed.checkpoint as dcp
from flambeau.distributed.algorithms.ddp_comm_hooks import default_hooks
from flambeau.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from flambeau.nn.parallel import DistributedDataParallel as DDP

RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
B = 4  # rows per rank


class Net(nn.Module):
    """Odd sizes; `extra` only runs when forward is asked to (an unused parameter otherwise)."""

    def __init__(self, width=33, extra=False):
        super().__init__()
        self.a = nn.Linear(7, width)
        self.b = nn.Linear(width, 17)
        self.c = nn.Linear(17, 3)
        if extra:
            self.extra = nn.Linear(3, 3)

    def forward(self, x, use_extra=False):
        h = self.c(fl.tanh(self.b(fl.tanh(self.a(x)))))
        return self.extra(h) if use_extra else h


def batch(step, rows):
    g = fl.Generator().manual_seed(1000 + step)
    return fl.randn(rows, 7, generator=g), fl.randn(rows, 3, generator=g)


def mine(t):
    return t[RANK * B:(RANK + 1) * B]


def loss_fn(out, y):
    return ((out - y) ** 2).mean()


def net(seed=0, **kw):
    fl.manual_seed(seed)
    return Net(**kw)


def flat(model):
    return [p.detach().clone() for p in model.parameters()]


def rel_err(a, b):
    return max(float((x - y).abs().max()) / max(float(y.abs().max()), 1e-30) for x, y in zip(a, b))


def bitwise(a, b):
    return all(bool((x == y).all()) for x, y in zip(a, b))


def fit(model, opt, steps):
    """steps of this rank's rows of the global batches 0, 1, ..."""
    for step in range(steps):
        x, y = batch(step, WORLD * B)
        loss_fn(model(mine(x)), mine(y)).backward()
        opt.step()
        opt.zero_grad()


def train_ddp(steps, lr=0.05, extra_every=0, hook=None, **ddp_kw):
    model = net(extra=extra_every > 0)
    ddp = DDP(model, **ddp_kw)
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    opt = fl.optim.SGD(ddp.parameters(), lr=lr)
    for step in range(steps):
        x, y = batch(step, WORLD * B)
        use = extra_every > 0 and step % extra_every == 0
        loss_fn(ddp(mine(x), use_extra=use), mine(y)).backward()
        opt.step()
        opt.zero_grad()
    return flat(model), ddp


def train_single(steps, lr=0.05, extra_every=0):
    model = net(extra=extra_every > 0)
    opt = fl.optim.SGD(model.parameters(), lr=lr)
    for step in range(steps):
        x, y = batch(step, WORLD * B)
        use = extra_every > 0 and step % extra_every == 0
        loss_fn(model(x, use_extra=use), y).backward()
        opt.step()
        opt.zero_grad()
    return flat(model)


def check(ok, what):
    if not ok:
        raise AssertionError(f"rank {RANK}: {what}")


def init():
    dist.init_process_group("gloo", timeout=60.0)


def scenario_reference():
    """100 fp32 steps of DDP against one process on the concatenated batch; the parameters
    broadcast from rank 0 at construction."""
    init()
    model = net()
    if RANK != 0:
        with fl.no_grad():
            for p in model.parameters():
                p.add_(1.0)
    DDP(model)
    check(bitwise(flat(model), flat(net())), "parameters not broadcast from rank 0")
    got, _ = train_ddp(100)
    want = train_single(100)
    err = rel_err(got, want)
    print(f"RESULT reference rel_err {err:.3e}", flush=True)
    check(err <= 1e-6, f"DDP vs one process: relative error {err:.3e} > 1e-6")


def scenario_variants():
    """gradient_as_bucket_view, static_graph, small buckets (several, rebuilt after the first
    iteration) and the Python default hook change no bit; bf16 compression stays within
    bf16's rounding."""
    init()
    base, _ = train_ddp(30)
    small = 60 / (1024 * 1024)  # bytes -> MiB: a bucket per weight and the bias before it
    for kw in ({"gradient_as_bucket_view": True}, {"static_graph": True}, {"bucket_cap_mb": small},
               {"bucket_cap_mb": small, "gradient_as_bucket_view": True},
               {"hook": default_hooks.allreduce_hook},  # the C++ hook
               {"hook": lambda state, bucket: default_hooks.allreduce_hook(state, bucket)}):  # through Python
        got, ddp = train_ddp(30, **kw)
        check(bitwise(got, base), f"DDP with {kw} differs from the default")
        if "bucket_cap_mb" in kw:
            check(len(ddp.reducer.bucket_indices()) >= 3, f"expected several buckets, got {ddp.reducer.bucket_indices()}")
    got, _ = train_ddp(30, hook=default_hooks.bf16_compress_hook)
    py, _ = train_ddp(30, hook=lambda state, bucket: default_hooks.bf16_compress_hook(state, bucket))
    check(bitwise(got, py), "bf16 compression: the Python hook differs from the C++ one")
    err = rel_err(got, base)
    print(f"RESULT bf16_compress rel_err {err:.3e}", flush=True)
    check(0 < err <= 2e-2, f"bf16 compression: relative error {err:.3e} (expected (0, 2e-2])")


def scenario_no_sync():
    """Two micro-batches, the first under no_sync(): the same bits as accumulating both
    locally and averaging each gradient by hand."""
    init()
    model = net()
    ddp = DDP(model)
    opt = fl.optim.SGD(ddp.parameters(), lr=0.05)
    ref = net()
    ref_opt = fl.optim.SGD(ref.parameters(), lr=0.05)
    for step in range(20):
        x, y = batch(step, WORLD * B)
        x2, y2 = batch(10_000 + step, WORLD * B)
        with ddp.no_sync():
            loss_fn(ddp(mine(x)), mine(y)).backward()
        loss_fn(ddp(mine(x2)), mine(y2)).backward()
        opt.step()
        opt.zero_grad()
        loss_fn(ref(mine(x)), mine(y)).backward()
        loss_fn(ref(mine(x2)), mine(y2)).backward()
        for p in ref.parameters():
            p.grad.div_(WORLD)
            dist.all_reduce(p.grad)
        ref_opt.step()
        ref_opt.zero_grad()
    check(bitwise(flat(model), flat(ref)), "no_sync accumulation differs from averaging by hand")


def scenario_unused():
    """A parameter used every third step: fine with find_unused_parameters (matches one
    process), a clear error without it."""
    init()
    got, _ = train_ddp(30, extra_every=3, find_unused_parameters=True)
    want = train_single(30, extra_every=3)
    err = rel_err(got, want)
    check(err <= 1e-6, f"find_unused_parameters: relative error {err:.3e}")
    model = net(extra=True)
    ddp = DDP(model)
    x, y = batch(0, WORLD * B)
    try:
        loss_fn(ddp(mine(x)), mine(y)).backward()
    except RuntimeError as e:
        check("find_unused_parameters" in str(e) and "extra.weight" in str(e), f"unclear error: {e}")
    else:
        raise AssertionError(f"rank {RANK}: no error for an unused parameter")


def scenario_overlap():
    """Bucket all-reduces start while backward is still running (launch before the end of
    backward, every iteration) and finish before it ends in some (a real overlap)."""
    init()
    fl.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(256, 256), nn.Tanh()]
    model = nn.Sequential(*layers)
    ddp = DDP(model, bucket_cap_mb=0.2)  # a bucket per layer
    done = []
    handle = dist._world().comm.register_post_hook(lambda *a: done.append(time.monotonic_ns()))
    # A batch that keeps backward busy for some milliseconds per iteration, so that a bucket's
    # all-reduce over loopback can finish before it ends (256 rows were done in under a
    # millisecond once the float32 GEMM moved to oneDNN).
    x = fl.randn(2048, 256)
    finished_early = 0
    for _ in range(6):
        done.clear()
        ddp(x).pow(2).mean().backward()
        events = ddp.reducer.timeline()
        end = [t for what, _, t in events if what == "backward_end"][0]
        launches = [t for what, _, t in events if what == "launch"]
        check(len(launches) >= 4 and min(launches) < end, f"no bucket launched during backward: {events}")
        finished_early += any(t < end for t in done)
    handle.remove()
    print(f"RESULT overlap iterations with an all_reduce done before backward ended: {finished_early}/6", flush=True)
    check(finished_early >= 1, "no all_reduce finished before the end of backward in 6 iterations")


def scenario_rebuild():
    """Parameters registered in the opposite order of their use: after the first iteration
    the buckets follow the order gradients became ready (c, then b, then a)."""
    init()

    class Reversed(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Linear(64, 64)
            self.b = nn.Linear(64, 64)
            self.a = nn.Linear(64, 64)

        def forward(self, x):
            return self.c(self.b(self.a(x)))

    fl.manual_seed(0)
    ddp = DDP(Reversed(), bucket_cap_mb=20000 / (1024 * 1024))
    before = ddp.reducer.bucket_indices()
    ddp(fl.randn(8, 64)).sum().backward()
    after = ddp.reducer.bucket_indices()
    # parameters: c.weight 0, c.bias 1, b.weight 2, b.bias 3, a.weight 4, a.bias 5
    check(before[0][0] == 5 and after[0][0] in (0, 1), f"buckets {before} -> {after}")
    check(sorted(i for b in after for i in b) == list(range(6)), f"rebuilt buckets lose parameters: {after}")


def _state(model, opt, step):
    return {"model": model.state_dict(), "optim": opt.state_dict(), "step": step}


def scenario_checkpoint_save(path):
    """3 DDP steps with AdamW, then a distributed save; rank 0 also writes the flat state
    as one plain file (the reference for the loads)."""
    init()
    model = net()
    ddp = DDP(model)
    opt = fl.optim.AdamW(ddp.parameters(), lr=0.01)
    fit(ddp, opt, 3)
    state = _state(model, opt, 3)
    dcp.save(state, os.path.join(path, "ckpt"))
    if RANK == 0:
        flat = dcp._flatten(state, "", {})
        fl.save({k: v for k, v in flat.items() if isinstance(v, fl.Tensor)}, os.path.join(path, "ref.safetensors"))


def scenario_checkpoint_load(path):
    """Another world size loads the checkpoint into a differently initialised model and
    optimizer: every tensor bitwise equal to the saved one, the step and lr restored."""
    init()
    model = net(seed=7)
    opt = fl.optim.AdamW(model.parameters(), lr=0.5)
    loss_fn(model(fl.randn(2, 7)), fl.randn(2, 3)).backward()
    opt.step()  # the optimizer's state exists, as in a run that resumes
    state = _state(model, opt, 0)
    dcp.load(state, os.path.join(path, "ckpt"))
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    check(state["step"] == 3, f"step {state['step']}")
    check(opt.state_dict()["param_groups"][0]["lr"] == 0.01, "lr not restored")
    ref = fl.load(os.path.join(path, "ref.safetensors"))
    flat = dcp._flatten(_state(model, opt, 3), "", {})
    for k, t in ref.items():
        check(bool((flat[k] == t).all()), f"{k} differs after loading")


def scenario_checkpoint_fail(path):
    """Rank 1 cannot write its shard: every rank raises (none waits), the checkpoint saved
    before still loads."""
    init()
    model = net()
    dcp.save({"model": model.state_dict()}, path)
    other = net(seed=3)
    if RANK == 1:
        fl.safetensors.save_file = lambda *a, **k: (_ for _ in ()).throw(OSError("disk full"))
    try:
        dcp.save({"model": other.state_dict()}, path)
    except (OSError, RuntimeError) as e:
        check(("disk full" in str(e)) == (RANK == 1), f"rank {RANK} raised {e!r}")
    else:
        raise AssertionError(f"rank {RANK}: the failed save did not raise")
    state = {"model": net(seed=9).state_dict()}
    dcp.load(state, path)
    check(bitwise(list(state["model"].values()), list(model.state_dict().values())), "the old checkpoint changed")


def train_fsdp(steps, lr=0.05, separate_rs=False, reshard_after_forward=None, mp=None, opt_cls=None):
    model = net()
    for block in (model.a, model.b, model.c):
        fully_shard(block, reshard_after_forward=reshard_after_forward, mp_policy=mp or MixedPrecisionPolicy())
    fully_shard(model, mp_policy=mp or MixedPrecisionPolicy())
    if separate_rs:
        model.set_separate_reduce_scatter_group(True)
    fit(model, (opt_cls or fl.optim.SGD)(model.parameters(), lr=lr), steps)
    return [p.full_tensor() for p in model.parameters()], model


def scenario_fsdp():
    """FSDP2 (per-layer fully_shard + root, odd sizes so shards are padded) against DDP:
    within 1e-5 for reshard_after_forward True and False (bitwise on 2 ranks, where the
    average of two gradients is the same sum in either algorithm); the separate
    reduce-scatter group changes no bit; the shards are this rank's rows."""
    init()
    want, _ = train_ddp(20)
    results = {}
    # an int k: reshard to k consecutive ranks after forward (4 ranks: k = 2)
    settings = (True, False, 2) if WORLD == 4 else (True, False)
    for raf in settings:
        got, model = train_fsdp(20, reshard_after_forward=raf)
        results[raf] = got
        err = rel_err(got, want)
        print(f"RESULT fsdp reshard_after_forward={raf} rel_err vs DDP {err:.3e} bitwise {bitwise(got, want)}", flush=True)
        check(err <= 1e-5, f"FSDP (reshard_after_forward={raf}) vs DDP: relative error {err:.3e}")
    for raf in settings[1:]:
        check(bitwise(results[True], results[raf]), f"reshard_after_forward={raf} changed bits")
    if WORLD == 4:
        # after forward each rank keeps half the gathered buffer (the parts of 2 ranks), no parameter memory
        _, model = train_fsdp(0, reshard_after_forward=2)
        x, _ = batch(0, WORLD * B)
        model(mine(x))
        g = model.a._fsdp_group
        check(g.post_forward is not None and g.post_forward[1].numel() == 2 * g.total
              and not dist._d._fsdp_has_memory(g.infos[0].unsharded), "reshard_after_forward=2 kept the wrong memory")
        check(g.post_forward[0].get_size() == 2 and g.post_forward[0].global_ranks == [RANK // 2 * 2, RANK // 2 * 2 + 1],
              "the post-forward group is not this rank's pair")
    if WORLD == 2:
        for bad in (3, 0):
            try:
                fully_shard(net().a, reshard_after_forward=bad)
            except ValueError as e:
                check("divide" in str(e), str(e))
            else:
                raise AssertionError(f"reshard_after_forward={bad} on 2 ranks did not raise")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            check(fully_shard(net().a, reshard_after_forward=1)._fsdp_group.reshard_after_forward is False and w,
                  "reshard_after_forward=1 is False, with a warning")
    got, model = train_fsdp(20, separate_rs=True)
    check(bitwise(got, results[True]), "the separate reduce-scatter group changed bits")
    # Shards: dim 0 cut in ceil(rows / world) pieces, this rank's piece.
    w = model.a.weight
    chunk = -(-33 // WORLD)
    check(isinstance(model.a, FSDPModule) and tuple(w.shape) == (max(0, min(chunk, 33 - RANK * chunk)), 7),
          f"shard shape {tuple(w.shape)}")
    full = w.full_tensor()
    check(bitwise([full[RANK * chunk:RANK * chunk + w.shape[0]]], [w.to_local()]), "to_local is not this rank's rows")


def scenario_fsdp_memory_and_accumulation():
    """After a forward with reshard_after_forward, the blocks' unsharded parameters hold no
    memory (the root's stay); gradient accumulation with set_requires_gradient_sync(False)
    gives DDP no_sync's result; bf16 MixedPrecisionPolicy stays within bf16 rounding."""
    init()
    model = net()
    for block in (model.a, model.b, model.c):
        fully_shard(block)
    fully_shard(model)
    x, y = batch(0, WORLD * B)
    out = model(mine(x))
    for block in (model.a, model.b, model.c):
        for info in block._fsdp_group.infos:
            check(not dist._d._fsdp_has_memory(info.unsharded), "a block's unsharded parameter kept its memory")
    loss_fn(out, mine(y)).backward()
    check(all(p.grad is not None for p in model.parameters()), "a shard got no gradient")
    # accumulation: FSDP without sync on the first micro-batch vs DDP no_sync
    fsdp = net()
    for block in (fsdp.a, fsdp.b, fsdp.c):
        fully_shard(block)
    fully_shard(fsdp)
    ddp = DDP(net())
    for step in range(5):
        x, y = batch(step, WORLD * B)
        x2, y2 = batch(100 + step, WORLD * B)
        fsdp.set_requires_gradient_sync(False)
        loss_fn(fsdp(mine(x)), mine(y)).backward()
        fsdp.set_requires_gradient_sync(True)
        loss_fn(fsdp(mine(x2)), mine(y2)).backward()
        with ddp.no_sync():
            loss_fn(ddp(mine(x)), mine(y)).backward()
        loss_fn(ddp(mine(x2)), mine(y2)).backward()
        for m in (fsdp, ddp):
            with fl.no_grad():
                for p in m.parameters():
                    p.sub_(0.05 * p.grad)
                    p.grad = None
    got = [p.full_tensor() for p in fsdp.parameters()]
    err = rel_err(got, flat(ddp.module))
    check(err <= 1e-5, f"accumulation: FSDP vs DDP no_sync relative error {err:.3e}")
    want, _ = train_fsdp(10)
    got, _ = train_fsdp(10, mp=MixedPrecisionPolicy(param_dtype=fl.bfloat16, reduce_dtype=fl.float32))
    err = rel_err(got, want)
    print(f"RESULT fsdp bf16 params rel_err {err:.3e}", flush=True)
    check(0 < err <= 2e-2, f"bf16 MixedPrecisionPolicy: relative error {err:.3e} (expected (0, 2e-2])")


def fsdp_net(seed=0):
    model = net(seed)
    for block in (model.a, model.b, model.c):
        fully_shard(block)
    return fully_shard(model)


def scenario_fsdp_checkpoint(path, mode):
    """mode save: FSDP on this world size trains 3 steps and saves (rank 0 also writes the
    whole parameters, gathered, as the reference); mode load: FSDP on another world size
    (or one plain process) loads them, bitwise."""
    init()
    if mode == "save":
        model = fsdp_net()
        fit(model, fl.optim.SGD(model.parameters(), lr=0.05), 3)
        dcp.save({"model": model.state_dict()}, os.path.join(path, "fsdp"))
        whole = {k: p.full_tensor() for k, p in model.named_parameters()}
        if RANK == 0:
            fl.save(whole, os.path.join(path, "fsdp_ref.safetensors"))
        return
    model = fsdp_net(seed=4) if WORLD > 1 else net(seed=4)
    state = {"model": model.state_dict()}
    dcp.load(state, os.path.join(path, "fsdp"))
    ref = fl.load(os.path.join(path, "fsdp_ref.safetensors"))
    for k, p in model.named_parameters():
        whole = p.full_tensor() if WORLD > 1 else p
        check(bool((whole == ref[k]).all()), f"{k} differs after loading on {WORLD} ranks")


def scenario_fsdp_overlap():
    """With the separate reduce-scatter group, reduce-scatters run while all-gathers do:
    the communicators' hooks time each op; some reduce-scatter interval overlaps some
    all-gather interval in 6 iterations (with one communicator they cannot)."""
    init()
    fl.manual_seed(0)
    blocks = [nn.Linear(256, 256) for _ in range(6)]
    model = nn.Sequential(*[m for b in blocks for m in (b, nn.Tanh())])
    for b in blocks:
        fully_shard(b)
    fully_shard(model)
    model.set_separate_reduce_scatter_group(True)
    spans = {"all_gather": [], "reduce_scatter": []}
    starts = {}

    def pre(name, seq, *a):
        starts[(name, seq)] = time.monotonic_ns()

    def post(name, seq, *a):
        for kind in spans:
            if kind in name:
                spans[kind].append((starts.pop((name, seq)), time.monotonic_ns()))
    comms = [blocks[0]._fsdp_group.comm, blocks[0]._fsdp_group.rs_comm]
    check(comms[0] is not comms[1], "no separate communicator")
    handles = [c.register_pre_hook(pre) for c in comms] + [c.register_post_hook(post) for c in comms]
    x = fl.randn(256, 256)
    for _ in range(6):
        model(x).pow(2).mean().backward()
    for h in handles:
        h.remove()
    overlaps = sum(1 for a in spans["all_gather"] for r in spans["reduce_scatter"] if a[0] < r[1] and r[0] < a[1])
    print(f"RESULT fsdp overlapping (all_gather, reduce_scatter) pairs: {overlaps} of {len(spans['all_gather'])} x "
          f"{len(spans['reduce_scatter'])}", flush=True)
    check(overlaps >= 1, "no reduce-scatter overlapped an all-gather")


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]](*sys.argv[2:])
    dist.destroy_process_group()
