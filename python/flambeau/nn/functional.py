"""flambeau.nn.functional: the functional forms, as in torch.nn.functional."""
from .. import _C


def one_hot(tensor, num_classes=-1):
    """int64 tensor of shape tensor.shape + (num_classes,); -1 infers max + 1."""
    return _C._one_hot(tensor, num_classes)


def embedding(input, weight, padding_idx=None):
    """Rows of weight picked by the integer tensor input."""
    return _C._embedding(weight, input, padding_idx)


def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    out = _C.matmul(input, weight.t())
    return out if bias is None else out + bias


def softmax(input, dim, dtype=None):
    return _C.softmax(input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    return _C.log_softmax(input, dim, dtype)


def relu(input):
    return _C.relu(input)


def gelu(input, approximate="none"):
    return _C.gelu(input, approximate)


def silu(input):
    return _C.silu(input)


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)


def softplus(input, beta=1.0, threshold=20.0):
    return _C.softplus(input, beta, threshold)
