"""flambeau.nn.functional: the functional forms, as in torch.nn.functional."""
from .. import _C


def one_hot(tensor, num_classes=-1):
    """int64 tensor of shape tensor.shape + (num_classes,); -1 infers max + 1."""
    return _C._nn.one_hot(tensor, num_classes)


def embedding(input, weight, padding_idx=None):
    """Rows of weight picked by the integer tensor input."""
    return _C._nn.embedding(input, weight, padding_idx)


def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    return _C._nn.linear(input, weight, bias)


def softmax(input, dim, dtype=None):
    return _C.softmax(input, dim, dtype)


def log_softmax(input, dim, dtype=None):
    return _C.log_softmax(input, dim, dtype)


def relu(input, inplace=False):
    return input.relu_() if inplace else _C.relu(input)


def gelu(input, *, approximate="none"):
    return _C.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return input.silu_() if inplace else _C.silu(input)


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)


def softplus(input, beta=1.0, threshold=20.0):
    return _C.softplus(input, beta, threshold)


# Activations (C++: nn/activation.cpp; autograd through their elementwise ops).
def _inplace_result(input, out, inplace):
    """inplace=True: the C++ op wrote into input; return input's own object, as torch does."""
    return input if inplace else out


def elu(input, alpha=1.0, inplace=False):
    return _inplace_result(input, _C._nn.elu(input, alpha, inplace), inplace)


def selu(input, inplace=False):
    return _inplace_result(input, _C._nn.selu(input, inplace), inplace)


