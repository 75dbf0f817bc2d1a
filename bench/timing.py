"""Timing helpers shared by the Python benchmarks."""
import statistics
import time


def timed(fn):
    """Seconds one call of fn takes."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def pair(f, t, reps):
    """Median seconds of f and of t, run in turn (after one untimed call each) so that
    drift hits both alike."""
    f(), t()
    fs, ts = [], []
    for _ in range(reps):
        fs.append(timed(f))
        ts.append(timed(t))
    return statistics.median(fs), statistics.median(ts)
