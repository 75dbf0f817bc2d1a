"""flambeau: an eager tensor framework in C++ with PyTorch 2.13's API.

Every kernel runs in flambeau's C++ core, with the GIL released. Tensors cross to and
from numpy and PyTorch without copies (DLPack).
"""
from . import _C
from ._C import *  # noqa: F401,F403  (dtypes, Tensor, factories, ops)
from ._C import Generator, Tensor, device, dtype, memory  # noqa: F401
from . import autograd, nn, optim, utils  # noqa: F401
from . import backends, linalg, ops, safetensors  # noqa: F401
from . import amp, cpu, graphs, profiler  # noqa: F401
from .amp import autocast, get_autocast_dtype, is_autocast_enabled, set_autocast_dtype, set_autocast_enabled  # noqa: F401
from ._C import clear_autocast_cache, is_autocast_cache_enabled, set_autocast_cache_enabled  # noqa: F401
from .serialization import load, save  # noqa: F401
from . import compiler  # noqa: F401
from .compiler import compile  # noqa: F401,A004
from .autograd import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled  # noqa: F401

for _name in ["tensor", "zeros", "ones", "empty", "full", "rand", "randn", "arange", "linspace", "eye",
              "zeros_like", "ones_like", "empty_like", "full_like"]:
    globals()[_name] = autograd._factory(getattr(_C, _name))
del _name

# The error types are flambeau._C.ValueError etc. (also RuntimeError subclasses); keep
# Python's builtins under their own names here.
del ValueError, TypeError, IndexError  # noqa: F821

__version__ = "0.1.0"
