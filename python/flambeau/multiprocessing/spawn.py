"""flambeau.multiprocessing.spawn: start `fn(i, *args)` in `nprocs` processes, as torch.multiprocessing.

A worker that raises writes its traceback to a per-worker error file and exits 1; the parent
then stops the other workers (SIGTERM, then SIGKILL after a grace period) and raises
ProcessRaisedException with that traceback, or ProcessExitedException for a signal or exit code.
"""
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings

__all__ = ["ProcessContext", "ProcessException", "ProcessExitedException", "ProcessRaisedException",
           "spawn", "start_processes"]

# Seconds a worker gets to exit after SIGTERM before SIGKILL, when join() has no grace_period.
TERMINATE_GRACE_S = 5.0


class ProcessException(Exception):
    """A worker process failed; error_index is its index i, pid (alias error_pid) its pid."""

    def __init__(self, msg, error_index, error_pid):
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.error_pid = error_pid

    @property
    def pid(self):
        return self.error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid)


class ProcessRaisedException(ProcessException):
    """A worker raised an exception; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A worker exited with a non-zero code or was killed by a signal (exit_code < 0, signal_name)."""

    def __init__(self, msg, error_index, error_pid, exit_code, signal_name=None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.error_pid, self.exit_code, self.signal_name)


def _set_parent_death_signal(sig):
    """Linux: deliver `sig` to this process when its parent dies (prctl PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except Exception:  # best effort
        pass


def _worker(fn, i, args, error_file):
    """Runs in the child: fn(i, *args); an exception's traceback goes to error_file, exit code 1."""
    _set_parent_death_signal(signal.SIGINT)
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # stopped by the parent (SIGINT)
    except Exception:
        text = traceback.format_exc()
        tmp = error_file + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, error_file)  # the parent never sees half a traceback
        sys.exit(1)


def _signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"<Unknown signal {signum}>"


class ProcessContext:
    """The processes started by start_processes(join=False); join() them until it returns True."""

    def __init__(self, processes, error_files):
        self.processes = processes
        self.error_files = error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}
        self._error = None  # the exception raised for a failure, raised again by later joins

    def pids(self):
        return [int(p.pid) for p in self.processes]

    def _join_all(self, seconds):
        end = time.monotonic() + seconds
        for p in self.processes:
            p.join(max(0.0, end - time.monotonic()))

    def _stop_all(self, grace_period):
        """Stops the processes still running: SIGTERM, then SIGKILL after the grace period."""
        if grace_period is not None:
            self._join_all(grace_period)  # let them finish on their own first
        for p in self.processes:
            if p.is_alive():
                p.terminate()
        self._join_all(TERMINATE_GRACE_S if grace_period is None else grace_period)
        for p in self.processes:
            if p.is_alive():
                p.kill()
            p.join()

    def _remove_error_files(self):
        for path in self.error_files:
            try:
                os.unlink(path)
            except OSError:
                pass

    def join(self, timeout=None, grace_period=None):
        """Waits up to `timeout` s for processes to end. Returns True once all ended successfully,
        False if some are still running; when one failed, stops the others and raises."""
        if self._error is not None:
            raise self._error
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            i = self.sentinels.pop(sentinel)
            self.processes[i].join()
            if self.processes[i].exitcode != 0 and failed is None:
                failed = i
        if failed is None:
            if not self.sentinels:
                self._remove_error_files()
            return not self.sentinels
        self.sentinels.clear()
        self._stop_all(grace_period)
        self._error = self._exception_for(failed)
        self._remove_error_files()
        raise self._error

    def _exception_for(self, i):
        proc = self.processes[i]
        try:
            with open(self.error_files[i], encoding="utf-8") as f:
                trace = f.read()
        except OSError:
            trace = None
        if trace is not None:
            msg = f"\n\n-- Process {i} terminated with the following error:\n{trace}"
            return ProcessRaisedException(msg, i, proc.pid)
        code = proc.exitcode
        if code < 0:
            name = _signal_name(-code)
            return ProcessExitedException(f"process {i} terminated with signal {name}", i, proc.pid,
                                          exit_code=code, signal_name=name)
        return ProcessExitedException(f"process {i} terminated with exit code {code}", i, proc.pid, exit_code=code)


def _error_file_path():
    fd, path = tempfile.mkstemp(prefix="flambeau-errorfile-", suffix=".txt")
    os.close(fd)
    os.unlink(path)  # the file's existence says "the worker raised"
    return path


def start_processes(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Starts fn(i, *args) for i in range(nprocs) with the given multiprocessing start method.
    join=True waits for all (raising on a failure); join=False returns a ProcessContext."""
    ctx = multiprocessing.get_context(start_method)
    processes, error_files = [], []
    for i in range(nprocs):
        path = _error_file_path()
        p = ctx.Process(target=_worker, args=(fn, i, args, path), daemon=daemon)
        p.start()
        processes.append(p)
        error_files.append(path)
    context = ProcessContext(processes, error_files)
    if not join:
        return context
    while not context.join():
        pass
    return None


def spawn(fn, args=(), nprocs=1, join=True, daemon=False, start_method="spawn"):
    """Spawns nprocs processes running fn(i, *args) (always with the 'spawn' start method; use
    start_processes for another). Returns None when join, else a ProcessContext.

    If a process raises or exits non-zero, the others are stopped and ProcessRaisedException /
    ProcessExitedException is raised with the cause (the child's traceback when it raised)."""
    if start_method != "spawn":
        warnings.warn(f"This method only supports start_method=spawn (got: {start_method}).\n"
                      "To use a different start_method use:\n\t\t flambeau.multiprocessing.start_processes(...)",
                      FutureWarning, stacklevel=2)
    return start_processes(fn, args, nprocs, join, daemon, start_method="spawn")
