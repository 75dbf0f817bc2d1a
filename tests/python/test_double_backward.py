"""Double backward (issue 22): gradients of gradients through the convolutions, max and
average pooling and the normalisations, against torch 2.13 in float64. For each case the first gradients
come from autograd.grad(create_graph=True) of L1 = sum(y * u) + sum(y^3) (so the upstream
gradient has a graph of its own), and the second from L2 = sum(g * r) + sum(g^2) over them,
w.r.t. the op's inputs and u. gradgradcheck checks a few small cases against finite
differences; a backward without create_graph still gives gradients without a graph."""
import numpy as np
import pytest
import torch

import flambeau as fl
import flambeau.nn.functional as F
import torch.nn.functional as TF

TOL = 1e-10


def _close(got, want):
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL * max(1.0, float(np.abs(want).max(initial=0))))


def second_order(lib, fn, arrays, seed):
    """(first gradients, second gradients) of fn(lib, *inputs) as numpy arrays."""
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    y = fn(lib, *ts)
    rng = np.random.default_rng(seed)
    u = lib.tensor(rng.standard_normal(tuple(y.shape)), requires_grad=True)
    l1 = (y * u).sum() + (y * y * y).sum()
    first = lib.autograd.grad(l1, ts, create_graph=True)
    l2 = sum((g * lib.tensor(rng.standard_normal(tuple(g.shape)))).sum() + (g * g).sum() for g in first)
    second = lib.autograd.grad(l2, ts + [u], allow_unused=True)
    to_np = lambda ts_: [None if t is None else t.detach().numpy() for t in ts_]  # noqa: E731
    return to_np(first), to_np(second)


def compare(fn, shapes, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    got, want = second_order(fl, fn, arrays, seed + 1), second_order(torch, fn, arrays, seed + 1)
    for gs, ws in zip(got, want):
        for g, w in zip(gs, ws):
            assert (g is None) == (w is None)
            if w is not None:
                _close(g, w)


def lib_f(lib):
    return F if lib is fl else TF


# (name, x shape, weight shape, bias, function name, kwargs)
CONV = [
    ("conv1d_stride_pad_dil_groups", (2, 4, 13), (6, 2, 3), True, "conv1d", dict(stride=2, padding=2, dilation=2,
                                                                                groups=2)),
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 3), True, "conv2d", dict()),
    ("conv2d_strided_padded", (2, 3, 9, 10), (4, 3, 3, 2), True, "conv2d",
     dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1))),
    ("conv2d_stride_remainder", (1, 2, 8, 9), (3, 2, 3, 3), False, "conv2d", dict(stride=3, padding=1)),
    ("conv2d_groups", (2, 4, 6, 7), (6, 2, 3, 3), True, "conv2d", dict(groups=2, padding=1)),
    ("conv2d_depthwise", (2, 3, 6, 6), (6, 1, 3, 3), False, "conv2d", dict(groups=3, stride=2, padding=1)),
    ("conv2d_same_even", (2, 2, 6, 7), (3, 2, 4, 2), True, "conv2d", dict(padding="same", dilation=(1, 3))),
    ("conv2d_unbatched", (3, 6, 6), (2, 3, 3, 3), True, "conv2d", dict(stride=2)),
    ("conv3d_groups", (2, 4, 4, 5, 4), (4, 2, 2, 3, 2), True, "conv3d", dict(groups=2, padding=1,
                                                                            stride=(1, 2, 1))),
    ("conv_transpose1d", (2, 4, 7), (4, 3, 3), True, "conv_transpose1d", dict(stride=2)),
    ("conv_transpose2d", (2, 4, 5, 6), (4, 3, 3, 3), True, "conv_transpose2d",
     dict(stride=2, padding=1, output_padding=1)),
    ("conv_transpose2d_groups_dil", (2, 4, 5, 4), (4, 2, 3, 2), True, "conv_transpose2d",
     dict(groups=2, stride=(2, 1), dilation=3, output_padding=(2, 1))),
    ("conv_transpose3d", (1, 2, 3, 4, 3), (2, 3, 2, 3, 2), True, "conv_transpose3d",
     dict(stride=2, padding=(0, 1, 1), output_padding=(1, 0, 1))),
]


def conv_fn(name, with_bias, kw):
    def fn(lib, x, w, *b):
        return getattr(lib_f(lib), name)(x, w, b[0] if with_bias else None, **kw)

    return fn


@pytest.mark.parametrize("case, x_shape, w_shape, with_bias, name, kw", CONV, ids=[c[0] for c in CONV])
def test_conv_double_backward_matches_torch(case, x_shape, w_shape, with_bias, name, kw):
    groups = kw.get("groups", 1)
    c_out = w_shape[1] * groups if name.startswith("conv_transpose") else w_shape[0]
    shapes = [x_shape, w_shape] + ([(c_out,)] if with_bias else [])
    compare(conv_fn(name, with_bias, kw), shapes, seed=len(case) * 7 + len(x_shape))


