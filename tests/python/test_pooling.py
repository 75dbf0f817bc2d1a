"""Pooling (src/flambeau/nn/pooling.cpp, unpooling.cpp) against PyTorch 2.13: max_pool,
avg_pool, adaptive_avg_pool, adaptive_max_pool, lp_pool and max_unpool in 1-3 dims over a grid
of strides, paddings, dilations, ceil_mode, count_include_pad and divisor_override, and integer
inputs. float64 values and indices are torch's bits (averages within a couple of roundoffs),
gradients for a random upstream gradient within float64 roundoff, finite differences agree,
results are the same with 1 and 2 threads, bad input raises naming the op, and the modules'
reprs are torch's."""
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
     ["[max_pool2d]", "pad should be at most half of kernel size", "pad=(2, 2)", "kernel_size=(3, 3)"]),
    # Half the kernel, not of the dilated window (torch refuses this one too).
    (lambda: F.max_pool2d(fl.zeros(2, 3, 9, 9), 3, 1, 2, dilation=2), ValueError,
     ["[max_pool2d]", "pad should be at most half of kernel size", "dilation=(2, 2)"]),
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
    (lambda: F.max_pool2d(fl.zeros(2, 3, 4, 4, dtype=fl.bool), 2), NotImplementedError, ["[max_pool2d]", "bool"]),
    (lambda: F.avg_pool2d(fl.zeros(2, 3, 4, 4, dtype=fl.int32), 2), NotImplementedError,
     ["[avg_pool2d]", "int32", "floating point or int64"]),
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


# ---- max_unpool (nn/unpooling.cpp) --------------------------------------------------------------
UNPOOL_GRID = [  # (dims, input shape, kernel_size, stride, padding, output_size): max_pool, then max_unpool
    (1, (2, 3, 12), 3, None, 0, None), (1, (2, 3, 11), 3, 2, 1, None), (1, (2, 3, 10), 2, 3, 0, (10,)),
    (1, (3, 9), 2, None, 1, (9,)), (1, (2, 3, 10), 3, 2, 1, (2, 3, 10)),
    (2, (2, 2, 9, 8), 3, None, 0, (9, 8)), (2, (2, 2, 9, 8), (3, 2), (2, 1), (1, 1), None),
    (2, (1, 3, 7, 7), 2, 3, 0, (7, 6)), (2, (2, 7, 7), 3, 2, 1, [7, 7]), (2, (1, 2, 9, 8), 2, None, 0, (1, 2, 9, 8)),
    (3, (1, 2, 5, 6, 7), 2, None, 0, (5, 6, 7)), (3, (1, 2, 5, 6, 7), 3, 2, 1, (1, 2, 5, 6, 7)),
    (3, (2, 6, 6, 6), (2, 3, 2), (1, 2, 3), (1, 1, 0), (6, 6, 6)),
]


@pytest.mark.parametrize("nd,shape,kernel_size,stride,padding,output_size", UNPOOL_GRID, ids=str)
def test_max_unpool_matches_torch(nd, shape, kernel_size, stride, padding, output_size):
    v, i = getattr(TF, f"max_pool{nd}d")(torch.tensor(R.standard_normal(shape)), kernel_size, stride, padding,
                                          return_indices=True)
    v = v.numpy()
    g = None
    results = []
    for lib, fn in ((torch, getattr(TF, f"max_unpool{nd}d")), (fl, getattr(F, f"max_unpool{nd}d"))):
        x = lib.tensor(v).requires_grad_()
        idx = i if lib is torch else fl.tensor(i.numpy())
        y = fn(x, idx, kernel_size, stride, padding, output_size)
        if g is None:
            g = R.standard_normal(tuple(y.shape))
        (y * lib.tensor(g)).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), y.grad_fn.name()))
    (want, gwant, nwant), (got, ggot, ngot) = results
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ggot, gwant)  # a gather: exact
    assert ngot == nwant


