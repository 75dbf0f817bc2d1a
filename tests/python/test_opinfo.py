"""An OpInfo-style database: every op with sample inputs (contiguous, non-contiguous,
broadcast, empty, 0-dim, edge values), run by flambeau and by PyTorch 2.13 on the same
data, compared with per-op tolerances (and dtypes, shapes, NaN placement)."""
import math

import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close

FLOATS = ["float32", "float64", "bfloat16", "float16"]
INTS = ["int64", "int32", "int16", "uint8"]
RNG = np.random.default_rng(1234)


def make(shape, dtype, lo=-3.0, hi=3.0, edge=False):
    """The same values as a flambeau and a torch tensor."""
    if dtype == "bool":
        a = RNG.random(shape) > 0.5
    elif dtype in FLOATS:
        a = RNG.uniform(lo, hi, shape)
        if edge and a.size >= 6:
            a.flat[:6] = [np.inf, -np.inf, np.nan, -0.0, 0.0, 1e30]
    else:
        a = RNG.integers(max(lo, 0) if dtype == "uint8" else lo, hi + 1, shape)
    t = torch.tensor(a).to(getattr(torch, dtype))
    return fl.from_dlpack(t.clone()), t


def samples(arity, dtype, lo=-3.0, hi=3.0):
    """(name, flambeau args, torch args) for the standard layouts."""
    def group(shapes, edge=False, transpose=False):
        pairs = [make(s, dtype, lo, hi, edge) for s in shapes]
        f = [p[0] for p in pairs]
        t = [p[1] for p in pairs]
        if transpose:
            f = [x.transpose(0, 1) for x in f]
            t = [x.transpose(0, 1) for x in t]
        return f, t

    yield ("contiguous", *group([(3, 4, 5)] * arity))
    yield ("transposed", *group([(4, 3, 5)] * arity, transpose=True))
    sliced_f, sliced_t = group([(6, 8)] * arity)
    yield ("strided", [x[::2, 1::3] for x in sliced_f], [x[::2, 1::3] for x in sliced_t])
    if arity > 1:
        yield ("broadcast", *group([(3, 1, 5), (4, 1)] + [(5,)] * (arity - 2)))
    yield ("empty", *group([(0, 4)] * arity))
    yield ("0-dim", *group([()] * arity))
    if dtype in FLOATS:
        yield ("edge", *group([(37,)] * arity, edge=True))
    yield ("long", *group([(70001,)] * arity))


class Op:
    def __init__(self, name, fn=None, torch_fn=None, arity=1, dtypes=FLOATS, rtol=None, lo=-3.0, hi=3.0,
                 skip=()):
        self.name = name
        self.fn = fn or getattr(fl, name)
        self.torch_fn = torch_fn or getattr(torch, name)
        self.arity, self.dtypes, self.rtol, self.lo, self.hi, self.skip = arity, dtypes, rtol, lo, hi, skip

    def tol(self, dtype):
        if self.rtol is not None and dtype in ("float32", "float64"):
            return self.rtol
        if self.rtol is not None and dtype in ("float16", "bfloat16"):  # long accumulations round more
            return {"float16": 1e-2, "bfloat16": 3e-2}[dtype]
        return {"float64": 1e-12, "float32": 2e-6, "bfloat16": 1e-2, "float16": 2e-3}.get(dtype, 0)


def reduce_last(fn):
    return lambda x: fn(x, -1) if x.dim() > 0 else fn(x, 0)


