"""Convolutions and F.pad (issue 22 items 1-2): conv1d/2d/3d and conv_transpose1d/2d/3d
against torch in float64 (outputs and the input, weight and bias gradients), padding
strings, unbatched and non-contiguous inputs, empty batches, results independent of the
thread count, float32 / bfloat16, the Conv modules (reprs, padding modes, initialisation)
and bad input."""
import numpy as np
import pytest
import torch

import flambeau as fl
import flambeau.nn.functional as F
import torch.nn.functional as TF
from conftest import assert_raises_naming

R = np.random.default_rng(1)

# (name, input shape, weight shape, transposed, bias, kwargs)
CASES = [
    ("1d", (2, 4, 11), (6, 4, 3), False, True, dict()),
    ("1d_stride_pad_dil", (3, 4, 13), (6, 2, 3), False, True, dict(stride=2, padding=2, dilation=2, groups=2)),
    ("1d_unbatched", (4, 9), (5, 4, 2), False, False, dict(padding=1)),
    ("2d", (2, 3, 9, 10), (4, 3, 3, 3), False, True, dict()),
    ("2d_stride_pad", (2, 3, 9, 10), (4, 3, 3, 2), False, True, dict(stride=(2, 1), padding=(1, 2), dilation=(2, 1))),
    ("2d_groups", (3, 4, 8, 7), (6, 2, 3, 3), False, True, dict(groups=2, padding=1)),
    ("2d_depthwise", (3, 6, 9, 9), (6, 1, 3, 3), False, True, dict(groups=6, padding=1)),
    ("2d_depthwise_mult", (2, 3, 7, 9), (6, 1, 5, 3), False, False, dict(groups=3, stride=2, padding=(2, 1))),
    ("2d_pointwise", (2, 5, 6, 7), (3, 5, 1, 1), False, True, dict()),
    ("2d_pointwise_stride", (2, 5, 6, 7), (3, 5, 1, 1), False, True, dict(stride=2)),
    ("2d_same", (2, 3, 9, 10), (4, 3, 3, 3), False, True, dict(padding="same")),
    ("2d_same_even", (2, 3, 9, 10), (4, 3, 4, 2), False, True, dict(padding="same", dilation=(1, 3))),
    ("2d_valid", (2, 3, 9, 10), (4, 3, 3, 3), False, True, dict(padding="valid")),
    ("2d_unbatched", (3, 8, 8), (2, 3, 3, 3), False, True, dict(stride=3)),
    ("2d_kernel_is_input", (2, 3, 4, 5), (2, 3, 4, 5), False, True, dict()),
    ("3d", (2, 4, 5, 6, 7), (6, 2, 3, 2, 3), False, True, dict(groups=2, padding=1, stride=(1, 2, 1))),
    ("3d_unbatched", (2, 4, 5, 5), (3, 2, 2, 2, 2), False, True, dict(padding="same")),
    ("t1d", (3, 4, 9), (4, 3, 3), True, True, dict(stride=2)),
    ("t1d_unbatched", (4, 9), (4, 3, 3), True, False, dict(stride=3, padding=1, output_padding=2)),
    ("t2d", (2, 4, 9, 10), (4, 3, 3, 3), True, True, dict(stride=2, padding=1, output_padding=1)),
    ("t2d_groups_dil", (2, 4, 9, 10), (4, 1, 3, 3), True, True, dict(groups=2, stride=(2, 3), dilation=2)),
    ("t2d_pointwise", (2, 4, 5, 6), (4, 3, 1, 1), True, True, dict()),
    ("t3d", (2, 2, 4, 5, 3), (2, 3, 2, 3, 2), True, True, dict(stride=2, padding=(0, 1, 1), output_padding=(1, 0, 1))),
]


def _conv(lib_f, nd, transposed):
    return getattr(lib_f, f"conv_transpose{nd}d" if transposed else f"conv{nd}d")


def run_case(x_shape, w_shape, transposed, with_bias, kw, lib, grad, x=None, dtype=np.float64, absolute=False):
    """Output and gradients; `absolute`: of |inputs| and |upstream gradient| (each result is
    then the sum of the absolute values of its terms)."""
    nd = len(w_shape) - 2
    groups = kw.get("groups", 1)
    c_out = w_shape[1] * groups if transposed else w_shape[0]
    rng = np.random.default_rng(abs(hash((x_shape, w_shape))) % 2**32)
    xa = rng.standard_normal(x_shape) if x is None else x
    wa, ba = rng.standard_normal(w_shape), rng.standard_normal(c_out)
    f = np.abs if absolute else (lambda a: a)
    xa, wa, ba = (f(a).astype(dtype) for a in (xa, wa, ba))
    fn = _conv(F if lib is fl else TF, nd, transposed)
    xt, wt = lib.tensor(xa, requires_grad=True), lib.tensor(wa, requires_grad=True)
    bt = lib.tensor(ba, requires_grad=True) if with_bias else None
    y = fn(xt, wt, bt, **kw)
    g = f(rng.standard_normal(tuple(y.shape))).astype(dtype)
    (y * lib.tensor(g)).sum().backward()
    out = [y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy()]
    return out + ([bt.grad.numpy()] if with_bias else [])


