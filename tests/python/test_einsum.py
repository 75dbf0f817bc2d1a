"""einsum and tensordot against torch 2.13 (float64 values and gradients, within a few
roundoffs of the sums' lengths), given contraction paths, torch's sublist form, bad equations;
and the derivatives of the special functions (lgamma, digamma, erfinv, i0) and of fmod,
hypot and copysign, whose values the OpInfo database checks."""
import mpmath
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close, assert_raises_naming

EINSUM_CASES = [
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("Ba,aB", [(2, 3), (3, 2)]),  # implicit output: A-Z before a-z
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("b...,b...->b", [(2, 3, 4), (2, 3, 4)]),  # ellipsis summed when the output lacks it
    ("...ij,...jk", [(5, 1, 2, 3), (4, 3, 6)]),  # ellipsis broadcast
    ("i...,i...", [(3, 2, 2), (3, 1, 2)]),
    ("...->...", [(2, 3)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),  # trace
    ("iij->ji", [(3, 3, 4)]),
    ("i,i", [(3,), (1,)]),  # size-1 broadcast
    ("i,j->ij", [(3,), (4,)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("ij,jk,kl->il", [(2, 30), (30, 40), (40, 3)]),
    ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]),
    ("ab,cd,ef->abcdef", [(2, 2), (2, 3), (1, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),  # attention scores
    ("i,i,i->", [(4,), (4,), (4,)]),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),  # spaces
    ("ij,jk", [(0, 3), (3, 4)]),  # empty
    ("ij,jk", [(2, 0), (0, 4)]),  # empty contraction: zeros
    (",i->i", [(), (3,)]),  # 0-dim operand
]


def pair(shapes, seed):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s) for s in shapes]
    f = [fl.tensor(a, requires_grad=True) for a in arrays]
    t = [torch.tensor(a, requires_grad=True) for a in arrays]
    return f, t


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_values_and_gradients(eq, shapes):
    f, t = pair(shapes, len(eq))
    got, want = fl.einsum(eq, *f), torch.einsum(eq, *t)
    assert_close(got, want.detach(), rtol=1e-13, atol=1e-13)
    if want.numel():
        g = np.random.default_rng(1).standard_normal(tuple(want.shape))
        got.backward(fl.tensor(g))
        want.backward(torch.tensor(g))
        for a, b in zip(f, t):
            assert_close(a.grad, b.grad, rtol=1e-13, atol=1e-13)


def test_einsum_takes_a_list_and_the_sublist_form():
    f, t = pair([(2, 3), (3, 4)], 0)
    want = torch.einsum("ij,jk->ik", *t).detach()
    assert_close(fl.einsum("ij,jk->ik", f), want, rtol=1e-14, atol=1e-14)
    assert_close(fl.einsum(f[0], [0, 1], f[1], [1, 2], [0, 2]), want, rtol=1e-14, atol=1e-14)
    assert_close(fl.einsum(f[0], [0, 1], f[1], [1, 2]), want, rtol=1e-14, atol=1e-14)
    x = fl.ones(2, 3, 4)
    assert fl.einsum(x, [Ellipsis, 1], [Ellipsis]).shape == (2, 3)


def test_einsum_path_gives_the_same_result():
    f, t = pair([(2, 30), (30, 40), (40, 3)], 3)
    want = torch.einsum("ij,jk,kl->il", *t).detach()
    for path in ([(0, 1), (0, 1)], [(1, 2), (0, 1)], [0, 2, 0, 1]):
        assert_close(fl.einsum("ij,jk,kl->il", *f, path=path), want, rtol=1e-13, atol=1e-13)


def test_einsum_integers_and_dtypes():
    a = fl.arange(6).reshape(2, 3)
    assert fl.einsum("ij,ij->", a, a).item() == 55
    assert_raises_naming(lambda: fl.einsum("i,i", fl.ones(3), fl.ones(3, dtype=fl.float64)), TypeError,
                         ["einsum", "float32", "float64"])


@pytest.mark.parametrize("eq,shapes,words", [
    ("ij,jk", [(2, 3)], ["einsum", "fewer operands"]),
    ("ij,jk", [(2, 3), (3, 4), (4, 4)], ["einsum", "more operands"]),
    ("ij,jk->ik", [(2, 3), (4, 4)], ["einsum", "subscript j", "(4, 4)", "size 3"]),
    ("ij->ii", [(2, 3)], ["einsum", "output subscript i appears more than once"]),
    ("i#", [(3,)], ["einsum", "invalid subscript", "[a-zA-Z]"]),
    ("ij->k", [(2, 3)], ["einsum", "output subscript k does not appear"]),
    ("ijk", [(2, 3)], ["einsum", "(3)", "(2)", "(2, 3)", "no ellipsis"]),
    ("ij...->", [(2,)], ["einsum", "more than the number of dimensions", "(2,)"]),
    ("i->i->", [(3,)], ["einsum", "more than one '->'"]),
    ("...i,...i->i", [(2, 3), (4, 3)], ["einsum", "ellipsis", "(4, 3)", "size 4"]),
    ("i.j", [(2, 3)], ["einsum", "'.'", "not part of any ellipsis"]),
    ("...i...", [(2, 3)], ["einsum", "ellipsis was already found"]),
])
def test_einsum_bad_equations(eq, shapes, words):
    assert_raises_naming(lambda: fl.einsum(eq, *[fl.ones(*s) for s in shapes]), ValueError, words)


def test_einsum_bad_path():
    ops = [fl.ones(2, 3), fl.ones(3, 4), fl.ones(4, 5)]
    assert_raises_naming(lambda: fl.einsum("ij,jk,kl", *ops, path=[(0, 1)]), ValueError, ["einsum", "path"])
    assert_raises_naming(lambda: fl.einsum("ij,jk,kl", *ops, path=[(0, 5), (0, 1)]), ValueError, ["einsum", "(0, 5)"])


