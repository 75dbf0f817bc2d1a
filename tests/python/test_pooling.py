"""Pooling (src/flambeau/nn/pooling.cpp) against PyTorch 2.13: max_pool, avg_pool,
adaptive_avg_pool and adaptive_max_pool in 1-3 dims over a grid of strides, paddings,
dilations, ceil_mode, count_include_pad and divisor_override. float64 values and indices
are torch's bits (averages within a couple of roundoffs), gradients for a random upstream
gradient within float64 roundoff, finite differences agree, results are the same with 1
and 2 threads, bad input raises naming the op, and the modules' reprs are torch's."""
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import flambeau as fl
import flambeau.nn.functional as F
from conftest import assert_raises_naming

R = np.random.default_rng(5)


def pair(a):
    """The same float64 data as a flambeau and a torch tensor that require grad."""
    return fl.tensor(a).requires_grad_(), torch.tensor(a).requires_grad_()


def run_both(name, data, make_input=lambda t: t, **kwargs):
    """Forward and backward of F.<name> on both libraries: (results, input grads) per library."""
    out = []
    upstream = None
    for lib, fn in ((fl, getattr(F, name)), (torch, getattr(TF, name))):
        x = (fl.tensor(data) if lib is fl else torch.tensor(data)).requires_grad_()
        r = fn(make_input(x), **kwargs)
        vals = r if isinstance(r, tuple) else (r,)
        if upstream is None:
            upstream = R.standard_normal(tuple(vals[0].shape))
        g = fl.tensor(upstream) if lib is fl else torch.tensor(upstream)
        (vals[0] * g).sum().backward()
        out.append(([v.detach().numpy() for v in vals], x.grad.numpy()))
    return out


def check(name, shape, make_input=lambda t: t, exact=True, **kwargs):
    data = R.standard_normal(shape)
    (got, ggot), (want, gwant) = run_both(name, data, make_input, **kwargs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if exact or g.dtype == np.int64:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=4e-16, atol=4e-16)
    np.testing.assert_allclose(ggot, gwant, rtol=1e-14, atol=1e-14)


MAX_GRID = [  # (shape, kwargs) per dims
    ((2, 3, 11), dict(kernel_size=3)), ((2, 3, 11), dict(kernel_size=4, stride=2, padding=2, ceil_mode=True)),
    ((2, 3, 11), dict(kernel_size=3, stride=1, padding=1, dilation=2)),
    ((2, 3, 10), dict(kernel_size=2, stride=3, ceil_mode=True)),
    ((2, 2, 9, 8), dict(kernel_size=3)), ((2, 2, 9, 8), dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 1))),
    ((2, 2, 9, 8), dict(kernel_size=3, stride=2, padding=1, dilation=(2, 1), ceil_mode=True)),
    ((1, 3, 7, 7), dict(kernel_size=2, stride=3, ceil_mode=True)),
    ((1, 3, 8, 8), dict(kernel_size=(5, 3), stride=(2, 3), padding=(2, 0), dilation=(1, 2))),
    ((2, 2, 5, 6, 7), dict(kernel_size=2)), ((1, 2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 6, 6, 6), dict(kernel_size=(2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0), dilation=(2, 1, 2))),
]


def dims_of(shape):
    return len(shape) - 2


@pytest.mark.parametrize("shape,kwargs", MAX_GRID, ids=str)
@pytest.mark.parametrize("return_indices", [False, True])
def test_max_pool_matches_torch(shape, kwargs, return_indices):
    check(f"max_pool{dims_of(shape)}d", shape, return_indices=return_indices, **kwargs)


AVG_GRID = [(s, {k: v for k, v in kw.items() if k != "dilation"}) for s, kw in MAX_GRID]


@pytest.mark.parametrize("shape,kwargs", AVG_GRID, ids=str)
@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool_matches_torch(shape, kwargs, count_include_pad):
    check(f"avg_pool{dims_of(shape)}d", shape, exact=False, count_include_pad=count_include_pad, **kwargs)


@pytest.mark.parametrize("shape,kwargs", [s for s in AVG_GRID if len(s[0]) > 3], ids=str)
@pytest.mark.parametrize("divisor", [1, 5, -2])
def test_avg_pool_divisor_override(shape, kwargs, divisor):
    check(f"avg_pool{dims_of(shape)}d", shape, exact=False, divisor_override=divisor, **kwargs)


