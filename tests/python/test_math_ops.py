"""Math ops of issue 22 item 5 (part): isposinf/isneginf, nan_to_num, logaddexp(2), bincount,
histc, normalize, cosine_similarity, pairwise_distance, cdist. Values against torch are in
test_opinfo_more.CASES; here: special values by the written rule (IEEE), gradients against
torch's and gradcheck (float64), bad input."""
import math

import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_raises_naming

R = np.random.default_rng(5)
A, B = R.standard_normal((4, 6)), R.standard_normal((4, 6))
INF, NAN = math.inf, math.nan
SPECIAL = np.where(R.random((4, 6)) < 0.3, INF, 0.0) * np.where(R.random((4, 6)) < 0.5, 1, -1)
SPECIAL[0, :2] = NAN


def test_special_values():
    x = fl.tensor([INF, -INF, NAN, 0.0, -0.0, 1e308], dtype=fl.float64)
    assert fl.isposinf(x).tolist() == [True, False, False, False, False, False]
    assert fl.isneginf(x).tolist() == [False, True, False, False, False, False]
    assert fl.nan_to_num(x).tolist() == [np.finfo(np.float64).max, -np.finfo(np.float64).max, 0.0, 0.0, -0.0, 1e308]
    h = fl.nan_to_num(x.to(fl.bfloat16)).float().tolist()
    assert h[0] == float(torch.finfo(torch.bfloat16).max) and h[1] == -h[0]
    assert fl.nan_to_num(x.half()).float().tolist()[:2] == [65504.0, -65504.0]
    assert fl.isposinf(fl.tensor([1, 2])).tolist() == [False, False]  # integers are finite
    # log(e^a + e^b) with a == b == +-inf is a, not NaN; inf beside a finite value is inf.
    a = fl.tensor([INF, -INF, INF, -INF, 0.0], dtype=fl.float64)
    b = fl.tensor([INF, -INF, 1.0, 2.0, 0.0], dtype=fl.float64)
    assert fl.logaddexp(a, b).tolist() == [INF, -INF, INF, 2.0, math.log(2.0)]
    assert fl.logaddexp2(a, b).tolist() == [INF, -INF, INF, 2.0, 1.0]
    big = fl.tensor([1000.0], dtype=fl.float64)
    assert fl.logaddexp(big, big).tolist() == [1000.0 + math.log(2.0)]  # no overflow


GRADS = {
    "logaddexp": lambda L, a, b: L.logaddexp(a, b),
    "logaddexp2": lambda L, a, b: L.logaddexp2(a, b),
    "nan_to_num": lambda L, a, b: L.nan_to_num(a + L.tensor(SPECIAL), posinf=2.0, neginf=-3.0) * b,
    "normalize": lambda L, a, b: L.nn.functional.normalize(a, p=3.0, dim=0),
    "cosine_similarity": lambda L, a, b: L.nn.functional.cosine_similarity(a, b),
    "pairwise_distance": lambda L, a, b: L.nn.functional.pairwise_distance(a, b, keepdim=True),
    "cdist": lambda L, a, b: L.cdist(a, b),
    "cdist_p1": lambda L, a, b: L.cdist(a.reshape(2, 2, 6), b.reshape(2, 2, 6), p=1.5),
}


@pytest.mark.parametrize("name", list(GRADS), ids=str)
def test_gradients_match_torch(name):
    f = GRADS[name]
    fa, fb = fl.tensor(A, requires_grad=True), fl.tensor(B, requires_grad=True)
    ta, tb = torch.tensor(A, requires_grad=True), torch.tensor(B, requires_grad=True)
    fy, ty = f(fl, fa, fb), f(torch, ta, tb)
    g = R.standard_normal(tuple(ty.shape))
    (fy * fl.tensor(g)).sum().backward()
    (ty * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(fy.detach().numpy(), ty.detach().numpy(), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(fa.grad.numpy(), ta.grad.numpy(), rtol=1e-12, atol=1e-13)
    if tb.grad is None:  # b unused
        assert fb.grad is None
    else:
        np.testing.assert_allclose(fb.grad.numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-13)
    assert fl.autograd.gradcheck(lambda a, b: f(fl, a, b), [fl.tensor(A, requires_grad=True),
                                                             fl.tensor(B, requires_grad=True)])


def test_counting_ops():
    assert fl.bincount(fl.tensor([], dtype=fl.int64)).tolist() == []
    assert fl.bincount(fl.tensor([2, 2]), minlength=4).tolist() == [0, 0, 2, 0]
    w = fl.bincount(fl.tensor([1, 1]), weights=fl.tensor([1, 2]))
    assert w.dtype == fl.float64 and w.tolist() == [0.0, 3.0]  # integer weights sum in double, as torch
    # The top edge falls in the last bin; values outside [min, max] and NaN are left out.
    assert fl.histc(fl.tensor([0.0, 1.0, 2.0, 3.0, 4.0, NAN]), bins=3, min=0, max=3).tolist() == [1.0, 1.0, 2.0]
    assert fl.histc(fl.tensor([5.0, 5.0]), bins=2).tolist() == [0.0, 2.0]  # min == max == 5: range [4, 6]


@pytest.mark.parametrize("call, error, words", [
    (lambda: fl.bincount(fl.tensor([[1, 2]])), ValueError, ["bincount", "(1, 2)"]),
    (lambda: fl.bincount(fl.tensor([1, -2])), ValueError, ["bincount", "-2"]),
    (lambda: fl.bincount(fl.tensor([1.0])), ValueError, ["bincount", "float32"]),
    (lambda: fl.bincount(fl.tensor([1, 2]), weights=fl.ones(3)), ValueError, ["bincount", "(3,)"]),
    (lambda: fl.histc(fl.tensor([1, 2])), TypeError, ["histc", "int64"]),
    (lambda: fl.histc(fl.ones(2), bins=0), ValueError, ["histc", "bins"]),
    (lambda: fl.histc(fl.ones(2), min=3, max=1), ValueError, ["histc", "min"]),
    (lambda: fl.cdist(fl.ones(3, 2), fl.ones(3, 4)), ValueError, ["cdist", "(3, 2)", "(3, 4)"]),
    (lambda: fl.cdist(fl.ones(3), fl.ones(3)), ValueError, ["cdist", "(3,)"]),
    (lambda: fl.cosine_similarity(fl.ones(3, 2), fl.ones(4, 2)), ValueError, ["cosine_similarity", "(3, 2)"]),
])
def test_bad_input_names_the_op(call, error, words):
    assert_raises_naming(call, error, words)