def test_max_unpool_layouts_dtypes_and_gradcheck():
    a = R.standard_normal((2, 3, 8, 6))
    v, i = TF.max_pool2d(torch.tensor(a), 2, return_indices=True)
    fv, fi = fl.tensor(v.numpy()), fl.tensor(i.numpy())
    want = TF.max_unpool2d(v, i, 2).numpy()
    for make in [lambda t: t.transpose(-1, -2).contiguous().transpose(-1, -2), lambda t: t[:0], lambda t: t[0]]:
        got = F.max_unpool2d(make(fv), make(fi), 2).numpy()
        np.testing.assert_array_equal(got, make(torch.tensor(want)).numpy())
    for dtype in ["float32", "float16", "bfloat16"]:
        f = F.max_unpool2d(fv.to(getattr(fl, dtype)), fi, 2)
        t = TF.max_unpool2d(v.to(getattr(torch, dtype)), i, 2)
        assert str(f.dtype).split(".")[-1] == dtype
        np.testing.assert_array_equal(f.float().numpy(), t.float().numpy())
    x = fl.tensor(v.numpy()[:1, :2]).requires_grad_()
    assert fl.autograd.gradcheck(lambda t: F.max_unpool2d(t, fi[:1, :2], 2, output_size=(9, 7)), (x,))


def test_max_unpool_repeated_index_keeps_the_last_value():
    v, i = fl.tensor([[[1.0, 2.0, 3.0]]]), fl.tensor([[[1, 1, 0]]])
    t = TF.max_unpool1d(torch.tensor([[[1.0, 2.0, 3.0]]]), torch.tensor([[[1, 1, 0]]]), 2)
    np.testing.assert_array_equal(F.max_unpool1d(v, i, 2).numpy(), t.numpy())
    np.testing.assert_array_equal(F.max_unpool1d(v, i, 2).numpy(), [[[3.0, 2.0, 0, 0, 0, 0]]])


UNPOOL_BAD = [  # (flambeau call, torch call, flambeau error, words)
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=2), lambda v, i: (v, i + 100), IndexError,
     ["[max_unpool2d]", "invalid max index: 100", "output volumes are of size 4x4"]),
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=2), lambda v, i: (v, i - 100), IndexError,
     ["[max_unpool2d]", "invalid max index: -"]),
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=2, output_size=(6, 5)), lambda v, i: (v, i), ValueError,
     ["[max_unpool2d]", "invalid output_size (6, 5) (dim 0 must be between 2 and 6)"]),
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=2, output_size=(3, 5, 5)), lambda v, i: (v, i), ValueError,
     ["[max_unpool2d]", "output_size should be a sequence containing 2 or 4 elements, but it has a length of '3'"]),
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=2), lambda v, i: (v, i.float()), TypeError,
     ["[max_unpool2d]", "indices should be type int64", "float32"]),
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=2), lambda v, i: (v, i[:, :2]), ValueError,
     ["[max_unpool2d]", "(2, 3, 2, 2)", "(2, 2, 2, 2)"]),
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=2), lambda v, i: (v[0, 0], i[0, 0]), ValueError,
     ["[max_unpool2d]", "3D or 4D", "(2, 2)"]),
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=2), lambda v, i: (v[:, :0], i[:, :0]), ValueError,
     ["[max_unpool2d]", "non-zero size", "(2, 0, 2, 2)"]),
    ("max_unpool2d", (2, 3, 2, 2), dict(kernel_size=1, stride=1, padding=2), lambda v, i: (v, i), ValueError,
     ["[max_unpool2d]", "output_size must contain non-negative spatial dimensions", "output_size[0]=-2"]),
    ("max_unpool3d", (1, 2, 2, 2, 2), dict(kernel_size=2, stride=0), lambda v, i: (v, i), ValueError,
     ["[max_unpool3d]", "strides should be greater than zero", "(0, 0, 0)"]),
    ("max_unpool1d", (2, 3, 4), dict(kernel_size=2, output_size=[10]), lambda v, i: (v, i), ValueError,
     ["[max_unpool1d]", "invalid output_size (10,) (dim 0 must be between 6 and 10)"]),
]