TENSORDOT_CASES = [
    ((3, 4, 5), (4, 5, 6), 2),
    ((3, 4), (4, 5), 1),
    ((3, 4), (5, 6), 0),
    ((3, 4, 5), (5, 4, 6), ([1, 2], [1, 0])),
    ((3, 4, 5), (5, 4, 6), ([2], [0])),
    ((3, 4, 5), (5, 4, 6), [[2, 1], [0, 1]]),
    ((2, 3), (2, 3), ([0, 1], [0, 1])),
]


@pytest.mark.parametrize("sa,sb,dims", TENSORDOT_CASES, ids=[str(c) for c in range(len(TENSORDOT_CASES))])
def test_tensordot_values_and_gradients(sa, sb, dims):
    f, t = pair([sa, sb], 7)
    got, want = fl.tensordot(f[0], f[1], dims=dims), torch.tensordot(t[0], t[1], dims=dims)
    assert_close(got, want.detach(), rtol=1e-13, atol=1e-13)
    got.sum().backward()
    want.sum().backward()
    for a, b in zip(f, t):
        assert_close(a.grad, b.grad, rtol=1e-13, atol=1e-13)


def test_tensordot_dims_as_a_tensor():
    a, b = fl.ones(3, 4, 5), fl.ones(5, 4, 6)
    assert fl.tensordot(a, b, dims=fl.tensor([[1, 2], [1, 0]])).shape == (3, 6)
    assert fl.tensordot(fl.ones(3, 4), fl.ones(4, 5), dims=fl.tensor(1)).shape == (3, 5)


def test_tensordot_bad_input():
    a, b = fl.ones(3, 4), fl.ones(5, 6)
    assert_raises_naming(lambda: fl.tensordot(a, b, dims=1), ValueError,
                         ["tensordot", "contracted dimensions need to match", "(3, 4)", "(5, 6)"])
    assert_raises_naming(lambda: fl.tensordot(a, b, dims=-1), ValueError, ["tensordot", "dims >= 0"])
    assert_raises_naming(lambda: fl.tensordot(a, b, dims=3), ValueError, ["tensordot", "dims=3"])
    assert_raises_naming(lambda: fl.tensordot(a, a, dims=([0, 1], [0])), ValueError, ["tensordot", "same length"])
    assert_raises_naming(lambda: fl.tensordot(a, fl.ones(3, 3), dims=([0, 0], [0, 1])), ValueError,
                         ["tensordot", "multiple times"])


# Derivatives of the special functions and of the new binary ops against torch's, in float64
# on the ops' domains (away from poles); digamma's (trigamma) against mpmath: torch's
# polygamma(1, x) is off by up to 5e-10 relative on these points.
UNARY_GRADS = [("lgamma", 0.1, 5.0), ("lgamma", -2.9, -2.1), ("digamma", 0.2, 6.0), ("digamma", -1.8, -1.2),
               ("erfinv", -0.99, 0.99), ("i0", -40.0, 40.0)]


@pytest.mark.parametrize("name,lo,hi", UNARY_GRADS, ids=[f"{n}[{lo},{hi}]" for n, lo, hi in UNARY_GRADS])
def test_special_function_gradients(name, lo, hi):
    x = np.random.default_rng(5).uniform(lo, hi, 64)
    f, t = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, w = getattr(fl, name)(f), getattr(torch, name)(t)
    assert y.grad_fn.name() == w.grad_fn.name()
    y.sum().backward()
    w.sum().backward()
    if name == "digamma":
        trigamma = np.array([float(mpmath.polygamma(1, v)) for v in x])
        np.testing.assert_allclose(f.grad.numpy(), trigamma, rtol=1e-14, atol=0)
    else:
        assert_close(f.grad, t.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["fmod", "hypot", "copysign"])
def test_binary_gradients(name):
    rng = np.random.default_rng(len(name))
    a, b = rng.uniform(-4, 4, (5, 6)), rng.uniform(0.5, 3, (6,)) * rng.choice([-1, 1], 6)
    a[0, 0] = 0.0  # copysign's derivative at 0 is 0
    fa, fb = fl.tensor(a, requires_grad=True), fl.tensor(b, requires_grad=True)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    y, w = getattr(fl, name)(fa, fb), getattr(torch, name)(ta, tb)
    assert y.grad_fn.name() == w.grad_fn.name()
    assert_close(y, w.detach(), rtol=1e-15, atol=1e-15)
    y.sum().backward()
    w.sum().backward()
    assert_close(fa.grad, ta.grad, rtol=1e-14, atol=1e-14)
    assert_close(fb.grad, tb.grad, rtol=1e-14, atol=1e-14)


def test_binary_ops_in_place_and_scalars():
    x = fl.tensor([5.0, -5.0, 7.5])
    x.fmod_(2)
    assert x.tolist() == [1.0, -1.0, 1.5]
    assert fl.fmod(x, 2.0).grad_fn is None
    assert fl.copysign(fl.tensor([1, 2]), -1).tolist() == [-1.0, -2.0]  # integers: float32, as torch
    assert fl.fmod(fl.tensor([-7, 7]), 3).tolist() == [-1, 1]  # C's remainder: the dividend's sign
    assert_raises_naming(lambda: fl.fmod(fl.tensor([1]), 0), RuntimeError, ["fmod", "ZeroDivisionError"])
    assert_raises_naming(lambda: fl.hypot(fl.tensor([3]), fl.tensor([4])), NotImplementedError,
                         ["hypot", "int64"])
