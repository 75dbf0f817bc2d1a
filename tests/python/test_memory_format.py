"""Memory formats (issue 22 item 1: channels-last input handled without a copy): the
torch.memory_format objects, is_contiguous / contiguous / to / clone / empty / *_like with
memory_format, the layout each op gives its result (torch's rules, which depend on the
shape and strides alone, so torch's strides are the reference), channels-last convolutions
forward and backward (oneDNN's NHWC kernels where it has them) against the row-major ones
and torch, the layers that keep the layout, Module.to(memory_format=) and bad input."""
import numpy as np
import pytest
import torch

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
import torch.nn.functional as TF
from conftest import assert_raises_naming

FORMATS = [(fl.contiguous_format, torch.contiguous_format), (fl.channels_last, torch.channels_last),
           (fl.channels_last_3d, torch.channels_last_3d)]


def pair(shape, seed=0, dtype=np.float64):
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    t = torch.empty(shape, dtype=torch.float64 if dtype == np.float64 else torch.float32).copy_(torch.tensor(a))
    return fl.tensor(a), t  # (torch.tensor of an empty array takes numpy's strides: 0s)


def test_formats_are_objects_with_torchs_names():
    assert repr(fl.channels_last) == "flambeau.channels_last"
    assert repr(fl.preserve_format) == "flambeau.preserve_format"
    assert isinstance(fl.contiguous_format, fl.memory_format)
    assert fl.channels_last is fl.channels_last and fl.channels_last != fl.contiguous_format