# (name, x shape, function name, kwargs)
POOL = [
    ("max_pool1d_pad_dil", (2, 3, 13), "max_pool1d", dict(kernel_size=3, stride=2, padding=1, dilation=2)),
    ("max_pool2d", (2, 3, 6, 6), "max_pool2d", dict(kernel_size=2)),
    ("max_pool2d_pad_dil_ceil", (2, 2, 9, 8), "max_pool2d",
     dict(kernel_size=3, stride=2, padding=1, dilation=(1, 2), ceil_mode=True)),
    ("max_pool2d_overlapping", (1, 2, 6, 5), "max_pool2d", dict(kernel_size=3, stride=1)),
    ("max_pool2d_unbatched", (3, 7, 7), "max_pool2d", dict(kernel_size=3, stride=2, padding=1)),
    ("max_pool3d", (1, 2, 5, 4, 6), "max_pool3d", dict(kernel_size=2, stride=2, padding=1)),
    ("adaptive_max_pool1d", (2, 3, 11), "adaptive_max_pool1d", dict(output_size=4)),
    ("adaptive_max_pool2d", (2, 3, 7, 9), "adaptive_max_pool2d", dict(output_size=(3, 4))),
    ("adaptive_max_pool3d", (1, 2, 5, 6, 4), "adaptive_max_pool3d", dict(output_size=(2, 3, 3))),
    # The average poolings' gradients are linear in the upstream gradient: their second
    # derivative reaches u only.
    ("avg_pool1d", (2, 3, 11), "avg_pool1d", dict(kernel_size=3, stride=2, padding=1)),
    ("avg_pool2d_no_pad_count", (2, 2, 7, 6), "avg_pool2d",
     dict(kernel_size=3, stride=2, padding=1, count_include_pad=False, ceil_mode=True)),
    ("avg_pool2d_divisor", (1, 2, 6, 6), "avg_pool2d", dict(kernel_size=2, divisor_override=3)),
    ("avg_pool3d", (1, 2, 4, 5, 4), "avg_pool3d", dict(kernel_size=2, stride=1)),
    ("adaptive_avg_pool2d", (2, 3, 7, 5), "adaptive_avg_pool2d", dict(output_size=(3, 2))),
]


@pytest.mark.parametrize("case, x_shape, name, kw", POOL, ids=[c[0] for c in POOL])
def test_pool_double_backward_matches_torch(case, x_shape, name, kw):
    compare(lambda lib, x: getattr(lib_f(lib), name)(x, **kw), [x_shape], seed=len(case) + 3)


@pytest.mark.parametrize("name, kw, node", [
    ("max_pool2d", dict(kernel_size=2), "MaxPool2DWithIndicesBackwardBackward0"),
    ("adaptive_max_pool2d", dict(output_size=3), "AdaptiveMaxPool2DBackwardBackward0"),
])
def test_max_pool_gradient_depends_on_x_with_zero_derivative(name, kw, node):
    # The gradient of sum(max_pool(x)) is a constant scatter; as torch's, it has a node over x
    # whose derivative w.r.t. x is zero.
    a = np.random.default_rng(5).standard_normal((2, 3, 6, 6))
    res = {}
    for lib in (fl, torch):
        x = lib.tensor(a, requires_grad=True)
        (g,) = lib.autograd.grad(getattr(lib_f(lib), name)(x, **kw).sum(), [x], create_graph=True)
        assert g.requires_grad and g.grad_fn.name() == node
        (res[lib],) = lib.autograd.grad((g * g).sum(), [x])
    np.testing.assert_array_equal(res[fl].numpy(), res[torch].numpy())
    assert not res[fl].numpy().any()


def _norm_cases():
    def layer_norm(shape, affine):
        def fn(lib, x, *p):
            return lib_f(lib).layer_norm(x, shape, *p, eps=1e-5) if affine else lib_f(lib).layer_norm(x, shape)
        return fn

    def rms_norm(lib, x, w):
        return lib_f(lib).rms_norm(x, (5,), w, eps=1e-6)

    def group_norm(lib, x, w, b):
        return lib_f(lib).group_norm(x, 3, w, b, eps=1e-5)

    def batch_norm(training):
        def fn(lib, x, w, b):
            rm, rv = lib.zeros(4, dtype=lib.float64) + 0.1, lib.ones(4, dtype=lib.float64) * 1.5
            return lib_f(lib).batch_norm(x, rm, rv, w, b, training=training, eps=1e-5)
        return fn

    def instance_norm(lib, x, w, b):
        return lib_f(lib).instance_norm(x, weight=w, bias=b)

    return [
        ("layer_norm_affine", layer_norm((5,), True), [(3, 4, 5), (5,), (5,)]),
        ("layer_norm_no_affine", layer_norm((4, 5), False), [(3, 4, 5)]),
        ("layer_norm_2d_affine", layer_norm((4, 5), True), [(2, 3, 4, 5), (4, 5), (4, 5)]),
        ("rms_norm", rms_norm, [(3, 4, 5), (5,)]),
        ("group_norm", group_norm, [(2, 6, 3, 3), (6,), (6,)]),
        ("batch_norm_train", batch_norm(True), [(3, 4, 3, 2), (4,), (4,)]),
        ("batch_norm_eval", batch_norm(False), [(3, 4, 5), (4,), (4,)]),
        ("instance_norm", instance_norm, [(2, 3, 4, 5), (3,), (3,)]),
    ]