def celu(input, alpha=1.0, inplace=False):
    return _inplace_result(input, _C._nn.celu(input, alpha, inplace), inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _inplace_result(input, _C._nn.leaky_relu(input, negative_slope, inplace), inplace)


def prelu(input, weight):
    return _C._nn.prelu(input, weight)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    return _inplace_result(input, _C._nn.rrelu(input, lower, upper, training, inplace), inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _inplace_result(input, _C._nn.hardtanh(input, min_val, max_val, inplace), inplace)


def relu6(input, inplace=False):
    return _inplace_result(input, _C._nn.relu6(input, inplace), inplace)


def hardsigmoid(input, inplace=False):
    return _inplace_result(input, _C._nn.hardsigmoid(input, inplace), inplace)


def hardswish(input, inplace=False):
    return _inplace_result(input, _C._nn.hardswish(input, inplace), inplace)


def mish(input, inplace=False):
    return _inplace_result(input, _C._nn.mish(input, inplace), inplace)


def glu(input, dim=-1):
    return _C._nn.glu(input, dim)


def log_sigmoid(input):
    return _C._nn.log_sigmoid(input)


logsigmoid = log_sigmoid  # torch's name for aten's log_sigmoid


def softsign(input):
    return _C._nn.softsign(input)


def softshrink(input, lambd=0.5):
    return _C._nn.softshrink(input, lambd)


def hardshrink(input, lambd=0.5):
    return _C._nn.hardshrink(input, lambd)


def tanhshrink(input):
    return _C._nn.tanhshrink(input)


def threshold(input, threshold, value, inplace=False):
    return _inplace_result(input, _C._nn.threshold(input, threshold, value, inplace), inplace)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return _C._nn.softmin(input, dim, dtype)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Fused: one kernel for the row statistics and the output, one for the backward."""
    return _C._nn.layer_norm(input, _shape(normalized_shape), weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """Fused; eps defaults to the machine epsilon of input's dtype (as torch)."""
    return _C._nn.rms_norm(input, _shape(normalized_shape), weight, eps)


def _shape(normalized_shape):
    return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)


def dropout(input, p=0.5, training=True):
    return _C._nn.dropout(input, p, training)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """input: log-probabilities [N, C, ...] (or [C]); target: class indices [N, ...]."""
    return _C._nn.nll_loss(input, target, weight, ignore_index, reduction)


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Class indices (integer target) or class probabilities (float target of input's shape)."""
    return _C._nn.cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=-100, label_smoothing=0.0, z_loss=0.0, chunk_size=None):
    """cross_entropy(linear(input, linear_weight, linear_bias), target, ...) + z_loss * logsumexp^2
    per counted row, as torch 2.13's F.linear_cross_entropy but fused by default: rows are
    processed chunk_size at a time (chosen from the sizes and the cache when None) and the
    [N, C] logits never exist. ignore_index=None means -100 (as torch). z_loss is not
    weighted by the class weights; 'mean' divides it by the cross-entropy's normaliser."""
    return _C._nn.linear_cross_entropy(input, linear_weight, target, linear_bias=linear_bias, weight=weight,
                                       reduction=reduction, ignore_index=-100 if ignore_index is None else ignore_index,
                                       label_smoothing=label_smoothing, z_loss=z_loss, chunk_size=chunk_size)


def mse_loss(input, target, reduction="mean"):
    return _C._nn.mse_loss(input, target, reduction)


def l1_loss(input, target, reduction="mean"):
    return _C._nn.l1_loss(input, target, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean", pos_weight=None):
    return _C._nn.binary_cross_entropy_with_logits(input, target, weight, reduction, pos_weight)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v, by a tiled kernel that never builds the score matrix."""
    return _C._nn.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                                               enable_gqa=enable_gqa)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p along dim, eps)."""
    if out is not None:
        raise TypeError("normalize: out= is not supported")
    return _C._nn.normalize(input, p, dim, eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    return _C.cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    return _C.pairwise_distance(x1, x2, p, eps, keepdim)


# Convolutions and padding (C++: nn/convolution.cpp, nn/padding.cpp). padding takes numbers
# or "valid" / "same".
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _C._nn.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _C._nn.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _C._nn.conv3d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _C._nn.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _C._nn.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _C._nn.conv_transpose3d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def pad(input, pad, mode="constant", value=None):
    return _C._nn.pad(input, pad, mode, value)


# Pooling (C++: nn/pooling.cpp). stride None means kernel_size; return_indices=True gives
# (values, indices), the indices flat positions in each input plane; an adaptive
# output_size entry None keeps the input's size.
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _C._nn.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _C._nn.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    return _C._nn.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _stride(stride):
    """aten's avg_pool*d write stride=None as [] (kernel_size)."""
    return [] if stride is None else stride


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    return _C._nn.avg_pool1d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _C._nn.avg_pool2d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad,
                             divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _C._nn.avg_pool3d(input, kernel_size, _stride(stride), padding, ceil_mode, count_include_pad,
                             divisor_override)


def adaptive_avg_pool1d(input, output_size):
    return _C._nn.adaptive_avg_pool1d(input, output_size)


def adaptive_avg_pool2d(input, output_size):
    return _C._nn.adaptive_avg_pool2d(input, output_size)


def adaptive_avg_pool3d(input, output_size):
    return _C._nn.adaptive_avg_pool3d(input, output_size)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _C._nn.adaptive_max_pool1d(input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _C._nn.adaptive_max_pool2d(input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _C._nn.adaptive_max_pool3d(input, output_size, return_indices)


# torch's names for the return_indices=True forms: (values, indices) whatever return_indices says.
def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return _C._nn.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return _C._nn.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    return _C._nn.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    return _C._nn.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    return _C._nn.adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    return _C._nn.adaptive_max_pool3d(input, output_size, True)


# Power-average pooling (composite in C++: nn/pooling.cpp, Note [lp_pool]).
def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _C._nn.lp_pool1d(input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _C._nn.lp_pool2d(input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _C._nn.lp_pool3d(input, norm_type, kernel_size, stride, ceil_mode)


# Max unpooling (C++: nn/unpooling.cpp): indices as max_pool*d(return_indices=True) gives them;
# output_size None, n sizes or n + 2 (input.size() of the pooling's input).
def _unpool_output_size_is_a_sequence(op, output_size):
    # torch's _unpool_output_size takes len() of it: a bare int is a TypeError there.
    if isinstance(output_size, int):
        raise TypeError(f"[{op}] output_size must be a sequence of sizes, got the int {output_size}")


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    _unpool_output_size_is_a_sequence("max_unpool1d", output_size)
    return _C._nn.max_unpool1d(input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    _unpool_output_size_is_a_sequence("max_unpool2d", output_size)
    return _C._nn.max_unpool2d(input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    _unpool_output_size_is_a_sequence("max_unpool3d", output_size)
    return _C._nn.max_unpool3d(input, indices, kernel_size, stride, padding, output_size)



# Resampling (C++: nn/resample.cpp). size / scale_factor: a number for every spatial dim or
# a sequence of one per dim.
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    return _C._nn.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)


def pixel_shuffle(input, upscale_factor):
    return _C._nn.pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    return _C._nn.pixel_unshuffle(input, downscale_factor)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    return _C._nn.unfold(input, kernel_size, dilation, padding, stride)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    return _C._nn.fold(input, output_size, kernel_size, dilation, padding, stride)

# Batch, group, instance and local response norms (C++: nn/batch_norm.cpp).
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-05):
    return _C._nn.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    return _C._nn.group_norm(input, num_groups, weight, bias, eps)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-05):
    return _C._nn.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def local_response_norm(input, size, alpha=0.0001, beta=0.75, k=1.0):
    return _C._nn.local_response_norm(input, size, alpha, beta, k)
