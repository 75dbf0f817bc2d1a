"""The OpInfo database, part 2: ops written once against a library handle `L` (flambeau
or torch) and run on both with the same numpy data: indexing, sorting, scans, reductions
with dims, matrix products, joins. Contiguous, transposed (non-contiguous) and empty
samples; results (tensors, or tuples of them) compared in value, dtype and shape."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close

R = np.random.default_rng(7)
X = R.standard_normal((5, 6)).astype(np.float32)
XT = R.standard_normal((6, 5)).astype(np.float32)  # used transposed: a non-contiguous (5, 6)
IDX = R.integers(0, 5, (4, 6))
IDX1 = R.integers(0, 6, (5, 3))
ROWS = np.array([4, 0, 2, 2])
MASK = R.random((5, 6)) > 0.5
INTS = R.integers(-3, 4, (5, 6))
SEQ = np.sort(R.standard_normal(10)).astype(np.float32)
_RC = np.random.default_rng(22)  # convolution weights (CASES' conv entries)
CONV_W = [_RC.standard_normal(s).astype(np.float32) for s in
          [(4, 5, 3), (4,), (3, 1, 3, 2), (4, 1, 2, 3), (2, 1, 2, 2, 3), (5, 2, 3), (1, 3, 3, 3), (1, 2, 2, 2, 2)]]


def T(L, a):
    """numpy -> tensor of library L (fresh memory)."""
    t = torch.from_numpy(np.ascontiguousarray(a).copy())
    return t if L is torch else fl.from_dlpack(t)


def both(L):
    """The (5, 6) float input, contiguous and non-contiguous."""
    return [T(L, X), T(L, XT).t()]


CASES = {
    "index_select": lambda L, x: L.index_select(x, 0, T(L, ROWS)),
    "index_select_dim1_int32": lambda L, x: L.index_select(x, 1, T(L, np.array([5, 1], dtype=np.int32))),
    "gather_dim0": lambda L, x: L.gather(x, 0, T(L, IDX)),
    "gather_dim1": lambda L, x: L.gather(x, 1, T(L, IDX1)),
    "scatter": lambda L, x: L.scatter(L.zeros(5, 6), 0, T(L, IDX), x[:4]),
    "scatter_value": lambda L, x: x.scatter(1, T(L, IDX1), 2.5),
    "scatter_add": lambda L, x: L.scatter_add(x, 0, T(L, IDX), x[:4]),
    **{f"scatter_reduce_{r}_{s}": (lambda r, s: lambda L, x: L.scatter_reduce(x, 0, T(L, IDX), x[:4] * 2, r,
                                                                                include_self=s))(r, s)
       for r in ["sum", "prod", "mean", "amax", "amin"] for s in [True, False]},
    "index_add": lambda L, x: L.index_add(x, 0, T(L, ROWS), x[:4], alpha=0.5),
    "index_copy": lambda L, x: L.index_copy(x, 1, T(L, np.array([3, 0])), x[:, :2] * 3),
    "index_fill": lambda L, x: L.index_fill(x, 1, T(L, np.array([-1, 2])), -7.0),
    "masked_fill": lambda L, x: L.masked_fill(x, T(L, MASK), 0.25),
    "masked_fill_broadcast": lambda L, x: L.masked_fill(x, T(L, MASK[0]), 1.0),
    "masked_select": lambda L, x: L.masked_select(x, T(L, MASK)),
    "masked_scatter": lambda L, x: L.masked_scatter(x, T(L, MASK), x * 10),
    "nonzero": lambda L, x: L.nonzero(x > 0.3),
    "take": lambda L, x: L.take(x, T(L, np.array([[0, 29], [-1, 7]]))),
    "one_hot": lambda L, x: L.nn.functional.one_hot(T(L, IDX), 6),
    "embedding": lambda L, x: L.nn.functional.embedding(T(L, IDX), x),
    "advanced_index": lambda L, x: x[T(L, ROWS), 1:4][:, None],
    "mask_index": lambda L, x: x[x > 0],
    "sort": lambda L, x: tuple(L.sort(x, dim=0, descending=True, stable=True)),
    "argsort": lambda L, x: L.argsort(x, dim=1, stable=True),
    "topk": lambda L, x: tuple(L.topk(x, 3, dim=1)),
    "topk_smallest": lambda L, x: tuple(L.topk(x, 2, dim=0, largest=False)),
    "kthvalue": lambda L, x: tuple(L.kthvalue(x, 2, dim=1)),
    "unique": lambda L, x: tuple(L.unique(T(L, INTS), return_inverse=True, return_counts=True)),
    "searchsorted": lambda L, x: L.searchsorted(T(L, SEQ), x),
    "searchsorted_right": lambda L, x: L.searchsorted(T(L, SEQ), x, right=True),
    "cummax": lambda L, x: tuple(L.cummax(x, 1)),
    "cummin": lambda L, x: tuple(L.cummin(x, 0)),
    "cumsum_int": lambda L, x: L.cumsum(T(L, INTS), 1),
    "sum_dims": lambda L, x: L.sum(x, dim=(0, 1), keepdim=True),
    "sum_int_dtype": lambda L, x: L.sum(T(L, INTS), 0, dtype=L.float64),
    "mean_dim": lambda L, x: L.mean(x, 1),
    "amax_dims": lambda L, x: L.amax(x, dim=(0,)),
    "max_dim": lambda L, x: tuple(L.max(x, 1, keepdim=True)),
    "min_dim": lambda L, x: tuple(L.min(x, 0)),
    "argmax": lambda L, x: L.argmax(x, 1),
    "argmin_all": lambda L, x: L.argmin(x),
    "any_all": lambda L, x: (L.any(x > 1, 1), L.all(x > -2, 0)),
    "count_nonzero": lambda L, x: L.count_nonzero(x > 0, 1),
    "std_correction": lambda L, x: L.std(x, 1, correction=0),
    "var_unbiased": lambda L, x: L.var(x, 0),
    "norm_1": lambda L, x: L.norm(x, 1),
    "norm_inf_dim": lambda L, x: L.norm(x, float("inf"), 1),
    "logsumexp_dim": lambda L, x: L.logsumexp(x, 0),
    "softmax_dim0": lambda L, x: L.softmax(x, 0),
    "mm": lambda L, x: L.mm(x, x.t()),
    "matmul_broadcast": lambda L, x: L.matmul(x.reshape(5, 2, 3), x[:3, :4]),
    "matmul_vec": lambda L, x: L.matmul(x, x[0]),
    "bmm": lambda L, x: L.bmm(x.reshape(5, 2, 3), x.reshape(5, 3, 2)),
    "addmm": lambda L, x: L.addmm(x[0, :5], x, x.t(), beta=0.5, alpha=2),
    "baddbmm": lambda L, x: L.baddbmm(L.ones(5, 2, 2), x.reshape(5, 2, 3), x.reshape(5, 3, 2), beta=2),
    "outer": lambda L, x: L.outer(x[0], x[1]),
    "dot": lambda L, x: L.dot(x[0], x[1]),
    "cat": lambda L, x: L.cat([x, x[:2]], 0),
    "stack": lambda L, x: L.stack([x, x], 2),
    "split": lambda L, x: tuple(L.split(x, [2, 4], 1)),
    "chunk": lambda L, x: tuple(L.chunk(x, 3, 0)),
    "where_scalar": lambda L, x: L.where(x > 0, x, 0.0),
    "clamp_tensor": lambda L, x: L.clamp(x, min=x[0], max=x[1] + 1),
    "div_int_true": lambda L, x: T(L, INTS) / 2,
    "pow_int": lambda L, x: T(L, np.abs(INTS)) ** 2,
    "mul_mixed_promotion": lambda L, x: T(L, INTS).to(L.int32) * x.to(L.float16),
    "sum_bool": lambda L, x: (x > 0).sum(),
    "sum_empty": lambda L, x: L.sum(x[:0], 0),
    "index_empty": lambda L, x: x[T(L, np.array([], dtype=np.int64))],
    "cat_empty": lambda L, x: L.cat([x[:0], x], 0),
    # Predicates, the remaining elementwise forms.
    "isnan": lambda L, x: L.isnan(L.log(x)), "isinf": lambda L, x: L.isinf(1 / (x * (x > 0))),
    "isfinite": lambda L, x: L.isfinite(L.log(x) / (x > -1)), "logical_not": lambda L, x: L.logical_not(x > 0),
    "all": lambda L, x: (L.all(x > -2), x.all(1)), "addcdiv": lambda L, x: L.addcdiv(x, x, x * x + 1, value=-0.5),
    "softplus": lambda L, x: L.nn.functional.softplus(x * 10, beta=2.0, threshold=5.0),
    # Views, copies and casts (values, dtypes and shapes).
    "view": lambda L, x: x.contiguous().view(3, 10), "view_as": lambda L, x: x.contiguous().view_as(x.t()),
    "reshape": lambda L, x: x.reshape(2, 15), "flatten": lambda L, x: x.flatten(), "unflatten": lambda L, x: x.unflatten(1, (2, 3)),
    "permute": lambda L, x: x.reshape(5, 2, 3).permute(2, 0, 1), "transpose": lambda L, x: x.transpose(0, 1),
    "t": lambda L, x: x.t(), "T": lambda L, x: x.T, "expand": lambda L, x: x[:1].expand(4, 5, 6),
    "expand_as": lambda L, x: x[:, :1].expand_as(x), "narrow": lambda L, x: x.narrow(1, 2, 3),
    "select": lambda L, x: x.select(1, -2), "squeeze": lambda L, x: (x[:1].squeeze(), x[:, :1].squeeze(1)),
    "unsqueeze": lambda L, x: x.unsqueeze(-1), "as_strided": lambda L, x: x.contiguous().as_strided((3, 4), (2, 5), 1),
    "contiguous": lambda L, x: x.contiguous(), "clone": lambda L, x: x.clone(),
    "to": lambda L, x: (x.to(L.float64), x.to(L.int32)), "float": lambda L, x: x.double().float(),
    "double": lambda L, x: x.double(), "half": lambda L, x: x.half(), "bfloat16": lambda L, x: x.bfloat16(),
    "long": lambda L, x: (x * 3).long(), "int": lambda L, x: (x * 3).int(), "bool": lambda L, x: x.bool(), "copy_": lambda L, x: L.zeros(5, 6, dtype=L.float64).copy_(x),
    "fill_": lambda L, x: x.clone().fill_(-1.5), "zero_": lambda L, x: x.clone().zero_(),
    # nn functionals.
    "linear": lambda L, x: L.nn.functional.linear(x, x[:4], x[0, :4]),
    "layer_norm": lambda L, x: L.nn.functional.layer_norm(x, (6,), x[0], x[1]),
    "rms_norm": lambda L, x: L.nn.functional.rms_norm(x, (6,), x[0], eps=1e-6),
    "cross_entropy": lambda L, x: L.nn.functional.cross_entropy(x, T(L, np.array([0, 5, 2, 2, 1]))),
    "nll_loss": lambda L, x: L.nn.functional.nll_loss(x, T(L, np.array([0, 5, 2, 2, 1]))),
    "mse_loss": lambda L, x: L.nn.functional.mse_loss(x, x * x),
    "l1_loss": lambda L, x: L.nn.functional.l1_loss(x, x * x, reduction="sum"),
    "binary_cross_entropy_with_logits": lambda L, x: L.nn.functional.binary_cross_entropy_with_logits(
        x, T(L, MASK.astype(np.float32))),
    "linear_cross_entropy": lambda L, x: L.nn.functional.linear_cross_entropy(x, x[:4], T(L, np.array([0, 3, 2, 2, 1]))),
    "scaled_dot_product_attention": lambda L, x: L.nn.functional.scaled_dot_product_attention(
        x.reshape(1, 5, 6), x.reshape(1, 5, 6) * 0.5, x.reshape(1, 5, 6), is_causal=True),
    # Activations (x * 3 reaches the clamps of hardtanh / relu6 / hardsigmoid / hardswish).
    "elu": lambda L, x: L.nn.functional.elu(x * 3, alpha=0.7),
    "selu": lambda L, x: L.nn.functional.selu(x * 3),
    "celu": lambda L, x: L.nn.functional.celu(x * 3, alpha=1.3),
    "leaky_relu": lambda L, x: L.nn.functional.leaky_relu(x, 0.2),
    "prelu": lambda L, x: L.nn.functional.prelu(x.reshape(5, 6, 1), x[0].abs()),
    "prelu_one_slope": lambda L, x: L.nn.functional.prelu(x, x[0, :1]),
    "rrelu": lambda L, x: L.nn.functional.rrelu(x, 0.1, 0.3),
    "hardtanh": lambda L, x: L.nn.functional.hardtanh(x * 3, -2.0, 1.5),
    "relu6": lambda L, x: L.nn.functional.relu6(x * 6),
    "hardsigmoid": lambda L, x: L.nn.functional.hardsigmoid(x * 3),
    "hardswish": lambda L, x: L.nn.functional.hardswish(x * 3),
    "mish": lambda L, x: L.nn.functional.mish(x * 3),
    "glu": lambda L, x: L.nn.functional.glu(x),
    "glu_dim0": lambda L, x: L.nn.functional.glu(x[:4], 0),
    "log_sigmoid": lambda L, x: (fl.nn.functional.log_sigmoid if L is fl else torch.nn.functional.logsigmoid)(x * 9),
    "logsigmoid": lambda L, x: L.nn.functional.logsigmoid(x * 9),
    "softsign": lambda L, x: L.nn.functional.softsign(x),
    "softshrink": lambda L, x: L.nn.functional.softshrink(x, 0.4),
    "hardshrink": lambda L, x: L.nn.functional.hardshrink(x, 0.4),
    "tanhshrink": lambda L, x: L.nn.functional.tanhshrink(x),
    "threshold": lambda L, x: L.nn.functional.threshold(x, 0.1, -2.0),
    "softmin": lambda L, x: L.nn.functional.softmin(x, dim=0),
    "softmin_implicit_dim": lambda L, x: L.nn.functional.softmin(x.reshape(5, 2, 3)),
    # Shape ops (ops/shape.cpp).
    "flip": lambda L, x: L.flip(x, (0, 1)),
    "fliplr": lambda L, x: L.fliplr(x),
    "flipud": lambda L, x: x.flipud(),
    "roll": lambda L, x: L.roll(x, 7),
    "roll_dims": lambda L, x: L.roll(x, (1, -8), (0, 1)),
    "rot90": lambda L, x: L.rot90(x),
    "rot90_k3": lambda L, x: L.rot90(x, 3, (1, 0)),
    "tril": lambda L, x: L.tril(x),
    "tril_offset": lambda L, x: x.tril(-2),
    "triu": lambda L, x: L.triu(x, 1),
    "tril_indices": lambda L, x: L.tril_indices(4, 6, 1),
    "triu_indices": lambda L, x: L.triu_indices(5, 3, -1, dtype=L.int32),
    "repeat": lambda L, x: x.repeat(2, 1, 3),
    "tile": lambda L, x: L.tile(x, (2,)),
    "repeat_interleave": lambda L, x: L.repeat_interleave(x, 2),
    "repeat_interleave_tensor": lambda L, x: x.repeat_interleave(T(L, np.array([1, 0, 3, 1, 2])), dim=0),
    "movedim": lambda L, x: L.movedim(x.reshape(5, 2, 3), (0, 1), (2, 0)),
    "moveaxis": lambda L, x: L.moveaxis(x, 0, 1),
    "swapaxes": lambda L, x: x.swapaxes(0, 1),
    "swapdims": lambda L, x: L.swapdims(x, 1, 0),
    "unbind": lambda L, x: tuple(L.unbind(x, 1)),
    "narrow_copy": lambda L, x: L.narrow_copy(x, 1, 2, 3),
    "diagonal": lambda L, x: L.diagonal(x, 1),
    "diagonal_3d": lambda L, x: x.reshape(5, 2, 3).diagonal(-1, 2, 0),
    "diag_embed": lambda L, x: L.diag_embed(x, 1, 0, 2),
    "diag": lambda L, x: L.diag(x, -1),
    "diag_vector": lambda L, x: L.diag(x[0], 2),
    "trace": lambda L, x: L.trace(x),
    "take_along_dim": lambda L, x: L.take_along_dim(x, L.argsort(x, dim=1), dim=1),
    "take_along_dim_flat": lambda L, x: L.take_along_dim(x.contiguous(), T(L, np.array([0, 29, 7]))),  # torch: view(-1)
    "meshgrid": lambda L, x: tuple(L.meshgrid(x[0], x[:, 0], indexing="xy")),
    "cartesian_prod": lambda L, x: L.cartesian_prod(x[0], x[:3, 1]),
    "kron": lambda L, x: L.kron(x[:2, :3], x),
    "block_diag": lambda L, x: L.block_diag(x, x[0, :2], x[:2, :3]),
    "bucketize": lambda L, x: L.bucketize(x, T(L, np.array([-1.0, 0.0, 0.5], dtype=np.float32)), right=True),
    # Math (ops/math.cpp, nn/distance.cpp).
    "isposinf": lambda L, x: L.isposinf(x / (x > 0.5)),
    "isneginf": lambda L, x: (x / (x > 0.5)).isneginf(),
    "nan_to_num": lambda L, x: L.nan_to_num(L.log(x) / (x > 0.5), posinf=7.0),
    "logaddexp": lambda L, x: L.logaddexp(x, x * 3 - 1),
    "logaddexp2": lambda L, x: x.logaddexp2(x * 3 - 1),
    "bincount": lambda L, x: L.bincount(T(L, IDX[0]), weights=x[0]),
    "histc": lambda L, x: L.histc(x, bins=6),
    "cosine_similarity": lambda L, x: L.nn.functional.cosine_similarity(x, x * x, dim=0),
    "pairwise_distance": lambda L, x: L.nn.functional.pairwise_distance(x, x[:1] * 2, p=3.0),
    "cdist": lambda L, x: L.cdist(x, x[:3] + 1, p=1.0),
    "einsum": lambda L, x: L.einsum("ij,kj->ik", x, x * 2),
    "einsum_three": lambda L, x: L.einsum("ij,jk,k->i", x, x.t(), x[:, 0]),
    "tensordot": lambda L, x: L.tensordot(x, x * 2, dims=([0], [0])),
    # torch.linalg (ops/linalg.cpp): square (5, 5) slices, an SPD one, gauge-free results.
    "linalg_det": lambda L, x: L.linalg.det(x[:, :5]),
    "linalg_slogdet": lambda L, x: tuple(L.linalg.slogdet(x[:, :5])),
    "linalg_inv": lambda L, x: L.linalg.inv(x[:, :5]),
    "linalg_solve": lambda L, x: L.linalg.solve(x[:, :5], x[:, 5]),
    "linalg_cholesky": lambda L, x: L.linalg.cholesky(x @ x.t() + 5 * L.eye(5)),
    "linalg_qr": lambda L, x: L.linalg.qr(x).R,
    "linalg_svd": lambda L, x: L.linalg.svd(x, full_matrices=False).S,
    "linalg_svdvals": lambda L, x: L.linalg.svdvals(x),
    "linalg_eigh": lambda L, x: L.linalg.eigh(x @ x.t()).eigenvalues,
    "linalg_eigvalsh": lambda L, x: L.linalg.eigvalsh(x @ x.t(), UPLO="U"),
    "linalg_pinv": lambda L, x: L.linalg.pinv(x),
    "linalg_lstsq": lambda L, x: L.linalg.lstsq(x.t(), x[0]).solution,
    "linalg_vector_norm": lambda L, x: L.linalg.vector_norm(x, 3, dim=1),
    "linalg_matrix_norm": lambda L, x: L.linalg.matrix_norm(x, "nuc"),
    "linalg_norm": lambda L, x: L.linalg.norm(x, float("inf")),
    "normalize": lambda L, x: L.nn.functional.normalize(x, dim=0),
    "unique_consecutive": lambda L, x: tuple(L.unique_consecutive((x * 2).round().flatten(), return_inverse=True,
                                                                  return_counts=True)),
    "unique_consecutive_dim": lambda L, x: tuple(L.unique_consecutive(
        T(L, np.array([[1, 1, 2, 2, 2, 1], [3, 3, 0, 0, 0, 3]])), return_counts=True, dim=1)),
    "unique_consecutive_values": lambda L, x: T(L, INTS).unique_consecutive(),
    "unique_dim0": lambda L, x: tuple(L.unique(T(L, INTS[:, :2]).repeat(2, 1), return_inverse=True,
                                               return_counts=True, dim=0)),
    "unique_dim1": lambda L, x: tuple(T(L, np.array([[1, 0, 1, 2], [3, 4, 3, 0]])).unique(dim=1, return_counts=True)),
    # Convolutions and padding (nn/convolution.cpp, nn/padding.cpp): x (5, 6) as channels x length or an image.
    "convolution": lambda L, x: L.convolution(x[None], T(L, CONV_W[0]), T(L, CONV_W[1]), [2], [1], [1], False, [0], 1),
    "conv1d": lambda L, x: L.nn.functional.conv1d(x[None], T(L, CONV_W[0]), stride=1, padding=2, dilation=2),
    "conv2d": lambda L, x: L.nn.functional.conv2d(x[None, None], T(L, CONV_W[2]), padding=(1, 0)),
    "conv2d_groups_same": lambda L, x: L.nn.functional.conv2d(x.reshape(1, 2, 3, 5), T(L, CONV_W[3]), groups=2,
                                                               padding="same"),
    "conv3d": lambda L, x: L.nn.functional.conv3d(x.reshape(1, 1, 2, 3, 5), T(L, CONV_W[4]), padding=1),
    "conv_transpose1d": lambda L, x: L.nn.functional.conv_transpose1d(x[None], T(L, CONV_W[5]), stride=2,
                                                                       output_padding=1),
    "conv_transpose2d": lambda L, x: L.nn.functional.conv_transpose2d(x[None, None], T(L, CONV_W[6]), stride=2,
                                                                       padding=1),
    "conv_transpose3d": lambda L, x: L.nn.functional.conv_transpose3d(x.reshape(1, 1, 2, 3, 5), T(L, CONV_W[7])),
    "pad": lambda L, x: L.nn.functional.pad(x, (1, -2, 2, 0), value=0.5),
    "pad_reflect": lambda L, x: L.nn.functional.pad(x[None], (2, 1, 0, 3), mode="reflect"),
    "pad_replicate": lambda L, x: L.nn.functional.pad(x[None], (3, 1), mode="replicate"),
    "pad_circular": lambda L, x: L.nn.functional.pad(x[None], (1, 2, 2, 1), mode="circular"),
    # Norms (nn/batch_norm.cpp): x (5, 6) as 5 samples of 6 channels, or (1, 5, 6) as channels x length.
    "batch_norm": lambda L, x: L.nn.functional.batch_norm(x, None, None, T(L, CONV_W[1].repeat(2)[:6]), None, True),
    "batch_norm_eval": lambda L, x: L.nn.functional.batch_norm(x, L.zeros(6) + 0.5, L.ones(6) * 2, eps=0.1),
    "group_norm": lambda L, x: L.nn.functional.group_norm(x.reshape(1, 6, 5), 3, eps=1e-3),
    "instance_norm": lambda L, x: L.nn.functional.instance_norm(x[None]),
    "local_response_norm": lambda L, x: L.nn.functional.local_response_norm(x[None], 3, alpha=0.01),
    # Pooling (nn/pooling.cpp): x (5, 6) as channels x length, an image, or (1, 5, 2, 3) a volume.
    "max_pool1d": lambda L, x: L.nn.functional.max_pool1d(x[None], 3, 2, 1, ceil_mode=True),
    "max_pool1d_indices": lambda L, x: tuple(L.nn.functional.max_pool1d(x, 2, return_indices=True)),
    "max_pool2d": lambda L, x: tuple(L.nn.functional.max_pool2d(x[None], (2, 3), 1, (1, 1), dilation=(2, 1),
                                                                return_indices=True)),
    "max_pool3d": lambda L, x: L.nn.functional.max_pool3d(x.reshape(1, 5, 2, 3), 2, ceil_mode=True),
    "avg_pool1d": lambda L, x: L.nn.functional.avg_pool1d(x[None], 3, 2, 1, count_include_pad=False),
    "avg_pool2d": lambda L, x: L.nn.functional.avg_pool2d(x[None, None], 3, 2, 1, ceil_mode=True),
    "avg_pool2d_divisor": lambda L, x: L.nn.functional.avg_pool2d(x[None], 2, divisor_override=3),
    "avg_pool3d": lambda L, x: L.nn.functional.avg_pool3d(x.reshape(1, 1, 5, 2, 3), 2, padding=1,
                                                          count_include_pad=False),
    "adaptive_avg_pool1d": lambda L, x: L.nn.functional.adaptive_avg_pool1d(x, 4),
    "adaptive_avg_pool2d": lambda L, x: L.nn.functional.adaptive_avg_pool2d(x[None], (3, None)),
    "adaptive_avg_pool3d": lambda L, x: L.nn.functional.adaptive_avg_pool3d(x.reshape(1, 5, 2, 3), (2, 1, 2)),
    "adaptive_max_pool1d": lambda L, x: tuple(L.nn.functional.adaptive_max_pool1d(x, 4, return_indices=True)),
    "adaptive_max_pool2d": lambda L, x: tuple(L.nn.functional.adaptive_max_pool2d(x[None], (4, 4), True)),
    "adaptive_max_pool3d": lambda L, x: L.nn.functional.adaptive_max_pool3d(x.reshape(1, 5, 2, 3), (3, 2, 2)),
    "max_pool1d_with_indices": lambda L, x: L.nn.functional.max_pool1d_with_indices(x, 3, 2, 1),
    "max_pool2d_with_indices": lambda L, x: L.nn.functional.max_pool2d_with_indices(x[None], (2, 3), 1),
    "max_pool3d_with_indices": lambda L, x: L.nn.functional.max_pool3d_with_indices(x.reshape(1, 5, 2, 3), 2,
                                                                                    ceil_mode=True),
    "adaptive_max_pool1d_with_indices": lambda L, x: L.nn.functional.adaptive_max_pool1d_with_indices(x, 4),
    "adaptive_max_pool2d_with_indices": lambda L, x: L.nn.functional.adaptive_max_pool2d_with_indices(x[None], 3),
    "adaptive_max_pool3d_with_indices": lambda L, x: L.nn.functional.adaptive_max_pool3d_with_indices(
        x.reshape(1, 5, 2, 3), (2, 1, 2)),
    "lp_pool1d": lambda L, x: L.nn.functional.lp_pool1d(x[None], 2, 3, 2),
    "lp_pool2d": lambda L, x: L.nn.functional.lp_pool2d(x[None].abs() + 0.1, 3.0, (2, 3), ceil_mode=True),
    "lp_pool3d": lambda L, x: L.nn.functional.lp_pool3d(x.reshape(1, 5, 2, 3).contiguous(), float("inf"), 2),
    "max_unpool1d": lambda L, x: L.nn.functional.max_unpool1d(*L.nn.functional.max_pool1d(x, 2, return_indices=True),
                                                              2),
    "max_unpool2d": lambda L, x: L.nn.functional.max_unpool2d(
        *L.nn.functional.max_pool2d(x[None], 2, 1, 1, return_indices=True), 2, 1, 1),
    "max_unpool3d": lambda L, x: L.nn.functional.max_unpool3d(
        *L.nn.functional.max_pool3d(x.reshape(1, 5, 2, 3), (2, 1, 2), return_indices=True), (2, 1, 2),
        output_size=(5, 2, 3)),
    # Resampling (nn/resample.cpp).
    "interpolate": lambda L, x: L.nn.functional.interpolate(x[None], scale_factor=1.5),
    "interpolate_nearest_exact": lambda L, x: L.nn.functional.interpolate(x[None, None], (3, 8), mode="nearest-exact"),
    "interpolate_linear": lambda L, x: L.nn.functional.interpolate(x[None], 9, mode="linear"),
    "interpolate_bilinear": lambda L, x: L.nn.functional.interpolate(x[None, None], (7, 4), mode="bilinear",
                                                                     align_corners=True),
    "interpolate_bicubic": lambda L, x: L.nn.functional.interpolate(x[None, None], scale_factor=1.7, mode="bicubic"),
    "interpolate_trilinear": lambda L, x: L.nn.functional.interpolate(x.reshape(1, 1, 5, 2, 3), scale_factor=(0.5, 2, 1.5),
                                                                      mode="trilinear"),
    "interpolate_area": lambda L, x: L.nn.functional.interpolate(x[None, None], (2, 4), mode="area"),
    "pixel_shuffle": lambda L, x: L.nn.functional.pixel_shuffle(x[:4].reshape(1, 4, 2, 3), 2),
    "pixel_unshuffle": lambda L, x: L.nn.functional.pixel_unshuffle(x[:4].reshape(1, 1, 4, 6), 2),
    "unfold": lambda L, x: L.nn.functional.unfold(x[None, None], (2, 3), padding=1, stride=(1, 2)),
    "fold": lambda L, x: L.nn.functional.fold(x.reshape(1, 6, 5), (6, 3), (2, 3)),
}


@pytest.mark.parametrize("name", list(CASES), ids=str)
def test_matches_torch(name):
    for f_in, t_in in zip(both(fl), both(torch)):
        got, want = CASES[name](fl, f_in), CASES[name](torch, t_in)
        if not isinstance(want, tuple):
            got, want = (got,), (want,)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_close(g, w, rtol=1e-5, atol=1e-5)


def test_numpy_reference_for_unary_and_binary_ops():
    for name, np_fn in [("exp", np.exp), ("sin", np.sin), ("tanh", np.tanh), ("sqrt", lambda v: np.sqrt(np.abs(v))),
                        ("abs", np.abs)]:
        arg = np.abs(X) if name == "sqrt" else X
        got = getattr(fl, name)(fl.tensor(arg)).numpy()
        np.testing.assert_allclose(got, np_fn(arg), rtol=2e-6, atol=1e-7)
    a, b = fl.tensor(X), fl.tensor(X[::-1].copy())
    np.testing.assert_allclose((a * b + a / (b * b + 1)).numpy(), X * X[::-1] + X / (X[::-1] ** 2 + 1), rtol=1e-6)
    np.testing.assert_allclose(fl.tensor(X).sum(dim=1).numpy(), X.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(fl.argsort(fl.tensor(X), dim=1, stable=True).numpy(),
                                  np.argsort(X, axis=1, kind="stable"))
