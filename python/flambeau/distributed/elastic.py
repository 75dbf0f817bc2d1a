"""flambeau.distributed.elastic: the local agent of flambeau-run (torchrun's elastic agent, simplified).

A rendezvous gives this node its rank and the job's size; the agent starts the local workers
as subprocesses with torchrun's environment, watches them, stops the group when one fails and
restarts it up to max_restarts times. Pure Python: never imports flambeau._C.
"""
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

__all__ = ["ChildFailure", "RendezvousError", "RendezvousInfo", "StaticRendezvous", "StoreRendezvous",
           "WorkerGroup", "WorkerSpec", "run_agent", "free_port"]


def _log(msg):
    print(f"[flambeau-run] {msg}", file=sys.stderr, flush=True)


def free_port(host="127.0.0.1"):
    """A TCP port free on host right now (bound to port 0, then released)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


# ---------------------------------------------------------------------------------------------
# Rendezvous: who is in the job, this node's rank, where the master is.

class RendezvousError(RuntimeError):
    pass


@dataclass
class RendezvousInfo:
    node_rank: int  # GROUP_RANK
    nnodes: int  # GROUP_WORLD_SIZE
    rank_offset: int  # global rank of this node's local rank 0
    world_size: int
    master_addr: str
    master_port: int
    round: int = 0


class StaticRendezvous:
    """Fixed membership (--nnodes N --node-rank R): every node runs nproc workers."""

    def __init__(self, nnodes, node_rank, nproc, master_addr, master_port):
        if not 0 <= node_rank < nnodes:
            raise RendezvousError(f"--node-rank {node_rank} is out of range for --nnodes {nnodes}")
        self.info = RendezvousInfo(node_rank, nnodes, node_rank * nproc, nnodes * nproc, master_addr, master_port)

    def next_rendezvous(self):
        return self.info

    def membership_changed(self):
        return False

    def request_restart(self):
        pass

    def finish(self):
        pass


class StoreRendezvous:
    """Elastic membership (--nnodes MIN:MAX) through a key-value store with c10d TCPStore's API
    (set, get, add, compare_set, wait). Nodes join numbered rounds:

    * the round is open until MAX nodes joined, or MIN joined and last_call_timeout passed since;
      the node that sees this first closes it with the count, the others read it;
    * a node arriving in a closed round with room left (count < MAX) starts the next round, and
      the nodes running see the round number change and join it (a membership change);
    * a node whose workers failed starts the next round too (a restart of every node).
    Node ranks follow the arrival order; each node publishes its nproc and rank 0 the master."""

    def __init__(self, store, run_id, min_nodes, max_nodes, nproc, local_addr, join_timeout=600.0,
                 last_call_timeout=30.0, is_host=False, poll_s=0.05, exit_timeout=300.0):
        if not 1 <= min_nodes <= max_nodes:
            raise RendezvousError(f"bad node range {min_nodes}:{max_nodes}")
        self.store, self.min, self.max, self.nproc = store, min_nodes, max_nodes, nproc
        self.prefix = f"/flambeau/rdzv/{run_id}/"
        self.local_addr = local_addr
        self.join_timeout, self.last_call_timeout = join_timeout, last_call_timeout
        self.is_host, self.poll_s, self.exit_timeout = is_host, poll_s, exit_timeout
        self.round = None

    def _key(self, *parts):
        return self.prefix + "/".join(str(p) for p in parts)

    def _counter(self, *parts):
        return int(self.store.add(self._key(*parts), 0))  # reads (and creates as 0) a counter

    def _current_round(self):
        return self._counter("round")

    def _bump_round(self, r):
        """Starts round r+1 unless someone already moved past r."""
        self.store.compare_set(self._key("round"), str(r), str(r + 1))

    def _close(self, r, n):
        """Closes round r with n nodes unless already closed; returns the final size."""
        self._counter(r, "closed")  # make sure the key exists with "0"
        return int(self.store.compare_set(self._key(r, "closed"), "0", str(n)))

    def next_rendezvous(self):
        deadline = time.monotonic() + self.join_timeout
        while True:
            r = self._current_round()
            arrival = int(self.store.add(self._key(r, "joined"), 1))  # 1-based
            size = self._wait_closed(r, deadline)
            if size is None:
                continue  # the round moved on while we waited: join the new one
            if arrival <= size:
                return self._publish(r, arrival - 1, size)
            # Too late for round r: start the next one if it has room, else wait for a change.
            if size < self.max:
                self._bump_round(r)
            else:
                _log(f"rendezvous round {r} is full ({size} nodes); waiting for the next round")
                while self._current_round() == r:
                    self._check_deadline(deadline, r)
                    time.sleep(self.poll_s)

    def _check_deadline(self, deadline, r):
        if time.monotonic() > deadline:
            raise RendezvousError(f"rendezvous timed out after {self.join_timeout:g} s in round {r} "
                                  f"(nodes {self.min}:{self.max}, {self._counter(r, 'joined')} joined)")

    def _wait_closed(self, r, deadline):
        """Waits until round r is closed and returns its size (None if the round number moved on)."""
        last_call = None
        while True:
            size = self._counter(r, "closed")
            if size:
                return size
            if self._current_round() != r:
                return None
            joined = self._counter(r, "joined")
            if joined >= self.max:
                return self._close(r, self.max)
            if joined >= self.min:
                last_call = last_call or time.monotonic() + self.last_call_timeout
                if time.monotonic() >= last_call:
                    return self._close(r, joined)
            self._check_deadline(deadline, r)
            time.sleep(self.poll_s)

    def _publish(self, r, node_rank, size):
        """Exchanges nproc (and the master address from node 0) within round r."""
        self.round = r
        if node_rank == 0:
            self.store.set(self._key(r, "master"), f"{self.local_addr}:{free_port(self.local_addr)}")
        self.store.set(self._key(r, "nproc", node_rank), str(self.nproc))
        keys = [self._key(r, "nproc", i) for i in range(size)] + [self._key(r, "master")]
        self.store.wait(keys, datetime.timedelta(seconds=self.join_timeout))
        nprocs = [int(_text(self.store.get(self._key(r, "nproc", i)))) for i in range(size)]
        addr, _, port = _text(self.store.get(self._key(r, "master"))).rpartition(":")
        return RendezvousInfo(node_rank, size, sum(nprocs[:node_rank]), sum(nprocs), addr, int(port), r)

    def membership_changed(self):
        """Whether another node started a new round (a node joined, or one restarts)."""
        return self.round is not None and self._current_round() != self.round

    def request_restart(self):
        """This node's workers failed: every node restarts in the next round."""
        if self.round is not None:
            self._bump_round(self.round)

    def finish(self):
        """This node is done. The node hosting the store waits (bounded) until every node of its
        round said so, since the others may still need the store."""
        if self.round is None:
            return
        self.store.add(self._key(self.round, "done"), 1)
        if not self.is_host:
            return
        size = self._counter(self.round, "closed")
        deadline = time.monotonic() + self.exit_timeout
        while self._counter(self.round, "done") < size and self._current_round() == self.round:
            if time.monotonic() > deadline:
                _log("timed out waiting for the other nodes to finish")
                return
            time.sleep(self.poll_s)