ADAPTIVE_GRID = [((2, 3, 11), 4), ((2, 3, 11), 11), ((2, 3, 5), 8), ((2, 3, 7), 1), ((1, 2, 9, 8), (4, 3)),
                 ((1, 2, 9, 8), (None, 5)), ((1, 2, 5, 7), 9), ((1, 2, 5, 7), 1), ((1, 2, 6, 7, 5), (3, 2, 4)),
                 ((1, 2, 6, 7, 5), (1, None, 2)), ((1, 1, 4, 4, 4), 1)]


@pytest.mark.parametrize("shape,size", ADAPTIVE_GRID, ids=str)
def test_adaptive_avg_pool_matches_torch(shape, size):
    check(f"adaptive_avg_pool{dims_of(shape)}d", shape, exact=False, output_size=size)


@pytest.mark.parametrize("shape,size", ADAPTIVE_GRID, ids=str)
@pytest.mark.parametrize("return_indices", [False, True])
def test_adaptive_max_pool_matches_torch(shape, size, return_indices):
    check(f"adaptive_max_pool{dims_of(shape)}d", shape, output_size=size, return_indices=return_indices)


LAYOUTS = {  # the same logical input, stored otherwise
    "transposed": lambda t: t.transpose(-1, -2).contiguous().transpose(-1, -2),
    "sliced": lambda t: t[..., ::2],
    "unbatched": lambda t: t[0],
    "empty_batch": lambda t: t[:0],
}
OPS = [("max_pool1d", dict(kernel_size=3, stride=2, padding=1)), ("avg_pool1d", dict(kernel_size=3, padding=1)),
       ("adaptive_avg_pool1d", dict(output_size=3)), ("adaptive_max_pool1d", dict(output_size=4)),
       ("max_pool2d", dict(kernel_size=2, return_indices=True)),
       ("avg_pool2d", dict(kernel_size=3, stride=2, ceil_mode=True, count_include_pad=False)),
       ("adaptive_avg_pool2d", dict(output_size=(2, 3))), ("adaptive_max_pool2d", dict(output_size=3)),
       ("max_pool3d", dict(kernel_size=2, padding=1)), ("avg_pool3d", dict(kernel_size=2, divisor_override=3)),
       ("adaptive_avg_pool3d", dict(output_size=2)), ("adaptive_max_pool3d", dict(output_size=(2, 1, 3)))]


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("name,kwargs", OPS, ids=[o[0] for o in OPS])
def test_layouts(name, kwargs, layout):
    nd = int(name[-2])
    shape = (2, 3) + (8, 6, 5)[:nd]
    if layout == "unbatched" and nd == 1:
        shape = (2, 3, 9)
    data = R.standard_normal(shape)
    (got, ggot), (want, gwant) = run_both(name, data, LAYOUTS[layout], **kwargs)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=4e-16, atol=4e-16)
    np.testing.assert_allclose(ggot, gwant, rtol=1e-14, atol=1e-14)


