"""flambeau.backends.cpu: the CPU's extensions and the kernel each path uses."""
from .. import _C


def capabilities():
    """A dict: vendor, model, logical_cpus, isa (extension -> bool), caches (bytes),
    simd_target (Highway's runtime target), gemm (dtype name -> kernel), line (one line
    for logs) and cpu_capability (as get_cpu_capability())."""
    return _C._cpu_capabilities()


def get_cpu_capability():
    """As torch.backends.cpu.get_cpu_capability(): "AVX512", "AVX2" or "DEFAULT"."""
    return _C._cpu_capabilities()["cpu_capability"]
