"""Module forms of the activations, with torch.nn's names, arguments and defaults. Each forward
is one call of the C++ functional (flambeau.nn.functional, src/flambeau/nn/activation.cpp);
PReLU holds its slopes as a parameter."""
import inspect

from ... import _C
from .. import functional as F
from .module import Module, Parameter

_REQUIRED = inspect.Parameter.empty


def _activation(name, forward, bare_repr=False, **arguments):
    """A parameterless layer `name` whose constructor takes `arguments` (name -> default, or
    _REQUIRED) as torch's does, keeps them as attributes, and whose forward is forward(self, x).
    Its repr is torch's: name=value for each argument (the value alone if bare_repr), inplace
    only when True."""
    signature = inspect.Signature([inspect.Parameter(a, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
                                   for a, d in arguments.items()])

    def __init__(self, *args, **kwargs):
        Module.__init__(self)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        for key, value in bound.arguments.items():
            setattr(self, key, value)

    def extra_repr(self):
        shown = [str(getattr(self, a)) if bare_repr else f"{a}={getattr(self, a)}" for a in arguments
                 if a != "inplace"]
        return ", ".join(shown + (["inplace=True"] if getattr(self, "inplace", False) else []))

    __init__.__signature__ = signature
    return type(name, (Module,), {"__init__": __init__, "forward": forward, "extra_repr": extra_repr,
                                  "__module__": __name__, "__qualname__": name})


ELU = _activation("ELU", lambda m, x: F.elu(x, m.alpha, m.inplace), alpha=1.0, inplace=False)
SELU = _activation("SELU", lambda m, x: F.selu(x, m.inplace), inplace=False)
CELU = _activation("CELU", lambda m, x: F.celu(x, m.alpha, m.inplace), alpha=1.0, inplace=False)
LeakyReLU = _activation("LeakyReLU", lambda m, x: F.leaky_relu(x, m.negative_slope, m.inplace),
                        negative_slope=0.01, inplace=False)
RReLU = _activation("RReLU", lambda m, x: F.rrelu(x, m.lower, m.upper, m.training, m.inplace),
                    lower=1.0 / 8, upper=1.0 / 3, inplace=False)
Hardtanh = _activation("Hardtanh", lambda m, x: F.hardtanh(x, m.min_val, m.max_val, m.inplace),
                       min_val=-1.0, max_val=1.0, inplace=False)
ReLU6 = _activation("ReLU6", lambda m, x: F.relu6(x, m.inplace), inplace=False)
Hardsigmoid = _activation("Hardsigmoid", lambda m, x: F.hardsigmoid(x, m.inplace), inplace=False)
Hardswish = _activation("Hardswish", lambda m, x: F.hardswish(x, m.inplace), inplace=False)
Mish = _activation("Mish", lambda m, x: F.mish(x, m.inplace), inplace=False)
GLU = _activation("GLU", lambda m, x: F.glu(x, m.dim), dim=-1)
LogSigmoid = _activation("LogSigmoid", lambda m, x: F.log_sigmoid(x))
Softsign = _activation("Softsign", lambda m, x: F.softsign(x))
Softshrink = _activation("Softshrink", lambda m, x: F.softshrink(x, m.lambd), True, lambd=0.5)
Hardshrink = _activation("Hardshrink", lambda m, x: F.hardshrink(x, m.lambd), True, lambd=0.5)
Tanhshrink = _activation("Tanhshrink", lambda m, x: F.tanhshrink(x))
Threshold = _activation("Threshold", lambda m, x: F.threshold(x, m.threshold, m.value, m.inplace),
                        threshold=_REQUIRED, value=_REQUIRED, inplace=False)
Softmin = _activation("Softmin", lambda m, x: F.softmin(x, m.dim), dim=None)
Softmax = _activation("Softmax", lambda m, x: F.softmax(x, m.dim if m.dim is not None else _implicit_dim(x)),
                      dim=None)
LogSoftmax = _activation("LogSoftmax",
                         lambda m, x: F.log_softmax(x, m.dim if m.dim is not None else _implicit_dim(x)), dim=None)
Softplus = _activation("Softplus", lambda m, x: F.softplus(x, m.beta, m.threshold), beta=1.0, threshold=20.0)


def _implicit_dim(x):
    """torch's dim for softmax without one: 0 for 0-, 1- and 3-dim input, else 1."""
    return 0 if x.dim() in (0, 1, 3) else 1


class PReLU(Module):
    """max(0, x) + weight * min(0, x), weight one slope or one per channel (input dim 1)."""

    def __init__(self, num_parameters=1, init=0.25, dtype=None):
        super().__init__()
        if not isinstance(num_parameters, int) or num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got {num_parameters!r}")
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(_C.full([num_parameters], float(init), dtype=dtype))

    def forward(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