def _text(value):
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


# ---------------------------------------------------------------------------------------------
# The local worker group.

@dataclass
class WorkerSpec:
    cmd: list  # argv of a worker
    nproc: int
    max_restarts: int = 0
    monitor_interval: float = 0.1
    run_id: str = "none"
    role: str = "default"
    shutdown_timeout: float = 30.0
    extra_env: dict = field(default_factory=dict)  # e.g. OMP_NUM_THREADS


@dataclass
class ChildFailure:
    local_rank: int
    rank: int
    pid: int
    exitcode: int  # negative: killed by signal -exitcode
    time: float

    def describe(self):
        if self.exitcode < 0:
            return f"killed by signal {signal_name(-self.exitcode)} ({-self.exitcode})"
        return f"exit code {self.exitcode}"


class WorkerGroup:
    """The local workers of one attempt: started with Popen, each in its own process group."""

    def __init__(self, spec, info, restart_count):
        self.spec, self.info, self.restart_count = spec, info, restart_count
        self.procs = []

    def env(self, local_rank):
        info, spec = self.info, self.spec
        rank = info.rank_offset + local_rank
        env = dict(os.environ)
        env.update(spec.extra_env)
        env.update({
            "RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(info.world_size),
            "LOCAL_WORLD_SIZE": str(spec.nproc), "GROUP_RANK": str(info.node_rank),
            "GROUP_WORLD_SIZE": str(info.nnodes), "ROLE_NAME": spec.role, "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(info.world_size), "MASTER_ADDR": info.master_addr,
            "MASTER_PORT": str(info.master_port), "TORCHELASTIC_RESTART_COUNT": str(self.restart_count),
            "TORCHELASTIC_MAX_RESTARTS": str(spec.max_restarts), "TORCHELASTIC_RUN_ID": spec.run_id,
            "TORCHELASTIC_USE_AGENT_STORE": "False",
        })
        return env

    def start(self):
        for local_rank in range(self.spec.nproc):
            self.procs.append(subprocess.Popen(self.spec.cmd, env=self.env(local_rank), start_new_session=True))

    def pids(self):
        return [p.pid for p in self.procs]

    def poll(self):
        """'running', 'succeeded', or the list of ChildFailure of the workers that failed."""
        now = time.time()
        codes = [p.poll() for p in self.procs]
        failures = [ChildFailure(i, self.info.rank_offset + i, p.pid, c, now)
                    for i, (p, c) in enumerate(zip(self.procs, codes)) if c not in (None, 0)]
        if failures:
            return failures
        return "succeeded" if all(c == 0 for c in codes) else "running"

    def stop(self, sig=signal.SIGTERM):
        """Sends sig to each worker still running (to its process group, which the worker leads),
        SIGKILL to those left after shutdown_timeout, and reaps them all."""
        def send(p, s):
            try:
                os.killpg(p.pid, s)  # the worker and whatever it started
            except OSError:
                try:
                    p.send_signal(s)
                except OSError:
                    pass

        running = [p for p in self.procs if p.poll() is None]
        for p in running:
            send(p, sig)
        deadline = time.monotonic() + self.spec.shutdown_timeout
        for p in running:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _log(f"worker pid {p.pid} did not exit after {signal_name(sig)}; sending SIGKILL")
                send(p, signal.SIGKILL)
                p.wait()


