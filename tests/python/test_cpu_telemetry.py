"""flambeau.cpu telemetry (torch.xpu's query names) and python -m flambeau.utils.collect_env:
plausible values on this machine, exact values or None from a fake /proc and /sys tree."""
import os
import subprocess
import sys

import pytest

import flambeau


@pytest.fixture
def fake_roots(tmp_path, monkeypatch):
    """An empty fake /proc and /sys; write(path, text) fills them ("proc/stat", "sys/...")."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "sys").mkdir()
    monkeypatch.setenv("FLAMBEAU_PROCFS_ROOT", str(tmp_path / "proc"))
    monkeypatch.setenv("FLAMBEAU_SYSFS_ROOT", str(tmp_path / "sys"))

    def write(path, text):
        p = tmp_path / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return write


def test_values_are_plausible_or_none():
    cpu = flambeau.cpu
    rss = cpu.device_memory_used()
    assert isinstance(rss, int) and rss > 0  # Linux always has /proc/self/status
    u = cpu.utilization()
    if u is not None:
        assert isinstance(u, float) and 0.0 <= u <= 100.0
        cores = cpu.utilization(per_core=True)
        assert cores and all(0.0 <= c <= 100.0 for c in cores)
    mhz = cpu.clock_rate()
    assert mhz is None or 100 < mhz < 10000
    c = cpu.temperature()
    assert c is None or 0 < c < 150
    w = cpu.power_draw()
    assert w is None or 0 <= w < 5000
    p = cpu.get_device_properties()
    assert p.type == "cpu" and p.is_integrated is True
    assert p.max_compute_units >= 1
    assert p.physical_cores is None or 1 <= p.physical_cores <= p.max_compute_units
    caps = flambeau.backends.cpu.capabilities()
    assert p.isa == [k for k, on in caps["isa"].items() if on and k != "amx_permitted"]
    assert p.total_memory is None or p.total_memory > 64 * 2**20
    assert "_CpuDeviceProperties(name=" in repr(p)
    assert cpu.synchronize() is None


def test_resident_memory_grows_after_touching_100_mib():
    before = flambeau.cpu.device_memory_used()
    block = bytearray(100 * 2**20)  # calloc'd: touch every page so it is resident
    for i in range(0, len(block), 4096):
        block[i] = 1
    assert flambeau.cpu.device_memory_used() - before >= 90 * 2**20
    del block


def test_device_argument():
    assert flambeau.cpu.device_memory_used("cpu") > 0
    assert flambeau.cpu.device_memory_used(0) > 0
    assert flambeau.cpu.device_memory_used(flambeau.device("cpu")) > 0
    with pytest.raises(ValueError, match=r"\[flambeau.cpu\] expected the CPU device"):
        flambeau.cpu.clock_rate("cuda")


def test_absent_files_give_none(fake_roots):
    cpu = flambeau.cpu
    assert cpu.device_memory_used() is None
    assert cpu.utilization() is None
    assert cpu.utilization(per_core=True) is None
    assert cpu.clock_rate() is None
    assert cpu.temperature() is None
    assert cpu.power_draw() is None
    p = cpu.get_device_properties()
    for name in ["physical_cores", "l1d_cache_size", "l2_cache_size", "l3_cache_size", "last_level_cache_size",
                 "total_memory"]:
        assert getattr(p, name) is None, name


def test_values_from_a_fake_tree(fake_roots):
    fake_roots("proc/self/status", "Name:\tx\nVmRSS:\t  1000 kB\n")
    fake_roots("proc/cpuinfo", "cpu MHz\t\t: 1800.000\ncpu MHz\t\t: 2200.000\n")
    fake_roots("sys/class/thermal/thermal_zone0/type", "x86_pkg_temp\n")
    fake_roots("sys/class/thermal/thermal_zone0/temp", "47500\n")
    fake_roots("proc/meminfo", "MemTotal:  2048 kB\n")
    cpu = flambeau.cpu
    assert cpu.device_memory_used() == 1000 * 1024
    assert cpu.clock_rate() == 2000.0
    assert cpu.temperature() == 47.5
    assert cpu.get_device_properties().total_memory == 2048 * 1024
    # Static /proc/stat: no tick goes by during the sample, so no figure.
    fake_roots("proc/stat", "cpu 1 0 1 8 0 0 0 0 0 0\ncpu0 1 0 1 8 0 0 0 0 0 0\n")
    fake_roots("proc/self/stat", "1 (x) R 1 2 3 4 5 6 7 8 9 10 1 1 0\n")
    assert cpu.utilization() is None


def _run_collect_env(env):
    return subprocess.run([sys.executable, "-m", "flambeau.utils.collect_env"], capture_output=True, text=True,
                          timeout=120, env=env, cwd=os.path.dirname(os.path.abspath(__file__)))


def test_collect_env_runs_as_a_module():
    r = _run_collect_env(dict(os.environ))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "flambeau version:" in out and flambeau.__version__ in out
    for key in ["Compiler:", "Build type:", "Highway:", "BLAS:", "OS:", "Python:", "ISA:", "Resident memory",
                "Utilization (process):", "Clock rate:", "Temperature:", "Power draw:"]:
        assert key in out, key
    b = flambeau._C._cpu.build_config()
    assert b["compiler"] and b["highway_targets"] and b["blas"]
    if flambeau.cpu.power_draw() is None:
        assert "Power draw:" in out and out.split("Power draw:")[1].strip().startswith("not available")


def test_collect_env_says_not_available(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "sys").mkdir()
    env = dict(os.environ, FLAMBEAU_PROCFS_ROOT=str(tmp_path / "proc"), FLAMBEAU_SYSFS_ROOT=str(tmp_path / "sys"))
    r = _run_collect_env(env)
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(":", 1) for line in r.stdout.splitlines() if ":" in line)
    for key in ["Resident memory (device_memory_used)", "Utilization (process)", "Clock rate", "Temperature",
                "Power draw", "Total memory"]:
        assert lines[key].strip() == "not available", (key, lines[key])
