"""flambeau.profiler: events of a known program, nesting, backward links, memory, the
Chrome trace's JSON, schedules and trace handlers, 8 Python threads losing nothing."""
import json
import threading

import pytest

import flambeau as flb
from flambeau.profiler import (ProfilerAction, profile, record_function, schedule,
                               tensorboard_trace_handler, merge_chrome_traces)


def _by_name(prof, name):
    return [e for e in prof.events() if e.name == name]


def test_ops_nest_in_record_function_and_averages_add_up():
    a = flb.ones(32, 32)
    with profile(record_shapes=True) as prof:
        with record_function("outer"):
            b = flb.matmul(a, a)
            c = b + a
    (outer,) = _by_name(prof, "outer")
    (mm,) = _by_name(prof, "matmul")
    assert outer.start_ns <= mm.start_ns and mm.end_ns <= outer.end_ns
    assert mm.input_shapes == "[[32, 32], [32, 32]]"
    rows = {r.key: r for r in prof.key_averages()}
    assert rows["outer"].count == 1 and rows["matmul"].count == 1
    assert rows["outer"].self_cpu_time_total <= rows["outer"].cpu_time_total
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    assert "outer" in table and "matmul" in table
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="nope")
    assert c.shape == (32, 32)


def test_decorator_form():
    @record_function("decorated")
    def f(x):
        return x * 2

    with profile() as prof:
        f(flb.ones(3))
        f(flb.ones(3))
    assert len(_by_name(prof, "decorated")) == 2


def test_backward_nodes_link_to_forward_ops_in_the_trace(tmp_path):
    x = flb.ones(4, 4, requires_grad=True)
    with profile() as prof:
        (x * x).sum().backward()
    (mul,) = _by_name(prof, "mul")
    assert mul.sequence_nr >= 0
    bwd = [e for e in prof.events() if e.category == "autograd" and e.sequence_nr == mul.sequence_nr]
    assert len(bwd) == 1 and bwd[0].start_ns >= mul.end_ns
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    flows = [e for e in trace if e.get("cat") == "fwdbwd" and e["id"] == mul.sequence_nr]
    assert sorted(e["ph"] for e in flows) == ["f", "s"]
    slices = [e for e in trace if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and "pid" in e and "tid" in e for e in slices)
    assert any(e["ph"] == "M" and e["name"] == "thread_name" for e in trace)


def test_memory_events_return_to_zero():
    with profile(profile_memory=True) as prof:
        y = flb.ones(1000) + 1
        del y
    mem = [e for e in prof.events() if e.category == "cpu_instant_event"]
    assert len(mem) >= 4
    assert sum(e.bytes for e in mem) == 0


def test_eight_python_threads_lose_no_event():
    n = 2000

    def work():
        for _ in range(n):
            with record_function("t"):
                pass

    with profile() as prof:
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    events = _by_name(prof, "t")
    assert len(events) == 8 * n
    assert len({e.tid for e in events}) == 8


def test_schedule_actions_and_trace_handler(tmp_path):
    s = schedule(wait=1, warmup=1, active=2, repeat=1)
    assert [s(i) for i in range(6)] == [ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD,
                                        ProfilerAction.RECORD_AND_SAVE, ProfilerAction.NONE, ProfilerAction.NONE]
    seen = []
    with profile(schedule=s, on_trace_ready=lambda p: seen.append(len(_by_name(p, "step")))) as prof:
        for _ in range(6):
            with record_function("step"):
                flb.ones(2) + 1
            prof.step()
    assert seen == [2]  # the two active steps, once
    out = tmp_path / "tb"
    with profile(on_trace_ready=tensorboard_trace_handler(str(out), worker_name="w0")):
        flb.ones(2) * 3
    (f,) = list(out.iterdir())
    assert f.name.startswith("w0.") and f.name.endswith(".pt.trace.json")
    assert any(e.get("name") == "mul" for e in json.loads(f.read_text())["traceEvents"])


def test_refusals_and_merge(tmp_path):
    with profile():
        with pytest.raises(ValueError, match="already running"):
            flb._C._profiler.start(False, False, False)
    with pytest.raises(RuntimeError, match="no trace"):
        profile().key_averages()
    paths = []
    for i in range(2):
        with profile() as prof:
            flb.ones(2) + i
        paths.append(str(prof.export_chrome_trace(str(tmp_path / f"r{i}.json"))))
    merged = json.loads(open(merge_chrome_traces(paths, str(tmp_path / "all.json"))).read())["traceEvents"]
    assert sum(e.get("name") == "add" for e in merged) == 2


def test_trace_loads_in_perfetto(tmp_path):
    tp_mod = pytest.importorskip("perfetto.trace_processor")
    with profile() as prof:
        with record_function("outer"):
            flb.matmul(flb.ones(16, 16), flb.ones(16, 16))
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    try:
        tp = tp_mod.TraceProcessor(trace=str(path))
    except Exception as e:  # noqa: BLE001 (the shell binary is downloaded on first use)
        pytest.skip(f"perfetto's trace processor is unavailable here: {e}")
    rows = list(tp.query("select s.name, p.name as parent from slice s left join slice p on s.parent_id = p.id"))
    tp.close()
    assert any(r.name == "matmul" and r.parent == "outer" for r in rows)


def test_compile_steps_are_events():
    def f(x):
        return (x * 3.0 + 1.0).relu()

    with profile() as prof:
        flb.compile(f)(flb.ones(64))
    assert any(e.category == "compile" for e in prof.events())
