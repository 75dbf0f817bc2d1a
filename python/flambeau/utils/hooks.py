"""Hook plumbing shared by nn.Module (as torch.utils.hooks): RemovableHandle, returned by every
register_*_hook, and BackwardHook, which runs a module's full backward hooks."""
import warnings
import weakref

from .. import _C
from ..autograd import Function

__all__ = ["RemovableHandle", "BackwardHook"]


class RemovableHandle:
    """Removes the hook it was returned for: handle.remove(), or the end of `with handle:`.
    Hooks live in OrderedDicts keyed by handle.id; the handle holds them weakly."""

    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict_ref = weakref.ref(hooks_dict)
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        extras = [] if extra_dict is None else extra_dict if isinstance(extra_dict, list) else [extra_dict]
        self.extra_dict_ref = tuple(weakref.ref(d) for d in extras)

    def remove(self):
        for ref in (self.hooks_dict_ref, *self.extra_dict_ref):
            d = ref()
            if d is not None and self.id in d:
                del d[self.id]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class BackwardHookFunction(Function):
    """Identity on tensors whose backward hands the gradients to a callback (its node is
    named BackwardHookFunctionBackward, as torch's)."""

    @staticmethod
    def forward(ctx, on_backward, *tensors):
        ctx.on_backward = on_backward
        return tuple(t.detach() for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        return (None, *ctx.on_backward(grads))


def _pack(positions, values, size):
    out = [None] * size
    for i, v in zip(positions, values):
        out[i] = v
    return tuple(out)


def _wrap(values, on_backward):
    """values with each tensor that requires grad replaced by an identity whose backward
    calls on_backward(grads); also the positions wrapped (None when none was)."""
    if not _C.is_grad_enabled():
        return values, None
    positions = [i for i, v in enumerate(values) if isinstance(v, _C.Tensor) and v.requires_grad]
    if not positions:
        return values, None
    wrapped = BackwardHookFunction.apply(on_backward, *(values[i] for i in positions))
    out = list(values)
    for i, t in zip(positions, wrapped):
        out[i] = t
    return tuple(out), positions


class BackwardHook:
    """A module's full backward hooks for one forward call (torch.utils.hooks.BackwardHook).

    The tensor arguments that require grad pass through one identity node and the outputs
    through another. In backward the output node runs first: the backward pre-hooks get
    grad_output (one entry per output, None for non-tensors) and may replace it; then the
    input node runs the backward hooks with grad_input (one entry per positional argument,
    None where no gradient is defined) and grad_output, and they may replace grad_input.
    When no argument requires grad, the output node runs the backward hooks with an all-None
    grad_input. Gradients that did not flow to a wrapped tensor arrive as zeros."""

    def __init__(self, module, user_hooks, user_pre_hooks):
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.input_positions = self.output_positions = None

    def setup_input_hook(self, args):
        self.n_inputs = len(args)
        args, self.input_positions = _wrap(tuple(args), self._input_backward)
        return args

    def setup_output_hook(self, result):
        is_tuple = isinstance(result, tuple)
        if not (is_tuple or isinstance(result, _C.Tensor)):
            warnings.warn("For backward hooks to be called, module output should be a Tensor or a tuple of Tensors "
                          f"but received {type(result)}", stacklevel=3)
        outputs = result if is_tuple else (result,)
        self.n_outputs = len(outputs)
        outputs, self.output_positions = _wrap(outputs, self._output_backward)
        return outputs if is_tuple else outputs[0]

    def _output_backward(self, grads):
        self.grad_outputs = _pack(self.output_positions, grads, self.n_outputs)
        for hook in self.user_pre_hooks:
            result = hook(self.module, self.grad_outputs)
            if result is None:
                continue
            if len(result) != len(self.grad_outputs):
                raise RuntimeError("Backward pre hook returned an invalid number of grad_output, got "
                                   f"{len(result)}, but expected {len(self.grad_outputs)}")
            self.grad_outputs = tuple(result)
        grad_outputs = self.grad_outputs
        if self.input_positions is None:
            if self.user_hooks:
                warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                              "outputs since no inputs require gradients.", stacklevel=2)
            no_grads = (None,) * self.n_inputs
            for hook in self.user_hooks:
                result = hook(self.module, no_grads, grad_outputs)
                if result is not None and not (isinstance(result, tuple) and all(r is None for r in result)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(grad_outputs[i] for i in self.output_positions)

    def _input_backward(self, grads):
        if self.grad_outputs is None:  # reached without passing through the module's output
            return grads
        grad_inputs = _pack(self.input_positions, grads, self.n_inputs)
        for hook in self.user_hooks:
            result = hook(self.module, grad_inputs, self.grad_outputs)
            if result is None:
                continue
            if len(result) != len(grad_inputs):
                raise RuntimeError("Backward hook returned an invalid number of grad_input, got "
                                   f"{len(result)}, but expected {len(grad_inputs)}")
            grad_inputs = tuple(result)
        self.grad_outputs = None
        return tuple(grad_inputs[i] for i in self.input_positions)
