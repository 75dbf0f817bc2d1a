"""Collectives, 2 ranks on this machine, side by side in one run: flambeau's gloo backend
against torch 2.13's gloo (both in the same two processes, alternating), and flambeau's mpi
backend against raw MPI (mpi4py, same two mpirun processes). all_reduce, all_gather_single and
reduce_scatter_single, fp32 and bf16, 4 KiB to 64 MiB (the size of one rank's tensor for
all_reduce, of the output for all_gather, of the input for reduce_scatter); medians of
alternating rounds; bus bandwidth as nccl-tests define it. Then the time from SIGKILLing one
of 3 ranks to the survivors' first completed all_reduce after reconfigure().
Usage: .venv/bin/python bench/bench_comms.py [--quick] [--only gloo|mpi|reconfigure]
(prints Markdown tables)"""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

SIZES = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
OPS = ["all_reduce", "all_gather_single", "reduce_scatter_single"]
DTYPES = ["float32", "bfloat16"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bus_factor(op, n):
    return 2 * (n - 1) / n if op == "all_reduce" else (n - 1) / n


def reps_for(nbytes):
    return max(3, min(200, (8 << 20) // max(nbytes, 1)))


def measure(runners, op, nbytes, world, rounds):
    """runners: name -> fn(k) running the op k times. Returns name -> median seconds per op."""
    k = reps_for(nbytes) if nbytes < (4 << 20) else 1
    for fn in runners.values():
        fn(2)
    times = {name: [] for name in runners}
    for _ in range(rounds):
        for name, fn in runners.items():
            t0 = time.perf_counter()
            fn(k)
            times[name].append((time.perf_counter() - t0) / k)
    return {name: statistics.median(v) for name, v in times.items()}


def cases(quick):
    sizes = SIZES[::2] if quick else SIZES
    for op in OPS:
        for dtype in DTYPES:
            for nbytes in sizes:
                yield op, dtype, nbytes


def buffers(lib, op, dtype, nbytes, world, rank):
    dt = getattr(lib, dtype)
    n = nbytes // 2 if dtype == "bfloat16" else nbytes // 4
    if op == "all_reduce":
        return lib.ones(n, dtype=dt), None
    if op == "all_gather_single":
        return lib.empty(n, dtype=dt), lib.ones(n // world, dtype=dt)
    return lib.empty(n // world, dtype=dt), lib.ones(n, dtype=dt)


def flambeau_runner(comm, op, out, inp):
    """fn(k): runs the op k times on flambeau's communicator."""
    def run(k):
        for _ in range(k):
            if op == "all_reduce":
                comm.all_reduce(out)
            elif op == "all_gather_single":
                comm.all_gather_single(out, inp)
            else:
                comm.reduce_scatter_single(out, inp)
    return run


def worker_gloo(rank, world, port, quick):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port + 1))
    import torch
    import torch.distributed as tdist

    import flambeau as fl
    import flambeau.distributed as dist
    torch.set_num_threads(1)
    fl.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, wait_for_workers=False)
    comm = dist.new_comm("gloo", store=store, name="bench", rank=rank, size=world,
                         abort_process_on_timeout_or_error=False, timeout=120)
    tdist.init_process_group("gloo", rank=rank, world_size=world)
    # torch 2.13's names (the old ones warn)
    t_all_gather = getattr(tdist, "all_gather_single", None) or tdist.all_gather_into_tensor
    t_reduce_scatter = getattr(tdist, "reduce_scatter_single", None) or tdist.reduce_scatter_tensor
    rows = []
    for op, dtype, nbytes in cases(quick):
        fo, fi = buffers(fl, op, dtype, nbytes, world, rank)
        to, ti = buffers(torch, op, dtype, nbytes, world, rank)

        run_fl = flambeau_runner(comm, op, fo, fi)

        def run_torch(k, to=to, ti=ti, op=op):
            for _ in range(k):
                if op == "all_reduce":
                    tdist.all_reduce(to)
                elif op == "all_gather_single":
                    t_all_gather(to, ti)
                else:
                    t_reduce_scatter(to, ti)

        t = measure({"flambeau": run_fl, "torch": run_torch}, op, nbytes, world, 11 if nbytes >= (4 << 20) else 7)
        rows.append((op, dtype, nbytes, t["flambeau"], t["torch"]))
    tdist.destroy_process_group()
    comm.finalize()
    return rows


def worker_mpi(quick):
    from mpi4py import MPI

    import flambeau as fl
    import flambeau.distributed as dist
    fl.set_num_threads(1)
    import numpy as np
    world, rank = MPI.COMM_WORLD.Get_size(), MPI.COMM_WORLD.Get_rank()
    comm = dist.new_comm("mpi", name="bench", abort_process_on_timeout_or_error=False, timeout=120)
    raw = MPI.COMM_WORLD.Dup()
    rows = []
    for op, dtype, nbytes in cases(quick):
        if dtype != "float32":
            continue  # mpi4py has no bfloat16
        fo, fi = buffers(fl, op, dtype, nbytes, world, rank)
        n = nbytes // 4
        if op == "all_reduce":
            ro, ri = np.ones(n, np.float32), None
        elif op == "all_gather_single":
            ro, ri = np.empty(n, np.float32), np.ones(n // world, np.float32)
        else:
            ro, ri = np.empty(n // world, np.float32), np.ones(n, np.float32)

        run_fl = flambeau_runner(comm, op, fo, fi)

        def run_raw(k, ro=ro, ri=ri, op=op):
            for _ in range(k):
                if op == "all_reduce":
                    raw.Allreduce(MPI.IN_PLACE, ro)
                elif op == "all_gather_single":
                    raw.Allgather(ri, ro)
                else:
                    raw.Reduce_scatter_block(ri, ro)

        t = measure({"flambeau": run_fl, "raw": run_raw}, op, nbytes, world, 5 if nbytes >= (16 << 20) else 7)
        rows.append((op, dtype, nbytes, t["flambeau"], t["raw"]))
    comm.finalize()
    return rows


def worker_reconfigure(rank, world, port):
    import flambeau as fl
    import flambeau.distributed as dist
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, wait_for_workers=False)
    c = dist.new_comm("gloo", store=store, name="rc", rank=rank, size=world, timeout=10,
                      abort_process_on_timeout_or_error=False, enable_reconfigure=True)
    store.set(f"h{rank}", c.get_init_handle())
    c.barrier()
    victim = world - 1
    t = fl.ones(1 << 16)
    if rank == victim:
        for _ in range(20):
            c.all_reduce(t)
        store.set("killed_at", repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        while True:
            c.all_reduce(t)
    except dist.DistBackendError:
        pass
    survivors = [r for r in range(world) if r != victim]
    c.reconfigure("bench", [store.get(f"h{r}").decode() for r in survivors])
    c.all_reduce(fl.ones(1024))
    done = time.time()
    killed = float(store.get("killed_at").decode())
    return [(done - killed)]


def run_workers(mode, world, quick):
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCHCOMM_ABORT_ON_ERROR="0")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", mode, str(r), str(world), str(port),
                               "1" if quick else "0"], env=env, stdout=subprocess.PIPE, text=True)
             for r in range(world)]
    return collect(procs, 900)