# Shapes with size-1 and size-0 dims are where the rules are subtle (a tensor can be
# contiguous in two formats at once, or in none).
SHAPES = [(2, 3, 4, 5), (2, 3, 1, 1), (2, 1, 4, 4), (1, 3, 1, 5), (2, 0, 3, 3), (2, 3, 0, 3), (3, 2, 4, 5, 2),
          (1, 1, 1, 1)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_layouts_match_torch(shape):
    f, t = pair(shape)
    for ff, tf in FORMATS:
        if (ff is fl.channels_last and len(shape) != 4) or (ff is fl.channels_last_3d and len(shape) != 5):
            continue
        fc, tc = f.contiguous(memory_format=ff), t.contiguous(memory_format=tf)
        assert fc.stride() == tc.stride(), (ff, fc.stride(), tc.stride())
        assert f.to(memory_format=ff).stride() == tc.stride()
        assert fl.empty(*shape, memory_format=ff).stride() == torch.empty(*shape, memory_format=tf).stride()
        np.testing.assert_array_equal(fc.numpy(), t.numpy())
        for gf, gt in FORMATS:  # every format's test on every layout
            assert fc.is_contiguous(memory_format=gf) == tc.is_contiguous(memory_format=gt), (ff, gf)
        # preserve_format (the default of clone and the *_like factories) keeps the layout.
        assert fc.clone().stride() == tc.clone().stride()
        for like in ("empty_like", "zeros_like", "ones_like"):
            assert getattr(fl, like)(fc).stride() == getattr(torch, like)(tc).stride()
        assert fl.full_like(fc, 2.0).stride() == torch.full_like(tc, 2.0).stride()
        assert fc.clone(memory_format=fl.contiguous_format).stride() == tc.clone(
            memory_format=torch.contiguous_format).stride()
        assert fc.to(fl.float32).stride() == tc.to(torch.float32).stride()


def test_preserve_keeps_dense_strides_and_densifies_the_rest():
    f, t = pair((4, 6))
    assert f.t().clone().stride() == t.t().clone().stride() == (1, 6)
    assert f[:, ::2].clone().stride() == t[:, ::2].clone().stride()
    f4, t4 = pair((2, 3, 8, 10))
    f4 = f4.contiguous(memory_format=fl.channels_last)[:, :, :, ::2]  # not dense, channels-last order
    t4 = t4.contiguous(memory_format=torch.channels_last)[:, :, :, ::2]
    assert f4.clone().stride() == t4.clone().stride() == t4.contiguous(memory_format=torch.channels_last).stride()
    assert fl.empty_like(f4).stride() == torch.empty_like(t4).stride()


def test_copies_are_differentiable_and_views_are_not_copied():
    f, _ = pair((2, 3, 4, 5))
    f.requires_grad_()
    c = f.contiguous(memory_format=fl.channels_last)
    assert c.contiguous(memory_format=fl.channels_last).data_ptr() == c.data_ptr()  # already so: no copy
    assert c.to(memory_format=fl.channels_last).data_ptr() == c.data_ptr()
    (c * fl.arange(5.0)).sum().backward()
    np.testing.assert_array_equal(f.grad.numpy(), np.broadcast_to(np.arange(5.0), (2, 3, 4, 5)))
    assert c.to(copy=True).data_ptr() != c.data_ptr() and c.to(copy=True).stride() == c.stride()


def test_elementwise_results_follow_the_first_full_shape_input_as_torch():
    f, t = pair((2, 3, 4, 5))
    fc, tc = f.contiguous(memory_format=fl.channels_last), t.contiguous(memory_format=torch.channels_last)
    fb, tb = pair((3, 1, 1), seed=1)
    cases = [
        (lambda L, x, c, b: x + 1), (lambda L, x, c, b: c + x), (lambda L, x, c, b: x + c), (lambda L, x, c, b: b + x),
        (lambda L, x, c, b: x * b), (lambda L, x, c, b: L.relu(x)), (lambda L, x, c, b: L.where(x > 0, x, 0.0)),
        (lambda L, x, c, b: x > b), (lambda L, x, c, b: L.exp(x)), (lambda L, x, c, b: x.to(L.float32)),
        (lambda L, x, c, b: L.nn.functional.gelu(x)), (lambda L, x, c, b: L.addcmul(x, c, b)),
        (lambda L, x, c, b: L.nn.functional.silu(x)), (lambda L, x, c, b: L.clamp(x, -0.5, 0.5)),
    ]
    for i, case in enumerate(cases):
        got, want = case(fl, fc, f, fb), case(torch, tc, t, tb)
        assert got.stride() == want.stride(), (i, got.stride(), want.stride())
        # The same kernels as on the row-major input: the same bits.
        np.testing.assert_array_equal(got.numpy(), case(fl, f, f, fb).numpy())


def test_module_to_memory_format():
    torch.manual_seed(0)
    fl.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 36, 2))
    weight = m[0].weight
    before = weight.detach().clone().numpy()
    assert m.to(memory_format=fl.channels_last) is m
    assert m[0].weight is weight and weight.is_contiguous(memory_format=fl.channels_last)
    np.testing.assert_array_equal(weight.detach().numpy(), before)
    assert m[4].weight.is_contiguous()  # 2-d parameters keep their layout
    x = fl.randn(2, 3, 6, 6).to(memory_format=fl.channels_last)
    m(x).sum().backward()
    assert weight.grad is not None and tuple(weight.grad.shape) == (8, 3, 3, 3)
    m.to(fl.float64, memory_format=fl.contiguous_format)
    assert weight.dtype == fl.float64 and weight.is_contiguous()


def conv_run(lib, x, w, b, gy, fmt, **kw):
    xt = lib.tensor(x).contiguous(memory_format=fmt).requires_grad_()
    wt, bt = lib.tensor(w, requires_grad=True), lib.tensor(b, requires_grad=True)
    conv = F.conv2d if lib is fl else TF.conv2d
    if x.ndim == 5:
        conv = F.conv3d if lib is fl else TF.conv3d
    y = conv(xt, wt, bt, **kw)
    y.backward(lib.tensor(gy).contiguous(memory_format=fmt))
    return y, xt.grad, wt.grad, bt.grad


