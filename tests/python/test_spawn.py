"""Tests of flambeau.multiprocessing.spawn / start_processes (torch.multiprocessing's semantics).

The worker functions live at the top of this module so that spawned children can unpickle
them; results travel through files in tmp_path. Every wait is bounded.
"""
import os
import signal
import sys
import time

import pytest

from dist.harness import pid_alive

import flambeau.multiprocessing as fmp


def _write_index(i, folder, tag):
    with open(os.path.join(folder, f"{i}.txt"), "w") as f:
        f.write(f"{tag}:{i}:{os.getpid()}")


def _raise_on_one(i, folder):
    if i == 1:
        raise ValueError(f"boom from {i}")
    _write_index(i, folder, "ok")


def _kill_self_on_one(i):
    if i == 1:
        os.kill(os.getpid(), signal.SIGKILL)


def _exit_3_on_zero(i):
    if i == 0:
        sys.exit(3)


def _sleep_or_raise(i, folder):
    """0 writes its pid and sleeps; 1 raises once 0's pid is written: 0 must be stopped."""
    path = os.path.join(folder, "sleeper.pid")
    if i == 0:
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(path + ".tmp", path)
        time.sleep(60)
    else:
        deadline = time.monotonic() + 20
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.01)
        raise RuntimeError("sibling failure")


def _sleep(i, seconds):
    time.sleep(seconds)


def test_results_through_files(tmp_path):
    assert fmp.spawn(_write_index, args=(str(tmp_path), "r"), nprocs=3) is None
    texts = sorted(p.read_text() for p in tmp_path.iterdir())
    assert [t.split(":")[:2] for t in texts] == [["r", "0"], ["r", "1"], ["r", "2"]]
    pids = {t.split(":")[2] for t in texts}
    assert len(pids) == 3 and str(os.getpid()) not in pids


def test_nprocs_1(tmp_path):
    fmp.spawn(_write_index, args=(str(tmp_path), "one"))
    assert (tmp_path / "0.txt").read_text().startswith("one:0:")


def test_raised_exception_carries_traceback(tmp_path):
    with pytest.raises(fmp.ProcessRaisedException) as info:
        fmp.spawn(_raise_on_one, args=(str(tmp_path),), nprocs=2)
    e = info.value
    assert isinstance(e, fmp.ProcessException)
    assert e.error_index == 1 and e.pid == e.error_pid and e.pid > 0
    msg = str(e)
    assert "-- Process 1 terminated with the following error:" in msg
    assert "Traceback (most recent call last):" in msg
    assert "ValueError: boom from 1" in msg and "_raise_on_one" in msg


def test_sigkill_is_process_exited(tmp_path):
    with pytest.raises(fmp.ProcessExitedException) as info:
        fmp.spawn(_kill_self_on_one, nprocs=2)
    e = info.value
    assert e.error_index == 1 and e.exit_code == -signal.SIGKILL and e.signal_name == "SIGKILL"
    assert "process 1 terminated with signal SIGKILL" in str(e)


def test_nonzero_exit_is_process_exited():
    with pytest.raises(fmp.ProcessExitedException) as info:
        fmp.spawn(_exit_3_on_zero, nprocs=2)
    e = info.value
    assert e.error_index == 0 and e.exit_code == 3 and e.signal_name is None
    assert "process 0 terminated with exit code 3" in str(e)


def test_failure_stops_the_others(tmp_path):
    ctx = fmp.spawn(_sleep_or_raise, args=(str(tmp_path),), nprocs=2, join=False)
    deadline = time.monotonic() + 30
    with pytest.raises(fmp.ProcessRaisedException) as info:
        while not ctx.join(timeout=0.5, grace_period=0.5):
            assert time.monotonic() < deadline
    assert info.value.error_index == 1 and "RuntimeError: sibling failure" in str(info.value)
    sleeper = int((tmp_path / "sleeper.pid").read_text())
    assert sleeper == ctx.pids()[0]
    assert not pid_alive(sleeper)
    assert ctx.processes[0].exitcode == -signal.SIGTERM
    with pytest.raises(fmp.ProcessRaisedException):  # joining again reports the same failure
        ctx.join()


def test_join_false_and_timeout_loop():
    ctx = fmp.spawn(_sleep, args=(0.5,), nprocs=2, join=False)
    assert isinstance(ctx, fmp.ProcessContext)
    assert len(ctx.pids()) == 2 and len(ctx.processes) == 2
    assert all(isinstance(p, int) and p > 0 for p in ctx.pids())
    deadline = time.monotonic() + 30
    polls = 0
    while not ctx.join(timeout=0.05):
        polls += 1
        assert time.monotonic() < deadline
    assert polls >= 1  # the workers sleep longer than one join timeout
    assert ctx.join() is True and ctx.join(timeout=0) is True
    assert [p.exitcode for p in ctx.processes] == [0, 0]


def test_start_processes_and_start_method_warning(tmp_path):
    fmp.start_processes(_write_index, args=(str(tmp_path), "sp"), nprocs=2, start_method="spawn")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0.txt", "1.txt"]
    with pytest.warns(FutureWarning, match="only supports start_method=spawn"):
        fmp.spawn(_write_index, args=(str(tmp_path), "w"), nprocs=1, start_method="fork")
    assert (tmp_path / "0.txt").read_text().startswith("w:0:")


def test_reexports_multiprocessing():
    import multiprocessing
    assert fmp.Process is multiprocessing.Process and fmp.get_context is multiprocessing.get_context
    fmp.set_sharing_strategy("file_system")
    assert fmp.get_sharing_strategy() == "file_system"
    assert fmp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    fmp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError):
        fmp.set_sharing_strategy("nope")
