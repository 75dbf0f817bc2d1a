"""Conv1d/2d/3d and ConvTranspose1d/2d/3d, as torch.nn's. The C++ layer (nn::Conv,
src/flambeau/nn/modules_conv.cpp) checks the arguments and initialises the parameters;
forward calls the same functional as its forward."""
from ... import _C
from .. import functional as F
from .layers import _build
from .module import Module


def _tuple(v, n):
    return tuple(v) if isinstance(v, (list, tuple)) else (v,) * n


class _ConvNd(Module):
    _dims = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                 dtype, output_padding=0):
        super().__init__()
        n = self._dims
        args = dict(in_channels=in_channels, out_channels=out_channels, kernel_size=kernel_size, stride=stride,
                    padding=padding, dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
                    dtype=dtype)
        if self._transposed:
            args["output_padding"] = output_padding
        _build(self, type(self).__name__, **args)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.dilation = _tuple(kernel_size, n), _tuple(stride, n), _tuple(dilation, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.output_padding = _tuple(output_padding, n)
        self.padding_mode, self.transposed = padding_mode, self._transposed
        if isinstance(padding, str):
            same = [d * (k - 1) if padding == "same" else 0 for d, k in zip(self.dilation, self.kernel_size)]
            pairs = [(t // 2, t - t // 2) for t in same]
        else:
            pairs = [(p, p) for p in self.padding]
        self._reversed_padding_repeated_twice = [a for pair in reversed(pairs) for a in pair]

    def extra_repr(self):
        n = self._dims
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, dtype)

    def forward(self, input):
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._dims - 1]
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(input, self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, dtype, output_padding)

    def forward(self, input, output_size=None):
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._dims - 1]
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)

    def _output_padding(self, input, output_size):
        """self.output_padding, or the one giving output_size (C++: nn::conv_transpose_output_padding)."""
        if output_size is None:
            return self.output_padding
        return tuple(_C._nn._conv_transpose_output_padding(type(self).__name__, input, list(output_size),
                                                           self.stride, self.padding, self.kernel_size,
                                                           self.dilation))


class Conv1d(_Conv):
    _dims = 1


class Conv2d(_Conv):
    _dims = 2


class Conv3d(_Conv):
    _dims = 3


class ConvTranspose1d(_ConvTranspose):
    _dims = 1


class ConvTranspose2d(_ConvTranspose):
    _dims = 2


class ConvTranspose3d(_ConvTranspose):
    _dims = 3