@pytest.mark.parametrize("i", range(len(UNPOOL_BAD)))
def test_max_unpool_bad_input_raises_as_torch(i):
    name, shape, kwargs, make, error, words = UNPOOL_BAD[i]
    v, idx = torch.zeros(shape, dtype=torch.float64), torch.zeros(shape, dtype=torch.int64)
    tv, ti = make(v, idx)
    with pytest.raises((RuntimeError, ValueError)):
        getattr(TF, name)(tv, ti, **kwargs)
    fv, fi = make(fl.tensor(v.numpy()), fl.tensor(idx.numpy()))
    assert_raises_naming(lambda: getattr(F, name)(fv, fi, **kwargs), error, words)


def test_max_unpool_of_integer_input_is_refused_as_torch():
    with pytest.raises(NotImplementedError):
        TF.max_unpool2d(torch.zeros(1, 1, 2, 2, dtype=torch.int64), torch.zeros(1, 1, 2, 2, dtype=torch.int64), 2)
    assert_raises_naming(lambda: F.max_unpool2d(fl.zeros(1, 1, 2, 2, dtype=fl.int64),
                                                fl.zeros(1, 1, 2, 2, dtype=fl.int64), 2),
                         NotImplementedError, ["[max_unpool2d]", "int64"])


# ---- lp_pool (composite: nn/pooling.cpp, Note [lp_pool]) ---------------------------------------
LP_GRID = [  # (dims, shape, kernel_size, stride, ceil_mode)
    (1, (2, 3, 11), 3, None, False), (1, (2, 3, 11), 4, 2, True), (1, (3, 10), 2, 3, True),
    (2, (2, 2, 9, 8), 3, None, False), (2, (2, 2, 9, 8), (3, 2), (2, 1), True), (2, (2, 7, 7), 2, 3, True),
    (3, (1, 2, 5, 6, 7), 2, None, False), (3, (1, 2, 5, 6, 7), (2, 3, 2), (1, 2, 3), True),
]


@pytest.mark.parametrize("nd,shape,kernel_size,stride,ceil_mode", LP_GRID, ids=str)
@pytest.mark.parametrize("p", [1, 2, 3, 1.5, 2.5, float("inf"), -float("inf")])
def test_lp_pool_matches_torch(nd, shape, kernel_size, stride, ceil_mode, p):
    # Positive data for p whose root of a negative sum is NaN; any sign for p = 1, 2, +-inf.
    data = np.abs(R.standard_normal(shape)) + 0.1 if p in (3, 1.5, 2.5) else R.standard_normal(shape)
    upstream = None
    results = []
    for lib, fn in ((torch, getattr(TF, f"lp_pool{nd}d")), (fl, getattr(F, f"lp_pool{nd}d"))):
        x = lib.tensor(data).requires_grad_()
        y = fn(x, p, kernel_size, stride, ceil_mode)
        if upstream is None:
            upstream = R.standard_normal(tuple(y.shape))
        (y * lib.tensor(upstream)).sum().backward()
        results.append((y.detach().numpy(), x.grad.numpy(), y.grad_fn.name()))
    (want, gwant, nwant), (got, ggot, ngot) = results
    assert got.shape == want.shape and got.dtype == want.dtype
    # A few roundoffs of the window sum and of pow (float64).
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(ggot, gwant, rtol=1e-12, atol=1e-12)
    assert ngot == nwant


def test_lp_pool_float32_gradcheck_and_a_zero_window():
    data = R.standard_normal((2, 3, 8, 8)).astype(np.float32)
    f, t = F.lp_pool2d(fl.tensor(data), 2.0, 2), TF.lp_pool2d(torch.tensor(data), 2.0, 2)
    np.testing.assert_allclose(f.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)
    x = fl.tensor(np.abs(R.standard_normal((1, 2, 7))) + 0.2).requires_grad_()
    assert fl.autograd.gradcheck(lambda t: F.lp_pool1d(t, 3.0, 3, 2), (x,))
    # A window of zeros, and odd p on negative sums (NaN), have torch's values and gradients.
    a = np.array([[[0.0, 0.0, 1.0, -2.0, 0.5, 3.0]]])
    for p in [2, 3, 1.5, 1]:
        fx, tx = fl.tensor(a).requires_grad_(), torch.tensor(a).requires_grad_()
        fy, ty = F.lp_pool1d(fx, p, 2), TF.lp_pool1d(tx, p, 2)
        fy.sum().backward()
        ty.sum().backward()
        np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-14, atol=0)
        np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-14, atol=0)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("p", [2, 2.0, 3, float("inf")])
