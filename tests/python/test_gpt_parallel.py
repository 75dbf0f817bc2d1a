"""flambeau-gpt --parallel ddp and fsdp under flambeau-run (2 ranks x 1 thread on 127.0.0.1):
the same losses as one process on the same global batch; a checkpoint of the 2-rank run
resumes in one process; a rank SIGKILLed mid-run makes flambeau-run restart the group from
the last checkpoint (--auto-resume), and the run ends bitwise equal to one that was never
interrupted. Every run is bounded (subprocess timeouts; the launcher's process group is
killed by its id)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from safetensors.numpy import load_file

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GPT = os.environ.get("FLAMBEAU_GPT", os.path.join(ROOT, "build", "release", "flambeau-gpt"))
SMALL = ["--config", os.path.join(ROOT, "examples", "gpt", "fortunes.conf"), "--n_layer", "2", "--d_model", "64",
         "--seq_len", "64", "--threads", "1", "--eval_batches", "2"]

pytestmark = pytest.mark.skipif(not os.path.exists(GPT), reason=f"build flambeau-gpt first: {GPT}")


MODES = pytest.mark.parametrize("mode", ["ddp", "fsdp"])


def launch(out_dir, *args, mode="ddp", ranks=2, restarts=0):
    cmd = [sys.executable, "-m", "flambeau.distributed.run", "--nproc-per-node", str(ranks), "--max-restarts",
           str(restarts), GPT, "train", *SMALL, "--parallel", mode, "--out_dir", str(out_dir), *args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def finish(proc, timeout=240):
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher's session: it and its workers
        out, _ = proc.communicate()
        pytest.fail(f"flambeau-run did not finish in {timeout} s:\n{out[-3000:]}")
    assert proc.returncode == 0, out[-3000:]
    return out


def single(out_dir, *args):
    r = subprocess.run([GPT, "train", *SMALL, "--out_dir", str(out_dir), *args], capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]


def losses(out_dir):
    with open(os.path.join(out_dir, "log.jsonl")) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}


def checkpoint(out_dir):
    return load_file(os.path.join(out_dir, "ckpt.safetensors"))


@MODES
def test_two_ranks_train_like_one_process_on_the_global_batch(tmp_path, mode):
    finish(launch(tmp_path / mode, "--steps", "12", mode=mode))
    single(tmp_path / "one", "--steps", "12")
    got, want = losses(tmp_path / mode), losses(tmp_path / "one")
    assert sorted(got) == list(range(12))
    for step in range(12):
        assert abs(got[step] - want[step]) <= 1e-5 * abs(want[step]), (step, got[step], want[step])


@MODES
def test_checkpoint_of_two_ranks_resumes_in_one_process(tmp_path, mode):
    finish(launch(tmp_path / "run", "--steps", "12", "--stop_at", "6", "--checkpoint_every", "6", mode=mode))
    single(tmp_path / "run", "--steps", "12", "--resume")
    single(tmp_path / "one", "--steps", "12")
    got, want = checkpoint(tmp_path / "run"), checkpoint(tmp_path / "one")
    assert sorted(got) == sorted(want)
    for k in want:
        if k.startswith("model."):
            scale = max(float(abs(want[k]).max()), 1e-6)
            assert float(abs(got[k] - want[k]).max()) <= 1e-4 * scale, k


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


@MODES
def test_killed_rank_restarts_the_group_from_the_checkpoint_bitwise(tmp_path, mode):
    args = ["--steps", "160", "--checkpoint_every", "20", "--eval_every", "1000", "--auto-resume"]
    proc = launch(tmp_path / "killed", *args, mode=mode, restarts=1)
    log = tmp_path / "killed" / "log.jsonl"
    deadline, victim = time.monotonic() + 120, None
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
        if log.exists() and any(json.loads(line).get("step", -1) >= 30 for line in log.read_text().splitlines()):
            workers = _children(proc.pid)
            if workers:
                victim = workers[-1]
                os.kill(victim, signal.SIGKILL)
    assert victim is not None, "the run ended before a rank could be killed"
    out = finish(proc)
    assert "resumed from" in out, out[-3000:]
    finish(launch(tmp_path / "whole", *args, mode=mode))
    got, want = checkpoint(tmp_path / "killed"), checkpoint(tmp_path / "whole")
    assert sorted(got) == sorted(want)
    for k in want:
        assert (got[k] == want[k]).all(), f"{k} differs after the restart"
