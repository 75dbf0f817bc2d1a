"""grad_fn names as PyTorch 2.13's: for every op of the OpInfo database (test_opinfo.py's OPS,
test_opinfo_more.py's CASES) that torch differentiates, and for a table of views,
reductions, matrix products and nn functionals, flambeau's `grad_fn.name()` equals the name
torch gives the same call, read from torch at test time. torch prefixes two C++ node classes
with their namespace ("torch::autograd::CopySlices"); the comparison drops it.

Where flambeau builds an op from others, or fuses what torch composes, the names differ on
purpose: DIFFERENT lists those with the reason, and checks that they still differ (an entry
that starts to match must leave the list)."""
import re

import numpy as np
import pytest
import torch

import flambeau as fl
import test_opinfo
import test_opinfo_more

R = np.random.default_rng(11)


def leaf(L, a):
    t = torch.tensor(a)  # numpy's dtype: float64, or float32 for the opinfo_more cases
    t = t if L is torch else fl.from_dlpack(t.clone())
    return t.requires_grad_()


def node(r):
    if isinstance(r, (tuple, list)):
        r = r[0]
    fn = getattr(r, "grad_fn", None)
    return None if fn is None else re.sub(r"^torch::autograd::", "", fn.name())




X, Y = R.uniform(0.5, 1.5, (3, 4)), R.uniform(0.5, 1.5, (3, 4))
IDX = np.array([2, 0])

# Views, reductions (all / over dims), matrix products, copies, in-place forms, nn functionals.
EXTRA = {
    "view": lambda L, x: x.view(12), "reshape_view": lambda L, x: x.reshape(4, 3),
    "reshape_copy": lambda L, x: x.t().reshape(12), "flatten": lambda L, x: x.flatten(),
    "unflatten": lambda L, x: x.unflatten(1, (2, 2)), "permute": lambda L, x: x.permute(1, 0),
    "transpose": lambda L, x: x.transpose(0, 1), "t": lambda L, x: x.t(), "expand": lambda L, x: x[:1].expand(3, 4),
    "slice": lambda L, x: x[:, 1:3], "slice_step": lambda L, x: x[::2], "select": lambda L, x: x[1],
    "narrow": lambda L, x: x.narrow(1, 1, 2), "squeeze": lambda L, x: x[:1].squeeze(),
    "squeeze_dim": lambda L, x: x[:1].squeeze(0), "unsqueeze": lambda L, x: x.unsqueeze(0),
    "as_strided_after_inplace": lambda L, x: (lambda v: (v.mul_(2), v)[1])(x.clone()[1]),
    "contiguous": lambda L, x: x.t().contiguous(), "clone": lambda L, x: x.clone(),
    "to": lambda L, x: x.to(L.float32), "sum": lambda L, x: x.sum(), "sum_dim": lambda L, x: x.sum(0),
    "sum_dims": lambda L, x: x.sum((0, 1)), "mean": lambda L, x: x.mean(), "mean_dim": lambda L, x: x.mean(1),
    "prod": lambda L, x: x.prod(), "amax": lambda L, x: x.amax(), "amin": lambda L, x: x.amin(0),
    "max": lambda L, x: x.max(), "min": lambda L, x: x.min(), "max_dim": lambda L, x: x.max(0),
    "var": lambda L, x: x.var(), "std_dim": lambda L, x: x.std(0), "norm": lambda L, x: x.norm(),
    "norm_1_dim": lambda L, x: x.norm(1, 1), "norm_inf": lambda L, x: x.norm(float("inf")),
    "logsumexp": lambda L, x: x.logsumexp(1), "mm": lambda L, x: L.mm(x, x.t()), "dot": lambda L, x: L.dot(x[0], x[1]),
    "matmul_2d": lambda L, x: x @ x.t(), "matmul_1d": lambda L, x: x[0] @ x[1],
    "matmul_2d_1d": lambda L, x: x @ x[0], "matmul_3d_2d": lambda L, x: x.reshape(3, 2, 2) @ x[:2, :2],
    "bmm": lambda L, x: L.bmm(x.reshape(3, 2, 2), x.reshape(3, 2, 2)),
    "outer": lambda L, x: L.outer(x[0], x[1]), "stack": lambda L, x: L.stack([x, x]),
    "split": lambda L, x: x.split(2, 1), "chunk": lambda L, x: x.chunk(2, 0),
    "rsub": lambda L, x: 2 - x, "rpow": lambda L, x: 2 ** x, "pow_scalar": lambda L, x: x ** 2,
    "pow_tensor": lambda L, x: x ** x, "remainder_scalar": lambda L, x: x % 0.7, "remainder": lambda L, x: x % (x + 1),
    "div_floor": lambda L, x: L.div(x, 0.3, rounding_mode="floor"),
    "div_trunc": lambda L, x: L.div(x, 0.3, rounding_mode="trunc"),
    "clamp_tensors": lambda L, x: L.clamp(x, x[0] - 0.1, x[1] + 1), "lerp_tensor": lambda L, x: L.lerp(x, x * 2, x),
    "addcdiv": lambda L, x: L.addcdiv(x, x, x + 1), "index_fill_tensor": lambda L, x: x.index_fill(0, L.tensor([1]), x[0, 0]),
    "masked_fill_tensor": lambda L, x: x.masked_fill(x > 1, x[0, 0]),
    "exp_": lambda L, x: x.clone().exp_(), "sigmoid_": lambda L, x: x.clone().sigmoid_(),
    "mul_": lambda L, x: x.clone().mul_(x), "add_": lambda L, x: x.clone().add_(x, alpha=2),
    "pow_": lambda L, x: x.clone().pow_(2), "clamp_": lambda L, x: x.clone().clamp_(0, 1),
    "copy_": lambda L, x: L.zeros(3, 4, dtype=L.float64).copy_(x), "setitem": lambda L, x: _setitem(x.clone(), x[0]),
    "uniform_": lambda L, x: x.clone().uniform_(), "normal_": lambda L, x: x.clone().normal_(),
    "exponential_": lambda L, x: x.clone().exponential_(), "bernoulli_": lambda L, x: x.clone().bernoulli_(),
    "bernoulli": lambda L, x: L.bernoulli(x * 0.5),
    "linear": lambda L, x: L.nn.functional.linear(x, x), "linear_bias": lambda L, x: L.nn.functional.linear(x, x, x[0, :3]),
    "relu": lambda L, x: L.nn.functional.relu(x), "gelu": lambda L, x: L.nn.functional.gelu(x),
    "gelu_tanh": lambda L, x: L.nn.functional.gelu(x, approximate="tanh"), "silu": lambda L, x: L.nn.functional.silu(x),
    "softplus": lambda L, x: L.nn.functional.softplus(x, beta=2.0),
    "softmax": lambda L, x: L.nn.functional.softmax(x, 1), "log_softmax": lambda L, x: L.nn.functional.log_softmax(x, 0),
    "layer_norm": lambda L, x: L.nn.functional.layer_norm(x, (4,), x[0], x[1]),
    "rms_norm": lambda L, x: L.nn.functional.rms_norm(x, (4,), x[0]),
    "cross_entropy": lambda L, x: L.nn.functional.cross_entropy(x, L.tensor([0, 3, 1])),
    "nll_loss": lambda L, x: L.nn.functional.nll_loss(x, L.tensor([0, 3, 1])),
    "mse_loss": lambda L, x: L.nn.functional.mse_loss(x, x.detach() * 2),
    "embedding": lambda L, x: L.nn.functional.embedding(L.tensor([0, 2]), x),
    "sdpa": lambda L, x: L.nn.functional.scaled_dot_product_attention(*[x.reshape(1, 1, 3, 4)] * 3),
    "sdpa_causal": lambda L, x: L.nn.functional.scaled_dot_product_attention(*[x.reshape(1, 1, 3, 4)] * 3,
                                                                             is_causal=True),
    "index_select": lambda L, x: x.index_select(0, L.tensor(IDX)), "index": lambda L, x: x[L.tensor(IDX)],
    "mask_index": lambda L, x: x[x > 1],
}


