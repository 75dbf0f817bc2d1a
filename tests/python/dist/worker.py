"""One rank of a distributed test scenario (run by dist/harness.py). A scenario checks its
results itself against a reference every rank can compute alone: rank r's input is a known
function of r, so no rank trusts another. Exit code 0 means every check passed."""
import math
import os
import signal
import sys
import threading
import time
import warnings

import flambeau as fl
import flambeau.distributed as dist

# Under mpirun, Open MPI's variables say who we are.
RANK = int(os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0")))
WORLD = int(os.environ.get("WORLD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1")))
BACKEND = os.environ.get("FLAMBEAU_DIST_BACKEND", "gloo")

FLOATS = ["float32", "float64", "bfloat16", "float16"]
INTS = ["int64", "int32", "int16", "int8", "uint8"]
DTYPES = FLOATS + INTS + ["bool"]


def value(r, i, dtype):
    """Rank r's element i: small integers, exact in every dtype, so any summation order gives
    the same bits."""
    if dtype == "bool":
        return (i + r) % 3 == 0
    if dtype == "uint8":
        return (i * 3 + r) % 5
    return ((i * 7 + r * 3) % 9) - 4


def make(r, n, dtype, offset=0):
    vals = [value(r, i + offset, dtype) for i in range(n)]
    return fl.tensor(vals, dtype=getattr(fl, dtype)) if n else fl.empty(0, dtype=getattr(fl, dtype))


def as_list(t):
    if t.dtype == fl.bool:
        return [bool(v) for v in t.tolist()]
    if t.dtype in (fl.bfloat16, fl.float16):
        return t.to(fl.float64).tolist()
    return t.tolist()


def reduce_ref(op, xs, dtype):
    def combine(a, b):
        if dtype == "bool":
            return {"SUM": a or b, "MAX": a or b, "MIN": a and b, "PRODUCT": a and b}[op]
        if op == "SUM":
            return a + b
        if op == "PRODUCT":
            return a * b
        if op == "MIN":
            return min(a, b)
        if op == "MAX":
            return max(a, b)
        if op == "BAND":
            return a & b
        if op == "BOR":
            return a | b
        if op == "BXOR":
            return a ^ b
        raise ValueError(op)
    out = list(xs[0])
    for x in xs[1:]:
        out = [combine(a, b) for a, b in zip(out, x)]
    return out


def expect(got, want, what, tol=0.0):
    if tol:
        ok = len(got) == len(want) and all(abs(a - b) <= tol * max(1.0, abs(b)) for a, b in zip(got, want))
    else:
        ok = got == want
    if not ok:
        raise AssertionError(f"rank {RANK}: {what}: got {got[:12]}... want {want[:12]}...")


def init():
    dist.init_process_group(BACKEND, timeout=float(os.environ.get("DIST_TIMEOUT", "30")))


def store():
    """The scenario's TCPStore (rank 0 serves it on MASTER_PORT)."""
    return dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), WORLD, RANK == 0, wait_for_workers=False)


def comm(s, name, **options):
    """A gloo communicator of all ranks on store s; errors raise (no process abort) unless
    options say otherwise."""
    options.setdefault("abort_process_on_timeout_or_error", False)
    return dist.new_comm("gloo", store=s, name=name, rank=RANK, size=WORLD, **options)


