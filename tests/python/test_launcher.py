"""Tests of flambeau-run (flambeau.distributed.run) and its agent/rendezvous (flambeau.distributed.elastic).

Workers are tiny scripts written to tmp_path that import nothing of flambeau and write what they
see to files; everything runs on 127.0.0.1, every wait is bounded and processes end by pid.
The elastic rendezvous is tested with an in-process store that has TCPStore's API.
"""
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from dist.harness import pid_alive

from flambeau.distributed import elastic, run

ENV_KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
            "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS"]

# Writes the worker's environment to <out>/env_<RANK>_<restart>.json, then acts per MODE.
WORKER = textwrap.dedent("""
    import json, os, sys, time
    out = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "ok"
    env = {k: os.environ.get(k) for k in %r}
    env["argv"] = sys.argv[1:]
    env["pid"] = os.getpid()
    rank, restart = env["RANK"], int(env["TORCHELASTIC_RESTART_COUNT"])
    path = os.path.join(out, f"env_{rank}_{restart}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(env, f)
    os.replace(path + ".tmp", path)
    def wait_for(name):  # bounded wait for a file written by another worker
        deadline = time.monotonic() + 20
        while not os.path.exists(os.path.join(out, name)) and time.monotonic() < deadline:
            time.sleep(0.01)
    if mode == "fail_first" and rank == "1" and restart == 0:
        sys.exit(5)
    if mode == "always_fail":  # local rank 1 fails once its sibling runs; the sibling sleeps
        if os.environ["LOCAL_RANK"] == "1":
            wait_for(f"env_0_{restart}.json")
            sys.exit(3)
        time.sleep(60)
    if mode == "sleep":
        time.sleep(60)
""" % ENV_KEYS)


def _child_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS" and not k.startswith("PET_")}
    env.update(extra)
    return env


def _launcher_cmd(*args):
    return [sys.executable, "-m", "flambeau.distributed.run", *map(str, args)]


