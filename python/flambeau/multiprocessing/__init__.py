"""flambeau.multiprocessing: Python's multiprocessing plus spawn/start_processes, as torch.multiprocessing.

Everything of the standard `multiprocessing` module is re-exported; spawn(fn, args, nprocs) runs
fn(i, *args) in nprocs processes and reports a failing one's traceback in the parent.
"""
import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403

from .spawn import (ProcessContext, ProcessException, ProcessExitedException, ProcessRaisedException,  # noqa: F401
                    spawn, start_processes)

__all__ = list(_mp.__all__) + ["ProcessContext", "ProcessException", "ProcessExitedException",
                               "ProcessRaisedException", "spawn", "start_processes",
                               "get_sharing_strategy", "set_sharing_strategy", "get_all_sharing_strategies"]

# flambeau shares no tensor storage between processes through pickling yet; the strategy
# names are kept so that torch code setting them runs.
_SHARING_STRATEGIES = {"file_descriptor", "file_system"}
_sharing_strategy = "file_descriptor"


def set_sharing_strategy(new_strategy):
    """Sets the strategy name for sharing tensors between processes (kept for torch compatibility)."""
    global _sharing_strategy
    if new_strategy not in _SHARING_STRATEGIES:
        raise ValueError(f"sharing strategy must be one of {sorted(_SHARING_STRATEGIES)}, got {new_strategy!r}")
    _sharing_strategy = new_strategy


def get_sharing_strategy():
    return _sharing_strategy


def get_all_sharing_strategies():
    return set(_SHARING_STRATEGIES)
