"""python -m flambeau.utils.collect_env: the flambeau version, its build configuration, Python
and the OS, and the CPU's telemetry (flambeau.cpu), for bug reports."""
import platform
import sys

import flambeau
import flambeau.distributed

_NA = "not available"


def _show(value, unit=""):
    if value is None:
        return _NA
    if isinstance(value, float):
        return f"{value:.1f}{unit}"
    return f"{value}{unit}"


def _mib(n):
    if n is None:
        return _NA
    return f"{n / 2**10:.0f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def get_pretty_env_info():
    """The report as one string."""
    b = flambeau._C._cpu.build_config()
    caps = flambeau.backends.cpu.capabilities()
    cpu = flambeau.cpu
    p = cpu.get_device_properties()
    per_core = cpu.utilization(per_core=True)
    rows = [
        ("flambeau version", flambeau.__version__),
        ("Compiler", b["compiler"] or _NA),
        ("Build type", b["build_type"] or _NA),
        ("C++ flags", b["cxx_flags"] or "(none)"),
        ("OpenMP", b["openmp"] or _NA),
        ("Highway", f"{b['highway']}, targets compiled in: {b['highway_targets']}"),
        ("BLAS", b["blas"]),
        ("SIMD target in use", caps["simd_target"]),
        ("GEMM kernels", ", ".join(f"{k} {v}" for k, v in caps["gemm"].items())),
        ("Distributed backends", ", ".join(n for n, ok in (("gloo", flambeau.distributed.is_gloo_available()),
                                                           ("mpi", flambeau.distributed.is_mpi_available())) if ok)
         or "none"),
        ("Threads", flambeau.get_num_threads()),
        ("Python", sys.version.replace("\n", " ")),
        ("OS", platform.platform()),
        ("CPU", p.name or p.vendor or _NA),
        ("ISA", " ".join(p.isa) or "baseline"),
        ("Logical / physical cores", f"{p.max_compute_units} / {_show(p.physical_cores)}"),
        ("Caches L1d / L2 / L3", " / ".join(_mib(s) for s in (p.l1d_cache_size, p.l2_cache_size, p.l3_cache_size))),
        ("Total memory", _mib(p.total_memory)),
        ("Resident memory (device_memory_used)", _mib(cpu.device_memory_used())),
        ("Utilization (process)", _show(cpu.utilization(), " %")),
        ("Utilization (per core)", _NA if per_core is None else " ".join(f"{c:.0f}%" for c in per_core)),
        ("Clock rate", _show(cpu.clock_rate(), " MHz")),
        ("Temperature", _show(cpu.temperature(), " C")),
        ("Power draw", _show(cpu.power_draw(), " W")),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k + ':':<{width + 1}} {v}" for k, v in rows)


def main():
    print("Collecting environment information...")
    print(get_pretty_env_info())


if __name__ == "__main__":
    main()