@pytest.mark.parametrize("nd", [1, 2])
def test_lp_pool_integer_inputs_as_torch(dtype, p, nd):
    a = np.array([1, 2, 3, 4, 5, 7]).reshape((1, 1, 6) if nd == 1 else (1, 1, 2, 3))
    k = 2 if nd == 1 else (1, 2)
    t_in, f_in = torch.tensor(a).to(getattr(torch, dtype)), fl.tensor(a).to(getattr(fl, dtype))
    try:
        want = getattr(TF, f"lp_pool{nd}d")(t_in, p, k)
    except NotImplementedError:
        with pytest.raises((NotImplementedError, TypeError)) as info:
            getattr(F, f"lp_pool{nd}d")(f_in, p, k)
        assert "[" in str(info.value)
        return
    got = getattr(F, f"lp_pool{nd}d")(f_in, p, k)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


# ---- integer inputs to the max and average poolings ------------------------------------------------
INT_OPS = [("max_pool1d", dict(kernel_size=2)), ("max_pool1d", dict(kernel_size=3, padding=1, return_indices=True)),
           ("max_pool2d", dict(kernel_size=2, stride=1, padding=1, return_indices=True)),
           ("max_pool2d", dict(kernel_size=3, dilation=2, ceil_mode=True)),
           ("max_pool3d", dict(kernel_size=2, return_indices=True)),
           ("adaptive_max_pool1d", dict(output_size=3)), ("adaptive_max_pool2d", dict(output_size=3)),
           ("adaptive_max_pool3d", dict(output_size=2)),
           ("avg_pool1d", dict(kernel_size=3, padding=1)), ("avg_pool1d", dict(kernel_size=3, padding=1,
                                                                                count_include_pad=False)),
           ("avg_pool2d", dict(kernel_size=2, ceil_mode=True)),
           ("avg_pool2d", dict(kernel_size=2, divisor_override=-3)),
           ("avg_pool3d", dict(kernel_size=2, padding=1)),
           ("adaptive_avg_pool1d", dict(output_size=3)), ("adaptive_avg_pool2d", dict(output_size=2))]


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64", "bool"])
@pytest.mark.parametrize("name,kwargs", INT_OPS, ids=str)
def test_integer_inputs_as_torch(name, kwargs, dtype):
    nd = int(name[-2])
    a = R.integers(-100, 100, (2, 3) + (7, 6, 5)[:nd])
    if dtype in ("uint8", "bool"):
        a = np.abs(a) % (2 if dtype == "bool" else 256)
    t_in, f_in = torch.tensor(a).to(getattr(torch, dtype)), fl.tensor(a).to(getattr(fl, dtype))
    try:
        want = getattr(TF, name)(t_in, **kwargs)
    except NotImplementedError:
        assert_raises_naming(lambda: getattr(F, name)(f_in, **kwargs), NotImplementedError, [f"[{name}]", dtype])
        return
    got = getattr(F, name)(f_in, **kwargs)
    got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
    for g, w in zip(got, want):
        assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), w.numpy())


def test_integer_extremes_and_padding():
    for dtype, lo in [(torch.int8, -128), (torch.int64, torch.iinfo(torch.int64).min)]:
        a = torch.full((1, 1, 2, 2), lo, dtype=dtype)
        want = TF.max_pool2d(a, 2, 1, 1, return_indices=True)
        got = F.max_pool2d(fl.tensor(a.numpy()), 2, 1, 1, return_indices=True)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    # INT64_MIN / -1 wraps (two's complement) instead of trapping (torch 2.13 dies of SIGFPE here).
    big = np.array([[[np.iinfo(np.int64).min, 0, 5, -7]]])
    np.testing.assert_array_equal(F.avg_pool2d(fl.tensor(big), (1, 1), divisor_override=-1).numpy(),
                                  [[[np.iinfo(np.int64).min, 0, -5, 7]]])