# ---------------------------------------------------------------------------------------------
# The agent loop.

class _SignalReceived(Exception):
    def __init__(self, signum):
        super().__init__(signal_name(signum))
        self.signum = signum


def _install_signal_handlers():
    """SIGINT/SIGTERM/SIGHUP/SIGQUIT raise _SignalReceived in the agent (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum, frame):
        raise _SignalReceived(signum)

    old = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"):
        sig = getattr(signal, name, None)
        if sig is not None:
            old[sig] = signal.signal(sig, handler)
    return old


def format_failures(script, failures, hostname=None):
    """torchrun's ChildFailedError summary: the root cause (first failure) and the others."""
    hostname = hostname or socket.gethostname()
    failures = sorted(failures, key=lambda f: (f.time, f.local_rank))
    bar, thin = "=" * 60, "-" * 60

    def block(i, f):
        stamp = datetime.datetime.fromtimestamp(f.time).strftime("%Y-%m-%d_%H:%M:%S")
        if f.exitcode < 0:
            detail = f"Signal {-f.exitcode} ({signal_name(-f.exitcode)}) received by PID {f.pid}"
        else:
            detail = "the worker's own output above shows its traceback"
        return (f"[{i}]:\n  time      : {stamp}\n  host      : {hostname}\n"
                f"  rank      : {f.rank} (local_rank: {f.local_rank})\n"
                f"  exitcode  : {f.exitcode} (pid: {f.pid})\n  traceback : {detail}")

    others = "\n".join(block(i + 1, f) for i, f in enumerate(failures[1:])) or "  <NO_OTHER_FAILURES>"
    return (f"ChildFailedError:\n{bar}\n{script} FAILED\n{thin}\nFailures:\n{others}\n{thin}\n"
            f"Root Cause (first observed failure):\n{block(0, failures[0])}\n{bar}")


def run_agent(spec, rendezvous, script_name="worker"):
    """Runs the local workers until they all succeed (returns 0) or fail with no restart left
    (prints the summary, returns 1). A signal to the agent stops the workers (returns 128+signum)."""
    old_handlers = _install_signal_handlers()
    group = None
    restart_count = 0
    try:
        while True:
            info = rendezvous.next_rendezvous()
            group = WorkerGroup(spec, info, restart_count)
            group.start()
            while True:
                time.sleep(spec.monitor_interval)
                state = group.poll()
                if state == "succeeded":
                    group = None
                    rendezvous.finish()
                    return 0
                if state != "running":
                    group.stop()
                    group = None
                    if restart_count >= spec.max_restarts:
                        rendezvous.request_restart()  # the other nodes stop too
                        print(format_failures(script_name, state), file=sys.stderr, flush=True)
                        return 1
                    restart_count += 1
                    _log(f"worker group failed ({', '.join(f'local_rank {f.local_rank}: {f.describe()}' for f in state)}); "
                         f"restarting ({restart_count}/{spec.max_restarts})")
                    rendezvous.request_restart()
                    break
                if rendezvous.membership_changed():
                    _log("membership changed; restarting the worker group")
                    group.stop()
                    group = None
                    break
    except _SignalReceived as e:
        _log(f"received {signal_name(e.signum)}; stopping the workers")
        for sig in old_handlers:  # a second signal must not interrupt the shutdown
            signal.signal(sig, lambda *_: None)
        if group is not None:
            group.stop(e.signum)
            group = None
        return 128 + e.signum
    finally:
        if group is not None:  # an unexpected error: leave no worker behind
            group.stop()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
