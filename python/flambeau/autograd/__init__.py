"""flambeau.autograd: reverse-mode automatic differentiation, as torch.autograd."""
import contextlib
import functools

from .. import _C

__all__ = ["backward", "grad", "gradcheck", "gradgradcheck", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "is_grad_enabled", "Variable", "Function", "graph"]

is_grad_enabled = _C.is_grad_enabled


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulates the gradients of `tensors` (weighted by grad_tensors) into the leaves.

    create_graph: the gradients get a graph of their own (double backward); retain_graph
    defaults to it."""
    retain = create_graph if retain_graph is None else retain_graph
    _C._backward(tensors, grad_tensors, bool(retain), bool(create_graph))


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None):
    """The gradients of outputs w.r.t. inputs, returned (not accumulated into .grad), in
    torch.autograd.grad's argument order; create_graph as for backward."""
    retain = create_graph if retain_graph is None else retain_graph
    return _C._grad(outputs, inputs, grad_outputs, bool(retain), bool(allow_unused), bool(create_graph))


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks backward against central finite differences (float64 inputs that require grad)."""
    inputs = (inputs,) if isinstance(inputs, _C.Tensor) else tuple(inputs)
    ok, report = _C._gradcheck(fn, list(inputs), eps, atol, rtol)
    if not ok and raise_exception:
        raise RuntimeError(report)
    return ok


def gradgradcheck(fn, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Checks the second derivatives: gradcheck of the gradients of fn(*inputs) (weighted by
    grad_outputs; by default a fixed, non-constant pattern) computed with create_graph."""
    inputs = (inputs,) if isinstance(inputs, _C.Tensor) else tuple(inputs)
    v = grad_outputs

    def first_grads(*xs):
        nonlocal v
        with enable_grad():
            out = fn(*xs)
            if v is None:
                n = out.numel()
                v = _C.sin(_C.arange(n, dtype=out.dtype) * 0.7 + 0.3).reshape(out.shape)
            gs = grad(out, list(xs), v, create_graph=True, allow_unused=True)
        flat = [g.reshape(-1) if g is not None else _C.zeros(x.numel(), dtype=x.dtype) for g, x in zip(gs, xs)]
        return _C.cat(flat)

    return gradcheck(first_grads, inputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception)


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


class Function:
    """A differentiable op written in Python, as torch.autograd.Function: subclasses define
    static forward(ctx, *args) and backward(ctx, *grad_outputs); call with .apply(*args)."""

    @classmethod
    def apply(cls, *args):
        ctx = _Context()
        with no_grad():
            out = cls.forward(ctx, *args)
        outputs = out if isinstance(out, tuple) else (out,)
        inputs = [a for a in args if isinstance(a, _C.Tensor)]
        if _C.is_grad_enabled() and any(a.requires_grad for a in inputs):
            positions = [i for i, a in enumerate(args) if isinstance(a, _C.Tensor)]

            def backward(*grads):
                g = cls.backward(ctx, *grads)
                g = g if isinstance(g, tuple) else (g,)
                return tuple(g[i] if i < len(g) else None for i in positions)

            _C._record_function(cls.__name__ + "Backward", inputs, list(outputs), backward)
        return out


class _Context:
    def save_for_backward(self, *tensors):
        self.saved_tensors = tuple(t.detach() if t is not None else None for t in tensors)


def checkpoint(fn, *args, use_reentrant=False):
    """Runs fn(*args) without keeping its intermediate tensors; backward runs it again
    (with grad) to get the gradients. fn must be deterministic (no random ops)."""
    class _Checkpoint(Function):
        @staticmethod
        def forward(ctx, *inputs):
            return fn(*inputs)

        @staticmethod
        def backward(ctx, *grads):
            with enable_grad():
                inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, _C.Tensor) else a
                          for a in args]
                out = fn(*inputs)
                outs = list(out) if isinstance(out, tuple) else [out]
                wanted = [a for a in inputs if isinstance(a, _C.Tensor) and a.requires_grad]
                got = iter(grad(outs, wanted, list(grads), allow_unused=True)) if wanted else iter(())
            return tuple(next(got) if isinstance(a, _C.Tensor) and a.requires_grad else None for a in inputs)
    _Checkpoint.__name__ = "Checkpoint"
    return _Checkpoint.apply(*args)


class _ExecutionEngine:
    """The backward engine as torch exposes it (torch.autograd.Variable._execution_engine)."""

    @staticmethod
    def queue_callback(callback):
        """See flambeau.autograd.graph.queue_callback."""
        _C._queue_callback(callback)


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, _C.Tensor)


class Variable(metaclass=_VariableMeta):
    """torch's legacy Variable: every Tensor is one; kept for Variable._execution_engine."""

    _execution_engine = _ExecutionEngine()


from . import graph  # noqa: E402,F401