# (input, weight, kwargs): oneDNN's NHWC kernels (3x3, 1x1, strided, groups, a 3-channel
# stem), depthwise, a 3-d convolution in channels_last_3d.
CONV_CASES = [((2, 16, 9, 9), (32, 16, 3, 3), dict(padding=1)), ((3, 8, 8, 7), (16, 8, 1, 1), dict()),
              ((2, 3, 15, 15), (8, 3, 7, 7), dict(stride=2, padding=3)),
              ((2, 8, 7, 7), (8, 2, 3, 3), dict(groups=4, padding=1)), ((2, 8, 6, 6), (8, 1, 3, 3), dict(groups=8)),
              ((2, 4, 5, 6, 5), (8, 4, 3, 3, 3), dict(padding=1))]


@pytest.mark.parametrize("x_shape, w_shape, kw", CONV_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_channels_last_convolution(x_shape, w_shape, kw, dtype):
    rng = np.random.default_rng(len(x_shape) * 100 + x_shape[1])
    x, w = rng.standard_normal(x_shape).astype(dtype), rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    cl_f = fl.channels_last if len(x_shape) == 4 else fl.channels_last_3d
    cl_t = torch.channels_last if len(x_shape) == 4 else torch.channels_last_3d
    y_shape = tuple(TF.conv2d(torch.tensor(x), torch.tensor(w), **kw).shape) if len(x_shape) == 4 else tuple(
        TF.conv3d(torch.tensor(x), torch.tensor(w), **kw).shape)
    gy = rng.standard_normal(y_shape).astype(dtype)
    got = conv_run(fl, x, w, b, gy, cl_f, **kw)
    want = conv_run(torch, x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), gy.astype(np.float64),
                    cl_t, **kw)
    # Layouts as torch's: output and input gradient channels-last in 2-d (row-major in 3-d).
    assert got[0].stride() == want[0].stride() and got[1].stride() == want[1].stride()
    assert got[0].is_contiguous(memory_format=cl_f) == (len(x_shape) == 4)
    # Each result is a sum of at most n products: n float32 roundings of the sum of |terms|.
    absolute = conv_run(torch, *(np.abs(a).astype(np.float64) for a in (x, w, b, gy)), cl_t, **kw)
    n = int(np.prod(w_shape)) + int(np.prod(y_shape))
    eps = 2.0**-24 if dtype == np.float32 else 2.0**-53
    for g, t, a in zip(got, want, absolute):
        g, t, a = g.detach().numpy().astype(np.float64), t.detach().numpy(), a.detach().numpy()
        assert np.all(np.abs(g - t) <= n * eps * a + 1e-300), np.max(np.abs(g - t) / (a + 1e-300))


def test_channels_last_convolution_is_bitwise_the_same_on_one_and_two_threads():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 32, 10, 10)).astype(np.float32)
    w = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    gy = rng.standard_normal((3, 32, 10, 10)).astype(np.float32)
    results = []
    for threads in (1, 2):
        fl.set_num_threads(threads)
        try:
            results.append([t.detach().numpy() for t in conv_run(fl, x, w, b, gy, fl.channels_last, padding=1)])
        finally:
            fl.set_num_threads(2)
    for a, c in zip(*results):
        assert a.tobytes() == c.tobytes()


LAYERS = [
    ("batch_norm", lambda L, x: L.nn.functional.batch_norm(x, None, None, training=True)),
    ("max_pool2d", lambda L, x: L.nn.functional.max_pool2d(x, 2)),
    ("max_pool2d_indices", lambda L, x: L.nn.functional.max_pool2d(x, 3, 2, 1, return_indices=True)[1]),
    ("avg_pool2d", lambda L, x: L.nn.functional.avg_pool2d(x, 2)),
    ("interpolate", lambda L, x: L.nn.functional.interpolate(x, scale_factor=2, mode="bilinear")),
    ("adaptive_avg_pool2d", lambda L, x: L.nn.functional.adaptive_avg_pool2d(x, 1)),
]


