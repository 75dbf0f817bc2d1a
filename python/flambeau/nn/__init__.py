"""flambeau.nn: modules, parameters, functional ops and initialisers, as torch.nn."""
from . import attention, functional, init, parallel, utils  # noqa: F401
from .modules import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .modules import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm)  # noqa: F401
from .modules import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from .modules import PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .modules import Fold, Unfold  # noqa: F401
from .modules import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,  # noqa: F401
                      AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d,
                      LPPool2d, LPPool3d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .modules import (CELU, ELU, GELU, GLU, SELU, Dropout, Embedding, Flatten, Hardshrink,  # noqa: F401
                      Hardsigmoid, Hardswish, Hardtanh, Identity, LayerNorm, LeakyReLU, Linear,
                      LinearCrossEntropyLoss, LogSigmoid, LogSoftmax, Mish, Module, ModuleDict, ModuleList,
                      Parameter, PReLU, ReLU, ReLU6, RMSNorm, RReLU, Sequential, Sigmoid, SiLU, Softmax, Softmin,
                      Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold, Unflatten)
