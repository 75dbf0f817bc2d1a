"""Ops built on logsumexp keep float32's precision for large logits.

Rule: log_softmax(x + c) == log_softmax(x). The inputs are on a grid (multiples of 1/8, or
of 1/64 for attention scores) so that x + c is exact in float32 for the offsets used; then
(x + c) - max(x + c) == x - max(x) exactly and a kernel that forms (x - max) - log(sum)
returns the same value for both up to rounding, which we bound by 2 ulp of the result
(BOUND_ULP). Forming x - (max + log sum) instead loses ulp(c) (1e-3 at c = 1e4, 4e3 ulp of
a result near 1). Ops whose result itself carries the offset (logsumexp, logcumsumexp,
flex's lse) are compared as f(x + c) - c against f(x): the result rounds once at the
magnitude of c, so the bound is ulp(c).
"""
import numpy as np
import pytest

import flambeau as fl
import flambeau.nn.functional as F
from flambeau.nn.attention.flex_attention import flex_attention, relative_bias

OFFSETS = [1e4, -1e4, 1e6]
BOUND_ULP = 2


def grid(shape, seed, denom=8, span=64):
    """float32 values k / denom, k uniform in [-span, span]: exact after adding an offset."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-span, span + 1, size=shape) / denom).astype(np.float32)


def assert_ulps(got, want, ulps=BOUND_ULP, scale=None):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    tol = ulps * np.spacing(np.abs(want) if scale is None else np.float32(abs(scale)))
    tol = np.maximum(tol, ulps * np.spacing(np.float32(1e-30)))  # zeros: a subnormal's ulp
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(err <= tol), f"max error {err.max()} > bound (at {np.argmax(err - tol)})"


def T(a, grad=False):
    return fl.tensor(a.tolist(), dtype=fl.float32, requires_grad=grad) if grad else fl.from_numpy(a)


def test_log_softmax_issue_example():
    a = fl.log_softmax(fl.tensor([10000.0, 10001.0, 10002.0, 10003.0]), 0).tolist()
    b = fl.log_softmax(fl.tensor([0.0, 1.0, 2.0, 3.0]), 0).tolist()
    assert_ulps(a, b)


@pytest.mark.parametrize("c", OFFSETS)
@pytest.mark.parametrize("n", [5, 37, 1000])  # within one SIMD vector, tails, many vectors
def test_log_softmax_shift(c, n):
    x = grid((3, n), seed=n)
    want = fl.log_softmax(T(x), -1).numpy()
    got = fl.log_softmax(T(x + np.float32(c)), -1).numpy()
    assert_ulps(got, want)
    # Its gradient is g - softmax * sum(g): built from the output, so it shifts as well.
    xs = [T(x, True), T(x + np.float32(c), True)]
    g = T(grid((3, n), seed=n + 1))
    for t in xs:
        (fl.log_softmax(t, -1) * g).sum().backward()
    want = xs[0].grad.numpy()
    assert_ulps(xs[1].grad.numpy(), want, ulps=4, scale=np.abs(want).max())


@pytest.mark.parametrize("c", OFFSETS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_shift(c, smoothing):
    x = grid((6, 50), seed=7)
    target = fl.tensor([0, 3, 49, 7, 12, 3])
    xs = [T(x, True), T(x + np.float32(c), True)]
    losses = [F.cross_entropy(t, target, label_smoothing=smoothing, reduction="none") for t in xs]
    assert_ulps(losses[1].detach().numpy(), losses[0].detach().numpy())
    for loss in losses:
        loss.sum().backward()
    # p - onehot: p is exp((x - m) - ls) of identical arguments.
    want = xs[0].grad.numpy()
    assert_ulps(xs[1].grad.numpy(), want, scale=np.abs(want).max())


@pytest.mark.parametrize("c", OFFSETS)
def test_logsumexp_shift(c):
    x = grid((4, 300), seed=3)
    want = fl.logsumexp(T(x), -1).numpy()
    got = fl.logsumexp(T(x + np.float32(c)), -1).numpy().astype(np.float64) - np.float32(c)
    assert_ulps(got, want, ulps=1, scale=c)


@pytest.mark.parametrize("c", OFFSETS)
def test_logcumsumexp_shift(c):
    x = grid((3, 40), seed=4)
    xs = [T(x, True), T(x + np.float32(c), True)]
    ys = [fl.logcumsumexp(t, -1) for t in xs]
    assert_ulps(ys[1].detach().numpy().astype(np.float64) - np.float32(c), ys[0].detach().numpy(), ulps=1, scale=c)
    g = T(grid((3, 40), seed=5))
    for y in ys:
        (y * g).sum().backward()
    # grad_i = exp(x_i - y_i) U_i, y recomputed in double: the float32 gradient rounds once
    # (U_i may cancel, so the bound is taken at the largest gradient).
    want = xs[0].grad.numpy()
    assert_ulps(xs[1].grad.numpy(), want, scale=np.abs(want).max())


def attention_inputs(seed):
    # Entries k / 4, E = 16, scale 1/4: every score is a multiple of 1/64 below 16 in size,
    # so score + c is exact in float32 for |c| <= 1e4 (1e6 would need 27 bits: left out).
    q, k, v = (grid((1, 2, 24, 16), seed + i, denom=4, span=4) for i in range(3))
    return q, k, v


@pytest.mark.parametrize("c", [1e4, -1e4])
def test_flex_attention_shift(c):
    q, k, v = attention_inputs(11)
    L = q.shape[2]
    do = T(grid((1, 2, L, 16), 20))
    res = []
    for shift in (0.0, c):
        qs, ks, vs = (T(a, True) for a in (q, k, v))
        table = fl.full((2 * L - 1,), shift)
        out, lse = flex_attention(qs, ks, vs, score_mod=relative_bias(table), return_lse=True)
        (out * do).sum().backward()
        res.append((out.detach().numpy(), lse.detach().numpy(), qs.grad.numpy(), ks.grad.numpy(), vs.grad.numpy()))
    (o0, l0, *g0), (o1, l1, *g1) = res
    assert_ulps(o1, o0)  # P = exp(s - m) of identical arguments
    assert_ulps(l1.astype(np.float64) - np.float32(c), l0, ulps=1, scale=c)
    # The backward rebuilds P as exp((s - m) - ls); the gradients are sums of up to L
    # products, so they may round apart by a few ulp of their largest term.
    for a, b in zip(g1, g0):
        assert_ulps(a, b, ulps=8, scale=np.abs(b).max())


@pytest.mark.parametrize("c", [1e4, -1e4])
def test_sdpa_shift(c):
    q, k, v = attention_inputs(13)
    L = q.shape[2]
    do = T(grid((1, 2, L, 16), 21))
    res = []
    for shift in (0.0, c):
        qs, ks, vs = (T(a, True) for a in (q, k, v))
        out = F.scaled_dot_product_attention(qs, ks, vs, attn_mask=fl.full((L, L), shift))
        (out * do).sum().backward()
        res.append((out.detach().numpy(), qs.grad.numpy(), ks.grad.numpy(), vs.grad.numpy()))
    (o0, *g0), (o1, *g1) = res
    assert_ulps(o1, o0)
    for a, b in zip(g1, g0):
        assert_ulps(a, b, ulps=8, scale=np.abs(b).max())


@pytest.mark.parametrize("c", OFFSETS)
def test_linear_cross_entropy_shift(c):
    # x, W on a grid of 1/4 (D = 8): logits x W^T are exact multiples of 1/16, and + c
    # through the bias stays exact, so the logits shift exactly.
    x = grid((10, 8), 30, denom=4, span=8)
    w = grid((40, 8), 31, denom=4, span=8)
    target = fl.tensor([0, 5, 39, 7, 1, 1, 20, 33, 2, 9])
    res = []
    for shift in (0.0, c):
        xs, ws = T(x, True), T(w, True)
        b = fl.full((40,), shift).requires_grad_()
        loss = F.linear_cross_entropy(xs, ws, target, linear_bias=b, reduction="none")
        loss.sum().backward()
        res.append((loss.detach().numpy(), xs.grad.numpy(), ws.grad.numpy(), b.grad.numpy()))
    (l0, *g0), (l1, *g1) = res
    assert_ulps(l1, l0)
    for a, bb in zip(g1, g0):
        assert_ulps(a, bb, ulps=8, scale=np.abs(bb).max())
