"""flambeau.nn.modules (as torch.nn.modules): Module and its hooks (module.py), the
containers (container.py), the layers (layers.py), the activations (activation.py) and the
poolings (pooling.py)."""
from . import module  # noqa: F401
from .activation import (CELU, ELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU,  # noqa: F401
                         LogSigmoid, LogSoftmax, Mish, PReLU, ReLU6, RReLU, SELU, Softmax, Softmin, Softplus,
                         Softshrink, Softsign, Tanhshrink, Threshold)
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm)  # noqa: F401
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d,  # noqa: F401
                      AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, LPPool1d,
                      LPPool2d, LPPool3d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
from .fold import Fold, Unfold  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .layers import (GELU, Dropout, Embedding, Flatten, Identity, LayerNorm, Linear,  # noqa: F401
                     LinearCrossEntropyLoss, ReLU, RMSNorm, Sigmoid, SiLU, Tanh, Unflatten)
from .module import Module, Parameter  # noqa: F401
