"""flambeau.ops: every registered op by its qualified name, as torch.ops.

``flambeau.ops.mylib.fused_bias_gelu(x, b)`` calls the op ``mylib::fused_bias_gelu`` that a
custom-op library registered; ``load_library(path)`` loads such a library (built against
the stable C header ``flambeau/stable/c_api.h``, see examples/extension/). Arguments are
checked and converted by the op's schema (``.schema``); a call reaches the op hook (the
compiler, the profiler) and autograd like a built-in op.
"""
import os

from .. import _C

__all__ = ["load_library", "loaded_libraries"]


def load_library(path):
    """Loads the extension at ``path`` and registers its ops (once per file).

    RuntimeError when the file cannot be loaded, when it was built for a newer C ABI
    version than this flambeau provides, or when its init fails (none of its ops is
    registered then); ValueError when it is not a flambeau extension."""
    _C._load_library(os.fspath(path))


def loaded_libraries():
    """The canonical paths of the libraries loaded so far, in load order."""
    return list(_C._loaded_libraries())


class _Namespace:
    """The ops of one namespace: ``flambeau.ops.<namespace>.<op>``."""

    def __init__(self, name):
        self.__name__ = name

    def __getattr__(self, op):
        if op.startswith("__"):
            raise AttributeError(op)
        handle = _C._find_op(f"{self.__name__}::{op}")
        if handle is None:
            raise AttributeError(f"flambeau.ops.{self.__name__} has no op '{op}' "
                                 f"(is its library loaded? flambeau.ops.load_library(path))")
        setattr(self, op, handle)  # later lookups are plain attribute reads
        return handle

    def __dir__(self):
        prefix = self.__name__ + "::"
        return sorted(n[len(prefix):] for n in _C._registered_ops() if n.startswith(prefix))

    def __repr__(self):
        return f"<flambeau.ops namespace '{self.__name__}'>"


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    ns = _Namespace(name)
    globals()[name] = ns
    return ns