def _setitem(t, v):
    t[0] = v
    return t


# name -> why flambeau's node differs from torch's (flambeau composes or fuses differently).
DIFFERENT = {
    "linalg_solve": "a vector b is solved as a one-column matrix and squeezed (SqueezeBackward1); torch records "
                    "LinalgSolveExBackward0 on the vector",
    **dict.fromkeys(["linalg_pinv", "linalg_lstsq"], "composed of svd and matmul (ops/linalg.cpp); torch has one "
                    "backward per op"),
    **dict.fromkeys(["nan_to_num", "logaddexp", "logaddexp2", "pairwise_distance", "cdist"],
                    "composed of where / norm (ops/math.cpp, nn/distance.cpp); torch has one backward per op"),
    "unique_consecutive": "flambeau's values are an index_select of the input (differentiable); torch records "
                          "UniqueConsecutiveBackward0, which has no derivative",
    **dict.fromkeys(["pad", "pad_reflect", "pad_replicate", "pad_circular"],
                    "flambeau's pad is cat / narrow (constant) or index_select (the other modes; nn/padding.cpp); "
                    "torch has one backward per mode"),
    **dict.fromkeys(["group_norm"],
                    "flambeau composes it of layer_norm and the affine mul / add (nn/batch_norm.cpp); "
                    "torch has one backward"),
    "bincount": "torch records a NotImplemented node for weights that require grad; flambeau records none "
                "(neither has a derivative)",
    **dict.fromkeys(["flip", "fliplr", "flipud", "roll", "roll_dims", "rot90", "rot90_k3", "tril", "tril_offset",
                     "triu", "repeat", "tile", "repeat_interleave", "unbind", "narrow_copy", "diagonal",
                     "diagonal_3d", "diag_embed", "diag", "diag_vector", "trace", "cartesian_prod", "kron",
                     "block_diag"],
                    "flambeau's shape ops are made of views, index_select, where, scatter and cat (ops/shape.cpp): "
                    "the node is the last of them; torch has one backward per op"),
    **dict.fromkeys(["elu", "selu", "celu", "leaky_relu", "prelu", "prelu_one_slope", "rrelu", "hardtanh", "relu6",
                     "hardsigmoid", "hardswish", "mish", "glu", "glu_dim0", "log_sigmoid", "logsigmoid",
                     "softshrink", "hardshrink", "threshold"],
                    "flambeau's activations compose differentiable elementwise ops (nn/activation.cpp): the node "
                    "is the last of them (where, clamp, mul, ...); torch has one fused kernel and backward"),
    "floor_divide": "torch records a NotImplemented node (no derivative); flambeau: DivBackward2 (zero gradient)",
    "matmul_2d_1d": "flambeau runs mm and squeezes (SqueezeBackward1); torch has a matrix-vector op (MvBackward0)",
    "matmul_3d_2d": "flambeau folds into mm and views the result (ViewBackward0); torch: UnsafeViewBackward0",
    "matmul_broadcast": "as matmul_3d_2d", "matmul_vec": "as matmul_2d_1d",
    "stack": "flambeau's stack is cat of unsqueezed views (CatBackward0); torch: StackBackward0",
    "split": "flambeau's split returns narrow views (SliceBackward0); torch: one SplitBackward0",
    "chunk": "as split",
    "baddbmm": "flambeau composes bmm, mul and add (AddBackward0); torch: BaddbmmBackward0",
    "rms_norm": "fused in flambeau (FusedRmsNormBackward0); torch 2.13 composes it on CPU (MulBackward0)",
    "cross_entropy": "fused in flambeau (CrossEntropyLossBackward0); torch: log_softmax then NllLossBackward0",
    "nll_loss": "flambeau composes gather and mean; torch: NllLossBackward0",
    "sort_values": "the entry calls torch with stable=True (SortBackward1), flambeau (always stable) without",
    "zero_": "flambeau's zero_ is fill_(0) (FillBackward2); torch: ZeroBackward0",
    "binary_cross_entropy_with_logits": "flambeau composes it (MeanBackward0); torch: one node",
    "linear_cross_entropy": "fused in flambeau (LinearCrossEntropyBackward0); torch 2.13 composes it (NllLossBackward0)",
    "scaled_dot_product_attention": "3-D q, k, v: torch views them as 4-D around its kernel (UnsafeViewBackward0); "
                                    "flambeau's kernel takes them as they are (4-D: same name, see sdpa)",
    "mse_loss": "flambeau composes sub, mul and mean; torch: MseLossBackward0",
}