@pytest.mark.parametrize("name, fn", LAYERS, ids=[c[0] for c in LAYERS])
def test_layers_keep_channels_last_and_compute_the_same(name, fn):
    f, t = pair((2, 3, 6, 8), seed=3)
    fc, tc = f.contiguous(memory_format=fl.channels_last), t.contiguous(memory_format=torch.channels_last)
    got, want, row_major = fn(fl, fc), fn(torch, tc), fn(fl, f)
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    # The same kernels on a row-major copy: the same bits.
    np.testing.assert_array_equal(got.detach().numpy(), row_major.detach().numpy())


def run_on(x, fn, seed=7):
    """fn(x) and the gradients of its outputs' weighted sum with respect to x (and its
    parameters): each output's gradient is a fixed pattern of small integers."""
    x = x.detach().requires_grad_()
    outs = fn(x)
    outs = outs if isinstance(outs, tuple) else (outs,)
    values = [o for o in outs if o.is_floating_point()]
    grads = [fl.tensor((np.arange(v.numel()).reshape(tuple(v.shape)) * 7 + seed) % 5 - 2.0).to(v.dtype)
             for v in values]
    fl.autograd.backward(values, grads)
    return outs + (x.grad,)


def same_bits(a, b):
    a, b = a.detach().numpy(), b.detach().numpy()
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# batch_norm and the max poolings work on channels-last tensors as they lie (no copy) in the
# same order of operations as on row-major ones (Note [Batch norm order], Note
# [Deterministic pooling]): the same bits in either layout and on any thread count. The
# shapes cross batch_norm's 1024-position chunks and leave lanes over (41 * 37 positions),
# and have channel counts that fill no vector (3, 5) and several (70).
NATIVE_LAYOUT_CASES = [
    ("batch_norm train", (2, 5, 37, 41), lambda x: F.batch_norm(
        x, fl.zeros(x.shape[1], dtype=x.dtype), fl.ones(x.shape[1], dtype=x.dtype),
        fl.linspace(0.5, 2, x.shape[1]).to(x.dtype), fl.linspace(-1, 1, x.shape[1]).to(x.dtype), training=True)),
    ("batch_norm eval", (3, 70, 4, 5), lambda x: F.batch_norm(
        x, fl.linspace(-1, 1, x.shape[1]).to(x.dtype), fl.linspace(0.5, 3, x.shape[1]).to(x.dtype), training=False)),
    ("batch_norm 3d", (2, 3, 5, 4, 6), lambda x: F.batch_norm(x, None, None, training=True)),
    ("max_pool2d", (2, 19, 9, 11), lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)),
    ("max_pool2d dilated ceil", (2, 3, 8, 8), lambda x: F.max_pool2d(
        x, (2, 3), (1, 2), (1, 1), dilation=(2, 1), ceil_mode=True, return_indices=True)),
    ("max_pool3d", (2, 70, 5, 6, 7), lambda x: F.max_pool3d(x, 2, 2, return_indices=True)),
    ("adaptive_max_pool2d", (2, 5, 9, 11), lambda x: F.adaptive_max_pool2d(x, (4, 3), return_indices=True)),
]


@pytest.mark.parametrize("name, shape, fn", NATIVE_LAYOUT_CASES, ids=[c[0] for c in NATIVE_LAYOUT_CASES])
@pytest.mark.parametrize("dtype", [fl.float32, fl.float64], ids=str)
def test_channels_last_norm_and_pooling_give_the_row_major_bits(name, shape, fn, dtype):
    a = np.random.default_rng(len(shape) * 10 + shape[1]).standard_normal(shape)
    if "pool" in name:  # a NaN (it wins its windows) and a run of ties (the first wins)
        a[0, 0].flat[3] = np.nan
        a[-1, -1].flat[:6] = 1.0
    x = fl.tensor(a).to(dtype)
    fmt = fl.channels_last if len(shape) == 4 else fl.channels_last_3d
    row_major = run_on(x, fn)
    results = []
    for threads in (1, 2):
        fl.set_num_threads(threads)
        try:
            results.append(run_on(x.contiguous(memory_format=fmt), fn))
        finally:
            fl.set_num_threads(2)
    for got in results:
        for g, r in zip(got, row_major):
            assert g.is_contiguous(memory_format=fmt)
            assert same_bits(g, r)


