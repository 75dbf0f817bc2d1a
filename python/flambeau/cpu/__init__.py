"""flambeau.cpu: CPU-specific names, as torch.cpu (amp.autocast, synchronize), and device
telemetry with the names of torch.xpu's queries (2.13).

Each query returns None where this machine does not expose the value (no sensor in a VM,
RAPL energy counters readable by root only): never an estimate. Values come from Linux's
/proc and /sys, read under $FLAMBEAU_PROCFS_ROOT / $FLAMBEAU_SYSFS_ROOT when set (tests point
them at a fake tree). ``device`` may be None, 0, "cpu" or a CPU device; there is one.
"""
from .. import _C
from . import amp  # noqa: F401

__all__ = ["device_memory_used", "utilization", "clock_rate", "temperature", "power_draw",
           "get_device_properties", "synchronize"]

_c = _C._cpu
# torch.xpu samples utilization and power over 150 ms.
_SAMPLE_INTERVAL_MS = 150


def _check(device):
    if device is None or getattr(device, "type", None) == "cpu" or (isinstance(device, (int, str))
                                                                  and device in (0, "cpu", "cpu:0")):
        return
    raise ValueError(f"[flambeau.cpu] expected the CPU device (None, 0 or 'cpu'), got {device!r}")


def device_memory_used(device=None):
    """Resident memory of this process in bytes (VmRSS), or None. The caching allocator's own
    figures are in flambeau.memory."""
    _check(device)
    return _c.device_memory_used()


def utilization(device=None, per_core=False):
    """Percent (0.0-100.0) of the whole CPU's time this process used over a 150 ms sample
    (blocks that long, as torch.xpu.utilization), from /proc/stat and /proc/self/stat; or None.
    per_core=True: instead a list with each core's busy percent (any process) over the sample."""
    _check(device)
    u = _c.utilization(_SAMPLE_INTERVAL_MS)
    if u is None:
        return None
    return u["per_core"] if per_core else u["process"]


def clock_rate(device=None):
    """Current clock in MHz, the mean over the cores (cpufreq, else /proc/cpuinfo), or None."""
    _check(device)
    return _c.clock_rate()


def temperature(device=None):
    """Temperature in degrees Celsius of the hottest CPU sensor (hwmon, else the CPU thermal
    zones), or None."""
    _check(device)
    return _c.temperature()


def power_draw(device=None):
    """Power draw in watts (torch.xpu's unit; torch.cuda's is milliwatts) of the CPU packages,
    from the RAPL energy counters over a 150 ms sample (blocks that long), or None where the
    counters are absent or unreadable (often root only)."""
    _check(device)
    return _c.power_draw(_SAMPLE_INTERVAL_MS)


def get_device_properties(device=None):
    """The CPU's properties: name, vendor, type ("cpu"), isa (the extensions flambeau uses that
    it has), max_compute_units (logical CPUs), physical_cores, l1d/l2/l3_cache_size and
    last_level_cache_size (bytes), is_integrated (True), total_memory (bytes). A value sysfs or
    /proc does not give is None."""
    _check(device)
    return _c.get_device_properties()


def synchronize(device=None):
    """Waits for the CPU's queued work: flambeau's ops are synchronous, so this returns at once
    (as torch.cpu.synchronize); it exists for device-agnostic code."""
    _check(device)
    _c.synchronize()
