"""flambeau.nn.utils: gradient clipping."""
from ... import _C

__all__ = ["clip_grad_norm_", "clip_grad_value_"]


def _grads(parameters):
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales all gradients so that their joint norm is at most max_norm; returns the norm."""
    grads = _grads(parameters)
    if not grads:
        return _C.tensor(0.0)
    prev = _C.is_grad_enabled()
    _C._set_grad_enabled(False)
    try:
        norms = _C.stack([_C.norm(g.float() if not g.is_floating_point() else g, norm_type) for g in grads])
        total = _C.norm(norms, norm_type)
        if error_if_nonfinite and not bool(_C.isfinite(total).all()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients is non-finite")
        coef = _C.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))
    finally:
        _C._set_grad_enabled(prev)
    return total


def clip_grad_value_(parameters, clip_value):
    """Clamps every gradient element into [-clip_value, clip_value]."""
    prev = _C.is_grad_enabled()
    _C._set_grad_enabled(False)
    try:
        for g in _grads(parameters):
            g.clamp_(-clip_value, clip_value)
    finally:
        _C._set_grad_enabled(prev)
