"""flambeau.nn.Module (as torch.nn.modules.module): parameters, buffers and submodules,
state_dict / load_state_dict with their hooks, train/eval, apply, to; forward pre/post hooks
and full backward pre/post hooks run by __call__, and the register_module_* global hooks
that run before every module's own."""
import itertools
import warnings
from collections import OrderedDict, namedtuple

from ... import _C
from ...autograd import no_grad
from ...utils.hooks import BackwardHook, RemovableHandle

__all__ = ["Module", "Parameter", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_pre_hook", "register_module_full_backward_hook"]

# Hooks common to all modules, run before each module's own (meant for debugging/profiling).
_global_forward_pre_hooks = OrderedDict()
_global_forward_hooks = OrderedDict()
_global_forward_hooks_always_called = OrderedDict()
_global_forward_hooks_with_kwargs = OrderedDict()
_global_backward_pre_hooks = OrderedDict()
_global_backward_hooks = OrderedDict()


def _add_hook(hooks, hook, *, prepend=False, flags=()):
    """Stores `hook` in the OrderedDict `hooks` (first when prepend) and returns its handle;
    flags: (dict, enabled) pairs marking the hook in each dict where enabled (the handle
    removes it from all of them)."""
    handle = RemovableHandle(hooks, extra_dict=[d for d, _ in flags] or None)
    hooks[handle.id] = hook
    for d, enabled in flags:
        if enabled:
            d[handle.id] = True
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def register_module_forward_pre_hook(hook):
    """hook(module, args) -> None or new args, before every module's forward pre-hooks."""
    return _add_hook(_global_forward_pre_hooks, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) (with_kwargs: hook(module, args, kwargs, output)) -> None or
    new output, before every module's forward hooks; always_call: also when forward raised."""
    return _add_hook(_global_forward_hooks, hook, flags=[(_global_forward_hooks_always_called, always_call),
                                                         (_global_forward_hooks_with_kwargs, with_kwargs)])


def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) -> None or new grad_output, before every module's own."""
    return _add_hook(_global_backward_pre_hooks, hook)


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) -> None or new grad_input, before every module's own."""
    return _add_hook(_global_backward_hooks, hook)


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: (missing_keys, unexpected_keys)."""

    def __repr__(self):
        return "<All keys matched successfully>" if not self.missing_keys and not self.unexpected_keys \
            else super().__repr__()

    __str__ = __repr__


class _WrappedHook:
    """A load_state_dict pre-hook, given the module first when registered with_module."""

    def __init__(self, hook, module=None):
        self.hook, self.module = hook, module

    def __call__(self, *args):
        return self.hook(self.module, *args) if self.module is not None else self.hook(*args)


class Parameter(_C.Tensor):
    """A tensor that a Module registers as a parameter (requires grad by default)."""

    def __init__(self, data=None, requires_grad=True):
        super().__init__(data if data is not None else _C.empty(0))
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of all modules: subclasses set attributes in __init__ and define forward."""

    _version = 1  # state_dict metadata, as torch

    def __init__(self):
        for name in ("_parameters", "_buffers", "_modules", "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
                     "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                     "_backward_pre_hooks", "_backward_hooks", "_state_dict_pre_hooks", "_state_dict_hooks",
                     "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"):
            object.__setattr__(self, name, OrderedDict())
        object.__setattr__(self, "_state_dict_hooks_public", set())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    def __call__(self, *args, **kwargs):
        if not (self._forward_pre_hooks or self._forward_hooks or self._backward_pre_hooks or self._backward_hooks
                or _global_forward_pre_hooks or _global_forward_hooks or _global_backward_pre_hooks
                or _global_backward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        """__call__ when a hook exists: global then own forward pre-hooks, the backward hooks'
        input wrapping, forward, global then own forward hooks, the output wrapping. If any of
        it raises, the always_call forward hooks that have not run yet run, then it re-raises."""
        result = None
        called = set()  # always_call hooks that already ran
        try:
            # Taken before the pre-hooks run, so a hook registered by one applies from the next call.
            backward_hooks = [*_global_backward_hooks.values(), *self._backward_hooks.values()]
            backward_pre_hooks = [*_global_backward_pre_hooks.values(), *self._backward_pre_hooks.values()]
            for hook_id, hook in (*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    out = hook(self, args, kwargs)
                    if out is not None:
                        if not (isinstance(out, tuple) and len(out) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, "
                                               f"new_kwargs), but got {out}.")
                        args, kwargs = out
                else:
                    out = hook(self, args)
                    if out is not None:
                        args = out if isinstance(out, tuple) else (out,)
            bw_hook = None
            if backward_hooks or backward_pre_hooks:
                bw_hook = BackwardHook(self, backward_hooks, backward_pre_hooks)
                args = bw_hook.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called or hook_id in _global_forward_hooks_always_called:
                    called.add(hook_id)
                result = self._call_forward_hook(hook_id, hook, args, kwargs, result)
            if bw_hook is not None:
                result = bw_hook.setup_output_hook(result)
            return result
        except Exception:
            self._run_always_called_hooks(args, kwargs, result, called)
            raise

    def _call_forward_hook(self, hook_id, hook, args, kwargs, result):
        """One forward hook (with kwargs when registered so); its non-None return replaces result."""
        if hook_id in self._forward_hooks_with_kwargs or hook_id in _global_forward_hooks_with_kwargs:
            out = hook(self, args, kwargs, result)
        else:
            out = hook(self, args, result)
        return result if out is None else out

    def _run_always_called_hooks(self, args, kwargs, result, called):
        """The always_call forward hooks not run yet; their own errors become warnings."""
        for hook_id, hook in (*_global_forward_hooks.items(), *self._forward_hooks.items()):
            if hook_id in called or not (hook_id in self._forward_hooks_always_called
                                         or hook_id in _global_forward_hooks_always_called):
                continue
            try:
                result = self._call_forward_hook(hook_id, hook, args, kwargs, result)
            except Exception as e:
                warnings.warn("module forward hook with ``always_call=True`` raised an exception that was "
                              f"silenced as another error was raised in forward: {e}", stacklevel=3)

    # ---- hooks ----------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (a non-tuple is wrapped in one); with_kwargs:
        hook(module, args, kwargs) -> None or (new_args, new_kwargs). prepend: run first."""
        return _add_hook(self._forward_pre_hooks, hook, prepend=prepend,
                         flags=[(self._forward_pre_hooks_with_kwargs, with_kwargs)])

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """hook(module, args, output) (with_kwargs: hook(module, args, kwargs, output)) -> None or
        new output. always_call: also runs when forward raised. prepend: run first."""
        return _add_hook(self._forward_hooks, hook, prepend=prepend,
                         flags=[(self._forward_hooks_with_kwargs, with_kwargs),
                                (self._forward_hooks_always_called, always_call)])

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output, when the gradients w.r.t. the
        module's outputs are known (see flambeau.utils.hooks.BackwardHook)."""
        return _add_hook(self._backward_pre_hooks, hook, prepend=prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input, when the gradients
        w.r.t. the module's positional inputs are known (None for inputs without one)."""
        return _add_hook(self._backward_hooks, hook, prepend=prepend)

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars), before this module saves its entries."""
        return _add_hook(self._state_dict_pre_hooks, hook)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, after this module and its
        children saved theirs; it may edit state_dict in place."""
        handle = _add_hook(self._state_dict_hooks, hook)
        self._state_dict_hooks_public.add(handle.id)
        return handle

    def _register_state_dict_hook(self, hook):
        """The private form: a result that is not None replaces the state_dict."""
        return _add_hook(self._state_dict_hooks, hook)

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs), before this module's entries are checked; it may edit
        state_dict (a copy of the one given) and the lists in place."""
        return self._register_load_state_dict_pre_hook(hook, with_module=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        return _add_hook(self._load_state_dict_pre_hooks, _WrappedHook(hook, self if with_module else None))

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None, after loading; it may edit
        incompatible_keys.missing_keys / unexpected_keys in place (strict checks what is left)."""
        return _add_hook(self._load_state_dict_post_hooks, hook)

    # ---- registration -------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign before Module.__init__() call")
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for d in (self._parameters, self._buffers, self._modules):
            if name in d:
                del d[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        self._modules[name] = module

    # ---- traversal ------------------------------------------------------------------
    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mp}.{name}" if mp else name), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mp}.{name}" if mp else name), b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- state ------------------------------------------------------------------------
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, t in itertools.chain(self._parameters.items(), self._buffers.items()):
            if t is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = t if keep_vars else t.detach()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (detached unless keep_vars), each
        module's own entries before its children's; runs the state_dict pre/post hooks."""
        if args:  # torch's deprecated positional form: (destination, prefix, keep_vars)
            destination = args[0] if destination is None else destination
            prefix = args[1] if len(args) > 1 and prefix == "" else prefix
            keep_vars = args[2] if len(args) > 2 and keep_vars is False else keep_vars
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        local_metadata = dict(version=self._version)
        if hasattr(destination, "_metadata"):
            destination._metadata[prefix[:-1]] = local_metadata
        for hook in self._state_dict_pre_hooks.values():
            hook(self, prefix, keep_vars)
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".", keep_vars=keep_vars)
        for hook_id, hook in self._state_dict_hooks.items():
            out = hook(self, destination, prefix, local_metadata)
            if hook_id in self._state_dict_hooks_public:
                if out is not None:
                    raise RuntimeError("state_dict post-hook must return None")
            elif out is not None:
                destination = out
        return destination

    def _check_state_dict(self, state_dict, prefix, missing, unexpected, errors, copies):
        """Compares this module's own entries with state_dict's keys under prefix: missing
        and unexpected keys, size mismatches (errors), and the copies to make."""
        own = {name: t for name, t in itertools.chain(self._parameters.items(), self._buffers.items())
               if t is not None and name not in self._non_persistent_buffers_set}
        for name, t in own.items():
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
            elif tuple(state_dict[key].shape) != tuple(t.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {tuple(state_dict[key].shape)} "
                              f"from checkpoint, the shape in current model is {tuple(t.shape)}.")
            else:
                copies.append((t, state_dict[key]))
        for key in state_dict:
            if key.startswith(prefix):
                head, dot, _ = key[len(prefix):].partition(".")
                if (dot and head not in self._modules) or (not dot and head not in own):
                    unexpected.append(key)

    def load_state_dict(self, state_dict, strict=True):
        """Copies the entries of state_dict into the parameters and buffers (no grad) and
        returns (missing_keys, unexpected_keys). Each module's load pre-hooks run before its
        entries are checked; size mismatches, and with strict missing or unexpected keys,
        raise one RuntimeError. Everything is checked before anything is written (when no
        load post-hook could still change the verdict); the post-hooks run after the copy,
        children before their parent, and strict checks the keys they leave."""
        metadata = getattr(state_dict, "_metadata", None)
        state_dict = OrderedDict(state_dict)  # hooks may edit this copy
        if metadata is not None:
            state_dict._metadata = metadata
        missing, unexpected, errors, copies, loaded = [], [], [], [], []

        def check(module, local, prefix):
            local_metadata = {} if metadata is None else metadata.get(prefix[:-1], {})
            for hook in module._load_state_dict_pre_hooks.values():
                hook(local, prefix, local_metadata, strict, missing, unexpected, errors)
            module._check_state_dict(local, prefix, missing, unexpected, errors, copies)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    check(child, {k: v for k, v in local.items() if k.startswith(child_prefix)}, child_prefix)
            loaded.append(module)

        check(self, state_dict, "")
        has_post_hooks = any(m._load_state_dict_post_hooks for m in loaded)
        if errors or (strict and not has_post_hooks and (missing or unexpected)):
            self._raise_load_errors(strict, missing, unexpected, errors)
        with no_grad():
            for target, source in copies:
                target.copy_(source)
        for m in loaded:
            for hook in m._load_state_dict_post_hooks.values():
                if hook(m, _IncompatibleKeys(missing, unexpected)) is not None:  # AssertionError, as torch
                    raise AssertionError("Hooks registered with ``register_load_state_dict_post_hook`` are not "
                                       "expected to return new values, if incompatible_keys need to be modified, "
                                       "it should be done inplace.")
        if strict and (missing or unexpected):
            self._raise_load_errors(strict, missing, unexpected, errors)
        return _IncompatibleKeys(missing, unexpected)

    def _raise_load_errors(self, strict, missing, unexpected, errors):
        lines = list(errors)
        if strict and unexpected:
            lines.insert(0, "unexpected keys in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        if strict and missing:
            lines.insert(0, "missing keys in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(lines))

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """to(dtype), to(device=None, dtype=None, non_blocking=False), to(tensor) or
        to(memory_format=...), as torch: floating parameters and buffers take the dtype, 4-d
        and 5-d ones the memory format, in place (the Parameter objects stay the same, so
        optimizers built before still hold them)."""
        dtype, memory_format = _to_arguments("Module.to", args, kwargs)

        def convert(t):
            if dtype is not None and t.is_floating_point() and t.dtype is not dtype:
                t = t.to(dtype)
            if memory_format is not None and t.dim() in (4, 5):
                t = t.to(memory_format=memory_format)
            return t

        for m in self.modules():
            for p in m._parameters.values():
                if p is None:
                    continue
                new = convert(p.detach())
                if new.dtype is not p.dtype or new.stride() != p.stride():
                    p._set_data(new)
                    p.grad = None
            for name, b in list(m._buffers.items()):
                if b is not None:
                    m._buffers[name] = convert(b)
        return self

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + (")" if not lines else "\n  " + "\n  ".join(lines) + "\n)")



def _to_arguments(op, args, kwargs):
    """(dtype or None, memory_format or None) of Module.to's arguments; the device must be the cpu."""
    dtype, memory_format, device = kwargs.pop("dtype", None), kwargs.pop("memory_format", None), kwargs.pop("device", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"{op}() got an unexpected keyword argument '{next(iter(kwargs))}'")
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, _C.Tensor):
            dtype = a.dtype
        elif isinstance(a, (str, _C.device)):
            device = a
        elif isinstance(a, bool):
            pass  # non_blocking
        else:
            raise TypeError(f"{op}() received an invalid combination of arguments: {type(a).__name__}")
    if device is not None and str(device).split(":")[0] != "cpu":
        raise RuntimeError(f"{op}: device {device} is not available: this build of flambeau supports only the cpu")
    if dtype is not None and not dtype.is_floating_point:
        raise TypeError(f"{op}() only accepts floating point dtypes, but got desired dtype={dtype}")
    return dtype, memory_format