NORMS = _norm_cases()


@pytest.mark.parametrize("case, fn, shapes", NORMS, ids=[c[0] for c in NORMS])
def test_norm_double_backward_matches_torch(case, fn, shapes):
    compare(fn, shapes, seed=len(case) + 11)


def _gradgradcheck(fn, shapes, seed):
    rng = np.random.default_rng(seed)
    inputs = [fl.tensor(rng.standard_normal(s), requires_grad=True) for s in shapes]
    assert fl.autograd.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("case, fn, shapes", [
    ("conv2d_groups", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2),
     [(1, 2, 4, 5), (4, 1, 3, 2), (4,)]),
    ("conv_transpose1d", lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1),
     [(2, 2, 4), (2, 3, 3)]),
    ("max_pool2d", lambda x: F.max_pool2d(x * x, 3, stride=2, padding=1), [(1, 2, 5, 5)]),
    ("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x * x, 3), [(2, 2, 7)]),
    ("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b), [(3, 4), (4,), (4,)]),
    ("batch_norm", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [(4, 2, 3), (2,), (2,)]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_gradgradcheck(case, fn, shapes):
    _gradgradcheck(fn, shapes, seed=len(case))


def test_without_create_graph_gradients_have_no_graph():
    rng = np.random.default_rng(2)
    x = fl.tensor(rng.standard_normal((2, 3, 6, 6)), requires_grad=True)
    w = fl.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    ln_w = fl.tensor(rng.standard_normal(3), requires_grad=True)
    y = F.layer_norm(F.max_pool2d(F.conv2d(x, w, padding=1), 2), (3,), ln_w)
    for g in fl.autograd.grad((y * y).sum(), [x, w, ln_w]):
        assert not g.requires_grad and g.grad_fn is None


def test_backward_create_graph_gives_grad_a_graph():
    # Tensor.backward(create_graph=True): .grad keeps its graph (a gradient penalty's pattern).
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    res = {}
    for lib in (fl, torch):
        x, w = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        y = lib_f(lib).conv2d(x, w)
        (y * y).sum().backward(create_graph=True)
        gx = x.grad
        assert gx.requires_grad
        x.grad, w.grad = None, None
        (gx * gx).sum().backward()
        res[lib] = (x.grad.detach().numpy(), w.grad.detach().numpy())
    for g, w in zip(res[fl], res[torch]):
        _close(g, w)


@pytest.mark.parametrize("op", ["cross_entropy", "interpolate", "embedding"])
def test_kernel_backwards_refuse_to_be_differentiated_twice(op):
    # Their backward runs a kernel: under create_graph the gradient carries a DelayedError
    # node, so differentiating it raises instead of treating it as a constant.
    x = fl.randn(4, 6, dtype=fl.float64).requires_grad_()
    if op == "cross_entropy":
        y = fl.nn.functional.cross_entropy(x, fl.tensor([0, 5, 2, 1]))
    elif op == "interpolate":
        y = (fl.nn.functional.interpolate(x.reshape(1, 1, 4, 6), scale_factor=2, mode="bilinear") ** 2).sum()
    else:
        y = (fl.nn.functional.embedding(fl.tensor([1, 3, 3]), x) ** 2).sum()
    (g,) = fl.autograd.grad(y, [x], create_graph=True)
    assert g.requires_grad  # through the DelayedError node (interpolate's: behind the reshape's view)
    with pytest.raises(RuntimeError, match="is not differentiable .*create_graph=True cannot differentiate"):
        (g ** 2).sum().backward()
    # The same loss written with ops differentiates twice.
    if op == "cross_entropy":
        z = fl.nn.functional.nll_loss(fl.log_softmax(x, 1), fl.tensor([0, 5, 2, 1]))
        (g2,) = fl.autograd.grad(z, [x], create_graph=True)
        (g2 ** 2).sum().backward()
        assert x.grad is not None
