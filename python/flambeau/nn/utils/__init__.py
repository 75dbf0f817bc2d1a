"""flambeau.nn.utils: gradient clipping; rnn (packed sequences)."""
from ... import _C
from . import rnn  # noqa: F401
from ...autograd import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


@no_grad()
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales all gradients so that their joint norm is at most max_norm; returns the norm."""
    grads = _grads(parameters)
    if not grads:
        return _C.tensor(0.0)
    total = _C.norm(_C.stack([_C.norm(g, norm_type) for g in grads]), norm_type)
    if error_if_nonfinite and not bool(_C.isfinite(total).all()):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients is non-finite")
    coef = _C.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.dtype))
    return total


@no_grad()
def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element into [-clip_value, clip_value]."""
    for g in _grads(parameters):
        g.clamp_(-clip_value, clip_value)
