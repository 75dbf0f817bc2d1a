"""Compiled training over the OpInfo database (test_opinfo.OPS): each float32 op compiled
with the cpp backend, inputs requiring grad, traced on one sample and then run on another
(so a tensor the trace captured by mistake would show): the outputs and the gradients are
eager's bits. The compiled forward and backward replay the ops eager runs, in its order, and
the cpp backend's kernels are bitwise equal to eager's; where the backward cannot be traced
the graph runs with eager autograd (still eager's bits). Every op but those of
EAGER_BACKWARD compiles its backward, and those are at most a fifth of the ops: each case
checks its own op, so the file passes in any order."""
import warnings

import numpy as np
import pytest

import flambeau as fl
from test_opinfo import OPS, make


def _differentiable(op):
    return "float32" in op.dtypes and op.name not in ("argsort",)


def _inputs(rng, op, shape):
    return [fl.from_dlpack(make(rng, shape, "float32", op.lo, op.hi)[1].clone()).requires_grad_(True)
            for _ in range(op.arity)]


def _run(f, xs, weight):
    for x in xs:
        x.grad = None
    y = f(*xs)
    if not y.requires_grad:
        return y.detach(), [None] * len(xs), False
    (y * weight).sum().backward()
    return y.detach(), [None if x.grad is None else x.grad.clone() for x in xs], True


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(((a == b) | (a.isnan() & b.isnan())).all())


# Ops whose backward runs with eager autograd (their derivative calls kernels the op hook
# does not see).
EAGER_BACKWARD = {"prod", "var", "cumprod", "logcumsumexp", "digamma", "i0"}  # digamma, i0: trigamma, i1


@pytest.mark.parametrize("op", [o for o in OPS if _differentiable(o)], ids=lambda o: o.name)
def test_compiled_gradients_are_eagers(op, tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMBEAU_CACHE_DIR", str(tmp_path / "cache"))
    rng = np.random.default_rng(abs(hash(op.name)) % (1 << 32))
    f = fl.compile(op.fn)
    first, second = _inputs(rng, op, (6, 8)), _inputs(rng, op, (6, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a break or an eager backward warns once
        _run(f, first, 1.0)  # the trace
        for xs in (first, second):
            want, want_grads, differentiable = _run(op.fn, xs, 1.0)
            if not differentiable:
                pytest.skip(f"{op.name}: no gradient")
            weight = fl.from_dlpack(make(rng, tuple(want.shape), "float32")[1].clone())
            want, want_grads, _ = _run(op.fn, xs, weight)
            got, got_grads, _ = _run(f, xs, weight)
            assert _same(got, want), op.name
            for g, w in zip(got_grads, want_grads):
                assert _same(g, w), op.name
    node = f(*second).grad_fn
    compiled = node is not None and node.name() == "CompiledFunctionBackward"
    assert compiled == (op.name not in EAGER_BACKWARD), (op.name, node.name() if node else None)


def test_most_ops_compile_their_backward():
    ops = {o.name for o in OPS if _differentiable(o)}
    assert EAGER_BACKWARD <= ops, EAGER_BACKWARD - ops
    assert len(EAGER_BACKWARD) <= 0.2 * len(ops), sorted(EAGER_BACKWARD)

