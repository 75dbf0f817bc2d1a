"""flambeau.profiler: torch.profiler's names on flambeau's CPU profiler.

Events come from every user-level op (the op hook), the kernels inside the big ops (GEMM,
FlexAttention tiles), autograd nodes in backward (with their forward op's sequence number:
flow arrows in the trace), the allocator (``profile_memory``) and user ranges
(``record_function``). Each thread records into its own buffer with no lock and no GIL; a
collector thread drains them. The trace is Chrome trace-event JSON (chrome://tracing,
Perfetto); traces of several ranks merge with ``merge_chrome_traces``.
"""
import enum
import functools
import json
import os
import socket
import time

from .. import _C

__all__ = ["ProfilerActivity", "ProfilerAction", "profile", "schedule", "record_function",
           "tensorboard_trace_handler", "merge_chrome_traces"]

_p = _C._profiler


class ProfilerActivity(enum.Enum):
    CPU = 0


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """torch.profiler.schedule: step number -> ProfilerAction."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("schedule: wait, warmup, repeat and skip_first must be >= 0 and active > 0")
    cycle = wait + warmup + active

    def action(step):
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait:
            step += wait
        if repeat and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return action


def _rank():
    try:
        from .. import distributed as dist
        if dist.is_initialized():
            return dist.get_rank()
    except Exception:  # noqa: BLE001 (no distributed layer: one process)
        pass
    return None


class FunctionEventAvg:
    """One row of key_averages(): times in microseconds, as torch's."""

    def __init__(self, row):
        self.key = row.key
        self.input_shapes = row.input_shapes
        self.count = row.count
        self.cpu_time_total = row.cpu_time_total
        self.self_cpu_time_total = row.self_cpu_time_total
        self.cpu_time = row.cpu_time
        self.self_cpu_memory_usage = row.self_cpu_memory_usage
        self._row = row

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time_total:.3f}us count={self.count}>")


class EventList(list):
    """key_averages()'s result: a list of FunctionEventAvg with torch's table()."""

    def table(self, sort_by="self_cpu_time_total", row_limit=100, **_):
        return _p.table([e._row for e in self], sort_by, -1 if row_limit is None else row_limit)

    def __str__(self):
        return self.table()


class profile:
    """torch.profiler.profile on the CPU. Without a schedule it records from __enter__
    (or start()) to __exit__ (or stop()); with one, prof.step() moves through it and
    on_trace_ready(prof) runs at the end of each active window."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 use_cuda=None):
        for a in activities or [ProfilerActivity.CPU]:
            if a != ProfilerActivity.CPU:
                raise ValueError(f"profile: activity {a} is not available (flambeau profiles the CPU)")
        self._schedule = schedule
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self.step_num = 0
        self._events = None
        self._recording = False
        self._action = ProfilerAction.RECORD if schedule is None else schedule(0)

    # Recording on and off.
    def _start_recording(self):
        if not self._recording:
            _p.start(self.record_shapes, self.profile_memory, self.with_stack)
            self._recording = True

    def _stop_recording(self):
        if self._recording:
            self._events = _p.stop()
            self._recording = False

    def _enter_action(self, action):
        if action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._start_recording()

    def start(self):
        self._enter_action(self._action)
        return self

    def stop(self):
        was = self._recording
        self._stop_recording()
        if was and self.on_trace_ready:  # a window cut short by the end still gets its trace
            self.on_trace_ready(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def step(self):
        """Marks the end of a step; follows the schedule."""
        prev = self._action
        self.step_num += 1
        self._action = self._schedule(self.step_num) if self._schedule else ProfilerAction.RECORD
        if self._schedule is None:
            return
        if prev == ProfilerAction.RECORD_AND_SAVE:
            self._stop_recording()
            if self.on_trace_ready:
                self.on_trace_ready(self)
        elif prev == ProfilerAction.RECORD and self._action in (ProfilerAction.NONE, ProfilerAction.WARMUP):
            self._stop_recording()
        self._enter_action(self._action)

    # Results.
    def _need_events(self):
        if self._events is None:
            raise RuntimeError("profile: no trace yet (the profiler has not recorded a window)")
        return self._events

    def events(self):
        return self._need_events().list()

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0):
        return EventList(FunctionEventAvg(r) for r in self._need_events().key_averages(group_by_input_shape))

    def export_chrome_trace(self, path):
        rank = _rank()
        pid = os.getpid() if rank is None else rank
        name = f"flambeau {socket.gethostname()} pid {os.getpid()}" + ("" if rank is None else f" rank {rank}")
        self._need_events().export_chrome_trace(os.fspath(path), pid, name)
        return path


class record_function:
    """A user range in the trace: a context manager and a decorator, as torch's."""

    def __init__(self, name, args=None):
        self.name = name
        self._range = None

    def __enter__(self):
        self._range = _p.Range(self.name)
        self._range.__enter__()
        return self

    def __exit__(self, *exc):
        self._range.__exit__()
        self._range = None
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapped


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """on_trace_ready that writes {worker}.{time_ms}.pt.trace.json into dir_name."""
    if use_gzip:
        raise ValueError("tensorboard_trace_handler: use_gzip is not supported; write plain JSON")

    def handler(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{worker}.{int(time.time() * 1000)}.pt.trace.json"))
    return handler


def merge_chrome_traces(paths, out_path):
    """Merges the traces of several processes (ranks) into one timeline: the events keep
    their pids, and every process uses the same steady clock."""
    merged = []
    for path in paths:
        with open(path) as f:
            merged.extend(json.load(f)["traceEvents"])
    tmp = os.fspath(out_path) + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"displayTimeUnit": "ms", "traceEvents": merged}, f)
    os.replace(tmp, out_path)
    return out_path
