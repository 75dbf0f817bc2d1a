"""batch_norm, group_norm, instance_norm and local_response_norm and their modules (issue 22
item 3): values and gradients against torch in float64, running-statistics updates
(momentum, cumulative average, eval mode, no tracking), unbatched inputs, the same bits on
1 and 2 threads, and bad input."""
import numpy as np
import pytest
import torch

import flambeau as fl
import flambeau.nn.functional as F
import torch.nn.functional as TF
from conftest import assert_raises_naming

R = np.random.default_rng(3)


def grads_of(lib, fn, arrays, upstream_seed=0):
    ts = [None if a is None else lib.tensor(a, requires_grad=True) for a in arrays]
    y = fn(lib, *ts)
    g = np.random.default_rng(upstream_seed).standard_normal(tuple(y.shape))
    (y * lib.tensor(g)).sum().backward()
    return [y.detach().numpy()] + [t.grad.numpy() for t in ts if t is not None]


def compare(fn, arrays, rtol=1e-12, atol=1e-12):
    for got, want in zip(grads_of(fl, fn, arrays), grads_of(torch, fn, arrays)):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


BN_SHAPES = [(6, 3), (4, 3, 7), (4, 3, 5, 6), (2, 3, 3, 4, 5)]


@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_matches_torch(shape, training, affine):
    c = shape[1]
    x = R.standard_normal(shape) * 3 + 1
    w, b = (R.standard_normal(c), R.standard_normal(c)) if affine else (None, None)
    rm, rv = R.standard_normal(c), R.uniform(0.5, 2.0, c)
    stats = {}

    def f(L, x, w=None, b=None):
        m, v = L.tensor(rm), L.tensor(rv)
        y = L.nn.functional.batch_norm(x, m, v, w, b, training, 0.3, 1e-3)
        stats[L.__name__] = (m.numpy(), v.numpy())
        return y
    compare(f, [x, w, b] if affine else [x])
    # Running statistics: (1 - momentum) * old + momentum * batch (unbiased variance).
    for got, want in zip(stats["flambeau"], stats["torch"]):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
    if training:
        n = x.size // c
        axes = tuple(i for i in range(len(shape)) if i != 1)
        np.testing.assert_allclose(stats["flambeau"][1], 0.7 * rv + 0.3 * x.var(axis=axes) * n / (n - 1), rtol=1e-13)


def test_batch_norm_without_running_stats_and_non_contiguous_input():
    x = R.standard_normal((5, 6, 4, 3))
    compare(lambda L, x: L.nn.functional.batch_norm(x.permute(0, 3, 1, 2), None, None, training=True), [x])


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_matches_torch(groups):
    x = R.standard_normal((3, 6, 4, 5)) * 2 - 1
    compare(lambda L, x, w, b: L.nn.functional.group_norm(x, groups, w, b, 1e-4),
            [x, R.standard_normal(6), R.standard_normal(6)])
    compare(lambda L, x: L.nn.functional.group_norm(x, groups), [x[:, :, 0]])


@pytest.mark.parametrize("use_input_stats", [True, False])
def test_instance_norm_matches_torch(use_input_stats):
    x = R.standard_normal((3, 4, 5, 6))
    rm, rv = R.standard_normal(4), R.uniform(0.5, 2.0, 4)
    stats = {}

    def f(L, x, w, b):
        m, v = L.tensor(rm), L.tensor(rv)
        y = L.nn.functional.instance_norm(x, m, v, w, b, use_input_stats, 0.2, 1e-4)
        stats[L.__name__] = (m.numpy(), v.numpy())
        return y
    compare(f, [x, R.standard_normal(4), R.standard_normal(4)])
    for got, want in zip(stats["flambeau"], stats["torch"]):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("shape, size", [((2, 5, 7), 3), ((2, 6, 4, 5), 2), ((1, 4, 2, 3, 3), 5)])