def test_max_pool_ties_pick_the_first_and_nan_propagates():
    a = np.zeros((1, 1, 4, 4))
    a[0, 0, 1, 1] = a[0, 0, 0, 1] = 5.0  # a tie in the first window
    a[0, 0, 2:, 2:] = -np.inf  # a window of -inf only
    a[0, 0, 3, 0] = np.nan
    a[0, 0, 2, 1] = np.nan  # two NaNs in one window: torch keeps the last
    for kwargs in [dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1), dict(kernel_size=2, stride=1)]:
        f, t = F.max_pool2d(fl.tensor(a), return_indices=True, **kwargs), TF.max_pool2d(
            torch.tensor(a), return_indices=True, **kwargs)
        np.testing.assert_array_equal(f[0].numpy(), t[0].numpy())
        np.testing.assert_array_equal(f[1].numpy(), t[1].numpy())
        f, t = F.adaptive_max_pool2d(fl.tensor(a), 3, True), TF.adaptive_max_pool2d(torch.tensor(a), 3, True)
        np.testing.assert_array_equal(f[0].numpy(), t[0].numpy())
        np.testing.assert_array_equal(f[1].numpy(), t[1].numpy())
    # Gradients of ties go to the chosen element only, as torch's.
    (got, ggot), (want, gwant) = run_both("max_pool2d", np.ones((1, 1, 4, 4)), kernel_size=3, stride=1, padding=1)
    np.testing.assert_array_equal(ggot, gwant)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_lower_precision_dtypes(dtype):
    data = R.standard_normal((2, 3, 9, 8)).astype(np.float32)
    for name, kwargs in OPS:
        if name[-2] != "2":
            continue
        f_in = fl.tensor(data).to(getattr(fl, dtype)).requires_grad_()
        t_in = torch.tensor(data).to(getattr(torch, dtype)).requires_grad_()
        f, t = getattr(F, name)(f_in, **kwargs), getattr(TF, name)(t_in, **kwargs)
        f, t = (f if isinstance(f, tuple) else (f,)), (t if isinstance(t, tuple) else (t,))
        assert str(f[0].dtype).split(".")[-1] == dtype
        tol = 1e-6 if dtype == "float32" else 1e-2
        np.testing.assert_allclose(f[0].float().detach().numpy(), t[0].float().detach().numpy(), rtol=tol, atol=tol)
        f[0].float().sum().backward()
        t[0].float().sum().backward()
        np.testing.assert_allclose(f_in.grad.float().numpy(), t_in.grad.float().numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("name,kwargs", OPS, ids=[o[0] for o in OPS])
def test_gradcheck(name, kwargs):
    nd = int(name[-2])
    x = fl.tensor(R.standard_normal((1, 2) + (5, 4, 3)[:nd])).requires_grad_()
    fn = getattr(F, name)
    assert fl.autograd.gradcheck(lambda t: (lambda r: r[0] if isinstance(r, tuple) else r)(fn(t, **kwargs)), (x,))


def test_same_bits_with_one_and_two_threads():
    data = R.standard_normal((4, 16, 23, 21))
    before = fl.get_num_threads()
    results = []
    try:
        for n in (1, 2):
            fl.set_num_threads(n)
            got = []
            for name, kwargs in OPS:
                if name[-2] != "2":
                    continue
                x = fl.tensor(data).requires_grad_()
                r = getattr(F, name)(x, **kwargs)
                r = r[0] if isinstance(r, tuple) else r
                (r * r).sum().backward()
                got += [r.detach().numpy(), x.grad.numpy()]
            results.append(got)
    finally:
        fl.set_num_threads(before)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


BAD = [
    (lambda: F.max_pool2d(fl.zeros(8, 8), 2), ValueError, ["[max_pool2d]", "3D or 4D", "(8, 8)"]),
    (lambda: F.max_pool1d(fl.zeros(8), 2), ValueError, ["[max_pool1d]", "2D or 3D", "(8,)"]),
    (lambda: F.avg_pool3d(fl.zeros(2, 3), 2), ValueError, ["[avg_pool3d]", "4D or 5D"]),
    (lambda: F.max_pool2d(fl.zeros(2, 3, 8, 8), 3, padding=2), ValueError,
     ["[max_pool2d]", "pad should be at most half of effective kernel size", "pad=(2, 2)", "kernel_size=(3, 3)"]),
    (lambda: F.avg_pool2d(fl.zeros(2, 3, 8, 8), 2, padding=(0, 2)), ValueError,
     ["[avg_pool2d]", "pad should be at most half"]),
    (lambda: F.max_pool2d(fl.zeros(2, 3, 8, 8), 3, padding=-1), ValueError, ["[max_pool2d]", "pad must be non-negative"]),
    (lambda: F.max_pool2d(fl.zeros(2, 3, 8, 8), 0), ValueError, ["[max_pool2d]", "kernel_size should be greater than zero"]),
    (lambda: F.max_pool3d(fl.zeros(1, 2, 4, 4, 4), 2, stride=0), ValueError,
     ["[max_pool3d]", "stride should be greater than zero"]),
    (lambda: F.max_pool2d(fl.zeros(2, 3, 8, 8), 2, dilation=0), ValueError,
     ["[max_pool2d]", "dilation should be greater than zero"]),
    (lambda: F.max_pool2d(fl.zeros(2, 3, 8, 8), (2, 2, 2)), ValueError,
     ["[max_pool2d]", "kernel_size must either be", "2 ints"]),
    (lambda: F.avg_pool2d(fl.zeros(2, 3, 8, 8), 2, stride=(1, 1, 1)), ValueError, ["[avg_pool2d]", "stride"]),
    (lambda: F.max_pool2d(fl.zeros(2, 3, 8, 8), 20), ValueError,
     ["[max_pool2d]", "(3x8x8)", "(3x0x0)", "Output size is too small"]),
    (lambda: F.avg_pool1d(fl.zeros(2, 3, 4), 5), ValueError, ["[avg_pool1d]", "Output size is too small"]),
    (lambda: F.avg_pool2d(fl.zeros(2, 3, 8, 8), 2, divisor_override=0), ValueError,
     ["[avg_pool2d]", "divisor must be not zero"]),
    (lambda: F.max_pool2d(fl.zeros(2, 0, 4, 4), 2), ValueError, ["[max_pool2d]", "non-zero size", "(2, 0, 4, 4)"]),
    (lambda: F.adaptive_avg_pool2d(fl.zeros(2, 3, 0, 4), 2), ValueError, ["[adaptive_avg_pool2d]", "non-zero size"]),
    (lambda: F.adaptive_avg_pool2d(fl.zeros(8), 2), ValueError, ["[adaptive_avg_pool2d]", "3D or 4D", "(8,)"]),
    (lambda: F.adaptive_max_pool2d(fl.zeros(2, 3, 4, 4), (2, 2, 2)), ValueError,
     ["[adaptive_max_pool2d]", "output_size"]),
    (lambda: F.adaptive_avg_pool1d(fl.zeros(2, 3, 4), -1), ValueError,
     ["[adaptive_avg_pool1d]", "output_size must be non-negative"]),
    (lambda: F.max_pool2d(fl.zeros(2, 3, 4, 4, dtype=fl.int32), 2), TypeError, ["[max_pool2d]", "floating point"]),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    call, error, words = BAD[i]
    assert_raises_naming(call, error, words)


def test_ceil_mode_drops_a_window_starting_in_the_right_padding():
    # in 5, kernel 2, stride 2, pad 1: ceil gives 4 windows, the last would start at 6 >= in + pad.
    for kwargs in [dict(kernel_size=2, stride=2, padding=1, ceil_mode=True), dict(kernel_size=3, stride=3, ceil_mode=True)]:
        a = R.standard_normal((1, 1, 5))
        assert F.max_pool1d(fl.tensor(a), **kwargs).shape == TF.max_pool1d(torch.tensor(a), **kwargs).shape
        assert F.avg_pool1d(fl.tensor(a), **kwargs).shape == TF.avg_pool1d(torch.tensor(a), **kwargs).shape


def test_stride_none_and_single_values():
    a = R.standard_normal((1, 2, 6, 6))
    np.testing.assert_array_equal(F.max_pool2d(fl.tensor(a), 2, None).numpy(), TF.max_pool2d(torch.tensor(a), 2).numpy())
    np.testing.assert_array_equal(F.avg_pool2d(fl.tensor(a), [2], stride=None).numpy(),
                                  TF.avg_pool2d(torch.tensor(a), 2).numpy())
    np.testing.assert_array_equal(fl._C._nn.avg_pool2d(fl.tensor(a), 2).numpy(), TF.avg_pool2d(torch.tensor(a), 2).numpy())


MODULES = [
    ("MaxPool1d", (3,), {}), ("MaxPool2d", (3, 2, 1), dict(return_indices=True)),
    ("MaxPool3d", ((2, 3, 3),), dict(ceil_mode=True)), ("AvgPool1d", (3,), {}),
    ("AvgPool1d", (3, 2, 1, True, False), {}), ("AvgPool2d", (3,), {}),
    ("AvgPool2d", ((2, 3),), dict(divisor_override=2)), ("AvgPool3d", (2,), dict(ceil_mode=True)),
    ("AdaptiveAvgPool1d", (3,), {}), ("AdaptiveAvgPool2d", ((None, 3),), {}), ("AdaptiveAvgPool3d", (2,), {}),
    ("AdaptiveMaxPool1d", (3,), {}), ("AdaptiveMaxPool2d", ((2, None),), dict(return_indices=True)),
    ("AdaptiveMaxPool3d", (1,), {}),
]


@pytest.mark.parametrize("name,args,kwargs", MODULES, ids=str)
def test_modules_match_torch(name, args, kwargs):
    f_mod, t_mod = getattr(fl.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(f_mod) == repr(t_mod)
    nd = int(name[-2])
    a = R.standard_normal((2, 3) + (7, 6, 5)[:nd])
    f, t = f_mod(fl.tensor(a)), t_mod(torch.tensor(a))
    f, t = (f if isinstance(f, tuple) else (f,)), (t if isinstance(t, tuple) else (t,))
    assert len(f) == len(t)
    for g, w in zip(f, t):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=4e-16, atol=4e-16)
    assert list(f_mod.parameters()) == []


def test_in_a_model_training_step():
    model = fl.nn.Sequential(fl.nn.MaxPool2d(2), fl.nn.AvgPool2d(2, padding=1), fl.nn.AdaptiveAvgPool2d(1),
                             fl.nn.Flatten(), fl.nn.Linear(3, 2))
    x = fl.tensor(R.standard_normal((4, 3, 12, 12)).astype(np.float32))
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("nd,kind", itertools.product([1, 2, 3], ["max", "avg"]))
def test_results_do_not_alias_the_input(nd, kind):
    a = R.standard_normal((1, 2) + (4,) * nd)
    x = fl.tensor(a)
    y = getattr(F, f"{kind}_pool{nd}d")(x, 1)
    y.add_(1.0)
    np.testing.assert_array_equal(x.numpy(), a)