OPS = [
    *[Op(n) for n in ["exp", "expm1", "sin", "cos", "tanh", "sigmoid", "erf", "abs", "neg", "floor", "ceil", "trunc"]],
    Op("log", lo=0.1, hi=5), Op("log1p", lo=0.1, hi=5), Op("sqrt", lo=0, hi=5), Op("rsqrt", lo=0.1, hi=5),
    Op("relu", dtypes=FLOATS + INTS[:2]), Op("abs_int", fl.abs, torch.abs, dtypes=INTS[:3]),
    Op("round", fl.round, torch.round, lo=-5, hi=5),
    Op("gelu", torch_fn=torch.nn.functional.gelu), Op("gelu_tanh", lambda x: fl.gelu(x, approximate="tanh"),
                   lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    Op("silu", fl.silu, torch.nn.functional.silu),
    Op("add", arity=2, dtypes=FLOATS + INTS[:2]), Op("sub", arity=2, dtypes=FLOATS + INTS[:2]),
    Op("mul", arity=2, dtypes=FLOATS + INTS[:2] + ["bool"]),
    Op("div", arity=2, lo=0.5, hi=4), Op("maximum", arity=2, dtypes=FLOATS + INTS[:2]),
    Op("minimum", arity=2, dtypes=FLOATS + INTS[:2]), Op("atan2", arity=2),
    Op("remainder", arity=2, lo=0.5, hi=6, dtypes=["float32", "float64", "int64"]),
    Op("floor_divide", arity=2, lo=1, hi=6, dtypes=["float32", "float64", "int64"]),
    Op("pow", arity=2, lo=0.5, hi=2),
    Op("add_scalar", lambda x: x + 2.5, lambda x: x + 2.5, dtypes=FLOATS + INTS[:2]),
    Op("rsub_scalar", lambda x: 3 - x, lambda x: 3 - x, dtypes=FLOATS + INTS[:2]),
    Op("mul_int_scalar", lambda x: x * 3, lambda x: x * 3, dtypes=FLOATS + INTS),
    *[Op(n, arity=2, dtypes=FLOATS + INTS[:2] + ["bool"]) for n in ["eq", "ne", "lt", "le", "gt", "ge"]],
    *[Op(n, arity=2, dtypes=["bool", "float32", "int64"]) for n in ["logical_and", "logical_or", "logical_xor"]],
    Op("where", lambda c, a, b: fl.where(c > 0, a, b), lambda c, a, b: torch.where(c > 0, a, b), arity=3),
    Op("clamp", lambda x: fl.clamp(x, -1, 2), lambda x: torch.clamp(x, -1, 2), dtypes=FLOATS + INTS[:2]),
    Op("lerp", lambda a, b, w: fl.lerp(a, b, w), lambda a, b, w: torch.lerp(a, b, w), arity=3),
    Op("addcmul", lambda a, b, c: fl.addcmul(a, b, c, value=0.5), lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
       arity=3),
    Op("sum", rtol=1e-5), Op("sum_dim", lambda x: fl.sum(x, 0, keepdim=True) if x.dim() else fl.sum(x),
                              lambda x: torch.sum(x, 0, keepdim=True) if x.dim() else torch.sum(x), rtol=1e-5),
    Op("mean", lambda x: fl.mean(x), lambda x: torch.mean(x), rtol=1e-5),
    Op("prod", lambda x: fl.prod(x * 0.1 + 1), lambda x: torch.prod(x * 0.1 + 1), rtol=1e-5),
    Op("amax", lambda x: fl.amax(x), lambda x: torch.amax(x), dtypes=FLOATS + INTS, skip=("empty",)),
    Op("amin", lambda x: fl.amin(x), lambda x: torch.amin(x), dtypes=FLOATS + INTS, skip=("empty",)),
    Op("var", lambda x: fl.var(x), lambda x: torch.var(x), rtol=1e-5, dtypes=["float32", "float64"],
       skip=("empty", "0-dim")),
    Op("norm", lambda x: fl.norm(x), lambda x: torch.norm(x), rtol=1e-5, dtypes=["float32", "float64"]),
    Op("logsumexp", reduce_last(fl.logsumexp), reduce_last(torch.logsumexp), rtol=1e-5, skip=("empty",)),
    Op("softmax", reduce_last(fl.softmax), reduce_last(torch.softmax), rtol=1e-5, skip=("empty",)),
    Op("log_softmax", reduce_last(fl.log_softmax), reduce_last(torch.log_softmax), rtol=1e-5, skip=("empty",)),
    Op("cumsum", reduce_last(fl.cumsum), reduce_last(torch.cumsum), rtol=1e-5, dtypes=FLOATS + INTS[:2]),
    Op("cumprod", lambda x: fl.cumprod(x * 0.01 + 1, 0), lambda x: torch.cumprod(x * 0.01 + 1, 0), rtol=1e-5),
    Op("logcumsumexp", reduce_last(fl.logcumsumexp), reduce_last(torch.logcumsumexp), rtol=1e-5),
    Op("sort_values", lambda x: fl.sort(x).values, lambda x: torch.sort(x, stable=True).values, dtypes=FLOATS + INTS),
    Op("argsort", lambda x: fl.argsort(x), lambda x: torch.sort(x, stable=True).indices, dtypes=["float32", "int64"]),
    Op("matmul", lambda a, b: fl.matmul(a, b.transpose(-1, -2)) if a.dim() >= 2 else a * b,
       lambda a, b: torch.matmul(a, b.transpose(-1, -2)) if a.dim() >= 2 else a * b, arity=2, rtol=1e-5,
       dtypes=["float32", "float64"], skip=("broadcast", "long")),
]


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_op_matches_torch(op):
    checked = 0
    for dtype in op.dtypes:
        for kind, fargs, targs in samples(op.arity, dtype, op.lo, op.hi):
            if kind in op.skip or (kind == "edge" and op.name in ("prod", "cumprod", "logcumsumexp", "var")):
                continue
            try:
                want = op.torch_fn(*targs)
            except RuntimeError:
                continue  # PyTorch has no kernel for this dtype: nothing to compare with
            got = op.fn(*fargs)
            tol = op.tol(dtype)
            assert_close(got, want, rtol=tol, atol=tol if tol else 0)
            checked += 1
    assert checked > 0


def test_int_division_by_zero_and_overflow_cases():
    a, ta = fl.tensor([7, -7, 0]), torch.tensor([7, -7, 0])
    assert (fl.floor_divide(a, 2).tolist()) == torch.floor_divide(ta, 2).tolist()
    assert fl.remainder(a, -3).tolist() == torch.remainder(ta, -3).tolist()
    assert math.isnan(fl.tensor(0.0).div(0.0).item())