def _launch(tmp_path, *args, timeout=30, env=None):
    return subprocess.run(_launcher_cmd(*args), cwd=tmp_path, env=env or _child_env(), capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def worker(tmp_path):
    path = tmp_path / "worker.py"
    path.write_text(WORKER)
    out = tmp_path / "out"
    out.mkdir()
    return path, out


def _envs(out):
    """{(rank, restart): env} of the files the workers wrote."""
    found = {}
    for p in out.glob("env_*.json"):
        _, rank, restart = p.stem.split("_")
        found[int(rank), int(restart)] = json.loads(p.read_text())
    return found


def _wait_pids_gone(pids, seconds=5):
    deadline = time.monotonic() + seconds
    while any(map(pid_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.02)
    return [p for p in pids if pid_alive(p)]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_standalone_env(worker, tmp_path):
    script, out = worker
    r = _launch(tmp_path, "--standalone", "--nproc-per-node", 3, script, out, "ok")
    assert r.returncode == 0, r.stderr
    envs = _envs(out)
    assert sorted(envs) == [(0, 0), (1, 0), (2, 0)]
    ports = {e["MASTER_PORT"] for e in envs.values()}
    run_ids = {e["TORCHELASTIC_RUN_ID"] for e in envs.values()}
    assert len(ports) == 1 and int(ports.pop()) > 0 and len(run_ids) == 1 and run_ids.pop() != "none"
    for (rank, _), e in envs.items():
        assert e["RANK"] == e["LOCAL_RANK"] == e["ROLE_RANK"] == str(rank)
        assert e["WORLD_SIZE"] == e["LOCAL_WORLD_SIZE"] == e["ROLE_WORLD_SIZE"] == "3"
        assert e["GROUP_RANK"] == "0" and e["GROUP_WORLD_SIZE"] == "1" and e["ROLE_NAME"] == "default"
        assert e["MASTER_ADDR"] == "127.0.0.1"
        assert e["TORCHELASTIC_RESTART_COUNT"] == "0" and e["TORCHELASTIC_MAX_RESTARTS"] == "0"
        assert e["argv"] == [str(out), "ok"]


def test_static_two_nodes(worker, tmp_path):
    """Two agents on one machine: node 0 with --master-addr/--master-port, node 1 with
    --rdzv-endpoint and torchrun's underscore spellings."""
    script, out = worker
    port = _free_port()
    node0 = _launcher_cmd("--nnodes", 2, "--node-rank", 0, "--nproc-per-node", 2, "--master-addr", "127.0.0.1",
                          "--master-port", port, "--rdzv-id", "job7", script, out)
    node1 = _launcher_cmd("--nnodes=2", "--node_rank=1", "--nproc_per_node=2", "--rdzv_endpoint", f"127.0.0.1:{port}",
                          "--run_id", "job7", script, out)
    agents = [subprocess.Popen(c, cwd=tmp_path, env=_child_env(), stderr=subprocess.PIPE, text=True)
              for c in (node0, node1)]
    for a in agents:
        _, err = a.communicate(timeout=30)
        assert a.returncode == 0, err
    envs = _envs(out)
    assert sorted(envs) == [(r, 0) for r in range(4)]
    for (rank, _), e in envs.items():
        assert e["RANK"] == e["ROLE_RANK"] == str(rank)
        assert e["LOCAL_RANK"] == str(rank % 2) and e["GROUP_RANK"] == str(rank // 2)
        assert e["WORLD_SIZE"] == e["ROLE_WORLD_SIZE"] == "4" and e["LOCAL_WORLD_SIZE"] == "2"
        assert e["GROUP_WORLD_SIZE"] == "2"
        assert (e["MASTER_ADDR"], e["MASTER_PORT"]) == ("127.0.0.1", str(port))
        assert e["TORCHELASTIC_RUN_ID"] == "job7"


def test_restart_after_a_first_failure(worker, tmp_path):
    script, out = worker
    r = _launch(tmp_path, "--standalone", "--nproc-per-node", 3, "--max-restarts", 1, script, out, "fail_first")
    assert r.returncode == 0, r.stderr
    assert "restarting (1/1)" in r.stderr and "exit code 5" in r.stderr
    envs = _envs(out)
    assert {(k, 1) for k in range(3)} <= set(envs)  # every worker ran again
    for rank in range(3):
        e = envs[rank, 1]
        assert e["TORCHELASTIC_RESTART_COUNT"] == "1" and e["TORCHELASTIC_MAX_RESTARTS"] == "1"
    assert envs[1, 0]["TORCHELASTIC_RESTART_COUNT"] == "0"
    assert envs[1, 0]["pid"] != envs[1, 1]["pid"]


def test_always_failing_stops_siblings(worker, tmp_path):
    script, out = worker
    r = _launch(tmp_path, "--nproc-per-node", 2, "--max-restarts", 1, "--monitor-interval", 0.05, script, out,
                "always_fail")
    assert r.returncode != 0
    envs = _envs(out)
    assert sorted(envs) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    sleepers = [envs[0, 0]["pid"], envs[0, 1]["pid"]]  # local rank 0 slept 60 s in both attempts
    assert _wait_pids_gone(sleepers) == []
    assert "ChildFailedError" in r.stderr and f"{script} FAILED" in r.stderr
    assert "rank      : 1 (local_rank: 1)" in r.stderr and "exitcode  : 3" in r.stderr
    assert "<NO_OTHER_FAILURES>" in r.stderr  # the sibling was stopped, not failed


def test_signal_death_is_reported(tmp_path):
    script = tmp_path / "die.py"
    script.write_text("import os, signal\nif os.environ['RANK'] == '0':\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    r = _launch(tmp_path, "--standalone", "--nproc-per-node", 2, script)
    assert r.returncode == 1
    assert "exitcode  : -9" in r.stderr and "Signal 9 (SIGKILL)" in r.stderr and "local_rank: 0" in r.stderr


def test_sigterm_to_agent_stops_workers(worker, tmp_path):
    script, out = worker
    agent = subprocess.Popen(_launcher_cmd("--standalone", "--nproc-per-node", 2, script, out, "sleep"),
                             cwd=tmp_path, env=_child_env(), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while len(_envs(out)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        pids = [e["pid"] for e in _envs(out).values()]
        assert len(pids) == 2
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=20)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    assert agent.returncode == 128 + signal.SIGTERM, err
    assert "received SIGTERM" in err
    assert _wait_pids_gone(pids) == []


def test_omp_num_threads(worker, tmp_path):
    script, out = worker
    r = _launch(tmp_path, "--standalone", "--nproc-per-node", 2, script, out)
    assert r.returncode == 0, r.stderr
    expected = str(max(1, len(os.sched_getaffinity(0)) // 2))
    assert {e["OMP_NUM_THREADS"] for e in _envs(out).values()} == {expected}
    for p in out.iterdir():
        p.unlink()
    r = _launch(tmp_path, "--standalone", "--nproc-per-node", 2, script, out, env=_child_env(OMP_NUM_THREADS="7"))
    assert r.returncode == 0, r.stderr
    assert {e["OMP_NUM_THREADS"] for e in _envs(out).values()} == {"7"}


def test_nproc_per_node_cpu(worker, tmp_path):
    script, out = worker
    r = _launch(tmp_path, "--standalone", "--nproc-per-node", "cpu", script, out)
    assert r.returncode == 0, r.stderr
    n = len(os.sched_getaffinity(0))
    assert sorted(_envs(out)) == [(k, 0) for k in range(n)]
    assert {e["OMP_NUM_THREADS"] for e in _envs(out).values()} == {"1"}


def test_module_mode_and_no_python(worker, tmp_path):
    script, out = worker
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "job.py").write_text(script.read_text())
    env = _child_env(PYTHONPATH=str(tmp_path))
    r = _launch(tmp_path, "--standalone", "--nproc_per_node", 2, "-m", "mypkg.job", out, "ok", env=env)
    assert r.returncode == 0, r.stderr
    envs = _envs(out)
    assert sorted(envs) == [(0, 0), (1, 0)] and envs[0, 0]["argv"] == [str(out), "ok"]
    for p in out.iterdir():
        p.unlink()
    r = _launch(tmp_path, "--standalone", "--no-python", sys.executable, script, out)
    assert r.returncode == 0, r.stderr
    assert sorted(_envs(out)) == [(0, 0)]


def test_bad_arguments(tmp_path):
    for args in (["-m", "--no-python", "x"], ["--nnodes", "2:1", "x"], ["--nproc-per-node", "gpu", "x"],
                 ["--nnodes", "1:2", "x"], ["--nnodes", "2", "--node-rank", "2", "x"]):
        r = _launch(tmp_path, *args)
        assert r.returncode == 2, args
        assert "flambeau-run: error:" in r.stderr, (args, r.stderr)
    assert "needs --rdzv-endpoint" in _launch(tmp_path, "--nnodes", "1:2", "x").stderr


def test_parsing_helpers():
    assert run.parse_nnodes("3") == (3, 3) and run.parse_nnodes("1:4") == (1, 4)
    assert run.parse_endpoint("10.0.0.1:1234") == ("10.0.0.1", 1234)
    assert run.parse_endpoint("[::1]:1234") == ("::1", 1234)
    assert run.parse_endpoint("myhost") == ("myhost", run.DEFAULT_MASTER_PORT)
    assert run.parse_rdzv_conf("join_timeout=5,last_call_timeout=1") == {"join_timeout": "5", "last_call_timeout": "1"}
    args = run.parse_args(["--nproc_per_node=4", "--max_restarts=2", "--monitor_interval=0.5", "s.py", "--lr", "1"])
    assert (args.nproc_per_node, args.max_restarts, args.monitor_interval) == ("4", 2, 0.5)
    assert args.training_script == "s.py" and args.training_script_args == ["--lr", "1"]


def test_launcher_does_not_load_the_extension():
    """run.py and elastic.py import no compiled code: load them under a stub flambeau package."""
    folder = os.path.dirname(run.__file__)
    code = textwrap.dedent(f"""
        import sys, types
        for name, path in (("flambeau", []), ("flambeau.distributed", [{folder!r}])):
            sys.modules[name] = types.ModuleType(name)
            sys.modules[name].__path__ = path
        import flambeau.distributed.run
        print(sorted(m for m in sys.modules if m.startswith("flambeau")))
    """)
    r = subprocess.run([sys.executable, "-c", code], env=_child_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(["flambeau", "flambeau.distributed", "flambeau.distributed.elastic",
                                    "flambeau.distributed.run"])


# --- the elastic rendezvous, with an in-process store ------------------------------------------

class FakeStore:
    """In-process, thread-safe store with c10d TCPStore's methods (values are bytes)."""

    def __init__(self, timeout=10.0):
        self.data, self.timeout = {}, timeout
        self.cond = threading.Condition()

    def set(self, key, value):
        with self.cond:
            self.data[key] = value.encode() if isinstance(value, str) else bytes(value)
            self.cond.notify_all()

    def get(self, key):
        self.wait([key])
        with self.cond:
            return self.data[key]

    def add(self, key, n):
        with self.cond:
            value = int(self.data.get(key, b"0")) + n
            self.data[key] = str(value).encode()
            self.cond.notify_all()
            return value

    def compare_set(self, key, expected, desired):
        expected, desired = (v.encode() if isinstance(v, str) else v for v in (expected, desired))
        with self.cond:
            current = self.data.get(key)
            if (current is None and expected == b"") or current == expected:
                self.data[key] = desired
                self.cond.notify_all()
                return desired
            return expected if current is None else current

    def wait(self, keys, timeout=None):
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else (timeout or self.timeout)
        with self.cond:
            if not self.cond.wait_for(lambda: all(k in self.data for k in keys), seconds):
                raise RuntimeError(f"wait timed out for {keys}")


def _rdzv(store, nproc=1, lo=1, hi=3, last_call=0.3, **kw):
    return elastic.StoreRendezvous(store, "job", lo, hi, nproc, "127.0.0.1", join_timeout=10,
                                   last_call_timeout=last_call, poll_s=0.01, **kw)


def _in_threads(fns):
    """Runs the callables in threads; returns their results (re-raises the first error)."""
    results, errors = [None] * len(fns), []

    def call(i):
        try:
            results[i] = fns[i]()
        except BaseException as e:  # noqa: B902
            errors.append(e)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]
    return results


def test_fake_store_semantics():
    s = FakeStore(timeout=0.1)
    assert s.add("n", 2) == 2 and s.add("n", 0) == 2 and s.get("n") == b"2"
    assert s.compare_set("k", "", "a") == b"a" and s.compare_set("k", "b", "c") == b"a"
    assert s.compare_set("k", "a", "c") == b"c" and s.compare_set("missing", "x", "y") == b"x"
    with pytest.raises(RuntimeError):
        s.wait(["absent"], datetime.timedelta(seconds=0.05))


def test_rendezvous_reaches_max_nodes():
    store = FakeStore()
    rdzvs = [_rdzv(store, nproc=n, lo=2, hi=3, last_call=30) for n in (1, 2, 3)]
    infos = _in_threads([r.next_rendezvous for r in rdzvs])  # closes at MAX without the last call
    assert sorted(i.node_rank for i in infos) == [0, 1, 2]
    assert {(i.nnodes, i.world_size, i.round) for i in infos} == {(3, 6, 0)}
    assert len({(i.master_addr, i.master_port) for i in infos}) == 1
    by_rank = sorted(zip(infos, (1, 2, 3)), key=lambda x: x[0].node_rank)
    offsets = [i.rank_offset for i, _ in by_rank]
    nprocs = [n for _, n in by_rank]
    assert offsets == [0, nprocs[0], nprocs[0] + nprocs[1]]


def test_rendezvous_min_nodes_after_last_call():
    store = FakeStore()
    infos = _in_threads([_rdzv(store, lo=2, hi=3).next_rendezvous for _ in range(2)])  # closes 0.3 s after MIN
    assert sorted(i.node_rank for i in infos) == [0, 1] and {i.nnodes for i in infos} == {2}


def test_rendezvous_late_node_triggers_a_new_round():
    store = FakeStore()
    a, b, c = (_rdzv(store, lo=2, hi=3) for _ in range(3))
    first = _in_threads([a.next_rendezvous, b.next_rendezvous])
    assert {(i.nnodes, i.round) for i in first} == {(2, 0)}
    assert not a.membership_changed()
    a.last_call_timeout = b.last_call_timeout = c.last_call_timeout = 30  # round 1 closes only at MAX

    def rejoin(r):
        deadline = time.monotonic() + 10
        while not r.membership_changed():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        return r.next_rendezvous()

    second = _in_threads([c.next_rendezvous, lambda: rejoin(a), lambda: rejoin(b)])
    assert {(i.nnodes, i.round, i.world_size) for i in second} == {(3, 1, 3)}
    assert sorted(i.node_rank for i in second) == [0, 1, 2]


def test_rendezvous_restart_request_and_finish():
    store = FakeStore()
    a, b = _rdzv(store, lo=2, hi=2, is_host=True), _rdzv(store, lo=2, hi=2)
    _in_threads([a.next_rendezvous, b.next_rendezvous])
    b.request_restart()
    assert a.membership_changed() and b.membership_changed()
    infos = _in_threads([a.next_rendezvous, b.next_rendezvous])
    assert {i.round for i in infos} == {1}
    _in_threads([a.finish, b.finish])  # the host waits for b, bounded
    assert store.add("/flambeau/rdzv/job/1/done", 0) == 2


def test_rendezvous_timeout():
    r = elastic.StoreRendezvous(FakeStore(), "job", 2, 2, 1, "127.0.0.1", join_timeout=0.2, poll_s=0.01)
    with pytest.raises(elastic.RendezvousError, match="timed out"):
        r.next_rendezvous()


def test_elastic_agents_with_restart(worker, tmp_path):
    """Two agents (threads) share a store; a worker fails on the first attempt: its node restarts
    (TORCHELASTIC_RESTART_COUNT 1) and the other node follows as a membership change."""
    script, out = worker
    flaky = tmp_path / "flaky.py"
    flaky.write_text(textwrap.dedent(f"""
        import os, runpy, sys, time
        out, rank = sys.argv[1], os.environ["RANK"]
        first = not os.path.exists(os.path.join(out, f"started_{{rank}}"))
        open(os.path.join(out, f"started_{{rank}}"), "a").close()
        if first:  # attempt 0: rank 3 fails once all 4 started; the others wait to be stopped
            if rank == "3":
                deadline = time.monotonic() + 20
                while (len([n for n in os.listdir(out) if n.startswith("started_")]) < 4
                       and time.monotonic() < deadline):
                    time.sleep(0.01)
                sys.exit(4)
            time.sleep(60)
        runpy.run_path({str(script)!r}, run_name="__main__")
    """))
    store = FakeStore(timeout=20)

    def agent(host):
        spec = elastic.WorkerSpec(cmd=[sys.executable, str(flaky), str(out)], nproc=2, max_restarts=1,
                                  monitor_interval=0.05, run_id="job", shutdown_timeout=5)
        rdzv = _rdzv(store, nproc=2, lo=2, hi=2, is_host=host)
        return elastic.run_agent(spec, rdzv)

    assert _in_threads([lambda: agent(True), lambda: agent(False)]) == [0, 0]
    envs = [json.loads(p.read_text()) for p in out.glob("env_*.json")]
    assert sorted(int(e["RANK"]) for e in envs) == [0, 1, 2, 3]
    assert {(e["WORLD_SIZE"], e["GROUP_WORLD_SIZE"], e["LOCAL_WORLD_SIZE"]) for e in envs} == {("4", "2", "2")}
    assert len({e["MASTER_PORT"] for e in envs}) == 1
    # The node whose worker failed counts a restart; the other restarted for the membership change.
    counts = sorted(e["TORCHELASTIC_RESTART_COUNT"] for e in envs)
    assert counts == ["0", "0", "1", "1"]


def test_elastic_cli_with_fake_store(worker, tmp_path, monkeypatch):
    """run.main with --nnodes 2:3 in two threads, TCPStore replaced by the in-process store: the
    first agent hosts it; the round closes after the last call with 2 nodes of 2 and 1 workers."""
    script, out = worker
    store, hosts = FakeStore(), []

    def fake_create_store(host, port, timeout_s, is_host):
        assert (host, port, timeout_s, is_host) == ("127.0.0.1", 29999, 20.0, True)
        hosts.append(not hosts)
        return store, hosts[-1]

    monkeypatch.setattr(run, "create_store", fake_create_store)

    def agent(nproc):
        return run.main(["--nnodes", "2:3", "--nproc-per-node", str(nproc), "--rdzv-endpoint", "127.0.0.1:29999",
                         "--rdzv-id", "cli", "--rdzv-conf", "join_timeout=20,last_call_timeout=0.5",
                         "--monitor-interval", "0.05", str(script), str(out)])

    assert _in_threads([lambda: agent(2), lambda: agent(1)]) == [0, 0]
    assert sorted(hosts) == [False, True]
    envs = _envs(out)
    assert sorted(envs) == [(0, 0), (1, 0), (2, 0)]
    assert {(e["WORLD_SIZE"], e["GROUP_WORLD_SIZE"], e["TORCHELASTIC_RUN_ID"]) for e in envs.values()} == {("3", "2", "cli")}
    assert sorted(e["LOCAL_WORLD_SIZE"] for e in envs.values()) == ["1", "2", "2"]
    assert {e["MASTER_ADDR"] for e in envs.values()} == {"127.0.0.1"}


def test_elastic_launch_with_tcpstore(worker, tmp_path):
    """End to end through the CLI when flambeau.distributed.TCPStore exists."""
    import flambeau.distributed as dist
    if not hasattr(dist, "TCPStore"):
        pytest.skip("flambeau.distributed.TCPStore is not built yet")
    script, out = worker
    port = _free_port()
    cmd = _launcher_cmd("--nnodes", "1:2", "--nproc-per-node", 1, "--rdzv-endpoint", f"127.0.0.1:{port}",
                        "--rdzv-id", "el", "--rdzv-conf", "join_timeout=20,last_call_timeout=1", script, out)
    agents = [subprocess.Popen(cmd, cwd=tmp_path, env=_child_env(), stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    try:
        for a in agents:
            _, err = a.communicate(timeout=40)
            assert a.returncode == 0, err
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
                a.wait()
    envs = _envs(out)
    assert sorted(envs) == [(0, 0), (1, 0)]
    assert {e["WORLD_SIZE"] for e in envs.values()} == {"2"}
