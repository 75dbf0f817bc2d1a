"""flambeau.autograd: reverse-mode automatic differentiation, as torch.autograd."""
import contextlib
import functools

from . import _C

__all__ = ["backward", "grad", "gradcheck", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled"]

is_grad_enabled = _C.is_grad_enabled


def backward(tensors, grad_tensors=None, retain_graph=None):
    """Accumulates the gradients of `tensors` (weighted by grad_tensors) into the leaves."""
    _C._backward(tensors, grad_tensors, bool(retain_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, allow_unused=False):
    """The gradients of outputs w.r.t. inputs, returned (not accumulated into .grad)."""
    return _C._grad(outputs, inputs, grad_outputs, bool(retain_graph), allow_unused)


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks backward against central finite differences (float64 inputs that require grad)."""
    inputs = (inputs,) if isinstance(inputs, _C.Tensor) else tuple(inputs)
    ok, report = _C._gradcheck(fn, list(inputs), eps, atol, rtol)
    if not ok and raise_exception:
        raise RuntimeError(report)
    return ok


class _GradMode(contextlib.ContextDecorator):
    """Sets grad mode inside a with-block (or a decorated function), restoring it after."""

    def __init__(self, enabled):
        self.enabled = enabled

    def __enter__(self):
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(self.enabled)
        return self

    def __exit__(self, *exc):
        _C._set_grad_enabled(self.prev)
        return False


class no_grad(_GradMode):
    """Ops record no graph inside (torch.no_grad)."""

    def __init__(self):
        super().__init__(False)


class enable_grad(_GradMode):
    """Ops record the graph inside, even within no_grad (torch.enable_grad)."""

    def __init__(self):
        super().__init__(True)


class inference_mode(_GradMode):
    """Like no_grad (flambeau has no separate inference tensors)."""

    def __init__(self, mode=True):
        super().__init__(not mode)


class set_grad_enabled(_GradMode):
    """Turns grad mode on or off: at once, and for a with-block."""

    def __init__(self, mode):
        super().__init__(mode)
        self.prev = _C.is_grad_enabled()
        _C._set_grad_enabled(mode)

    def __enter__(self):
        return self


def _factory(f):
    """Adds torch's `requires_grad=` keyword to a factory."""
    @functools.wraps(f)
    def make(*args, requires_grad=False, **kwargs):
        t = f(*args, **kwargs)
        return t.requires_grad_() if requires_grad else t
    return make
