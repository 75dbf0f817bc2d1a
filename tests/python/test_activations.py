"""The activations of torch.nn.functional and their modules (issue 22 item 7): gradients
against torch's in float64, in-place forms, rrelu's random slopes, bad input, and the module
forms (defaults, repr, forward equal to the functional). Values are compared in
test_opinfo_more.CASES."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_raises_naming
import flambeau.nn.functional as F
import torch.nn.functional as TF

R = np.random.default_rng(22)
# Kept a margin away from every kink (0, +-lambd, +-3, clamp bounds): the one-sided
# derivatives differ there, and torch picks one side by convention.
X = R.uniform(-4, 4, (4, 6))
X = np.where(np.min(np.abs(X[..., None] - np.array([0, 0.5, -0.5, 3, -3, 1, -1, 6, 0.1])), -1) < 0.05, 0.7, X)

# name -> (flambeau call, torch call), on an input x of shape (4, 6).
FUNCS = {
    "elu": (lambda x: F.elu(x, 0.7), lambda x: TF.elu(x, 0.7)),
    "selu": (F.selu, TF.selu),
    # alpha a power of 2: torch's celu backward rounds 1 / alpha to float32 (derivatives.yaml).
    "celu": (lambda x: F.celu(x, 2.0), lambda x: TF.celu(x, 2.0)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2)),
    "rrelu_eval": (lambda x: F.rrelu(x, 0.1, 0.3), lambda x: TF.rrelu(x, 0.1, 0.3)),
    "hardtanh": (lambda x: F.hardtanh(x, -1.0, 3.0), lambda x: TF.hardtanh(x, -1.0, 3.0)),
    "relu6": (F.relu6, TF.relu6),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid),
    "hardswish": (F.hardswish, TF.hardswish),
    "mish": (F.mish, TF.mish),
    "glu": (F.glu, TF.glu),
    "glu_dim0": (lambda x: F.glu(x, 0), lambda x: TF.glu(x, 0)),
    "log_sigmoid": (F.logsigmoid, TF.logsigmoid),
    "softsign": (F.softsign, TF.softsign),
    "softshrink": (F.softshrink, TF.softshrink),
    "hardshrink": (F.hardshrink, TF.hardshrink),
    "tanhshrink": (F.tanhshrink, TF.tanhshrink),
    "threshold": (lambda x: F.threshold(x, 0.1, -2.0), lambda x: TF.threshold(x, 0.1, -2.0)),
    "softmin": (lambda x: F.softmin(x, 1), lambda x: TF.softmin(x, 1)),
    "relu": (F.relu, TF.relu),
}


def pair(a):
    return fl.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


@pytest.mark.parametrize("name", list(FUNCS), ids=str)
def test_gradient_matches_torch(name):
    f, t = FUNCS[name]
    fx, tx = pair(X)
    fy, ty = f(fx), t(tx)
    upstream = R.standard_normal(tuple(ty.shape))
    (fy * fl.tensor(upstream)).sum().backward()
    (ty * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-13, atol=1e-14)
    want = EXACT_GRADIENT[name](X, upstream) if name in EXACT_GRADIENT else tx.grad.numpy()
    np.testing.assert_allclose(fx.grad.numpy(), want, rtol=1e-12, atol=1e-14)


# Where torch's backward rounds a constant to float32 (hardsigmoid's 1/6), the gradient is
# checked against the derivative itself.
EXACT_GRADIENT = {"hardsigmoid": lambda x, g: np.where(np.abs(x) < 3, g / 6, 0.0)}


def test_prelu_gradient_for_input_and_per_channel_weight():
    x = R.standard_normal((2, 3, 4))
    w = np.array([0.1, -0.3, 0.6])
    fx, tx = pair(x)
    fw, tw = pair(w)
    (F.prelu(fx, fw) ** 2).sum().backward()
    (TF.prelu(tx, tw) ** 2).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-13)
    np.testing.assert_allclose(fw.grad.numpy(), tw.grad.numpy(), rtol=1e-13)


INPLACE = {"elu": {}, "selu": {}, "celu": {}, "leaky_relu": {}, "rrelu": {}, "hardtanh": {}, "relu6": {},
           "hardsigmoid": {}, "hardswish": {}, "mish": {}, "threshold": {"threshold": 0.1, "value": 5.0},
           "relu": {}, "silu": {}}


@pytest.mark.parametrize("name", list(INPLACE), ids=str)
def test_inplace_writes_the_input_and_returns_it(name):
    fn, kwargs = getattr(F, name), INPLACE[name]
    x = fl.tensor(X)
    want = fn(x, **kwargs).numpy()
    out = fn(x, inplace=True, **kwargs)
    assert out is x
    np.testing.assert_array_equal(x.numpy(), want)


def test_inplace_on_a_non_leaf_keeps_the_gradient():
    fx, tx = pair(X)
    fy, ty = fx * 2, tx * 2
    F.elu(fy, inplace=True).sum().backward()
    TF.elu(ty, inplace=True).sum().backward()
    np.testing.assert_allclose(fx.grad.numpy(), tx.grad.numpy(), rtol=1e-13)


def test_inplace_on_a_leaf_that_requires_grad_is_refused():
    x = fl.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError):
        F.elu(x, inplace=True)


def test_rrelu_training_draws_slopes_in_range_from_the_seeded_generator():
    x = fl.tensor(X)
    fl.manual_seed(5)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    fl.manual_seed(5)
    again = F.rrelu(x, 0.1, 0.3, training=True)
    np.testing.assert_array_equal(y.numpy(), again.numpy())
    neg = X < 0
    np.testing.assert_array_equal(y.numpy()[~neg], X[~neg])
    slopes = y.numpy()[neg] / X[neg]
    assert slopes.min() >= 0.1 - 1e-12 and slopes.max() <= 0.3 + 1e-12
    assert np.unique(slopes).size > 1  # one draw per element, not one per call
    xg = fl.tensor(X, requires_grad=True)
    fl.manual_seed(5)
    F.rrelu(xg, 0.1, 0.3, training=True).sum().backward()  # the gradient is each element's slope
    np.testing.assert_allclose(xg.grad.numpy()[neg], slopes, rtol=1e-12)
    np.testing.assert_array_equal(xg.grad.numpy()[~neg], 1.0)


@pytest.mark.parametrize("call, error, words", [
    (lambda x: F.glu(x[:, :5]), ValueError, ["glu", "even", "(4, 5)"]),
    (lambda x: F.glu(x, 2), IndexError, ["glu", "dim 2"]),
    (lambda x: F.glu(fl.tensor(1.0)), ValueError, ["glu", "scalars"]),
    (lambda x: F.hardtanh(x, 1.0, -1.0), ValueError, ["hardtanh", "min_val"]),
    (lambda x: F.prelu(x, fl.ones(4)), ValueError, ["prelu", "channel size = 6", "(4, 6)"]),
    (lambda x: F.softshrink(x, -0.5), ValueError, ["softshrink", "-0.5"]),
    (lambda x: F.rrelu(x, 0.5, 0.1), ValueError, ["rrelu", "Lower bound"]),
    (lambda x: F.celu(x, 0.0), ValueError, ["celu", "alpha"]),
    (lambda x: F.elu(fl.ones(3, dtype=fl.int64)), TypeError, ["elu", "int64", "(3,)"]),
])
def test_bad_input_names_the_op_and_writes_nothing(call, error, words):
    x = fl.tensor(X)
    assert_raises_naming(lambda: call(x), error, words, unchanged=[(x, X)])


# (module name, constructor args): each module's forward equals torch's module's.
MODULES = [("ELU", (0.5,)), ("SELU", ()), ("CELU", (2.0,)), ("LeakyReLU", (0.3,)), ("Hardtanh", (-2.0, 2.0)),
           ("ReLU6", ()), ("Hardsigmoid", ()), ("Hardswish", ()), ("Mish", ()), ("GLU", (0,)), ("LogSigmoid", ()),
           ("Softsign", ()), ("Softshrink", (1.0,)), ("Hardshrink", (0.7,)), ("Tanhshrink", ()),
           ("Threshold", (0.2, -1.0)), ("Softmin", (1,)), ("Softmax", (0,)), ("LogSoftmax", (1,)),
           ("Softplus", (2.0, 5.0)), ("ReLU", ()), ("SiLU", ()), ("Identity", (3, "ignored")),
           ("Flatten", (0,)), ("Unflatten", (1, (2, 3))), ("PReLU", ()), ("PReLU", (6, 0.1))]


@pytest.mark.parametrize("name, args", MODULES, ids=lambda v: str(v))
def test_module_matches_torch(name, args):
    fm, tm = getattr(fl.nn, name)(*args), getattr(torch.nn, name)(*args)
    if name == "PReLU":
        fm, tm = fm.double(), tm.double()
    x = R.standard_normal((4, 6))
    np.testing.assert_allclose(fm(fl.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-13, atol=1e-15)
    assert repr(fm) == repr(tm)
    assert sorted(dict(fm.named_parameters())) == sorted(dict(tm.named_parameters()))


def test_module_defaults_and_inplace():
    assert fl.nn.RReLU().lower == 1.0 / 8 and fl.nn.RReLU().upper == 1.0 / 3
    assert fl.nn.Hardtanh().min_val == -1.0 and fl.nn.ELU().alpha == 1.0 and not fl.nn.ELU().inplace
    with pytest.raises(TypeError):
        fl.nn.Threshold(0.1)  # threshold and value are required, as in torch
    x = fl.tensor(X)
    assert fl.nn.LeakyReLU(0.1, inplace=True)(x) is x
    np.testing.assert_array_equal(x.numpy(), np.where(X > 0, X, 0.1 * X))
    m = fl.nn.RReLU(0.1, 0.3)
    m.eval()
    np.testing.assert_array_equal(m(fl.tensor(X)).numpy(), np.where(X >= 0, X, 0.2 * X))
    assert fl.nn.PReLU(3).weight.shape == (3,) and float(fl.nn.PReLU().weight[0]) == 0.25
    with pytest.raises(ValueError):
        fl.nn.PReLU(0)
