"""flambeau.compiler (torch.compiler's API) and flambeau.compile (torch.compile's).

flambeau.compile(fn_or_module) traces the function on its first call with each kind of
arguments (src/flambeau/compile: the op hook records the ops it calls; Python control flow is
specialised to that call), then runs the graph through a backend. A kind of call is its
tensors' dtypes, shapes, strides and requires_grad, the grad mode, the other arguments' values
(numbers, strings, None, ...; objects by identity) and, for a module, the identity of its
parameters and buffers and its training flag. After cache_size_limit kinds (8, as torch) new
kinds run eagerly (one warning). A trace that breaks (item(), data-dependent shapes, an op
outside the registry, a disabled function) raises with fullgraph=True, naming the op, and
otherwise runs eagerly (one warning). Shapes are specialised; with dynamic=True the batch and
sequence dims (0 and 1) of the tensors are not: a call that differs only there traces again
(the trace is that call's own eager run) without counting toward cache_size_limit, and the
cpp backend's kernels, whose code takes sizes at run time, come from the cache (no compiler
run). Compiled functions are differentiable: with inputs or parameters that require grad the
cpp backend compiles the forward and the backward (src/flambeau/compile/aot.h).

Backends: a name, or a callable (graph, example_inputs) -> callable, as torch's; the graph
prints, has to_dot() and is callable on the inputs. Built in: "cpp" (the default: float32
pointwise chains become generated C++ kernels built by the system compiler and cached on
disk, $FLAMBEAU_CACHE_DIR or ~/.cache/flambeau/compile, in a pool of compile worker
processes; the rest runs op by op), "eager" (tag "debug": the graph's ops one by one) and
"aot_eager" (tag "debug": compiled training's forward and backward graphs, op by op). The cpp backend's options: {"target":
"armv9-a+sve2", "sve_bits": 128 | 256} builds the graph (one fused kernel) with Debian's
aarch64 cross g++ and runs it under qemu-aarch64 (cross-target testing); {"gemm_backends":
["blas", "template"]} (torch's "max_autotune_gemm_backends" too) lists the candidates for a
GEMM followed by pointwise ops (templates: GEMM + epilogue per cache block, RMSNorm +
residual), and mode="max-autotune" times them once per pattern, caching the winner on disk.
"""
import atexit
import functools
import warnings
import weakref

from flambeau._C import Tensor as _Tensor
from flambeau._C import _compile as _cc

__all__ = ["compile", "disable", "get_default_backend", "is_compiling", "list_backends", "register_backend",
           "reset", "set_default_backend"]

_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_BUILTIN_DEFAULT = "cpp"
_compiled = weakref.WeakSet()  # every compiled function, for reset()
_custom = {}  # id(callable) -> (its registered name, it)
_registered = set()  # the names of the backends registered from Python


def _warn(message):
    warnings.warn(f"flambeau.compile: {message}", stacklevel=4)


_cc.set_warning_handler(_warn)


@atexit.register
def _release():
    """The C++ registry outlives the interpreter: drop the Python objects it holds."""
    reset()
    for name in _registered:
        _cc.unregister_backend(name)
    _registered.clear()
    _cc.set_warning_handler(None)


def _register(name, fn, tags):
    _cc.register_backend(name, fn, list(tags))
    _registered.add(name)


def _backend_name(backend):
    """A backend argument as a registered name (a callable is registered on first use)."""
    if backend is None:
        return ""
    if isinstance(backend, str):
        return backend
    if callable(backend):
        if id(backend) not in _custom:
            name = f"custom_{getattr(backend, '__name__', 'backend')}_{len(_custom)}"
            _register(name, backend, ())
            _custom[id(backend)] = (name, backend)  # kept alive: ids stay unique
        return _custom[id(backend)][0]
    raise TypeError(f"[compile] backend must be a name or a callable, got {type(backend).__name__}")


def register_backend(compiler_fn=None, name=None, tags=()):
    """Registers compiler_fn(graph, example_inputs) -> callable under name (its __name__ by
    default); usable as a decorator, with or without arguments."""
    if compiler_fn is None:
        return functools.partial(register_backend, name=name, tags=tags)
    _register(name or compiler_fn.__name__, compiler_fn, tags)
    return compiler_fn


def list_backends(exclude_tags=("debug", "experimental")):
    return _cc.list_backends(list(exclude_tags or ()))


def set_default_backend(backend):
    """The backend compile uses when none is given: a name, a callable, or None for the
    built-in default."""
    _cc.set_default_backend(_backend_name(backend) or _BUILTIN_DEFAULT)


def get_default_backend():
    return _cc.get_default_backend()


def is_compiling():
    """True while a trace is recording on this thread."""
    return _cc.is_tracing()


def reset():
    """Drops every compiled function's traces (they trace again on their next call)."""
    for f in list(_compiled):
        f._entries.clear()
        f._warned_limit = False


def disable(fn=None, recursive=True):
    """fn runs eagerly and is never captured: a trace that reaches it breaks there."""
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    if isinstance(fn, _CompiledFunction):
        return fn._fn

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        _cc.break_trace(getattr(fn, "__qualname__", "function"), "flambeau.compiler.disable")
        return fn(*args, **kwargs)

    return disabled


