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


def embedding(input, weight, padding_idx=None):  # noqa: F811  (padding_idx only shapes the gradient)
    """Rows of weight picked by the integer tensor input."""
    return _C._embedding(weight, input, padding_idx)


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    dims = tuple(range(-len(normalized_shape), 0))
    mean = input.mean(dim=dims, keepdim=True)
    var = input.var(dim=dims, keepdim=True, correction=0)
    out = (input - mean) * _C.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def rms_norm(input, normalized_shape, weight=None, eps=None):
    dims = tuple(range(-len(normalized_shape), 0))
    if eps is None:  # torch: the dtype's machine epsilon
        eps = {"flambeau.float64": 2.220446049250313e-16, "flambeau.float16": 0.0009765625,
               "flambeau.bfloat16": 0.0078125}.get(repr(input.dtype), 1.1920928955078125e-07)
    out = input * _C.rsqrt((input * input).mean(dim=dims, keepdim=True) + eps)
    return out * weight if weight is not None else out


def dropout(input, p=0.5, training=True):
    if p < 0 or p > 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    if p == 1:
        return input * 0.0
    keep = _C.empty(*input.shape, dtype=input.dtype).bernoulli_(1 - p)
    return input * keep / (1 - p)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """input: log-probabilities [N, C] (or [C]); target: class indices [N]."""
    if input.dim() == 1:
        input, target = input.unsqueeze(0), target.unsqueeze(0)
    valid = target != ignore_index
    safe = _C.where(valid, target, 0)
    picked = -input.gather(1, safe.unsqueeze(1)).squeeze(1)
    w = _C.where(valid, 1.0, 0.0).to(input.dtype)
    if weight is not None:
        w = w * weight.index_select(0, safe)
    loss = picked * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Class indices (int64 target) or class probabilities (float target of input's shape)."""
    logp = input.log_softmax(1 if input.dim() > 1 else 0)
    c = input.shape[1] if input.dim() > 1 else input.shape[0]
    if target.is_floating_point():  # probabilities
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / c
        w = weight if weight is not None else 1.0
        loss = -(logp * target * w).sum(dim=1 if input.dim() > 1 else 0)
        return _reduce(loss, reduction)
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0:
        return nll
    # torch: (1 - s) * nll + s * (mean over classes of -logp, weighted like nll)
    lp = logp if logp.dim() > 1 else logp.unsqueeze(0)
    t = target if target.dim() > 0 else target.unsqueeze(0)
    valid = _C.where(t != ignore_index, 1.0, 0.0).to(lp.dtype)
    smooth = -(lp * weight).sum(dim=1) if weight is not None else -lp.sum(dim=1)
    smooth = smooth * valid
    if reduction == "mean":
        denom = (weight.index_select(0, _C.where(t != ignore_index, t, 0)) * valid).sum() if weight is not None \
            else valid.sum()
        smooth = smooth.sum() / denom
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / c)


def mse_loss(input, target, reduction="mean"):
    d = input - target
    return _reduce(d * d, reduction)


def l1_loss(input, target, reduction="mean"):
    return _reduce((input - target).abs(), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    # log(1 + exp(-|x|)) + max(x, 0) - x * t, with pos_weight scaling the positive term.
    log_sig_neg = _C.softplus(-input)  # -log(sigmoid(x))
    if pos_weight is not None:
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * log_sig_neg
    else:
        loss = (1 - target) * input + log_sig_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v, by a tiled kernel that never builds the score matrix."""
    return _C._scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
