"""flambeau.distributed on the gloo backend, in real processes on 127.0.0.1 (dist/harness.py:
bounded, a watchdog, processes ended by pid). Each scenario checks its results against a
reference each rank computes alone (dist/worker.py)."""
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest

import flambeau.distributed as dist
from dist import harness

pytestmark = pytest.mark.skipif(not dist.is_gloo_available(), reason="flambeau built without Gloo")


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_op_and_dtype_against_reference(world):
    harness.run("ops", world, timeout=120).check_ok()


@pytest.mark.parametrize("world", [2, 3])
def test_bad_arguments_and_cross_rank_mismatch(world):
    harness.run("errors", world).check_ok()


@pytest.mark.parametrize("world", [2, 4])
def test_groups_split_and_device_mesh(world):
    harness.run("groups", world).check_ok()


def test_two_communicators_progress_concurrently_hooks_flight_recorder():
    harness.run("concurrent", 2).check_ok()


@pytest.mark.parametrize("world", [2, 3])
def test_stopped_peer_times_out_everywhere(world):
    harness.run("timeout", world, timeout=30).check_ok()


@pytest.mark.parametrize("world", [2, 3])
def test_killed_peer_fails_survivors_fast(world):
    res = harness.run("kill", world, timeout=30)
    assert res.codes[-1] == -signal.SIGKILL
    assert all(c == 0 for c in res.codes[:-1]), res.outputs


@pytest.mark.parametrize("world", [2, 3])
def test_reconfigure_after_a_kill(world):
    res = harness.run("reconfigure", world, timeout=30)
    assert res.codes[-1] == -signal.SIGKILL
    assert all(c == 0 for c in res.codes[:-1]), res.outputs


FAULT_CASES = [(seed, kind, sig) for seed, (kind, sig) in enumerate(
    [(k, s) for k in ("collective", "p2p", "barrier") for s in ("KILL", "STOP")] * 2)]


@pytest.mark.parametrize("seed,kind,sig", FAULT_CASES)
def test_fault_injection_never_hangs(seed, kind, sig):
    """SIGKILL or SIGSTOP one of 3 ranks at a seeded random point of a loop of collectives,
    P2P rings or barriers: every survivor raises within 0.5 s of a kill and within
    timeout + 0.5 s of a stop."""
    rng = random.Random(seed)
    world, op_timeout = 3, 1.0
    victim = rng.randrange(world)
    fault = {}

    def inject(procs):
        time.sleep(1.0 + rng.random() * 0.5)  # the workers are past their barrier by then
        fault["at"] = time.time()
        os.kill(procs[victim].pid, getattr(signal, "SIG" + sig))
        if sig == "STOP":
            time.sleep(op_timeout + 1.0)
            os.kill(procs[victim].pid, signal.SIGKILL)  # ended by its pid

    res = harness.run("fault", world, timeout=30, args=(kind, op_timeout), inject=inject)
    limit = 0.5 if sig == "KILL" else op_timeout + 0.5
    for r in range(world):
        if r == victim:
            assert res.codes[r] == -signal.SIGKILL
            continue
        assert res.codes[r] == 0, res.outputs[r]
        failed = [line.split() for line in res.outputs[r].splitlines() if line.startswith("FAILED")]
        assert failed, res.outputs[r]
        took = float(failed[0][1]) - fault["at"]
        assert took < limit, f"rank {r} raised {took:.3f} s after SIG{sig} of rank {victim} ({kind})"


def test_abort_process_runs_hooks_dumps_and_aborts(tmp_path):
    res = harness.run("abort_process", 2, timeout=30, env={"FLAMBEAU_FR_DUMP_DIR": str(tmp_path)})
    assert res.codes[0] == -signal.SIGABRT, res.outputs[0]
    assert (tmp_path / "hook_0").read_text() == "hook ran"
    dump = json.loads((tmp_path / "ap_rank0.json").read_text())
    assert dump["entries"][-1]["state"] == "failed" and dump["entries"][-1]["profiling_name"] == "gloo:all_reduce"
    assert dump["pg_status"]["ap"]["last_completed_collective"] == 1


def test_store_and_backend_errors_in_process():
    s = dist.HashStore()
    s.set("k", "v")
    assert s.get("k") == b"v" and s.add("n", 3) == 3 and s.add("n", 2) == 5
    with pytest.raises(dist.DistStoreError, match="k2"):
        s.wait(["k2"], __import__("datetime").timedelta(milliseconds=50))
    with pytest.raises(ValueError, match="unknown backend"):
        dist.new_comm("nccl", store=s, rank=0, size=1)
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("nope", rank=0, world_size=1, store=s)


def test_single_rank_group_in_process():
    s = dist.HashStore()
    import flambeau as fl
    dist.init_process_group("gloo", store=s, rank=0, world_size=1)
    try:
        t = fl.arange(5, dtype=fl.float32)
        dist.all_reduce(t)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        o = fl.empty(3)
        dist.reduce_scatter_single(o, fl.ones(3))
        assert o.tolist() == [1.0, 1.0, 1.0]
        assert dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.is_initialized()
        with pytest.raises(RuntimeError, match="already initialized"):
            dist.init_process_group("gloo", store=s, rank=0, world_size=1)
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()


def test_file_rendezvous(tmp_path):
    harness.run("file_init", 3, args=(tmp_path / "store",)).check_ok()


def test_unreachable_store_and_port_in_use():
    port = harness.free_port()
    with pytest.raises(dist.DistNetworkError, match=str(port)):
        dist.TCPStore("127.0.0.1", port, 2, False, datetime.timedelta(milliseconds=300))
    master = dist.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
    with pytest.raises(dist.DistNetworkError, match="in use"):
        dist.TCPStore("127.0.0.1", master.port, 1, True, wait_for_workers=False)
    with pytest.raises(dist.DistNetworkError):
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=1, world_size=2,
                                timeout=datetime.timedelta(milliseconds=300))
    assert not dist.is_initialized()


def test_structured_log_lines(tmp_path):
    res = harness.run("errors", 2, env={"FLAMBEAU_COMM_LOG": "1"})
    res.check_ok()
    lines = [ln for ln in res.outputs[1].splitlines() if ln.startswith("[flambeau.distributed]")]
    assert any("rank=1 comm=world op=all_reduce seq=" in ln and "state=completed" in ln for ln in lines), lines[:5]
    assert any("state=failed" in ln and "different shapes" in ln for ln in lines), lines[:5]


@pytest.mark.skipif(not dist.is_mpi_available() or shutil.which("mpirun") is None, reason="no MPI in this build")
@pytest.mark.parametrize("world", [2, 3])
def test_mpi_backend_under_mpirun(world):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    for k in ("RANK", "WORLD_SIZE"):
        env.pop(k, None)
    proc = subprocess.Popen(["mpirun", "-np", str(world), "--bind-to", "none", sys.executable, harness.WORKER, "mpi"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # mpirun and its ranks: the group started above
            proc.wait()
    assert proc.returncode == 0, out[-4000:]
