"""flambeau.nn.init: in-place initialisers (run without recording gradients), as
torch.nn.init; the C++ nn::init does the work."""
from .. import _C

calculate_gain = _C._nn.calculate_gain


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _C._nn.uniform_(tensor, a, b, generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _C._nn.normal_(tensor, mean, std, generator)


def constant_(tensor, val):
    return _C._nn.constant_(tensor, val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    return _C._nn.xavier_uniform_(tensor, gain, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    return _C._nn.xavier_normal_(tensor, gain, generator)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    return _C._nn.kaiming_uniform_(tensor, a, mode, nonlinearity, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    return _C._nn.kaiming_normal_(tensor, a, mode, nonlinearity, generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b], by the inverse CDF (as torch)."""
    return _C._nn.trunc_normal_(tensor, mean, std, a, b, generator)
