"""flambeau.nn.modules (as torch.nn.modules): Module and its hooks (module.py), the
containers (container.py) and the layers (layers.py)."""
from . import module  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .layers import (GELU, Dropout, Embedding, LayerNorm, Linear, LinearCrossEntropyLoss, ReLU, RMSNorm,  # noqa: F401
                     Sigmoid, SiLU, Tanh)
from .module import Module, Parameter  # noqa: F401