@pytest.mark.parametrize("name, x_shape, w_shape, transposed, with_bias, kw", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_in_float64(name, x_shape, w_shape, transposed, with_bias, kw):
    got = run_case(x_shape, w_shape, transposed, with_bias, kw, fl, True)
    want = run_case(x_shape, w_shape, transposed, with_bias, kw, torch, True)
    # Sums of at most a few hundred products of N(0, 1) values: a few float64 roundoffs.
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, x_shape, w_shape, transposed, with_bias, kw", CASES, ids=[c[0] for c in CASES])
def test_float32_is_within_the_rounding_bound(name, x_shape, w_shape, transposed, with_bias, kw):
    # Every float32 path (oneDNN's kernels where built in, im2col + GEMM) against float64:
    # a sum of n terms rounded in float32 is within n * 2^-24 of the sum of their absolute
    # values, n at most the longest sum (a weight gradient's: batch times output size).
    got = run_case(x_shape, w_shape, transposed, with_bias, kw, fl, True, dtype=np.float32)
    want = run_case(x_shape, w_shape, transposed, with_bias, kw, torch, True)
    scale = run_case(x_shape, w_shape, transposed, with_bias, kw, torch, True, absolute=True)
    n = int(np.prod(w_shape)) + int(np.prod(want[0].shape))
    for g, w, a in zip(got, want, scale):
        assert g.dtype == np.float32 and g.shape == w.shape
        assert np.all(np.abs(g - w) <= n * 2.0**-24 * a + 1e-30), np.max(np.abs(g - w) / (a + 1e-30))


def test_non_contiguous_input_and_grad_fn():
    x = R.standard_normal((2, 10, 3, 9))  # used as its (2, 3, 9, 10) transpose
    w = R.standard_normal((4, 3, 3, 3))
    fx = fl.tensor(x).permute(0, 2, 3, 1)
    tx = torch.tensor(x).permute(0, 2, 3, 1)
    assert not fx.is_contiguous()
    got = F.conv2d(fx[:, :, ::2], fl.tensor(w), padding=1)
    want = TF.conv2d(tx[:, :, ::2], torch.tensor(w), padding=1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    y = F.conv2d(fl.tensor(x[:, :3].copy(), requires_grad=True), fl.tensor(w))
    assert y.grad_fn.name() == "ConvolutionBackward0"


def test_empty_batch_and_zero_channels():
    w = fl.randn(4, 3, 3, 3, requires_grad=True)
    x = fl.zeros(0, 3, 8, 8, requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    assert tuple(y.shape) == (0, 4, 8, 8)
    y.sum().backward()
    assert w.grad.abs().sum().item() == 0.0 and tuple(x.grad.shape) == (0, 3, 8, 8)
    # No input channels: the output is the bias alone.
    b = fl.tensor([1.0, -2.0])
    y = F.conv1d(fl.zeros(2, 0, 5), fl.zeros(2, 0, 3), b)
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(np.array([1.0, -2.0])[None, :, None], (2, 2, 3)))


# Images in order (threaded GEMMs) and images over threads; oneDNN's blocked kernels (64
# channels), groups, a 3-d and a transposed convolution.
@pytest.mark.parametrize("batch, c, hw, kw", [
    (1, 8, 20, dict(padding=1, stride=(1, 2))), (5, 8, 20, dict(padding=1, stride=(1, 2))),
    (3, 64, 14, dict(padding=1)), (4, 32, 9, dict(padding=2, dilation=2, groups=4)),
    (2, 16, 6, dict(padding=1, nd=3)), (3, 32, 7, dict(stride=2, padding=1, transposed=True))])
def test_bitwise_the_same_on_one_and_two_threads(batch, c, hw, kw):
    kw = dict(kw)
    nd, transposed = kw.pop("nd", 2), kw.pop("transposed", False)
    groups = kw.get("groups", 1)
    x = R.standard_normal((batch, c) + (hw,) * nd).astype(np.float32)
    w = R.standard_normal((c, 2 * c // groups) + (3,) * nd if transposed else (2 * c, c // groups) + (3,) * nd)
    w = w.astype(np.float32)
    fn = _conv(F, nd, transposed)
    results = []
    for threads in (1, 2):
        fl.set_num_threads(threads)
        try:
            fx, fw = fl.tensor(x, requires_grad=True), fl.tensor(w, requires_grad=True)
            y = fn(fx, fw, **kw)
            y.backward(fl.ones_like(y))
            results.append([y.detach().numpy(), fx.grad.numpy(), fw.grad.numpy()])
        finally:
            fl.set_num_threads(2)
    for a, b in zip(*results):
        assert a.tobytes() == b.tobytes()


def test_float32_and_bfloat16():
    x = R.standard_normal((2, 3, 12, 12)).astype(np.float32)
    w = R.standard_normal((5, 3, 3, 3)).astype(np.float32)
    want = TF.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64), padding=1).numpy()
    got = F.conv2d(fl.tensor(x), fl.tensor(w), padding=1)
    assert got.dtype == fl.float32
    # 27 products per output: float32 sums within 27 * 2^-24 of the magnitude of the terms.
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=27 * 2**-24 * np.abs(want).max() * 4)
    xb, wb = fl.tensor(x).to(fl.bfloat16), fl.tensor(w).to(fl.bfloat16)
    yb = F.conv2d(xb, wb, padding=1)
    assert yb.dtype == fl.bfloat16
    # Computed in float32 from the bfloat16 inputs, then rounded once to bfloat16.
    ref = F.conv2d(xb.float(), wb.float(), padding=1).to(fl.bfloat16)
    assert yb.float().numpy().tobytes() == ref.float().numpy().tobytes()


PAD_CASES = [
    ((2, 3, 5, 6), (1, 2), "constant", 0.0),
    ((2, 3, 5, 6), (1, -2, 2, 3), "constant", 1.5),
    ((4, 5), (0, 0, 2, 1), "constant", -1.0),
    ((2, 3, 5, 6), (1, 2, 2, 0), "reflect", None),
    ((3, 5, 6), (4, 5), "reflect", None),
    ((2, 3, 4, 5, 6), (1, 1, 2, 0, 3, 3), "reflect", None),
    ((2, 3, 5, 6), (1, 2, 2, 0), "replicate", None),
    ((2, 3, 5), (7, 3), "replicate", None),
    ((2, 3, 5, 6), (1, 2, 5, 0), "circular", None),
    ((2, 2, 3, 4, 5), (1, 1, 2, 0, 3, 3), "circular", None),
]


@pytest.mark.parametrize("shape, padding, mode, value", PAD_CASES)
def test_pad_matches_torch_with_gradient(shape, padding, mode, value):
    x = R.standard_normal(shape)
    fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    kw = {} if value is None else dict(value=value)
    fy, ty = F.pad(fx, padding, mode, **kw), TF.pad(tx, padding, mode, **kw)
    assert fy.numpy().tobytes() == ty.detach().numpy().tobytes()  # copies: bitwise
    g = R.standard_normal(tuple(ty.shape))
    (fy * fl.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-14, atol=1e-14)


MODULES = [
    ("Conv1d", (4, 6, 3), dict(stride=2, padding=1, bias=False), (2, 4, 11)),
    ("Conv2d", (3, 8, 3), dict(stride=2, padding=1, padding_mode="reflect"), (2, 3, 9, 9)),
    ("Conv2d", (4, 4, (3, 2)), dict(padding="same", dilation=2, groups=2, padding_mode="replicate"), (1, 4, 7, 8)),
    ("Conv2d", (2, 4, 3), dict(padding=(1, 2), padding_mode="circular"), (2, 2, 5, 6)),
    ("Conv3d", (2, 4, 2), dict(padding="valid"), (1, 2, 4, 4, 4)),
    ("ConvTranspose1d", (4, 2, 3), dict(stride=2, output_padding=1), (2, 4, 5)),
    ("ConvTranspose2d", (3, 4, (3, 2)), dict(stride=2, padding=1, groups=1, dilation=2, bias=False), (2, 3, 5, 6)),
    ("ConvTranspose3d", (2, 2, 2), dict(stride=(1, 2, 1)), (1, 2, 3, 3, 3)),
]


@pytest.mark.parametrize("name, args, kwargs, x_shape", MODULES)
def test_module_matches_torch(name, args, kwargs, x_shape):
    fm = getattr(fl.nn, name)(*args, **kwargs, dtype=fl.float64)
    tm = getattr(torch.nn, name)(*args, **kwargs, dtype=torch.float64)
    assert repr(fm) == repr(tm)
    assert [(n, tuple(p.shape)) for n, p in fm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    fm.load_state_dict({n: fl.tensor(p.detach().numpy()) for n, p in tm.state_dict().items()})
    x = R.standard_normal(x_shape)
    np.testing.assert_allclose(fm(fl.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-12, atol=1e-12)


OUTPUT_SIZES = [  # (name, args, kwargs, input shape, output_size): every reachable size, batched or not
    ("ConvTranspose1d", (2, 3, 3), dict(stride=3, padding=1), (2, 2, 4), [(10,), [11], (2, 3, 12)]),
    ("ConvTranspose2d", (2, 3, (2, 3)), dict(stride=(3, 2), padding=1, dilation=(1, 2)), (1, 2, 4, 5),
     [(9, 12), [11, 11], (1, 3, 10, 12)]),
    ("ConvTranspose2d", (2, 2, 3), dict(stride=2), (2, 3, 3), [(7, 8), (2, 8, 7)]),
    ("ConvTranspose3d", (2, 2, 2), dict(stride=(2, 1, 3)), (1, 2, 3, 3, 2), [(6, 4, 6), (7, 4, 7)]),
]


@pytest.mark.parametrize("name, args, kwargs, x_shape, sizes", OUTPUT_SIZES)
def test_transposed_forward_output_size_matches_torch(name, args, kwargs, x_shape, sizes):
    fm = getattr(fl.nn, name)(*args, **kwargs, dtype=fl.float64)
    tm = getattr(torch.nn, name)(*args, **kwargs, dtype=torch.float64)
    fm.load_state_dict({n: fl.tensor(p.detach().numpy()) for n, p in tm.state_dict().items()})
    x = R.standard_normal(x_shape)
    for size in sizes + [None]:
        fx, tx = fl.tensor(x).requires_grad_(), torch.tensor(x).requires_grad_()
        f, t = fm(fx, output_size=size), tm(tx, output_size=size)
        assert tuple(f.shape) == tuple(t.shape), (size, f.shape, t.shape)
        np.testing.assert_allclose(f.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-12)
        g = R.standard_normal(tuple(t.shape))
        (f * fl.tensor(g)).sum().backward()
        (t * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_transposed_output_size_out_of_range_raises_as_torch():
    fm, tm = fl.nn.ConvTranspose2d(2, 3, 2, stride=3, padding=1), torch.nn.ConvTranspose2d(2, 3, 2, stride=3, padding=1)
    x = R.standard_normal((1, 2, 4, 4)).astype(np.float32)
    for size in [(12, 9), (9, 8), (1, 3, 9, 12)]:  # valid: 9 to 11
        with pytest.raises(ValueError, match="valid sizes range"):
            tm(torch.tensor(x), output_size=size)
        assert_raises_naming(lambda: fm(fl.tensor(x), output_size=size), ValueError,
                             ["[ConvTranspose2d]", "requested an output size of", "valid sizes range from (9, 9) to "
                              "(11, 11) (for an input of (4, 4))"])
    with pytest.raises(ValueError, match="output_size must have 2 or 4 elements"):
        tm(torch.tensor(x), output_size=(9, 9, 9))
    assert_raises_naming(lambda: fm(fl.tensor(x), output_size=(9, 9, 9)), ValueError,
                         ["[ConvTranspose2d]", "for 4D input, output_size must have 2 or 4 elements (got 3)"])
    assert_raises_naming(lambda: fm(fl.tensor(x[0]), output_size=(9,)), ValueError,
                         ["[ConvTranspose2d]", "for 3D input, output_size must have 2 or 3 elements (got 1)"])


def test_module_initialisation_follows_torch_bounds():
    fl.manual_seed(0)
    m = fl.nn.Conv2d(16, 32, 3)
    # kaiming_uniform_(a=sqrt(5)): bound = 1 / sqrt(fan_in) for both, fan_in = 16 * 9.
    bound = 1 / np.sqrt(16 * 9)
    w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.abs(b).max() <= bound
    t = fl.nn.ConvTranspose2d(16, 8, 3, groups=2)
    assert tuple(t.weight.shape) == (16, 4, 3, 3)
    assert np.abs(t.bias.detach().numpy()).max() <= 1 / np.sqrt(4 * 9)


@pytest.mark.parametrize("call, error, words", [
    (lambda: F.conv2d(fl.ones(3, 4), fl.ones(2, 3, 1, 1)), ValueError, ["conv2d", "(3, 4)", "3D (unbatched) or 4D"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 1)), ValueError, ["conv2d", "(2, 3, 1)", "4-D"]),
    (lambda: F.conv2d(fl.ones(1, 4, 5, 5), fl.ones(2, 3, 3, 3)), ValueError,
     ["conv2d", "(1, 4, 5, 5)", "(2, 3, 3, 3)", "3 channels", "4 channels"]),
    (lambda: F.conv2d(fl.ones(1, 4, 5, 5), fl.ones(3, 2, 3, 3), groups=2), ValueError,
     ["conv2d", "groups=2", "divisible by 2", "(3, 2, 3, 3)"]),
    (lambda: F.conv2d(fl.ones(1, 3, 2, 2), fl.ones(2, 3, 3, 3)), ValueError,
     ["conv2d", "(2 x 2)", "(3 x 3)", "Kernel size can't be greater"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3), stride=0), ValueError, ["conv2d", "stride"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3), padding=-1), ValueError, ["conv2d", "negative padding"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3), dilation=0), ValueError, ["conv2d", "dilation"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3), groups=0), ValueError, ["conv2d", "groups"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3), stride=(1, 2, 3)), ValueError,
     ["conv2d", "stride", "list of 2"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3), fl.ones(3)), ValueError, ["conv2d", "bias", "(3,)"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3), stride=2, padding="same"), ValueError,
     ["conv2d", "strided"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3), padding="full"), ValueError, ["conv2d", "'full'"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5, dtype=fl.int64), fl.ones(2, 3, 3, 3, dtype=fl.int64)), TypeError,
     ["conv2d", "int64"]),
    (lambda: F.conv2d(fl.ones(1, 3, 5, 5), fl.ones(2, 3, 3, 3, dtype=fl.float64)), TypeError,
     ["conv2d", "float32", "float64"]),
    (lambda: F.conv_transpose2d(fl.ones(1, 3, 5, 5), fl.ones(4, 2, 3, 3)), ValueError,
     ["conv_transpose2d", "transposed", "4 channels"]),
    (lambda: F.conv_transpose2d(fl.ones(1, 4, 5, 5), fl.ones(4, 2, 3, 3), stride=2, output_padding=2), ValueError,
     ["conv_transpose2d", "output padding"]),
    (lambda: F.conv_transpose1d(fl.ones(1, 4, 1), fl.ones(4, 2, 1), padding=1), ValueError,
     ["conv_transpose1d", "(1)", "(-1)", "too small"]),
    (lambda: F.pad(fl.ones(2, 3), (1,)), ValueError, ["pad", "divisible by 2"]),
    (lambda: F.pad(fl.ones(2, 3), (1, 1, 1, 1, 1, 1)), ValueError, ["pad", "(2, 3)"]),
    (lambda: F.pad(fl.ones(2, 3), (-2, -2)), ValueError, ["pad", "negative size"]),
    (lambda: F.pad(fl.ones(1, 2, 3), (3, 0), "reflect"), ValueError, ["pad", "reflect", "(1, 2, 3)", "less than"]),
    (lambda: F.pad(fl.ones(1, 2, 3), (4, 0), "circular"), ValueError, ["pad", "circular", "at most"]),
    (lambda: F.pad(fl.ones(3), (1, 1), "replicate"), ValueError, ["pad", "replicate", "(3,)"]),
    (lambda: F.pad(fl.ones(1, 2, 3), (1, 1), "wrap"), ValueError, ["pad", "'wrap'"]),
    (lambda: F.pad(fl.ones(1, 2, 3), (1, 1), "reflect", 2.0), ValueError, ["pad", "value"]),
    (lambda: fl.nn.Conv2d(3, 4, 3, groups=2), ValueError, ["Conv2d", "in_channels", "groups"]),
    (lambda: fl.nn.Conv2d(4, 3, 3, groups=2), ValueError, ["Conv2d", "out_channels", "groups"]),
    (lambda: fl.nn.Conv2d(4, 4, 3, padding_mode="zero"), ValueError, ["Conv2d", "padding_mode", "'zero'"]),
    (lambda: fl.nn.Conv2d(4, 4, 3, stride=2, padding="same"), ValueError, ["Conv2d", "strided"]),
    (lambda: fl.nn.ConvTranspose2d(4, 4, 3, padding_mode="reflect"), ValueError, ["ConvTranspose2d", "zeros"]),
])
def test_bad_input_names_the_op(call, error, words):
    assert_raises_naming(call, error, words)


def test_bad_input_writes_nothing():
    w = R.standard_normal((2, 3, 3, 3)).astype(np.float32)
    fw = fl.tensor(w, requires_grad=True)
    assert_raises_naming(lambda: F.conv2d(fl.ones(1, 4, 5, 5), fw), ValueError, ["conv2d"], unchanged=[(fw, w)])
    assert fw.grad is None
