"""flambeau.nn.init: in-place initialisers (run without recording gradients)."""
import math

from .. import _C
from ..autograd import no_grad


def _fans(t):
    if t.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def _gain(nonlinearity, param=None):
    if nonlinearity in ("linear", "sigmoid", "conv1d", "conv2d", "conv3d"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


calculate_gain = _gain


def uniform_(t, a=0.0, b=1.0, generator=None):
    with no_grad():
        return t.uniform_(a, b, generator=generator)


def normal_(t, mean=0.0, std=1.0, generator=None):
    with no_grad():
        return t.normal_(mean, std, generator=generator)


def constant_(t, val):
    with no_grad():
        return t.fill_(val)


def zeros_(t):
    return constant_(t, 0.0)


def ones_(t):
    return constant_(t, 1.0)


def xavier_uniform_(t, gain=1.0, generator=None):
    fan_in, fan_out = _fans(t)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -a, a, generator)


def xavier_normal_(t, gain=1.0, generator=None):
    fan_in, fan_out = _fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    fan = _fans(t)[0 if mode == "fan_in" else 1]
    bound = math.sqrt(3.0) * _gain(nonlinearity, a) / math.sqrt(fan) if fan > 0 else 0.0
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    fan = _fans(t)[0 if mode == "fan_in" else 1]
    return normal_(t, 0.0, _gain(nonlinearity, a) / math.sqrt(fan), generator)


def trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) resampled... by inverse-CDF on [a, b], as torch does."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    with no_grad():
        t.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        u = t.clamp(-1 + 1e-7, 1 - 1e-7)
        # erfinv through Newton steps on erf (flambeau has no erfinv kernel yet).
        x = u * 0.0
        for _ in range(30):
            x = x - (_C.erf(x) - u) / (_C.exp(-(x * x)) * (2 / math.sqrt(math.pi)))
        t.copy_((x * (std * math.sqrt(2.0)) + mean).clamp(a, b))
    return t
