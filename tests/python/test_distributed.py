"""flambeau.distributed on the gloo backend, in real processes on 127.0.0.1 (dist/harness.py:
bounded, a watchdog, processes ended by pid). Each scenario checks its results against a
reference each rank computes alone (dist/worker.py)."""
import glob
import json
import os
import signal

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