def test_local_response_norm_matches_its_formula_and_torch(shape, size):
    x = R.standard_normal(shape)
    sq = np.pad(x * x, [(0, 0), (size // 2, (size - 1) // 2)] + [(0, 0)] * (x.ndim - 2))
    window = sum(sq[:, i:i + shape[1]] for i in range(size)) / size
    want = x / (1.5 + 0.3 * window) ** 0.6
    np.testing.assert_allclose(F.local_response_norm(fl.tensor(x), size, 0.3, 0.6, 1.5).numpy(), want, rtol=1e-14,
                               atol=1e-15)
    # torch's avg_pool averages the window less exactly (relative errors near 1e-8 in float64).
    compare(lambda L, x: L.nn.functional.local_response_norm(x, size, 0.3, 0.6, 1.5), [x], rtol=1e-6, atol=1e-7)


def test_batch_norm_same_bits_on_one_and_two_threads():
    x = R.standard_normal((8, 16, 9, 11)).astype(np.float32)
    runs = []
    for threads in (1, 2):
        fl.set_num_threads(threads)
        try:
            fx = fl.tensor(x, requires_grad=True)
            w = fl.ones(16, requires_grad=True)
            y = F.batch_norm(fx, None, None, w, None, training=True)
            (y * y).sum().backward()
            runs.append([y.detach().numpy().tobytes(), fx.grad.numpy().tobytes(), w.grad.numpy().tobytes()])
        finally:
            fl.set_num_threads(2)
    assert runs[0] == runs[1]


MODULES = [
    ("BatchNorm1d", (4,), dict(), (6, 4)),
    ("BatchNorm1d", (4,), dict(momentum=None, affine=False), (6, 4, 3)),
    ("BatchNorm2d", (3,), dict(eps=1e-3, momentum=0.5, bias=False), (4, 3, 5, 5)),
    ("BatchNorm2d", (3,), dict(track_running_stats=False), (4, 3, 5, 5)),
    ("BatchNorm3d", (2,), dict(), (2, 2, 3, 3, 3)),
    ("InstanceNorm1d", (4,), dict(), (3, 4, 6)),
    ("InstanceNorm2d", (3,), dict(affine=True, track_running_stats=True), (2, 3, 4, 5)),
    ("InstanceNorm2d", (3,), dict(affine=True), (3, 4, 5)),  # unbatched
    ("InstanceNorm3d", (2,), dict(momentum=0.3, track_running_stats=True), (2, 2, 3, 3, 3)),
    ("GroupNorm", (2, 6), dict(), (3, 6, 4)),
    ("GroupNorm", (3, 6), dict(eps=1e-3, affine=False), (3, 6, 2, 2)),
    ("LocalResponseNorm", (3,), dict(alpha=0.1, beta=0.5, k=2.0), (2, 5, 3, 3)),
]


@pytest.mark.parametrize("name, args, kwargs, x_shape", MODULES)
def test_module_matches_torch_over_steps_and_in_eval(name, args, kwargs, x_shape):
    fm = getattr(fl.nn, name)(*args, **kwargs, **({} if name == "LocalResponseNorm" else dict(dtype=fl.float64)))
    tm = getattr(torch.nn, name)(*args, **kwargs, **({} if name == "LocalResponseNorm" else dict(dtype=torch.float64)))
    assert repr(fm) == repr(tm)
    assert list(fm.state_dict()) == list(tm.state_dict())
    with torch.no_grad():
        for p in tm.parameters():
            p.copy_(torch.tensor(R.standard_normal(tuple(p.shape))))
    fm.load_state_dict({n: fl.tensor(t.numpy()) for n, t in tm.state_dict().items()})
    for step in range(3):
        if step == 2:
            fm.eval(), tm.eval()
        x = R.standard_normal(x_shape) * 2 + step
        np.testing.assert_allclose(fm(fl.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-12, atol=1e-12)
    for (n, a), (_, b) in zip(fm.state_dict().items(), tm.state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-14, atol=1e-15, err_msg=n)


@pytest.mark.parametrize("call, error, words", [
    (lambda: F.batch_norm(fl.ones(4), None, None, training=True), ValueError, ["batch_norm", "(4,)"]),
    (lambda: F.batch_norm(fl.ones(4, 3), fl.zeros(4), fl.ones(4)), ValueError,
     ["batch_norm", "running_mean", "(4,)", "(4, 3)"]),
    (lambda: F.batch_norm(fl.ones(4, 3), None, None), ValueError, ["batch_norm", "evaluation mode"]),
    (lambda: F.batch_norm(fl.ones(1, 3), None, None, training=True), ValueError,
     ["batch_norm", "more than 1 value per channel", "(1, 3)"]),
    (lambda: F.batch_norm(fl.ones(4, 3, dtype=fl.int64), None, None, training=True), TypeError,
     ["batch_norm", "int64"]),
    (lambda: F.group_norm(fl.ones(2, 6, 3), 4), ValueError, ["group_norm", "(6)", "num_groups (4)"]),
    (lambda: F.group_norm(fl.ones(2, 6, 3), 2, fl.ones(3)), ValueError, ["group_norm", "weight", "(3,)"]),
    (lambda: F.instance_norm(fl.ones(2, 6)), ValueError, ["instance_norm", "(2, 6)"]),
    (lambda: F.instance_norm(fl.ones(2, 6, 3), use_input_stats=False), ValueError, ["instance_norm", "running"]),
    (lambda: F.local_response_norm(fl.ones(2, 6), 2), ValueError, ["local_response_norm", "(2, 6)"]),
    (lambda: fl.nn.BatchNorm2d(3)(fl.ones(2, 3, 4)), ValueError, ["BatchNorm2d", "4D", "3D"]),
    (lambda: fl.nn.BatchNorm1d(3)(fl.ones(2, 3, 4, 4)), ValueError, ["BatchNorm1d", "2D or 3D"]),
    (lambda: fl.nn.InstanceNorm2d(3, affine=True)(fl.ones(2, 4, 4, 4)), ValueError,
     ["InstanceNorm2d", "num_features (3)", "4"]),
    (lambda: fl.nn.GroupNorm(4, 6), ValueError, ["GroupNorm", "divisible"]),
])
def test_bad_input_names_the_op(call, error, words):
    assert_raises_naming(call, error, words)


def test_bad_input_leaves_running_stats_alone():
    m, v = fl.zeros(3), fl.ones(3)
    assert_raises_naming(lambda: F.batch_norm(fl.ones(1, 3), m, v, training=True), ValueError, ["batch_norm"],
                         unchanged=[(m, np.zeros(3, np.float32)), (v, np.ones(3, np.float32))])