# ---- argument structure --------------------------------------------------------------------
def _flatten(obj, tensors):
    """A hashable description of obj with its tensors appended to `tensors` (as slots)."""
    if isinstance(obj, _Tensor):
        tensors.append(obj)
        return ("T",)
    if isinstance(obj, (tuple, list)):
        return (type(obj).__name__, tuple(_flatten(x, tensors) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple((k, _flatten(v, tensors)) for k, v in obj.items()))
    try:
        hash(obj)
        return ("const", type(obj), obj)
    except TypeError:
        return ("object", id(obj), obj)  # by identity (kept alive by the description)


def _unflatten(spec, tensors):
    kind = spec[0]
    if kind == "T":
        return next(tensors)
    if kind in ("tuple", "list"):
        items = [_unflatten(s, tensors) for s in spec[1]]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {k: _unflatten(s, tensors) for k, s in spec[1]}
    return spec[2]


class _CompiledFunction:
    """What compile returns for a function (a module's wraps its __call__)."""

    def __init__(self, fn, backend, fullgraph, limit, module=None, options=None, dynamic=False):
        self._fn, self._backend, self._fullgraph, self._limit = fn, backend, fullgraph, limit
        self._dynamic = bool(dynamic)
        self._options = {str(k): str(v) for k, v in (options or {}).items()}
        self._module = module
        self._entries = {}  # kind of call -> (_cc.Compiled, [output structure])
        self._warned_limit = False
        functools.update_wrapper(self, fn, updated=())
        _compiled.add(self)

    def _module_key(self):
        m = self._module
        if m is None:
            return None
        return (m.training, tuple(id(p) for p in m.parameters()), tuple(id(b) for b in m.buffers()))

    def __call__(self, *args, **kwargs):
        if _cc.is_tracing():  # inside another compiled function's trace: inlined
            return self._fn(*args, **kwargs)
        tensors = []
        spec = _flatten((args, kwargs), tensors)
        # The tensors' dtypes, shapes, strides, requires_grad and aliasing, and the grad mode,
        # are guarded in C++ (each kind here holds up to the limit of traces there).
        key = (spec, self._module_key()) if self._module is not None else spec
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self._limit:
                if not self._warned_limit:
                    _warn(f"cache_size_limit ({self._limit}) reached: calls of a new kind run eagerly")
                    self._warned_limit = True
                return self._fn(*args, **kwargs)
            specs, ran = {}, [None]  # output structure per C++ trace; the one of a call that ran fn
            fn = self._fn

            def traced(ts):
                a, kw = _unflatten(spec, iter(ts))
                outs = []
                ran[0] = _flatten(fn(*a, **kw), outs)
                return outs

            entry = (_cc.Compiled(traced, self._backend, self._fullgraph, self._limit, self._options, self._dynamic),
                     specs, ran)
            self._entries[key] = entry
        compiled, specs, ran = entry
        ran[0] = None
        outs, index = compiled.call(tensors)
        if ran[0] is not None:  # fn ran (a trace, or a kind that runs eagerly)
            specs.setdefault(index, ran[0])
            return _unflatten(ran[0], iter(outs))
        return _unflatten(specs[index], iter(outs))

    def graphs(self):
        """The graphs traced so far (after the passes), one per kind of call."""
        out = []
        for compiled, _, _ in self._entries.values():
            for i in range(compiled.traces):
                try:
                    out.append(compiled.graph(i))
                except Exception:  # a kind that runs eagerly has none
                    pass
        return out


def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None, disable=False):
    """torch.compile: fn_or_module compiled (see the module docstring); a decorator too."""
    if model is None:
        return functools.partial(compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                 options=options, disable=disable)
    if mode not in _MODES:
        raise ValueError(f"[compile] unknown mode {mode!r} (one of {', '.join(repr(m) for m in _MODES[1:])})")
    if options is not None and mode is not None:
        raise RuntimeError("[compile] either mode or options can be specified, but both can't be specified")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"[compile] options must be a dict, got {type(options).__name__}")
    if not callable(model):
        raise TypeError(f"[compile] expects a function or a Module, got {type(model).__name__}")
    if disable:
        return model
    name = _backend_name(backend)
    if mode in ("max-autotune", "max-autotune-no-cudagraphs") and name in ("", "cpp"):
        options = {"max_autotune": True}  # the cpp backend times its GEMM templates against BLAS
    if name and name not in _cc.list_backends([]):
        raise ValueError(f"[compile] no backend named {name!r} (registered: {', '.join(_cc.list_backends([]))})")
    from flambeau.nn import Module
    if isinstance(model, Module):
        module = model
        compiled = _CompiledFunction(lambda *a, **k: module(*a, **k), name, fullgraph, 8, module=module,
                                     options=options, dynamic=dynamic)
        return _OptimizedModule(module, compiled)
    return _CompiledFunction(model, name, fullgraph, 8, options=options, dynamic=dynamic)


class _OptimizedModule:
    """A compiled module (torch's OptimizedModule): calls go through the compiled forward;
    everything else reaches the module (_orig_mod)."""

    def __init__(self, module, compiled):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled_call", compiled)

    def __call__(self, *args, **kwargs):
        return self._compiled_call(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __repr__(self):
        return f"OptimizedModule({self._orig_mod!r})"