def collect(procs, timeout):
    deadline = time.monotonic() + timeout
    outs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(1, deadline - time.monotonic()))
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
    for out in outs:
        for line in out.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[7:])
    raise RuntimeError("no result from the workers")


def table(rows, other, world, title):
    print(f"\n{title}\n")
    print(f"| op | dtype | size | flambeau | {other} | flambeau busbw GB/s | {other} busbw GB/s | {other} / flambeau |")
    print("|---|---|---|---|---|---|---|---|")
    for op, dtype, nbytes, tf, to in rows:
        bw = lambda t: nbytes / t * bus_factor(op, world) / 1e9  # noqa: E731
        size = f"{nbytes >> 20} MiB" if nbytes >= (1 << 20) else f"{nbytes >> 10} KiB"
        fmt = lambda t: f"{t * 1e6:.0f} µs" if t < 1e-3 else f"{t * 1e3:.2f} ms"  # noqa: E731
        print(f"| {op} | {dtype} | {size} | {fmt(tf)} | {fmt(to)} | {bw(tf):.2f} | {bw(to):.2f} | {to / tf:.2f}x |")


def main():
    if sys.argv[1:2] == ["--worker"]:
        mode = sys.argv[2]
        if mode == "mpi":
            rows = worker_mpi(sys.argv[3] == "1")
            from mpi4py import MPI
            if MPI.COMM_WORLD.Get_rank() == 0:
                print("RESULT " + json.dumps(rows), flush=True)
            return
        rank, world, port, quick = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
        rows = worker_gloo(rank, world, port, quick) if mode == "gloo" else worker_reconfigure(rank, world, port)
        if rank == 0:
            print("RESULT " + json.dumps(rows), flush=True)
        return
    quick = "--quick" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    wanted = lambda part: only in (None, part)  # noqa: E731
    cpu = subprocess.run(["sh", "-c", "lscpu | sed -n 's/Model name: *//p' | head -1"], capture_output=True,
                         text=True).stdout.strip()
    print(f"CPU: {cpu}, {os.cpu_count()} cores; 2 ranks, 1 thread each, 127.0.0.1")
    if wanted("gloo"):
        table(run_workers("gloo", 2, quick), "torch", 2, "flambeau gloo vs torch 2.13 gloo")
    try:
        import mpi4py  # noqa: F401
        if not wanted("mpi"):
            raise StopIteration
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
                   OMPI_MCA_btl_vader_single_copy_mechanism="none")
        p = subprocess.Popen(["mpirun", "-np", "2", "--bind-to", "none", sys.executable, __file__, "--worker", "mpi",
                              "1" if quick else "0"], env=env, stdout=subprocess.PIPE, text=True)
        table(collect([p], 900), "raw MPI", 2, "flambeau mpi vs raw Open MPI (mpi4py), float32")
    except ImportError:
        print("\nmpi: skipped (mpi4py not installed: pip install mpi4py)")
    except StopIteration:
        pass
    if not wanted("reconfigure"):
        return
    times = [run_workers("reconfigure", 3, quick)[0] for _ in range(5)]
    print(f"\nreconfigure: SIGKILL of 1 of 3 ranks to the survivors' first completed all_reduce after "
          f"reconfigure(): median {statistics.median(times) * 1e3:.1f} ms (runs: "
          f"{', '.join(f'{t * 1e3:.0f}' for t in times)} ms)")


if __name__ == "__main__":
    main()