def scenario_ops():
    """Every op x dtype x size against the reference."""
    init()
    ranks = range(WORLD)
    for dtype in DTYPES:
        fdt = getattr(fl, dtype)
        for n in (0, 1, 7, 1000):
            ops = ["SUM", "MIN", "MAX"] + (["PRODUCT"] if dtype in ("float32", "float64", "int64", "bool") else [])
            ops += ["BAND", "BOR", "BXOR"] if dtype in INTS else []
            for op in ops:
                t = make(RANK, n, dtype)
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                expect(as_list(t), reduce_ref(op, [as_list(make(r, n, dtype)) for r in ranks], dtype),
                       f"all_reduce {op} {dtype} n={n}")
            if dtype in FLOATS:
                t = make(RANK, n, dtype)
                dist.all_reduce(t, op=dist.ReduceOp.AVG)
                want = [s / WORLD for s in reduce_ref("SUM", [as_list(make(r, n, dtype)) for r in ranks], dtype)]
                expect(as_list(t), want, f"all_reduce AVG {dtype} n={n}", tol=1e-2 if dtype in ("bfloat16", "float16") else 1e-6)
                t = make(RANK, n, dtype)
                dist.all_reduce(t, op=dist.ReduceOp.PREMUL_SUM(2.0))
                want = [2 * s for s in reduce_ref("SUM", [as_list(make(r, n, dtype)) for r in ranks], dtype)]
                expect(as_list(t), want, f"all_reduce PREMUL_SUM {dtype} n={n}")
            # all_gather_single and the list form
            out = fl.empty(WORLD * n, dtype=fdt)
            dist.all_gather_single(out, make(RANK, n, dtype))
            want = sum((as_list(make(r, n, dtype)) for r in ranks), [])
            expect(as_list(out), want, f"all_gather_single {dtype} n={n}")
            outs = [fl.empty(n, dtype=fdt) for _ in ranks]
            dist.all_gather(outs, make(RANK, n, dtype))
            expect(sum((as_list(o) for o in outs), []), want, f"all_gather {dtype} n={n}")
            # reduce_scatter_single / list: input is WORLD blocks of n
            red_ops = ["SUM", "MAX"] if dtype != "bool" else ["MAX"]
            for op in red_ops:
                o = fl.empty(n, dtype=fdt)
                dist.reduce_scatter_single(o, make(RANK, WORLD * n, dtype), op=getattr(dist.ReduceOp, op))
                full = reduce_ref(op, [as_list(make(r, WORLD * n, dtype)) for r in ranks], dtype)
                expect(as_list(o), full[RANK * n:(RANK + 1) * n], f"reduce_scatter_single {op} {dtype} n={n}")
                o = fl.empty(n, dtype=fdt)
                dist.reduce_scatter(o, [make(RANK, n, dtype, offset=b * n) for b in ranks], op=getattr(dist.ReduceOp, op))
                expect(as_list(o), full[RANK * n:(RANK + 1) * n], f"reduce_scatter {op} {dtype} n={n}")
            # broadcast from the last rank, reduce to rank 0
            t = make(RANK, n, dtype)
            dist.broadcast(t, src=WORLD - 1)
            expect(as_list(t), as_list(make(WORLD - 1, n, dtype)), f"broadcast {dtype} n={n}")
            t = make(RANK, n, dtype)
            dist.reduce(t, dst=0, op=dist.ReduceOp.MAX)
            want = reduce_ref("MAX", [as_list(make(r, n, dtype)) for r in ranks], dtype) if RANK == 0 else as_list(make(RANK, n, dtype))
            expect(as_list(t), want, f"reduce {dtype} n={n}")
            # gather / scatter at root 1 % WORLD
            root = 1 % WORLD
            glist = [fl.empty(n, dtype=fdt) for _ in ranks] if RANK == root else None
            dist.gather(make(RANK, n, dtype), glist, dst=root)
            if RANK == root:
                expect(sum((as_list(g) for g in glist), []), want_all(n, dtype), f"gather {dtype} n={n}")
            o = fl.empty(n, dtype=fdt)
            slist = [make(root, n, dtype, offset=1000 * r) for r in ranks] if RANK == root else None
            dist.scatter(o, slist, src=root)
            expect(as_list(o), as_list(make(root, n, dtype, offset=1000 * RANK)), f"scatter {dtype} n={n}")
            # all_to_all_single, equal parts: block b of rank r goes to rank b
            o = fl.empty(WORLD * n, dtype=fdt)
            dist.all_to_all_single(o, make(RANK, WORLD * n, dtype))
            want = sum((as_list(make(r, WORLD * n, dtype))[RANK * n:(RANK + 1) * n] for r in ranks), [])
            expect(as_list(o), want, f"all_to_all_single {dtype} n={n}")
            # uneven splits: rank r sends (b + r) % 3 rows to rank b
            ins = [(b + RANK) % 3 for b in ranks]
            outs_ = [(RANK + r) % 3 for r in ranks]
            o = fl.empty(sum(outs_), 2, dtype=fdt)
            src = make(RANK, 2 * sum(ins), dtype).reshape(sum(ins), 2)
            dist.all_to_all_single(o, src, output_split_sizes=outs_, input_split_sizes=ins)
            want = []
            for r in ranks:
                their = [(b + r) % 3 for b in ranks]
                start = sum(their[:RANK])
                want += as_list(make(r, 2 * sum(their), dtype))[2 * start:2 * (start + their[RANK])]
            expect(as_list(o.reshape(-1)), want, f"all_to_all_single splits {dtype}")
            # P2P ring: send to the next rank, receive from the previous one
            if WORLD > 1:
                nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
                r_ = fl.empty(n, dtype=fdt)
                reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, make(RANK, n, dtype), nxt),
                                               dist.P2POp(dist.irecv, r_, prv)])
                for q in reqs:
                    q.wait()
                expect(as_list(r_), as_list(make(prv, n, dtype)), f"batch_isend_irecv {dtype} n={n}")
    # A large float32 all_reduce and reduce-scatter (many segments of the ring).
    n = 300_001
    t = fl.arange(n, dtype=fl.float32) % 13 * (RANK + 1)
    dist.all_reduce(t)
    ref = fl.arange(n, dtype=fl.float32) % 13 * (WORLD * (WORLD + 1) // 2)
    assert bool((t == ref).all()), "large all_reduce"
    t = (fl.arange(n, dtype=fl.float32) % 7 - RANK).to(fl.bfloat16)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert bool((t == (fl.arange(n, dtype=fl.float32) % 7).to(fl.bfloat16)).all()), "large bf16 all_reduce MAX"
    o = fl.empty(WORLD * n, dtype=fl.float32)
    dist.all_gather_single(o, fl.arange(n, dtype=fl.float32) % 5 + 10 * RANK)
    ref = fl.cat([fl.arange(n, dtype=fl.float32) % 5 + 10 * r for r in range(WORLD)])
    assert bool((o == ref).all()), "large all_gather_single"
    o = fl.empty(n, dtype=fl.float32)
    dist.reduce_scatter_single(o, fl.arange(WORLD * n, dtype=fl.float32) % 11 * (RANK + 1))
    ref = (fl.arange(WORLD * n, dtype=fl.float32) % 11 * (WORLD * (WORLD + 1) // 2))[RANK * n:(RANK + 1) * n]
    assert bool((o == ref).all()), "large reduce_scatter_single"
    # Non-contiguous in-place tensor: all_reduce writes back through the view.
    base = fl.zeros(4, 6)
    view = base.t()
    view += RANK + 1
    dist.all_reduce(view)
    assert bool((base == WORLD * (WORLD + 1) // 2).all()), "non-contiguous all_reduce"
    dist.barrier()
    dist.destroy_process_group()


def want_all(n, dtype):
    return sum((as_list(make(r, n, dtype)) for r in range(WORLD)), [])


def expect_raises(fn, exc, text):
    try:
        fn()
    except exc as e:
        assert text in str(e), f"rank {RANK}: wanted '{text}' in: {e}"
        return e
    raise AssertionError(f"rank {RANK}: no {exc.__name__} ('{text}')")


def scenario_errors():
    """Local argument errors raise at the call and write nothing; cross-rank mismatches fail on
    every rank and leave the group usable."""
    init()
    out = fl.full((5,), 7.0)
    expect_raises(lambda: dist.all_gather_single(out, fl.ones(2)), ValueError, "must hold world_size")
    assert out.tolist() == [7.0] * 5, "nothing written before the transfer"
    expect_raises(lambda: dist.all_gather_single(fl.empty(2 * WORLD, dtype=fl.int64), fl.ones(2)), TypeError, "dtype")
    expect_raises(lambda: dist.reduce_scatter_single(fl.empty(3), fl.ones(3 * WORLD + 1)), ValueError, "must hold world_size")
    expect_raises(lambda: dist.broadcast(fl.ones(2), src=WORLD), IndexError, "out of range")
    expect_raises(lambda: dist.all_reduce(fl.ones(2, dtype=fl.int64), op=dist.ReduceOp.AVG), TypeError, "floating")
    expect_raises(lambda: dist.all_reduce(fl.ones(2), op=dist.ReduceOp.BXOR), TypeError, "integer")
    expect_raises(lambda: dist.send(fl.ones(2), dst=RANK), ValueError, "itself")
    expect_raises(lambda: dist.all_to_all_single(fl.empty(3), fl.ones(3), [1] * WORLD, [2] * WORLD), ValueError, "split sizes")
    expect_raises(lambda: dist.all_gather([fl.empty(2)], fl.ones(2)), ValueError, "world_size")
    # Shapes that differ across ranks: every rank raises, naming each rank's shape.
    e = expect_raises(lambda: dist.all_reduce(fl.ones(3 + RANK)), dist.DistBackendError, "rank 1: all_reduce (4,)")
    assert e.kind == "arguments differ across ranks" and e.op == "all_reduce", (e.kind, e.op)
    expect_raises(lambda: dist.broadcast(fl.ones(2, dtype=fl.float32 if RANK else fl.float64), src=0),
                  dist.DistBackendError, "float64")
    # Different ops at the same point (a desync): named too.
    if RANK == 0:
        expect_raises(lambda: dist.barrier(), dist.DistBackendError, "all_reduce")
    else:
        expect_raises(lambda: dist.all_reduce(fl.ones(2)), dist.DistBackendError, "rank 0: barrier")
    # The group still works.
    t = fl.ones(3)
    dist.all_reduce(t)
    assert t.tolist() == [float(WORLD)] * 3
    # The 2.13 renames: the old names warn once (FutureWarning) and give the same result.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a, b = fl.empty(2 * WORLD), fl.empty(2 * WORLD)
        dist.all_gather_into_tensor(a, fl.full((2,), float(RANK)))
        dist.all_gather_into_tensor(a, fl.full((2,), float(RANK)))
        dist.all_gather_single(b, fl.full((2,), float(RANK)))
        assert a.tolist() == b.tolist()
        o1, o2 = fl.empty(2), fl.empty(2)
        dist.reduce_scatter_tensor(o1, fl.arange(2 * WORLD, dtype=fl.float32))
        dist.reduce_scatter_single(o2, fl.arange(2 * WORLD, dtype=fl.float32))
        assert o1.tolist() == o2.tolist()
    future = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert len(future) == 2, [str(w.message) for w in future]
    assert "all_gather_single" in str(future[0].message) and "reduce_scatter_single" in str(future[1].message)
    dist.destroy_process_group()


def scenario_groups():
    """new_group, split sub-communicators, a 2-D device mesh with named sub-meshes."""
    init()
    evens = [r for r in range(WORLD) if r % 2 == 0]
    g = dist.new_group(evens)
    if RANK in evens:
        t = fl.full((2,), float(RANK))
        dist.all_reduce(t, group=g)
        assert t.tolist() == [float(sum(evens))] * 2
        assert dist.get_process_group_ranks(g) == evens and g.rank() == evens.index(RANK)
        t = fl.full((1,), float(RANK))
        dist.broadcast(t, src=evens[-1], group=g)
        assert t.tolist() == [float(evens[-1])]
    else:
        assert g is dist.GroupMember.NON_GROUP_MEMBER
    if WORLD == 4:
        mesh = dist.init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
        dp, tp = mesh["dp"], mesh["tp"]
        t = fl.full((1,), float(RANK))
        dist.all_reduce(t, group=tp.get_group())
        row = RANK // 2
        assert t.tolist() == [float(2 * row * 2 + 1)], t.tolist()
        t = fl.full((1,), float(RANK))
        dist.all_reduce(t, group=dp.get_group())
        col = RANK % 2
        assert t.tolist() == [float(col + col + 2)], t.tolist()
        assert mesh.get_coordinate() == [row, col] and dp.size() == 2
    m1 = dist.init_device_mesh("cpu", (WORLD,), mesh_dim_names=("dp",))
    t = fl.ones(1)
    dist.all_reduce(t, group=m1["dp"].get_group())
    assert t.tolist() == [float(WORLD)]
    dist.destroy_process_group()


def scenario_concurrent():
    """Two communicators progress at once: async ops issued from two threads, interleaved."""
    kv = store()
    a = comm(kv, "a")
    b = comm(kv, "b")
    results = {}

    def run(comm, key, n):
        works, ts = [], []
        for i in range(20):
            t = fl.full((n,), float(RANK + i))
            ts.append(t)
            works.append(comm.all_reduce(t, async_op=True))
        for w in works:
            w.wait()
        results[key] = [t[0].item() for t in ts]

    threads = [threading.Thread(target=run, args=(a, "a", 200_000)), threading.Thread(target=run, args=(b, "b", 1000))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    base = WORLD * (WORLD - 1) // 2
    for key in "ab":
        assert results[key] == [float(base + WORLD * i) for i in range(20)], (key, results.get(key))
    # Work introspection and the flight recorder's entries.
    w = a.barrier(async_op=True)
    assert w.wait() is True and w.is_completed() and w.exception() is None
    fr = a.dump_flight_recorder()
    entries = fr["entries"]
    assert entries[-1]["profiling_name"] == "gloo:barrier" and entries[-1]["state"] == "completed"
    assert [e["collective_seq_id"] for e in entries] == list(range(1, 22))
    assert fr["pg_status"]["a"]["last_completed_collective"] == 21
    # Hooks see every op.
    seen = []
    h = b.register_post_hook(lambda op, seq, ins, outs, failed: seen.append((op, seq, failed)))
    b.all_reduce(fl.ones(2))
    h.remove()
    b.all_reduce(fl.ones(2))
    assert seen == [("all_reduce", 21, False)], seen
    a.finalize()
    b.finalize()


def scenario_timeout():
    """The last rank sleeps through a collective: the others fail with a timeout error within
    timeout + 0.5 s, later ops fail at once, and abort hooks and the flight recorder work."""
    kv = store()
    c = comm(kv, "t", timeout=0.5)
    c.all_reduce(fl.ones(4))
    if RANK == WORLD - 1:
        time.sleep(3.0)
        return
    t0 = time.monotonic()
    try:
        c.all_reduce(fl.ones(4))
        raise AssertionError("no timeout")
    except dist.DistBackendError as e:
        took = time.monotonic() - t0
        assert e.kind in ("timeout", "peer failed"), e.kind
        assert e.op == "all_reduce" and e.seq == 2, (e.op, e.seq)
        assert took < 0.5 + 0.5, took
    e2 = expect_raises(lambda: c.all_reduce(fl.ones(4)), dist.DistBackendError, "broken")
    assert e2.op == "all_reduce"
    fr = c.dump_flight_recorder()
    assert fr["entries"][-1]["state"] == "failed" and fr["entries"][-1]["collective_seq_id"] == 2


def scenario_kill():
    """The last rank is SIGKILLed inside a large all_reduce: every survivor raises within 0.5 s."""
    kv = store()
    c = comm(kv, "k", timeout=20)
    c.barrier()
    victim = WORLD - 1
    if RANK == victim:
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        while True:
            c.all_reduce(fl.ones(2_000_000))
    t = fl.ones(2_000_000)
    kill_time = None
    try:
        while True:
            c.all_reduce(t)
            kill_time = time.monotonic()
    except dist.DistBackendError as e:
        waited = time.monotonic() - kill_time if kill_time else 0.0
        print(f"rank {RANK}: failed after {waited:.3f} s since the last completed op: {e.kind}", flush=True)
        assert e.kind in ("peer failed", "timeout")
        # The victim dies 0.3 s after the barrier; an op takes ~tens of ms, so the failure
        # must come well inside 0.5 s of the last completed op.
        assert waited < 0.5, waited


def scenario_reconfigure():
    """The last rank is SIGKILLed; the survivors reconfigure from their init handles and
    complete a correct all_reduce, then go on with the new group."""
    kv = store()
    c = comm(kv, "rc", timeout=10, enable_reconfigure=True)
    kv.set(f"handle{RANK}", c.get_init_handle())
    c.barrier()
    victim = WORLD - 1
    if RANK == victim:
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        while True:
            c.all_reduce(fl.ones(100_000))
    try:
        while True:
            c.all_reduce(fl.ones(100_000))
    except dist.DistBackendError as e:
        failed = time.monotonic()
        assert e.kind in ("peer failed", "timeout"), e.kind
    survivors = [r for r in range(WORLD) if r != victim]
    handles = [kv.get(f"handle{r}").decode() for r in survivors]
    c.reconfigure("after-kill-1", handles)
    assert c.get_size() == len(survivors) and c.get_rank() == survivors.index(RANK)
    t = fl.full((1000,), float(RANK + 1))
    c.all_reduce(t)
    took = time.monotonic() - failed
    print(f"rank {RANK}: failure to first all_reduce after reconfigure: {took * 1000:.1f} ms", flush=True)
    assert t.tolist() == [float(sum(r + 1 for r in survivors))] * 1000
    assert took < 2.0, took
    out = fl.empty(2 * len(survivors))
    c.all_gather_single(out, fl.full((2,), float(RANK)))
    assert out.tolist() == sum(([float(r)] * 2 for r in survivors), [])
    c.finalize()


def scenario_fault(kind, timeout):
    """Loops one kind of op (a collective, a P2P ring or a barrier) until it fails: the test
    SIGKILLs or SIGSTOPs one rank meanwhile. Prints the wall-clock time of the failure."""
    kv = store()
    c = comm(kv, "f", timeout=float(timeout))
    c.barrier()
    print(f"READY {time.time()!r}", flush=True)
    t = fl.ones(200_000)
    r = fl.empty(200_000)
    try:
        while True:
            if kind == "collective":
                c.all_reduce(t)
            elif kind == "p2p":
                b = c.batch_op_create()
                b.send(t, (RANK + 1) % WORLD).recv(r, (RANK - 1) % WORLD).issue()
            else:
                c.barrier()
    except dist.DistBackendError as e:
        print(f"FAILED {time.time()!r} {e.kind}", flush=True)


def scenario_mpi():
    """torch.distributed's API on the mpi backend under mpirun; reconfigure says MPI cannot."""
    dist.init_process_group("mpi")
    assert dist.get_rank() == RANK and dist.get_world_size() == WORLD and dist.get_backend() == "mpi"
    t = fl.full((5,), float(RANK + 1))
    dist.all_reduce(t)
    assert t.tolist() == [float(WORLD * (WORLD + 1) // 2)] * 5
    out = fl.empty(2 * WORLD, dtype=fl.bfloat16)
    dist.all_gather_single(out, fl.full((2,), float(RANK), dtype=fl.bfloat16))
    assert out.to(fl.float32).tolist() == sum(([float(r)] * 2 for r in range(WORLD)), [])
    o = fl.empty(3)
    dist.reduce_scatter_single(o, fl.arange(3 * WORLD, dtype=fl.float32), op=dist.ReduceOp.AVG)
    assert o.tolist() == [float(3 * RANK + i) for i in range(3)]
    expect_raises(lambda: dist.all_reduce(fl.ones(2 + RANK)), dist.DistBackendError, "rank 0: all_reduce (2,)")
    c = dist.new_comm("mpi", name="rc", enable_reconfigure=True)
    expect_raises(lambda: c.reconfigure("u", [c.get_init_handle()]), NotImplementedError, "ULFM")
    c.finalize()
    dist.destroy_process_group()


def scenario_file_init(path):
    """file:// rendezvous (a FileStore shared by the ranks)."""
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=RANK, world_size=WORLD, timeout=30)
    t = fl.full((3,), float(RANK + 1))
    dist.all_reduce(t)
    assert t.tolist() == [float(WORLD * (WORLD + 1) // 2)] * 3
    dist.destroy_process_group()


def scenario_abort_process():
    """With abort_process_on_timeout_or_error=True a timeout runs the abort hooks, dumps the
    flight recorder and ends the process with SIGABRT."""
    kv = store()
    c = comm(kv, "ap", timeout=0.5, abort_process_on_timeout_or_error=True)
    marker = os.path.join(os.environ["FLAMBEAU_FR_DUMP_DIR"], f"hook_{RANK}")
    c.register_abort_hook(lambda: open(marker, "w").write("hook ran"))
    c.all_reduce(fl.ones(4))
    if RANK == WORLD - 1:
        time.sleep(3.0)
        sys.exit(0)
    c.all_reduce(fl.ones(4))
    sys.exit(3)  # not reached: the process aborts


def scenario_desync():
    """Rank 2 skips the 4th all_reduce: ranks 0 and 1 time out in it; every rank dumps its
    flight recorder to $FLAMBEAU_FR_DUMP_DIR for the reader (test_flight_recorder.py)."""
    out = os.environ["FLAMBEAU_FR_DUMP_DIR"]
    kv = store()
    c = comm(kv, "fr", timeout=0.5)
    for _ in range(3):
        c.all_reduce(fl.ones(4))
    if RANK == 2:
        time.sleep(1.5)
        c.dump_flight_recorder_file(out)
        return
    expect_raises(lambda: c.all_reduce(fl.ones(4)), dist.DistBackendError, "all_reduce")
    c.dump_flight_recorder_file(out)


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]](*sys.argv[2:])