def test_channels_last_pooling_layouts_as_torch():
    f, t = pair((2, 5, 6, 6, 7), seed=4)
    fc, tc = f.contiguous(memory_format=fl.channels_last_3d), t.contiguous(memory_format=torch.channels_last_3d)
    for ff, tf in [(F.max_pool3d, TF.max_pool3d), (F.adaptive_max_pool3d, TF.adaptive_max_pool3d)]:
        (gv, gi), (wv, wi) = ff(fc, 2, return_indices=True), tf(tc, 2, return_indices=True)
        assert gv.stride() == wv.stride() and gi.stride() == wi.stride()  # torch's adaptive 3-d one is row-major
        np.testing.assert_array_equal(gi.numpy(), wi.numpy())
        np.testing.assert_array_equal(gv.numpy(), wv.numpy())


def test_channels_last_weight_gradient_is_channels_last_as_torch():
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((2, 16, 9, 9)).astype(np.float32), rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    grads = []
    for lib in (fl, torch):
        xt = lib.tensor(x).contiguous(memory_format=lib.channels_last)
        wt = lib.tensor(w).contiguous(memory_format=lib.channels_last).requires_grad_()
        conv = F.conv2d if lib is fl else TF.conv2d
        conv(xt, wt, padding=1).sum().backward()
        grads.append(wt.grad)
    assert grads[0].stride() == grads[1].stride()
    # A sum of 2 * 9 * 9 terms of size up to |x|: float32 roundings of the sum of |x| bound it.
    bound = 2 * 81 * 2.0**-24 * np.abs(x).sum()
    assert np.max(np.abs(grads[0].numpy() - grads[1].numpy())) <= bound


def test_relu_backward_keeps_the_layout():
    f, t = pair((2, 3, 4, 5), seed=9)
    fc, tc = (f.contiguous(memory_format=fl.channels_last).requires_grad_(),
              t.contiguous(memory_format=torch.channels_last).requires_grad_())
    for lib, v in ((fl, fc), (torch, tc)):
        y = lib.relu(v * 1.0)
        y.backward(lib.ones_like(y))
    assert fc.grad.stride() == tc.grad.stride()
    np.testing.assert_array_equal(fc.grad.numpy(), tc.grad.numpy())


def test_bad_input_names_the_op():
    f, _ = pair((2, 3, 4))
    assert_raises_naming(lambda: f.contiguous(memory_format=fl.channels_last), ValueError,
                         ["[contiguous]", "rank 4", "channels_last", "2, 3, 4"])
    assert_raises_naming(lambda: f.to(memory_format=fl.channels_last_3d), ValueError, ["rank 5", "channels_last_3d"])
    assert_raises_naming(lambda: fl.empty(2, 3, memory_format=fl.channels_last), ValueError, ["[empty]", "rank 4"])
    assert_raises_naming(lambda: f.is_contiguous(memory_format=fl.preserve_format), ValueError,
                         ["[is_contiguous]", "preserve_format"])
    assert_raises_naming(lambda: f.contiguous(memory_format=fl.preserve_format), ValueError,
                         ["[contiguous]", "preserve memory format is unsupported"])
    with pytest.raises(TypeError):
        f.contiguous(memory_format="channels_last")
    assert_raises_naming(lambda: nn.Conv3d(2, 2, 1).to(memory_format=fl.channels_last), ValueError, ["rank 4"])
