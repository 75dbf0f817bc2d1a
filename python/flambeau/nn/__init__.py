"""flambeau.nn: modules, parameters, functional ops and initialisers, as torch.nn."""
from . import attention, functional, init, parallel, utils  # noqa: F401
from .modules import (GELU, Dropout, Embedding, LayerNorm, Linear, LinearCrossEntropyLoss, Module,  # noqa: F401
                      ModuleDict, ModuleList, Parameter, ReLU, RMSNorm, Sequential, Sigmoid, SiLU, Tanh)
