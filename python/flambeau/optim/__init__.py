"""flambeau.optim: SGD, Adam and AdamW with torch.optim's arguments and update rules.
Each step runs in C++, fused over all parameters."""
from .. import _C

Optimizer = _C._optim.Optimizer

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]


class SGD(_C._optim.SGD):
    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        super().__init__(list(params), lr, momentum, dampening, weight_decay, nesterov, maximize)


class Adam(_C._optim.Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
        super().__init__(list(params), lr, tuple(betas), eps, weight_decay, maximize)


class AdamW(_C._optim.AdamW):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, maximize=False):
        super().__init__(list(params), lr, tuple(betas), eps, weight_decay, maximize)

from . import lr_scheduler  # noqa: E402,F401
