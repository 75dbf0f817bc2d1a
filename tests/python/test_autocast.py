"""flambeau.autocast against torch.autocast on the CPU: the state and its nesting, the
dtype each op gives (matmul-like ops 16-bit, losses float32, the rest their inputs' dtype),
values within bf16 rounding, gradients to float32 leaves, the decorator and the warnings."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import flambeau as fl
import flambeau.nn.functional as F
from conftest import assert_close, same_dtype, to_numpy


def pair(shape, seed, dtype=np.float32):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    return fl.tensor(x), torch.tensor(x)


def bf16_bound(k, mag, extra_rounding):
    """Two bf16 roundings of float32 sums of bf16 products can differ by one bf16 ulp
    (relative 2^-7 at most) plus the float32 sums' k * 2^-24 * sum|a b| each; baddbmm rounds
    the product to bf16 before adding the bias (one more rounding, 2^-8 of its magnitude)."""
    extra = 2.0 ** -8 * mag if extra_rounding else 0
    return lambda f, t: np.all(np.abs(to_numpy(f).astype(np.float64) - to_numpy(t).astype(np.float64))
                               <= 2.0 ** -7 * np.abs(to_numpy(t)) + k * 2.0 ** -23 * mag + extra)


def test_state_nests_and_restores():
    assert not fl.is_autocast_enabled("cpu") and fl.get_autocast_dtype("cpu") == fl.bfloat16
    with fl.autocast("cpu"):
        assert fl.is_autocast_enabled("cpu") and fl.get_autocast_dtype("cpu") == fl.bfloat16
        with fl.autocast("cpu", dtype=fl.float16):
            assert fl.get_autocast_dtype("cpu") == fl.float16
            with fl.autocast("cpu", enabled=False):
                assert not fl.is_autocast_enabled("cpu")
            assert fl.is_autocast_enabled("cpu")
        assert fl.get_autocast_dtype("cpu") == fl.bfloat16
    assert not fl.is_autocast_enabled("cpu")
    assert not fl.is_autocast_enabled()  # device_type None is "cuda", as in torch
    assert fl.get_autocast_dtype("cuda") == fl.float16
    assert fl.amp.autocast is fl.autocast and issubclass(fl.cpu.amp.autocast, fl.autocast)
    with fl.cpu.amp.autocast():
        assert fl.is_autocast_enabled("cpu") and fl.get_autocast_dtype("cpu") == fl.bfloat16


def test_decorator_and_exceptions_restore_state():
    @fl.autocast("cpu", dtype=fl.bfloat16)
    def f(a, b):
        assert fl.is_autocast_enabled("cpu")
        return fl.mm(a, b)

    a, _ = pair((3, 4), 0)
    assert f(a, a.t()).dtype == fl.bfloat16
    assert not fl.is_autocast_enabled("cpu")
    with pytest.raises(ValueError):
        with fl.autocast("cpu"):
            raise ValueError("inside")
    assert not fl.is_autocast_enabled("cpu")


def test_unsupported_dtypes_and_devices_warn_and_disable_like_torch():
    for dt in ("float32", "float64", "int32"):
        for lib in (fl, torch):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                with lib.autocast("cpu", dtype=getattr(lib, dt)):
                    assert not lib.is_autocast_enabled("cpu")
            assert any("not supported. Disabling autocast" in str(m.message) for m in w), (lib, dt)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with fl.autocast("cuda"):
            assert not fl.is_autocast_enabled("cuda") and not fl.is_autocast_enabled("cpu")
    with pytest.raises(RuntimeError, match="device type at start of device string: xyz"):
        fl.autocast("xyz")
    with pytest.raises(ValueError):
        fl.autocast(0)


@pytest.mark.parametrize("op", ["mm", "matmul", "bmm", "linear", "linear_bias", "addmm", "baddbmm"])
def test_matmul_like_ops_match_torch(op):
    (xf, xt), (wf, wt), (bf, bt) = pair((9, 70), 1), pair((13, 70), 2), pair((13,), 3)
    calls = {
        "mm": (lambda m, x, w, b: m.mm(x, w.t())),
        "matmul": (lambda m, x, w, b: m.matmul(x.reshape(3, 3, 70), w.t())),
        "bmm": (lambda m, x, w, b: m.bmm(x.unsqueeze(0), w.t().unsqueeze(0))),
        "linear": (lambda m, x, w, b: (F if m is fl else TF).linear(x, w)),
        "linear_bias": (lambda m, x, w, b: (F if m is fl else TF).linear(x, w, b)),
        "addmm": (lambda m, x, w, b: m.addmm(b, x, w.t())),
        "baddbmm": (lambda m, x, w, b: m.baddbmm(b, x.unsqueeze(0), w.t().unsqueeze(0))),
    }
    with fl.autocast("cpu", dtype=fl.bfloat16):
        f = calls[op](fl, xf, wf, bf)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = calls[op](torch, xt, wt, bt)
    assert same_dtype(f, t) and t.dtype == torch.bfloat16
    mag = np.abs(to_numpy(xt)) @ np.abs(to_numpy(wt)).T + np.abs(to_numpy(bt))
    assert bf16_bound(70, mag.reshape(to_numpy(t).shape), op == "baddbmm")(f, t)


def test_attention_runs_in_bf16_like_torch():
    (qf, qt), (kf, kt), (vf, vt) = pair((1, 2, 16, 8), 4), pair((1, 2, 16, 8), 5), pair((1, 2, 16, 8), 6)
    with fl.autocast("cpu"):
        f = F.scaled_dot_product_attention(qf, kf, vf, is_causal=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = TF.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    assert f.dtype == fl.bfloat16 and t.dtype == torch.bfloat16
    # Outputs are convex combinations of bf16 values of v (|v| <= max|v|), through bf16
    # scores and probabilities: a few bf16 roundings of that scale.
    assert_close(f, t, rtol=0, atol=4 * 2.0 ** -8 * float(np.abs(to_numpy(vt)).max()))


def test_float32_list_and_other_ops_match_torch_dtypes():
    (lf, lt) = pair((6, 5), 7)
    lf, lt = lf.to(fl.bfloat16), lt.to(torch.bfloat16)
    tgt = np.array([0, 4, 2, 1, 3, 0])
    tf_, tt = fl.tensor(tgt), torch.tensor(tgt)
    cases = {
        "cross_entropy": (lambda M, x, t: M.cross_entropy(x, t)),
        "nll_loss": (lambda M, x, t: M.nll_loss(x, t)),
        "mse_loss": (lambda M, x, t: M.mse_loss(x, x * 0.5)),
        "l1_loss": (lambda M, x, t: M.l1_loss(x, x * 0.5)),
        "bce_with_logits": (lambda M, x, t: M.binary_cross_entropy_with_logits(x, x.sigmoid())),
        "softmax": (lambda M, x, t: x.softmax(-1)),
        "log_softmax": (lambda M, x, t: x.log_softmax(-1)),
        "sum": (lambda M, x, t: x.sum()),
        "prod": (lambda M, x, t: x.prod()),
        "layer_norm": (lambda M, x, t: M.layer_norm(x, (5,))),
        "gelu": (lambda M, x, t: M.gelu(x)),
        "cat": (lambda M, x, t: (fl if M is F else torch).cat([x, x.float()])),
    }
    for name, fn in cases.items():
        with fl.autocast("cpu"):
            f = fn(F, lf, tf_)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            t = fn(TF, lt, tt)
        assert same_dtype(f, t), (name, f.dtype, t.dtype)
        if f.dtype == fl.float32:  # computed in float32 from the same bf16 inputs
            assert_close(f, t, rtol=1e-5, atol=1e-5)


def test_gradients_reach_float32_leaves_like_torch():
    (xf, xt), (wf, wt) = pair((4, 6), 8), pair((3, 6), 9)
    xf.requires_grad_(), wf.requires_grad_(), xt.requires_grad_(), wt.requires_grad_()
    with fl.autocast("cpu"):
        yf = F.linear(xf, wf)
        lf = F.mse_loss(yf, fl.zeros(4, 3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yt = TF.linear(xt, wt)
        lt = TF.mse_loss(yt, torch.zeros(4, 3))
    assert lf.dtype == fl.float32 and lt.dtype == torch.float32
    lf.backward(), lt.backward()
    assert xf.grad.dtype == fl.float32 and wf.grad.dtype == fl.float32
    # bf16 GEMMs in both directions: a few bf16 roundings of the gradients' scale.
    for f, t in ((xf.grad, xt.grad), (wf.grad, wt.grad)):
        assert_close(f, t, rtol=2.0 ** -6, atol=2.0 ** -6 * float(np.abs(to_numpy(t)).max()))


def test_weight_cast_is_cached_within_a_region():
    wf, _ = pair((5, 4), 10)
    wf.requires_grad_()
    xf, _ = pair((2, 4), 11)
    with fl.autocast("cpu"):
        a = F.linear(xf, wf)
        b = F.linear(xf, wf)
    assert np.array_equal(to_numpy(a), to_numpy(b))
    (a.float().sum() + b.float().sum()).backward()
    with fl.autocast("cpu", cache_enabled=False):
        c = F.linear(xf, wf)
    assert np.array_equal(to_numpy(a), to_numpy(c))
    assert_close(wf.grad, (2 * xf.to(fl.bfloat16).float().sum(0)).expand(5, 4), rtol=2.0 ** -7, atol=0,
                 check_dtype=True)


def test_flex_attention_runs_in_bf16_like_torch():
    from torch.nn.attention.flex_attention import flex_attention as torch_flex

    from flambeau.nn.attention.flex_attention import flex_attention as fl_flex
    (qf, qt), (kf, kt), (vf, vt) = pair((1, 2, 16, 8), 12), pair((1, 2, 16, 8), 13), pair((1, 2, 16, 8), 14)
    with fl.autocast("cpu"):
        f = fl_flex(qf, kf, vf)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t = torch_flex(qt, kt, vt)
    assert f.dtype == fl.bfloat16 and t.dtype == torch.bfloat16
    assert_close(f, t, rtol=0, atol=4 * 2.0 ** -8 * float(np.abs(to_numpy(vt)).max()))