def all_cases():
    for op in test_opinfo.OPS:
        if "float64" in op.dtypes:
            arrays = [R.uniform(max(op.lo, 0.3), op.hi, (3, 4)) for _ in range(op.arity)]
            fn, tfn = op.fn, op.torch_fn
            yield "opinfo:" + op.name, op.name, (lambda f, t: lambda L, *xs: (t if L is torch else f)(*xs))(fn, tfn), arrays
    for name, f in test_opinfo_more.CASES.items():
        yield "opinfo_more:" + name, name, (lambda f: lambda L, x: f(L, x.reshape(5, 6)))(f), [R.uniform(0.5, 1.5, 30).astype(np.float32)]
    for name, f in EXTRA.items():
        yield name, name, f, [X]


CASES = list(all_cases())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_grad_fn_name_matches_torch(case):
    _, name, f, arrays = case
    try:
        want = node(f(torch, *[leaf(torch, a) for a in arrays]))
    except RuntimeError as e:  # torch refuses the sample: nothing to compare with
        pytest.skip(f"torch: {e}")
    got = node(f(fl, *[leaf(fl, a) for a in arrays]))
    if want is None:
        assert got is None, f"{name}: torch records no node, flambeau {got}"
        return
    if name in DIFFERENT:
        assert got != want, f"{name} now matches torch ({want}): remove it from DIFFERENT"
        return
    assert got == want, f"{name}: flambeau {got}, torch {want}"


def test_different_entries_exist():
    names = {c[1] for c in CASES}
    assert set(DIFFERENT) <= names, set(DIFFERENT) - names


def test_repr_and_name():
    y = fl.tensor([1.0, 2.0], requires_grad=True).exp()
    assert y.grad_fn.name() == "ExpBackward0"
    assert re.fullmatch(r"<ExpBackward0 object at 0x[0-9a-f]+>", repr(y.grad_fn)), repr(y.grad_fn)
    assert repr(y.grad_fn) == repr(y.grad_fn)  # the node's address: stable
