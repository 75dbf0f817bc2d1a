"""flambeau.nn: modules, parameters, functional ops and initialisers, as torch.nn."""
from . import functional, init, utils  # noqa: F401
from .modules import (GELU, Dropout, Embedding, LayerNorm, Linear, Module, ModuleDict, ModuleList,  # noqa: F401
                      Parameter, ReLU, RMSNorm, Sequential, Sigmoid, SiLU, Tanh)
