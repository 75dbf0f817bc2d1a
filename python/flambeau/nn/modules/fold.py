"""Fold and Unfold, with torch.nn's names, attributes and reprs (C++: src/flambeau/nn/resample.cpp,
over the convolution's im2col / col2im)."""
from .. import functional as F
from .module import Module


class Fold(Module):
    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}".format(**self.__dict__))


class Unfold(Module):
    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return "kernel_size={kernel_size}, dilation={dilation}, padding={padding}, stride={stride}".format(
            **self.__dict__)
