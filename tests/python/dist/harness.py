"""Runs a scenario of dist/worker.py in N processes on 127.0.0.1 with a watchdog: every
process is ended by its pid when the deadline passes (SIGKILL), and the test fails naming
the ranks that had not finished."""
import os
import signal
import socket
import subprocess
import sys
import time

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
DDP_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_worker.py")


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Result:
    def __init__(self, codes, outputs):
        self.codes, self.outputs = codes, outputs

    def check_ok(self):
        bad = [r for r, c in enumerate(self.codes) if c != 0]
        assert not bad, "\n".join(f"rank {r} exit {self.codes[r]}:\n{self.outputs[r][-4000:]}" for r in bad)


def run(scenario, world_size, *, timeout=60.0, env=None, args=(), backend="gloo", inject=None, script=WORKER):
    """Starts world_size workers (scenario `scenario` of `script`); returns their exit codes
    and output once all end. inject(procs), when given, runs once they have started (fault
    injection)."""
    port = free_port()
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world_size),
                OMP_NUM_THREADS="1", TORCHCOMM_ABORT_ON_ERROR="0", FLAMBEAU_DIST_BACKEND=backend)
    base.update(env or {})
    procs, logs = [], []
    for r in range(world_size):
        log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"fl_dist_{port}_{r}.log"), "w+")
        procs.append(subprocess.Popen([sys.executable, script, scenario, *map(str, args)],
                                      env=dict(base, RANK=str(r)), stdout=log, stderr=subprocess.STDOUT))
        logs.append(log)
    deadline = time.monotonic() + timeout
    try:
        if inject:
            inject(procs)
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.02)
    finally:
        hung = [r for r, p in enumerate(procs) if p.poll() is None]
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait()
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read())
        log.close()
        os.unlink(log.name)
    assert not hung, f"{scenario}: ranks {hung} did not finish in {timeout} s:\n" + "\n".join(
        f"--- rank {r}:\n{outputs[r][-3000:]}" for r in hung)
    return Result([p.returncode for p in procs], outputs)
