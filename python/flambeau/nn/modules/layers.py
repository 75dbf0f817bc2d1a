"""flambeau.nn modules: Module (parameters, buffers, submodules, state_dict, train/eval),
Parameter, containers and the common layers, with torch.nn's names and behaviour."""
import math
from collections import OrderedDict

from .. import _C
from ..autograd import no_grad
from . import functional as F
from . import init


class Parameter(_C.Tensor):
    """A tensor that a Module registers as a parameter (requires grad by default)."""

    def __init__(self, data=None, requires_grad=True):
        super().__init__(data if data is not None else _C.empty(0))
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of all modules: subclasses set attributes in __init__ and define forward."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"Module [{type(self).__name__}] is missing the required \"forward\" function")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- registration -------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign before Module.__init__() call")
        for d in (self._parameters, self._buffers, self._modules):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for d in (self._parameters, self._buffers, self._modules):
            if name in d:
                del d[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is None:
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def register_buffer(self, name, tensor, persistent=True):
        self._buffers[name] = tensor
        if not persistent:
            self.__dict__.setdefault("_non_persistent", set()).add(name)

    def add_module(self, name, module):
        self._modules[name] = module

    # ---- traversal ------------------------------------------------------------------
    def named_modules(self, prefix=""):
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix="", recurse=True):
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, p in m._parameters.items():
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mp}.{name}" if mp else name), p

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mp, m in mods:
            for name, b in m._buffers.items():
                if b is not None:
                    yield (f"{mp}.{name}" if mp else name), b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- state ------------------------------------------------------------------------
    def state_dict(self):
        out = OrderedDict()
        for mp, m in self.named_modules():
            skip = m.__dict__.get("_non_persistent", set())
            for name, t in list(m._parameters.items()) + [(k, v) for k, v in m._buffers.items() if k not in skip]:
                if t is not None:
                    out[f"{mp}.{name}" if mp else name] = t.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies matching entries in; with strict, missing or unexpected keys raise."""
        own = self.state_dict()
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
        with no_grad():
            for k, v in state_dict.items():
                if k in own:
                    if tuple(own[k].shape) != tuple(v.shape):
                        raise RuntimeError(f"size mismatch for {k}: copying a param with shape {tuple(v.shape)}, "
                                           f"the shape in current model is {tuple(own[k].shape)}")
                    own[k].copy_(v)
        return missing, unexpected

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, dtype):
        """Converts floating parameters and buffers to dtype in place (the Parameter objects
        stay the same, so optimizers built before still hold them), as torch does."""
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None and p.is_floating_point() and p.dtype is not dtype:
                    p._set_data(p.detach().to(dtype))
                    p.grad = None
            for name, b in list(m._buffers.items()):
                if b is not None and b.is_floating_point():
                    m._buffers[name] = b.to(dtype)
        return self

    def float(self):
        return self.to(_C.float32)

    def double(self):
        return self.to(_C.float64)

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + (")" if not lines else "\n  " + "\n  ".join(lines) + "\n)")


class _ModuleSequence(Module):
    """Submodules kept in order, indexable and iterable (Sequential, ModuleList)."""

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(_ModuleSequence):
    def __init__(self, *modules):
        super().__init__()
        items = modules[0].items() if len(modules) == 1 and isinstance(modules[0], OrderedDict) else \
            ((str(i), m) for i, m in enumerate(modules))
        for name, m in items:
            self.add_module(name, m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(_ModuleSequence):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        self.add_module(str(len(self._modules)), m)
        return self


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, k):
        return self._modules[k]

    def __setitem__(self, k, m):
        self.add_module(k, m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(_C.empty(out_features, in_features, dtype=dtype))
        self.bias = Parameter(_C.empty(out_features, dtype=dtype)) if bias else None
        if not bias:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        # torch: kaiming_uniform_(a=sqrt(5)) on the weight, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) on the bias.
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.padding_idx = padding_idx
        self.weight = Parameter(_C.empty(num_embeddings, embedding_dim, dtype=dtype))
        init.normal_(self.weight)
        if padding_idx is not None:
            with no_grad():
                self.weight[padding_idx] = 0.0

    def forward(self, x):
        return F.embedding(x, self.weight, self.padding_idx)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LinearCrossEntropyLoss(Module):
    """torch 2.13's nn.LinearCrossEntropyLoss (plus z_loss): owns `linear` (in_features ->
    num_classes) and applies F.linear_cross_entropy (fused, chunked) with its options. Tie it
    to an embedding by sharing the parameter: `loss.linear.weight = emb.weight`."""

    def __init__(self, in_features, num_classes, *, bias=False, dtype=None, reduction="mean", weight=None,
                 ignore_index=-100, label_smoothing=0.0, z_loss=0.0, chunk_size=None):
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"[LinearCrossEntropyLoss] reduction must be 'mean', 'sum' or 'none', got '{reduction}'")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"[LinearCrossEntropyLoss] label_smoothing must be between 0.0 and 1.0, got "
                             f"{label_smoothing}")
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise ValueError(f"[LinearCrossEntropyLoss] expected weight of shape ({num_classes},), got "
                             f"{tuple(weight.shape)}")
        self.num_classes = num_classes
        self.reduction, self.ignore_index = reduction, -100 if ignore_index is None else ignore_index
        self.label_smoothing, self.z_loss, self.chunk_size = label_smoothing, z_loss, chunk_size
        self.linear = Linear(in_features, num_classes, bias=bias, dtype=dtype)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.linear_cross_entropy(input, self.linear.weight, target, linear_bias=self.linear.bias,
                                      weight=self.weight, reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing, z_loss=self.z_loss,
                                      chunk_size=self.chunk_size)

    def extra_repr(self):
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"bias={self.linear.bias is not None}, reduction={self.reduction}, ignore_index={self.ignore_index}, "
                f"label_smoothing={self.label_smoothing}, z_loss={self.z_loss}")


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(_C.ones(self.normalized_shape, dtype=dtype)) if elementwise_affine else None
        self.bias = Parameter(_C.zeros(self.normalized_shape, dtype=dtype)) if elementwise_affine and bias else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(_C.ones(self.normalized_shape, dtype=dtype)) if elementwise_affine else None

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)


def _activation(name, fn):
    class Act(Module):
        def forward(self, x):
            return fn(x)
    Act.__name__ = Act.__qualname__ = name
    return Act


ReLU = _activation("ReLU", _C.relu)
SiLU = _activation("SiLU", _C.silu)
Tanh = _activation("Tanh", _C.tanh)
Sigmoid = _activation("Sigmoid", _C.sigmoid)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return _C.gelu(x, self.approximate)