# ---- torch's *_with_indices names and the new modules ----------------------------------------------
@pytest.mark.parametrize("name,args", [("max_pool1d_with_indices", (3, 2, 1)), ("max_pool2d_with_indices", ((2, 3),)),
                                       ("max_pool3d_with_indices", (2, 1, 1, 1, True)),
                                       ("adaptive_max_pool1d_with_indices", (4,)),
                                       ("adaptive_max_pool2d_with_indices", ((3, None),)),
                                       ("adaptive_max_pool3d_with_indices", (2, False))])
def test_with_indices_names(name, args):
    nd = int(name.split("_with")[0][-2])
    a = R.standard_normal((2, 3) + (7, 6, 5)[:nd])
    got, want = getattr(F, name)(fl.tensor(a), *args), getattr(TF, name)(torch.tensor(a), *args)
    assert isinstance(got, tuple) and len(got) == len(want) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.numpy(), w.numpy())


NEW_MODULES = [("LPPool1d", (2, 3), {}), ("LPPool2d", (1.5, (2, 3), 2), dict(ceil_mode=True)),
               ("LPPool3d", (float("inf"), 2), {}), ("LPPool2d", (3, 2), dict(stride=(1, 2)))]


@pytest.mark.parametrize("name,args,kwargs", NEW_MODULES, ids=str)
def test_lp_pool_modules_match_torch(name, args, kwargs):
    f_mod, t_mod = getattr(fl.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(f_mod) == repr(t_mod)
    nd = int(name[-2])
    a = np.abs(R.standard_normal((2, 3) + (7, 6, 5)[:nd])) + 0.1
    np.testing.assert_allclose(f_mod(fl.tensor(a)).numpy(), t_mod(torch.tensor(a)).numpy(), rtol=1e-13, atol=1e-13)
    assert list(f_mod.parameters()) == []


@pytest.mark.parametrize("nd,args,kwargs", [(1, (3,), {}), (2, (2, 1), dict(padding=0)), (2, ((3, 2), (2, 1), 1), {}),
                                            (3, (2,), dict(stride=2, padding=1))], ids=str)
def test_max_unpool_modules_match_torch(nd, args, kwargs):
    f_pool = getattr(fl.nn, f"MaxPool{nd}d")(*args, **kwargs, return_indices=True)
    t_pool = getattr(torch.nn, f"MaxPool{nd}d")(*args, **kwargs, return_indices=True)
    f_un = getattr(fl.nn, f"MaxUnpool{nd}d")(*args, **kwargs)
    t_un = getattr(torch.nn, f"MaxUnpool{nd}d")(*args, **kwargs)
    assert repr(f_un) == repr(t_un)
    a = R.standard_normal((2, 3) + (7, 6, 5)[:nd])
    for size in [None, a.shape, a.shape[2:]]:
        try:
            t = t_un(*t_pool(torch.tensor(a)), output_size=size)
        except RuntimeError:  # the default size is smaller than the input: indices out of range
            with pytest.raises(IndexError, match=rf"\[max_unpool{nd}d\] found an invalid max index"):
                f_un(*f_pool(fl.tensor(a)), output_size=size)
            continue
        np.testing.assert_array_equal(f_un(*f_pool(fl.tensor(a)), output_size=size).numpy(), t.numpy())
    assert list(f_un.parameters()) == []


def test_max_unpool_output_size_must_be_a_sequence_as_torch():
    v, i = TF.max_pool2d(torch.randn(1, 1, 4, 4), 2, return_indices=True)
    with pytest.raises(TypeError):
        TF.max_unpool2d(v, i, 2, output_size=4)
    fv, fi = fl.tensor(v.numpy()), fl.tensor(i.numpy())
    assert_raises_naming(lambda: F.max_unpool2d(fv, fi, 2, output_size=4), TypeError,
                         ["[max_unpool2d]", "output_size must be a sequence"])
    assert tuple(F.max_unpool2d(fv, fi, 2, output_size=(4, 4)).shape) == (1, 1, 4, 4)
