"""The common layers, with torch.nn's names, arguments, defaults and initialisation. Each
forward is one call of the C++ functional that the C++ layer of the same name calls too
(tests/python/test_layer_parity.py checks that both stacks agree bit for bit)."""
import math

from ... import _C
from ...autograd import no_grad
from .. import functional as F
from .. import init
from .module import Module, Parameter


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
        if padding_idx is not None and not -num_embeddings <= padding_idx < num_embeddings:
            raise ValueError(f"[Embedding] padding_idx {padding_idx} must be within num_embeddings {num_embeddings}")
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
        if not (math.isfinite(z_loss) and z_loss >= 0):
            raise ValueError(f"[LinearCrossEntropyLoss] z_loss must be finite and >= 0, got {z_loss}")
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
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"[Dropout] dropout probability has to be between 0 and 1, but got {p}")
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
