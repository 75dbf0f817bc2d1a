"""The common layers, with torch.nn's names, arguments and defaults. Each has one
implementation, in C++ (src/flambeau/nn/modules.h): the constructor runs the C++ layer's
(argument checks, parameters and their initialisation; _build) and registers its tensors here,
and forward is one call of the C++ functional that the C++ layer's forward calls too
(tests/python/test_layer_parity.py checks that both stacks agree bit for bit). What stays in
Python is torch's Module machinery: attributes, hooks, state_dict."""
from ... import _C
from .. import functional as F
from .module import Module, Parameter


def _adopt(module, tree):
    """Registers the parameters and buffers of a C++ layer's tree (_C._nn._make_layer) on module;
    returns its children's trees by name."""
    params, buffers, children = tree
    for name, t in params:
        module.register_parameter(name, None if t is None else Parameter(t))
    for name, t, persistent in buffers:
        module.register_buffer(name, t, persistent=persistent)
    return dict(children)


def _build(module, layer, **args):
    """Runs the constructor of the C++ layer named `layer` on args and adopts its tensors."""
    return _adopt(module, _C._nn._make_layer(layer, args))


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        _build(self, "Linear", in_features=in_features, out_features=out_features, bias=bias, dtype=dtype)

    @classmethod
    def _adopted(cls, tree, in_features, out_features):
        """The Linear child of a C++ layer's tree."""
        self = cls.__new__(cls)
        Module.__init__(self)
        self.in_features, self.out_features = in_features, out_features
        _adopt(self, tree)
        return self

    def reset_parameters(self):
        _C._nn._init_linear_(self.weight, self.bias)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        _build(self, "Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim, padding_idx=padding_idx,
               dtype=dtype)
        self.padding_idx = padding_idx + num_embeddings if padding_idx is not None and padding_idx < 0 else padding_idx

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
        self.num_classes = num_classes
        self.reduction, self.ignore_index = reduction, -100 if ignore_index is None else ignore_index
        self.label_smoothing, self.z_loss, self.chunk_size = label_smoothing, z_loss, chunk_size
        children = _build(self, "LinearCrossEntropyLoss", in_features=in_features, num_classes=num_classes, bias=bias,
                          dtype=dtype, reduction=reduction, weight=weight, ignore_index=self.ignore_index,
                          label_smoothing=label_smoothing, z_loss=z_loss)
        self.linear = Linear._adopted(children["linear"], in_features, num_classes)
        if weight is None:
            self.register_buffer("weight", None)

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
        self.eps, self.elementwise_affine = eps, elementwise_affine
        _build(self, "LayerNorm", normalized_shape=self.normalized_shape, eps=eps,
               elementwise_affine=elementwise_affine, bias=bias, dtype=dtype)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(Module):
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        _build(self, "RMSNorm", normalized_shape=self.normalized_shape, eps=eps, elementwise_affine=elementwise_affine,
               dtype=dtype)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
    def __init__(self, p=0.5):
        super().__init__()
        self.p = p
        _build(self, "Dropout", p=p)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


def _activation(name, fn, inplace_form=None):
    """A C++ activation layer; inplace_form: its in-place method name, for torch's inplace=."""
    class Act(Module):
        def __init__(self, inplace=False):
            super().__init__()
            if inplace and inplace_form is None:
                raise TypeError(f"{name}.__init__() got an unexpected keyword argument 'inplace'")
            self.inplace = inplace
            _build(self, name)

        def forward(self, x):
            return getattr(x, inplace_form)() if self.inplace else fn(x)

        def extra_repr(self):
            return "inplace=True" if self.inplace else ""
    Act.__name__ = Act.__qualname__ = name
    return Act


ReLU = _activation("ReLU", _C.relu, "relu_")
SiLU = _activation("SiLU", _C.silu, "silu_")
Tanh = _activation("Tanh", _C.tanh)
Sigmoid = _activation("Sigmoid", _C.sigmoid)


class Identity(Module):
    """Returns its input; takes (and ignores) any arguments, as torch's."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        _build(self, "Identity")

    def forward(self, x):
        return x


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim
        _build(self, "Flatten", start_dim=start_dim, end_dim=end_dim)

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)
        _build(self, "Unflatten", dim=dim, unflattened_size=self.unflattened_size)

    def forward(self, x):
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate
        _build(self, "GELU", approximate=approximate)

    def forward(self, x):
        return _C.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"
