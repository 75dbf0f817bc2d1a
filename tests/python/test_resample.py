"""Resampling (src/flambeau/nn/resample.cpp) against PyTorch 2.13: F.interpolate in every mode
x align_corners x size / scale_factor (integer, non-integer, per dim, recomputed) x 1-3
spatial dims, up and down, odd sizes; pixel_shuffle / pixel_unshuffle; unfold / fold; the
modules. float64 gradients of every mode are torch's bits, and so are the values of the
nearest modes, linear and trilinear; bilinear and bicubic values agree within a few roundoffs
(torch's 2-d kernels sum in another order, not yet matched). Finite differences agree,
results are the same with 1 and 2 threads, bad input raises naming the op. antialias=True
(bilinear / bicubic, 4-d) is checked in its own section below."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import flambeau as fl
import flambeau.nn.functional as F
from conftest import assert_raises_naming

R = np.random.default_rng(22)

SHAPES = {1: (2, 3, 7), 2: (2, 3, 7, 5), 3: (1, 2, 4, 5, 3)}
MODES = [("nearest", 1), ("nearest", 2), ("nearest", 3), ("nearest-exact", 1), ("nearest-exact", 2),
         ("nearest-exact", 3), ("linear", 1), ("bilinear", 2), ("bicubic", 2), ("trilinear", 3),
         ("area", 1), ("area", 2), ("area", 3)]
SIZES = [dict(size=13), dict(size=3), dict(size=[9, 4, 6]), dict(scale_factor=2), dict(scale_factor=1.7),
         dict(scale_factor=0.6), dict(scale_factor=2.1), dict(scale_factor=[2.5, 0.4, 1.3]),
         dict(scale_factor=1.7, recompute_scale_factor=True), dict(scale_factor=0.45, recompute_scale_factor=False),
         dict(size="same")]


def fix(kw, dims, shape):
    kw = dict(kw)
    for k in ("size", "scale_factor"):
        if isinstance(kw.get(k), list):
            kw[k] = kw[k][:dims]
    if kw.get("size") == "same":
        kw["size"] = list(shape[2:])
    return kw


def run_both(data, make=lambda t: t, **kw):
    out, upstream = [], None
    for lib, fn in ((fl, F.interpolate), (torch, TF.interpolate)):
        x = (fl.tensor(data) if lib is fl else torch.tensor(data)).requires_grad_()
        y = fn(make(x), **kw)
        if upstream is None:
            upstream = R.standard_normal(tuple(y.shape))
        (y * (fl.tensor(upstream) if lib is fl else torch.tensor(upstream))).sum().backward()
        out.append((y.detach().numpy(), x.grad.numpy()))
    return out


GRID = [(m, d, ac) for m, d in MODES for ac in ([None] if m in ("nearest", "nearest-exact", "area")
                                                  else [None, False, True])]


@pytest.mark.parametrize("mode,dims,align_corners", GRID, ids=str)
@pytest.mark.parametrize("kw", SIZES, ids=str)
def test_interpolate_matches_torch(mode, dims, kw, align_corners):
    shape = SHAPES[dims]
    kw = fix(kw, dims, shape)
    (y, gx), (ty, tgx) = run_both(R.standard_normal(shape), mode=mode, align_corners=align_corners, **kw)
    assert y.shape == ty.shape and y.dtype == ty.dtype
    if mode in ("bilinear", "bicubic", "area"):  # see the module docstring
        np.testing.assert_allclose(y, ty, rtol=1e-14, atol=1e-14)
    else:
        np.testing.assert_array_equal(y, ty)
    if mode == "area":
        np.testing.assert_allclose(gx, tgx, rtol=1e-14, atol=1e-14)
    else:
        np.testing.assert_array_equal(gx, tgx)


@pytest.mark.parametrize("mode,dims", [m for m in MODES if m[0] != "area"], ids=str)
def test_float32_matches_torch(mode, dims):
    a = R.standard_normal(SHAPES[dims]).astype(np.float32)
    y = F.interpolate(fl.tensor(a), scale_factor=1.7, mode=mode).numpy()
    ty = TF.interpolate(torch.tensor(a), scale_factor=1.7, mode=mode).numpy()
    assert y.dtype == np.float32
    if mode.startswith("nearest"):
        np.testing.assert_array_equal(y, ty)
    else:
        np.testing.assert_allclose(y, ty, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_types_compute_in_float32(dtype):
    a = R.standard_normal((2, 3, 6, 5)).astype(np.float32)
    x = fl.tensor(a).to(getattr(fl, dtype))
    y = F.interpolate(x, scale_factor=1.5, mode="bilinear")
    assert y.dtype == getattr(fl, dtype)
    want = F.interpolate(x.float(), scale_factor=1.5, mode="bilinear").to(getattr(fl, dtype))
    np.testing.assert_array_equal(y.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("mode,dims", [("nearest", 2), ("linear", 1), ("bilinear", 2), ("bicubic", 2),
                                       ("trilinear", 3), ("nearest-exact", 3)], ids=str)
def test_non_contiguous_input(mode, dims):
    shape = SHAPES[dims]
    a = R.standard_normal(shape[:2] + tuple(2 * s for s in shape[2:]))
    sl = (slice(None), slice(None)) + (slice(None, None, 2),) * dims
    (y, gx), (ty, tgx) = run_both(a, make=lambda t: t[sl].transpose(0, 1), scale_factor=1.5, mode=mode)
    np.testing.assert_allclose(y, ty, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(gx, tgx, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic"])
def test_empty_batch(mode):
    x = fl.zeros(0, 3, 4, 5).requires_grad_()
    y = F.interpolate(x, scale_factor=2, mode=mode)
    assert tuple(y.shape) == (0, 3, 8, 10)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 4, 5)


@pytest.mark.parametrize("mode,dims", [("nearest", 1), ("linear", 1), ("bilinear", 2), ("bicubic", 2),
                                       ("trilinear", 3), ("nearest-exact", 2)], ids=str)
def test_gradcheck(mode, dims):
    shape = (1, 2) + (4, 3, 3)[:dims]
    x = fl.tensor(R.standard_normal(shape)).requires_grad_()
    kw = dict(scale_factor=1.6, mode=mode)
    if mode not in ("nearest", "nearest-exact"):
        kw["align_corners"] = dims == 2
    assert fl.autograd.gradcheck(lambda t: F.interpolate(t, **kw), (x,))


@pytest.mark.parametrize("mode,dims", [("nearest", 2), ("linear", 1), ("bilinear", 2), ("bicubic", 2),
                                       ("trilinear", 3)], ids=str)
def test_same_bits_with_1_and_2_threads(mode, dims):
    shape = (3, 7) + (9, 11, 6)[:dims]
    a = R.standard_normal(shape).astype(np.float32)
    g = None
    results = []
    before = fl.get_num_threads()
    try:
        for n in (1, 2):
            fl.set_num_threads(n)
            x = fl.tensor(a).requires_grad_()
            y = F.interpolate(x, scale_factor=1.7, mode=mode)
            if g is None:
                g = fl.tensor(R.standard_normal(tuple(y.shape)).astype(np.float32))
            (y * g).sum().backward()
            results.append((y.detach().numpy(), x.grad.numpy()))
    finally:
        fl.set_num_threads(before)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_grad_fn_names_match_torch():
    for mode, dims in MODES:
        if mode == "area":
            continue
        a = R.standard_normal(SHAPES[dims])
        y = F.interpolate(fl.tensor(a).requires_grad_(), scale_factor=2, mode=mode)
        ty = TF.interpolate(torch.tensor(a).requires_grad_(), scale_factor=2, mode=mode)
        assert type(ty.grad_fn).__name__ == y.grad_fn.name(), mode


BAD = [  # (kwargs, input shape, error, words)
    (dict(size=4, scale_factor=2), (1, 2, 5), ValueError, ["interpolate", "only one of size or scale_factor"]),
    (dict(), (1, 2, 5), ValueError, ["interpolate", "either size or scale_factor"]),
    (dict(size=[4, 4]), (1, 2, 5), ValueError, ["interpolate", "[5]", "[4, 4]"]),
    (dict(scale_factor=[2.0]), (1, 2, 5, 5), ValueError, ["interpolate", "[5, 5]", "scale_factor"]),
    (dict(size=4, align_corners=True), (1, 2, 5), ValueError, ["interpolate", "align_corners"]),
    (dict(size=4, mode="nearest-exact", align_corners=False), (1, 2, 5), ValueError, ["interpolate", "align_corners"]),
    (dict(size=4, recompute_scale_factor=True), (1, 2, 5), ValueError, ["interpolate", "recompute_scale_factor"]),
    (dict(size=4, mode="bilinear"), (1, 2, 5), NotImplementedError, ["interpolate", "3D", "bilinear", "4D"]),
    (dict(size=4, mode="linear"), (1, 2, 5, 5), NotImplementedError, ["interpolate", "4D", "linear", "3D"]),
    (dict(size=4, mode="trilinear"), (1, 2, 5, 5), NotImplementedError, ["interpolate", "trilinear", "5D"]),
    (dict(size=4, mode="bicubic"), (1, 2, 5, 5, 5), NotImplementedError, ["interpolate", "bicubic"]),
    (dict(size=4), (2, 5), NotImplementedError, ["interpolate", "Only 3D, 4D and 5D", "got 2D"]),
    (dict(size=4, mode="cubic"), (1, 2, 5), NotImplementedError, ["interpolate", "got cubic"]),
    (dict(size=0), (1, 2, 5, 5), ValueError, ["interpolate", "greater than 0", "(H: 5, W: 5)", "(H: 0, W: 0)"]),
    (dict(scale_factor=0.1), (1, 2, 5), ValueError, ["interpolate", "greater than 0", "(W: 0)"]),
    (dict(size=[2.5]), (1, 2, 5), TypeError, ["interpolate", "expected size to be one of int"]),
    (dict(size=4, mode="bilinear", antialias=True), (1, 2, 5), ValueError, ["interpolate", "Anti-alias"]),
    (dict(size=4, mode="nearest", antialias=True), (1, 2, 5, 5), ValueError, ["interpolate", "Anti-alias"]),
    (dict(size=4, mode="linear", antialias=True), (1, 2, 5), ValueError, ["interpolate", "Anti-alias"]),
    (dict(size=4, mode="trilinear", antialias=True), (1, 2, 5, 5, 5), ValueError, ["interpolate", "Anti-alias"]),
    (dict(size=4, mode="bicubic", antialias=True), (1, 2, 5, 5, 5), ValueError, ["interpolate", "Anti-alias"]),
    (dict(size=4, mode="area", antialias=True), (1, 2, 5, 5), ValueError, ["interpolate", "Anti-alias"]),
    (dict(size=4, mode="nearest-exact", antialias=True), (1, 2, 5, 5), ValueError, ["interpolate", "Anti-alias"]),
]


@pytest.mark.parametrize("kw,shape,error,words", BAD, ids=str)
def test_bad_input_raises_naming_the_op(kw, shape, error, words):
    a = R.standard_normal(shape)
    assert_raises_naming(lambda: F.interpolate(fl.tensor(a), **kw), error, words)
    with pytest.raises((error, RuntimeError)):  # torch raises the same kind
        TF.interpolate(torch.tensor(a), **kw)


# ---- pixel_shuffle / pixel_unshuffle -----------------------------------------------------------
@pytest.mark.parametrize("shape,r", [((2, 8, 3, 5), 2), ((18, 2, 3), 3), ((2, 3, 4, 2, 3), 2), ((1, 5, 4, 4), 1)],
                         ids=str)
def test_pixel_shuffle_matches_torch(shape, r):
    a = R.standard_normal(shape)
    for name in ("pixel_shuffle", "pixel_unshuffle"):
        data = a if name == "pixel_shuffle" else TF.pixel_shuffle(torch.tensor(a), r).numpy()
        x, t = fl.tensor(data).requires_grad_(), torch.tensor(data).requires_grad_()
        y, ty = getattr(F, name)(x, r), getattr(TF, name)(t, r)
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        assert y.is_contiguous()
        g = R.standard_normal(tuple(ty.shape))
        (y * fl.tensor(g)).sum().backward()
        (ty * torch.tensor(g)).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


def test_pixel_shuffle_round_trip_and_non_contiguous():
    a = R.standard_normal((2, 8, 6, 4))
    x = fl.tensor(a).transpose(-1, -2)
    np.testing.assert_array_equal(F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2).numpy(), x.numpy())
    np.testing.assert_array_equal(F.pixel_unshuffle(x, 2).numpy(),
                                  TF.pixel_unshuffle(torch.tensor(a).transpose(-1, -2), 2).numpy())


PIXEL_BAD = [
    ("pixel_shuffle", (4, 4), 2, ["pixel_shuffle", "at least 3 dimensions", "2 dimension(s)"]),
    ("pixel_shuffle", (1, 4, 2, 2), 0, ["pixel_shuffle", "positive upscale_factor"]),
    ("pixel_shuffle", (1, 6, 2, 2), 2, ["pixel_shuffle", "input.size(-3)=6", "divisible by 4"]),
    ("pixel_unshuffle", (4, 4), 2, ["pixel_unshuffle", "at least 3 dimensions"]),
    ("pixel_unshuffle", (1, 1, 4, 4), -1, ["pixel_unshuffle", "positive downscale_factor"]),
    ("pixel_unshuffle", (1, 1, 5, 4), 2, ["pixel_unshuffle", "height", "input.size(-2)=5"]),
    ("pixel_unshuffle", (1, 1, 4, 5), 2, ["pixel_unshuffle", "width", "input.size(-1)=5"]),
]


@pytest.mark.parametrize("name,shape,r,words", PIXEL_BAD, ids=str)
def test_pixel_shuffle_bad_input(name, shape, r, words):
    a = R.standard_normal(shape)
    assert_raises_naming(lambda: getattr(F, name)(fl.tensor(a), r), ValueError, words)
    with pytest.raises(RuntimeError):
        getattr(TF, name)(torch.tensor(a), r)


# ---- modules -----------------------------------------------------------------------------------
MODULES = [
    ("Upsample", dict(scale_factor=2)), ("Upsample", dict(size=(5, 7), mode="bilinear", align_corners=False)),
    ("Upsample", dict(scale_factor=(2, 1.5), mode="bicubic")), ("Upsample", dict(size=9)),
    ("UpsamplingNearest2d", dict(scale_factor=3)), ("UpsamplingBilinear2d", dict(size=(6, 8))),
    ("PixelShuffle", dict(upscale_factor=2)), ("PixelUnshuffle", dict(downscale_factor=2)),
]


@pytest.mark.parametrize("name,kw", MODULES, ids=str)
def test_modules_match_torch(name, kw):
    m, tm = getattr(fl.nn, name)(**kw), getattr(torch.nn, name)(**kw)
    assert repr(m) == repr(tm)
    a = R.standard_normal((2, 4, 4, 6))
    np.testing.assert_allclose(m(fl.tensor(a)).numpy(), tm(torch.tensor(a)).numpy(), rtol=1e-14, atol=1e-14)


# ---- unfold / fold -----------------------------------------------------------------------------
BLOCKS = [((2, 3, 7, 6), dict(kernel_size=3)),
          ((2, 3, 7, 6), dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(2, 3))),
          ((3, 5, 4), dict(kernel_size=2, stride=2)), ((1, 2, 5, 5), dict(kernel_size=5, padding=2, stride=3)),
          ((0, 2, 5, 5), dict(kernel_size=2))]


def grads_both(name, data, *args, **kw):
    out, g = [], None
    for lib, fn in ((fl, getattr(F, name)), (torch, getattr(TF, name))):
        x = (fl.tensor(data) if lib is fl else torch.tensor(data)).requires_grad_()
        y = fn(x, *args, **kw)
        if g is None:
            g = R.standard_normal(tuple(y.shape))
        (y * (fl.tensor(g) if lib is fl else torch.tensor(g))).sum().backward()
        out.append((y.detach().numpy(), x.grad.numpy()))
    return out


@pytest.mark.parametrize("shape,kw", BLOCKS, ids=str)
def test_unfold_and_fold_match_torch(shape, kw):
    (y, gx), (ty, tgx) = grads_both("unfold", R.standard_normal(shape), **kw)
    assert y.shape == ty.shape
    np.testing.assert_array_equal(y, ty)
    np.testing.assert_array_equal(gx, tgx)
    (y, gx), (ty, tgx) = grads_both("fold", R.standard_normal(ty.shape), shape[-2:], **kw)
    assert y.shape == ty.shape
    np.testing.assert_array_equal(y, ty)  # the same sums in the same order
    np.testing.assert_array_equal(gx, tgx)


def test_fold_is_the_adjoint_of_unfold_and_non_contiguous():
    a = R.standard_normal((2, 3, 6, 8))
    x = fl.tensor(a).transpose(-1, -2)
    kw = dict(kernel_size=(3, 2), padding=1, stride=2)
    cols = F.unfold(x, **kw)
    np.testing.assert_array_equal(cols.numpy(), TF.unfold(torch.tensor(a).transpose(-1, -2), **kw).numpy())
    c = R.standard_normal(tuple(cols.shape))
    lhs = float((cols * fl.tensor(c)).sum())
    rhs = float((x * F.fold(fl.tensor(c), (8, 6), **kw)).sum())
    assert abs(lhs - rhs) < 1e-12 * max(1.0, abs(lhs))
    assert fl.autograd.gradcheck(lambda t: F.fold(t, (4, 4), 2, stride=1), (fl.tensor(R.standard_normal((1, 8, 9))).requires_grad_(),))


FOLD_BAD = [
    ("unfold", (3, 4), (2,), {}, ["unfold", "3D or 4D", "[3, 4]"]),
    ("unfold", (1, 0, 4, 4), (2,), {}, ["unfold", "non-zero dimensions", "[1, 0, 4, 4]"]),
    ("unfold", (1, 2, 4, 4), (0,), {}, ["unfold", "kernel size should be greater than zero"]),
    ("unfold", (1, 2, 4, 4), (2,), dict(stride=0), ["unfold", "stride should be greater than zero"]),
    ("unfold", (1, 2, 4, 4), (2,), dict(dilation=(1, 0)), ["unfold", "dilation should be greater than zero"]),
    ("unfold", (1, 2, 4, 4), (2,), dict(padding=-1), ["unfold", "padding should be non-negative"]),
    ("unfold", (1, 2, 4, 4), (5,), {}, ["unfold", "spatial size (4, 4)", "at least one"]),
    ("unfold", (1, 2, 4, 4), ((1, 2, 3),), {}, ["unfold", "kernel_size"]),
    ("fold", (2, 4, 5, 5), ((4, 4), 2), {}, ["fold", "2D or 3D", "[2, 4, 5, 5]"]),
    ("fold", (1, 6, 9), ((4, 4), 2), {}, ["fold", "divisible by the product of kernel_size", "input.size(1)=6"]),
    ("fold", (1, 8, 8), ((4, 4), 2), {}, ["fold", "sliding blocks 3 * 3 = 9", "input.size(2)=8"]),
    ("fold", (1, 8, 1), ((1, 1), 2), {}, ["fold", "too small (non-positive)"]),
    ("fold", (1, 8, 9), ((0, 4), 2), {}, ["fold", "output_size"]),
]


@pytest.mark.parametrize("name,shape,args,kw,words", FOLD_BAD, ids=str)
def test_unfold_fold_bad_input(name, shape, args, kw, words):
    a = R.standard_normal(shape)
    assert_raises_naming(lambda: getattr(F, name)(fl.tensor(a), *args, **kw), ValueError, words)
    with pytest.raises((RuntimeError, ValueError, IndexError)):
        getattr(TF, name)(torch.tensor(a), *args, **kw)


@pytest.mark.parametrize("name,kw", [("Fold", dict(output_size=(4, 5), kernel_size=2)),
                                     ("Fold", dict(output_size=6, kernel_size=(2, 3), dilation=1, padding=1, stride=2)),
                                     ("Unfold", dict(kernel_size=2, padding=1)),
                                     ("Unfold", dict(kernel_size=(3, 2), dilation=2, stride=(1, 2)))], ids=str)
def test_fold_modules_match_torch(name, kw):
    m, tm = getattr(fl.nn, name)(**kw), getattr(torch.nn, name)(**kw)
    assert repr(m) == repr(tm)
    shape = (2, 3, 6, 7) if name == "Unfold" else None
    if shape is None:
        L = TF.unfold(torch.zeros(1, 1, *((kw["output_size"],) * 2 if isinstance(kw["output_size"], int)
                                         else kw["output_size"])), **{k: v for k, v in kw.items() if k != "output_size"}).shape[-1]
        k = kw["kernel_size"]
        shape = (2, 3 * (k * k if isinstance(k, int) else k[0] * k[1]), L)
    a = R.standard_normal(shape)
    np.testing.assert_array_equal(m(fl.tensor(a)).numpy(), tm(torch.tensor(a)).numpy())


# ---- antialias ---------------------------------------------------------------------------------
# Tolerances: an output is two passes of at most n = 2 * ceil(support) + 1 taps (support <= 2 *
# in / out); flambeau and torch may round each product-sum step differently (fma or not), so
# |diff| <= 2 * n * eps * sum|w| * max|x| with sum|w| < 1.5 (the cubic's negative lobes). For
# the sizes below (n <= 33, max|x| < 6): float64 < 1.3e-13, under the 1e-12 used; float32 < 7e-5
# as a bound, 2e-5 used (typical roundoff, measured differences are <= 2e-7). Gradients are
# the same (w_w * w_h) * g sums in the same order and compared with the same tolerances.
AA_TOL = {np.float64: 1e-12, np.float32: 2e-5}
AA_SIZES = [dict(size=(5, 4)), dict(size=(7, 3)), dict(size=(17, 13)), dict(scale_factor=0.5),
            dict(scale_factor=0.3), dict(scale_factor=(0.45, 0.7)),
            dict(scale_factor=0.37, recompute_scale_factor=True), dict(scale_factor=1.1),
            dict(scale_factor=(1.05, 0.5)),  # H keeps its size: torch's forward skips it, its backward does not
            dict(size=(29, 20)), dict(scale_factor=2.3), dict(scale_factor=(1.7, 0.6))]


def aa_both(a, **kw):
    (y, gx), (ty, tgx) = run_both(a, antialias=True, **kw)
    return y, gx, ty, tgx


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [None, False, True])
@pytest.mark.parametrize("kw", AA_SIZES, ids=str)
def test_antialias_matches_torch_float64(mode, align_corners, kw):
    a = R.standard_normal((2, 3, 17, 13))
    y, gx, ty, tgx = aa_both(a, mode=mode, align_corners=align_corners, **kw)
    assert y.shape == ty.shape and y.dtype == ty.dtype == np.float64
    tol = AA_TOL[np.float64]
    np.testing.assert_allclose(y, ty, rtol=tol, atol=tol)
    np.testing.assert_allclose(gx, tgx, rtol=tol, atol=tol)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("kw", [dict(size=(6, 5)), dict(scale_factor=0.35), dict(scale_factor=1.8),
                                dict(size=(9, 31), align_corners=True)], ids=str)
def test_antialias_matches_torch_float32(mode, kw):
    a = R.standard_normal((2, 4, 19, 23)).astype(np.float32)
    x, t = fl.tensor(a).requires_grad_(), torch.tensor(a).requires_grad_()
    y, ty = F.interpolate(x, mode=mode, antialias=True, **kw), TF.interpolate(t, mode=mode, antialias=True, **kw)
    g = R.standard_normal(tuple(ty.shape)).astype(np.float32)
    (y * fl.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    assert y.dtype == fl.float32
    tol = AA_TOL[np.float32]
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)


def test_antialias_upscale_bilinear_is_plain_bilinear_and_bicubic_is_not():
    # torch: upscaling (support 1, no widening) makes antialiased bilinear the plain half-pixel
    # bilinear (the border renormalization equals plain's clamping); bicubic uses A = -0.5 and
    # renormalizes at borders, so it differs; align_corners keeps half-pixel centres in antialias.
    x = fl.tensor(R.standard_normal((2, 3, 6, 5)))
    for kw in (dict(scale_factor=2.5), dict(size=(13, 7))):
        aa = F.interpolate(x, mode="bilinear", antialias=True, **kw).numpy()
        np.testing.assert_allclose(aa, F.interpolate(x, mode="bilinear", **kw).numpy(), rtol=1e-14, atol=1e-14)
        assert np.abs(F.interpolate(x, mode="bicubic", antialias=True, **kw).numpy()
                      - F.interpolate(x, mode="bicubic", **kw).numpy()).max() > 1e-3
        assert np.abs(F.interpolate(x, mode="bilinear", antialias=True, align_corners=True, **kw).numpy()
                      - F.interpolate(x, mode="bilinear", align_corners=True, **kw).numpy()).max() > 1e-3


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_output_width_one(mode):
    # torch 2.13's forward is wrong when the output width is 1 and the height changes (its
    # vertical pass then repeats the first row); flambeau computes the separable sum, checked
    # against torch's two passes run apart (W alone, then H alone on a width-2 copy).
    a = R.standard_normal((2, 3, 7, 5))
    y = F.interpolate(fl.tensor(a), size=(3, 1), mode=mode, antialias=True).numpy()
    t = TF.interpolate(torch.tensor(a), size=(7, 1), mode=mode, antialias=True)
    t = TF.interpolate(t.expand(-1, -1, -1, 2).contiguous(), size=(3, 2), mode=mode, antialias=True)[..., :1]
    np.testing.assert_allclose(y, t.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_gradcheck_and_non_contiguous(mode):
    x = fl.tensor(R.standard_normal((1, 2, 7, 6))).requires_grad_()
    assert fl.autograd.gradcheck(lambda t: F.interpolate(t, size=(3, 4), mode=mode, antialias=True), (x,))
    a = R.standard_normal((3, 2, 18, 14))
    (y, gx), (ty, tgx) = run_both(a, make=lambda t: t[:, :, ::2, ::2].transpose(0, 1), size=(4, 3), mode=mode,
                                  antialias=True)
    np.testing.assert_allclose(y, ty, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gx, tgx, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_same_bits_with_1_and_2_threads(mode):
    a = R.standard_normal((3, 7, 29, 23)).astype(np.float32)
    g, results = None, []
    before = fl.get_num_threads()
    try:
        for n in (1, 2):
            fl.set_num_threads(n)
            x = fl.tensor(a).requires_grad_()
            y = F.interpolate(x, scale_factor=(0.4, 0.7), mode=mode, antialias=True)
            if g is None:
                g = fl.tensor(R.standard_normal(tuple(y.shape)).astype(np.float32))
            (y * g).sum().backward()
            results.append((y.detach().numpy(), x.grad.numpy()))
    finally:
        fl.set_num_threads(before)
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialias_grad_fn_name_and_empty_batch(mode):
    a = R.standard_normal((1, 2, 8, 8))
    y = F.interpolate(fl.tensor(a).requires_grad_(), scale_factor=0.5, mode=mode, antialias=True)
    ty = TF.interpolate(torch.tensor(a).requires_grad_(), scale_factor=0.5, mode=mode, antialias=True)
    assert y.grad_fn.name() == type(ty.grad_fn).__name__
    x = fl.zeros(0, 3, 8, 6).requires_grad_()
    y = F.interpolate(x, size=(3, 4), mode=mode, antialias=True)
    assert tuple(y.shape) == (0, 3, 3, 4)
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 3, 8, 6)
