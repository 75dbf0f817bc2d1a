"""flambeau.amp: autocast, as torch.amp (CPU autocast; flambeau has no CUDA)."""
import functools
import warnings

from . import _C

__all__ = ["autocast", "is_autocast_available"]

_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia",
                 "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


def _check_device_type(device_type):
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type.split(":")[0] not in _DEVICE_TYPES:
        raise RuntimeError(f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of device string: "
                           f"{device_type}")


def is_autocast_available(device_type):
    """Whether autocast runs on this device type here (only "cpu" in flambeau)."""
    _check_device_type(device_type)
    return device_type == "cpu"


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for device_type in this thread (None means "cuda", as torch)."""
    device_type = "cuda" if device_type is None else device_type
    _check_device_type(device_type)
    return device_type == "cpu" and _C._is_autocast_cpu_enabled()


def get_autocast_dtype(device_type):
    """The 16-bit dtype autocast uses on device_type (bfloat16 on the CPU unless set)."""
    _check_device_type(device_type)
    return _C._get_autocast_cpu_dtype() if device_type == "cpu" else _C.float16


def set_autocast_enabled(device_type, enabled):
    _check_device_type(device_type)
    if device_type == "cpu":
        _C._set_autocast_cpu_enabled(bool(enabled))


def set_autocast_dtype(device_type, dtype):
    _check_device_type(device_type)
    if device_type == "cpu":
        _C._set_autocast_cpu_dtype(dtype)


class autocast:
    """Region (context manager or decorator) where matmul-like ops run in a 16-bit dtype and
    losses in float32, with torch.autocast's CPU policy. On "cuda" (absent here) it warns and
    does nothing, as torch does on a machine without CUDA; an unsupported dtype on "cpu" warns
    and disables autocast, as torch does."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        _check_device_type(device_type)
        self.device = device_type
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        self._enabled = bool(enabled)
        self._cache_enabled = _C.is_autocast_cache_enabled() if cache_enabled is None else bool(cache_enabled)
        if device_type == "cuda" and self._enabled:
            warnings.warn("CUDA is not available or torch_xla is imported. Disabling autocast.")
            self._enabled = False
        elif device_type != "cpu" and self._enabled:
            warnings.warn(f"User provided device_type of '{device_type}', but autocast is not available on it here. "
                          "Disabling autocast.")
            self._enabled = False
        elif self._enabled and self.fast_dtype not in (_C.bfloat16, _C.float16):
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtypes of flambeau.bfloat16, flambeau.float16 currently.")
            self._enabled = False
        self._previous = []  # a stack, so that a decorated function may recurse

    def __enter__(self):
        if self.device != "cpu":
            return self
        self._previous.append(_C._autocast_enter(self.fast_dtype if self._enabled else _C.bfloat16, self._enabled,
                                                 self._cache_enabled))
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if self.device == "cpu":
            _C._autocast_exit(*self._previous.pop())
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper
