"""An OpInfo-style database: every op with sample inputs (contiguous, non-contiguous,
channels-last (elementwise results keep that layout, as torch's), broadcast, empty, 0-dim,
edge values), run by flambeau and by PyTorch 2.13 on the same
data, compared with per-op tolerances (and dtypes, shapes, NaN placement). Inputs are drawn
from a generator seeded by the op's name, so each test sees the same data in any order.

PyTorch is the truth only on ordinary finite values. Edge values (EDGES: +-inf, NaN, +-0,
huge, tiny) follow a written rule that flambeau must satisfy whatever the CPU:

  rule                                               ops
  IEEE 754 / C99 Annex F, as numpy's float64 gives   exp exp2 expm1 sin cos tan tanh erf abs
    (exp(-inf) = 0, sin(inf) = NaN, log(-0) = -inf,  neg floor ceil trunc round log log2 log10
    sqrt(-0) = -0, 1/sqrt(-0) = -inf, pow(x, 0) = 1, log1p sqrt rsqrt reciprocal add sub mul
    atan2(-0, -0) = -pi, inf - inf = NaN, 1/-0 = -inf) div pow atan2 remainder floor_divide
                                                     maximum minimum clamp ..., and every other op
                                                     of the unary schema: numpy's function of its
                                                     name (asin: numpy's arcsin)
  the limit of the formula at +-inf                  sigmoid(+inf) = 1, sigmoid(-inf) = 0,
                                                     silu/gelu(+inf) = +inf, silu/gelu(-inf) = 0
  NaN in, NaN out (maximum/minimum/clamp too)        every float op, except where/comparisons
                                                     (NaN compares unequal, is truthy) and sign
  mpmath's value, with torch's poles and limits:     lgamma digamma erfinv i0
    lgamma = +inf at poles and +-inf, digamma(+-0) =
    -+inf, NaN at negative integers and -inf,
    erfinv(+-1) = +-inf, NaN beyond
  sign(x) = (0 < x) - (x < 0): sign(NaN) = 0 and     sign
    sign(-0) = 0, as PyTorch defines it
  sign of zero: as IEEE for                          neg abs floor ceil trunc sqrt mul reciprocal
                                                     (other ops may return either zero)
The result is compared with the rule's float64 value rounded to the dtype: infinities and
NaN exactly, finite values within the op's tolerance. Tolerances are the dtype's defaults (a
few units of roundoff) where the op's condition number |x f'(x) / f(x)| stays small on the
sampled range; tan is sampled on [-1.4, 1.4], where it is below 2.8 / sin(2.8) < 9, away
from its poles at +-pi/2. Reductions, scans and sorts follow the rules of
test_reduction_edge_rules.

Floating reductions (sum, mean, prod, var, norm, logsumexp, softmax, cumsum, ...) in
float32/float64 are checked against a float64 reference with a bound derived from the
input (u: the dtype's unit roundoff, n: terms per output; the *_ref functions state them): torch's float32
answer has errors of its own, so it is not the reference there."""
import math
import zlib

import mpmath
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close, to_numpy

FLOATS = ["float32", "float64", "bfloat16", "float16"]
INTS = ["int64", "int32", "int16", "uint8"]
EDGES = [np.inf, -np.inf, np.nan, -0.0, 0.0, 1e30, -1e30, 1e-30]  # the first values of "edge" samples
UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}


def make(rng, shape, dtype, lo=-3.0, hi=3.0, edge=False):
    """The same values as a flambeau and a torch tensor."""
    if dtype == "bool":
        a = rng.random(shape) > 0.5
    elif dtype in FLOATS:
        a = rng.uniform(lo, hi, shape)
        if edge:
            a.flat[:len(EDGES)] = EDGES
    else:
        a = rng.integers(max(lo, 0) if dtype == "uint8" else lo, hi + 1, shape)
    t = torch.tensor(a).to(getattr(torch, dtype))
    return fl.from_dlpack(t.clone()), t


def samples(rng, arity, dtype, lo=-3.0, hi=3.0):
    """(name, flambeau args, torch args) for the standard layouts."""
    def group(shapes, edge=False, transpose=False):
        pairs = [make(rng, s, dtype, lo, hi, edge) for s in shapes]
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
    cl_f, cl_t = group([(2, 3, 4, 5)] * arity)  # stored N, H, W, C
    yield ("channels_last", [x.contiguous(memory_format=fl.channels_last) for x in cl_f],
           [x.contiguous(memory_format=torch.channels_last) for x in cl_t])
    yield ("empty", *group([(0, 4)] * arity))
    yield ("0-dim", *group([()] * arity))
    if dtype in FLOATS:
        yield ("edge", *group([(37,)] * arity, edge=True))
    yield ("long", *group([(70001,)] * arity))


class Op:
    """rule: the float64 edge-value rule of an elementwise op (None: not elementwise, see
    test_reduction_edge_rules); ref64(*args) -> (float64 reference, error bound) replaces
    torch as the reference in float32/float64."""
    def __init__(self, name, fn=None, torch_fn=None, arity=1, dtypes=FLOATS, rtol=None, lo=-3.0, hi=3.0,
                 skip=(), rule=None, signed_zero=False, ref64=None):
        self.name = name
        self.fn = fn or getattr(fl, name)
        self.torch_fn = torch_fn or getattr(torch, name)
        self.arity, self.dtypes, self.rtol, self.lo, self.hi, self.skip = arity, dtypes, rtol, lo, hi, skip
        self.rule, self.signed_zero, self.ref64 = rule, signed_zero, ref64

    def tol(self, dtype):
        if self.rtol is not None and dtype in ("float32", "float64"):
            return self.rtol
        if self.rtol is not None and dtype in ("float16", "bfloat16"):  # long accumulations round more
            return {"float16": 1e-2, "bfloat16": 3e-2}[dtype]
        return {"float64": 1e-12, "float32": 2e-6, "bfloat16": 1e-2, "float16": 2e-3}.get(dtype, 0)


def np_rule(fn):
    """An IEEE rule: numpy's float64 function (warnings of inf/NaN arithmetic silenced)."""
    def rule(*xs):
        with np.errstate(all="ignore"):
            return fn(*xs)
    return rule


def sigmoid64(x):
    with np.errstate(all="ignore"):
        return 1.0 / (1.0 + np.exp(-x))  # exp(inf) = inf gives 0, exp(-inf) = 0 gives 1


def at_inf(fn):
    """fn on finite x, and the limit at +-inf: +inf -> +inf, -inf -> 0 (silu, gelu)."""
    def rule(x):
        with np.errstate(all="ignore"):
            y = fn(np.where(np.isinf(x), 0.0, x))
        return np.where(x == np.inf, np.inf, np.where(x == -np.inf, 0.0, y))
    return rule


ERF64 = np.vectorize(math.erf, otypes=[float])
GELU64 = at_inf(lambda x: 0.5 * x * (1 + ERF64(x / math.sqrt(2))))
GELU_TANH64 = at_inf(lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))))
SILU64 = at_inf(lambda x: x * sigmoid64(x))
IEEE = {"exp": np.exp, "expm1": np.expm1, "sin": np.sin, "cos": np.cos, "tanh": np.tanh, "erf": ERF64,
        "abs": np.abs, "neg": np.negative, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "log": np.log,
        "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "round": np.round,
        "sigmoid": sigmoid64, "relu": lambda x: np.where(x > 0, x, np.where(np.isnan(x), x, 0.0)),
        "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
        "minimum": np.minimum, "atan2": np.arctan2, "remainder": np.remainder, "floor_divide": np.floor_divide,
        "pow": np.power, "exp2": np.exp2, "log2": np.log2, "log10": np.log10, "tan": np.tan,
        "reciprocal": np.reciprocal, "sign": lambda x: np.where(np.isnan(x), 0.0, np.sign(x)) + 0.0}
SIGNED_ZERO = {"neg", "abs", "floor", "ceil", "trunc", "sqrt", "mul", "reciprocal", "fmod", "copysign"}


def special64(fn):
    """A special function's float64 rule: mpmath's value, with the edges as torch defines them."""
    def rule(x):
        return np.array([fn(float(v)) for v in np.ravel(x)], dtype=np.float64).reshape(np.shape(x))
    return rule


def lgamma_edge(x):
    if math.isnan(x):
        return x
    if math.isinf(x) or (x <= 0 and x == math.floor(x)):
        return math.inf  # the poles, and lgamma(-inf) = inf as C99 says
    return float(mpmath.log(abs(mpmath.gamma(x))))


def digamma_edge(x):
    if x == 0:
        return math.copysign(math.inf, -x)  # torch: digamma(+-0) = -+inf
    if math.isnan(x) or (x < 0 and (math.isinf(x) or x == math.floor(x))):
        return math.nan  # poles and -inf
    return x if math.isinf(x) else float(mpmath.digamma(x))


def erfinv_edge(x):
    if math.isnan(x) or abs(x) > 1:
        return math.nan
    return math.copysign(math.inf, x) if abs(x) == 1 else float(mpmath.erfinv(x))


def i0_edge(x):
    return x if math.isnan(x) else math.inf if math.isinf(x) else float(mpmath.besseli(0, x))


IEEE.update({"fmod": np.fmod, "hypot": np.hypot, "copysign": np.copysign, "lgamma": special64(lgamma_edge),
             "digamma": special64(digamma_edge), "erfinv": special64(erfinv_edge), "i0": special64(i0_edge)})


def numpy_function(name):
    """numpy's float64 function of an op: the same name, or numpy's arc- name for the inverse
    trigonometric and hyperbolic ops (asin: arcsin, atanh: arctanh)."""
    return getattr(np, name) if hasattr(np, name) else getattr(np, "arc" + name[1:])


def unary(name, **kw):
    if "rule" not in kw:
        kw["rule"] = np_rule(IEEE.get(name) or numpy_function(name))
    return Op(name, signed_zero=name in SIGNED_ZERO, **kw)


def binary(name, **kw):
    return Op(name, arity=2, rule=np_rule(IEEE[name]), signed_zero=name in SIGNED_ZERO, **kw)


# float64 references with error bounds (u: unit roundoff, n: terms summed per output). Any
# summation order of n terms is within n u sum|x| of the exact sum; a product of n factors
# within 2 n u relative (the inputs x * 0.1 + 1 round once more); sqrt and log halve/keep it.
def _terms(x, dim):
    return x.shape[dim] if x.ndim else 1


def sum_ref(dim=None, keepdim=False, scale=False):
    def ref(x, u):
        n = x.size if dim is None else _terms(x, dim)
        r, a = np.sum(x, axis=dim, keepdims=keepdim), np.sum(np.abs(x), axis=dim, keepdims=keepdim)
        if scale:  # mean (NaN when empty)
            with np.errstate(all="ignore"):
                r, a = r / n, a / max(n, 1)
        return r, n * u * a + u * np.abs(r)
    return ref


def tiny(u):  # the smallest normal number: products may underflow below it
    return 2.0 ** -126 if u > 2.0 ** -30 else 2.0 ** -1022


def prod_ref(x, u):
    y = x * 0.1 + 1
    r = np.prod(y)
    return r, 2 * (y.size + 1) * u * np.abs(r) + tiny(u)


def var_ref(x, u):  # two-pass or sum-of-squares: both within 2 (n + 2) u sum(x^2) / (n - 1)
    return np.var(x, ddof=1), 2 * (x.size + 2) * u * np.sum(x * x) / (x.size - 1)


def norm_ref(x, u):
    r = np.sqrt(np.sum(x * x))
    return r, (x.size + 2) * u * r


def lse_ref(x, u):
    dim = -1 if x.ndim else None
    m = np.max(x, axis=dim, keepdims=True)
    r = np.squeeze(m + np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True)), axis=dim)
    return r, (_terms(x, -1) + 8) * u * (1 + np.abs(r))


def softmax_ref(log):
    def ref(x, u):
        dim = -1 if x.ndim else None
        z = x - np.max(x, axis=dim, keepdims=True)
        lse = np.log(np.sum(np.exp(z), axis=dim, keepdims=True))
        r = z - lse if log else np.exp(z - lse)
        k = (_terms(x, -1) + 8) * u
        return r, k * (1 + np.abs(r)) if log else k * r
    return ref


def cumsum_ref(x, u):
    dim = -1 if x.ndim else None
    r = np.cumsum(x, axis=dim).reshape(x.shape)
    count = np.cumsum(np.ones_like(x), axis=dim).reshape(x.shape)
    return r, count * u * np.cumsum(np.abs(x), axis=dim).reshape(x.shape) + u * np.abs(r)


def cumprod_ref(x, u):
    r = np.cumprod(x * 0.01 + 1, axis=0) if x.ndim else x * 0.01 + 1
    count = np.cumsum(np.ones_like(x), axis=0) if x.ndim else np.ones_like(x)
    return r, 2 * (count + 1) * u * np.abs(r) + tiny(u)


def logcumsumexp_ref(x, u):
    if x.ndim == 0:
        return x, u * np.abs(x)
    m = np.max(x, axis=-1, keepdims=True)
    r = m + np.log(np.cumsum(np.exp(x - m), axis=-1))
    return r, (x.shape[-1] + 8) * u * (1 + np.abs(r))


def matmul_ref(a, b, u):
    if a.ndim < 2:
        r = a * b
        return r, u * np.abs(r)
    bt = np.swapaxes(b, -1, -2)
    return a @ bt, (a.shape[-1] + 2) * u * (np.abs(a) @ np.abs(bt))


def reduce_last(fn):
    return lambda x: fn(x, -1) if x.dim() > 0 else fn(x, 0)


# What differs from the defaults for some ops of the unary schema.
UNARY_EXTRA = {"sign": dict(dtypes=FLOATS + INTS[:2]), "relu": dict(dtypes=FLOATS + INTS[:2]),
               "silu": dict(torch_fn=torch.nn.functional.silu, rule=SILU64)}

OPS = [
    # Every op of the unary schema (core/op_list.h), sampled on its [lo, hi].
    *[unary(n, lo=lo, hi=hi, **UNARY_EXTRA.get(n, {})) for n, _kind, lo, hi in fl._C._unary_op_schema],
    Op("abs_int", fl.abs, torch.abs, dtypes=INTS[:3]),
    Op("gelu", torch_fn=torch.nn.functional.gelu, rule=GELU64),
    Op("gelu_tanh", lambda x: fl.gelu(x, approximate="tanh"), lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
       rule=GELU_TANH64),
    binary("add", dtypes=FLOATS + INTS[:2]), binary("sub", dtypes=FLOATS + INTS[:2]),
    binary("mul", dtypes=FLOATS + INTS[:2] + ["bool"]),
    binary("div", lo=0.5, hi=4), binary("maximum", dtypes=FLOATS + INTS[:2]),
    binary("minimum", dtypes=FLOATS + INTS[:2]), binary("atan2"),
    binary("remainder", lo=0.5, hi=6, dtypes=["float32", "float64", "int64"]),
    binary("floor_divide", lo=1, hi=6, dtypes=["float32", "float64", "int64"]),
    binary("pow", lo=0.5, hi=2),
    binary("fmod", lo=0.5, hi=6, dtypes=["float32", "float64", "int64"]), binary("hypot"),
    binary("copysign", dtypes=FLOATS + INTS[:1]),
    Op("add_scalar", lambda x: x + 2.5, lambda x: x + 2.5, dtypes=FLOATS + INTS[:2], rule=np_rule(lambda x: x + 2.5)),
    Op("rsub_scalar", lambda x: 3 - x, lambda x: 3 - x, dtypes=FLOATS + INTS[:2], rule=np_rule(lambda x: 3 - x)),
    Op("mul_int_scalar", lambda x: x * 3, lambda x: x * 3, dtypes=FLOATS + INTS, rule=np_rule(lambda x: x * 3)),
    *[Op(n, arity=2, dtypes=FLOATS + INTS[:2] + ["bool"], rule=np_rule(getattr(np, {"eq": "equal", "ne": "not_equal",
      "lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal"}[n]))) for n in ["eq", "ne", "lt", "le",
                                                                                              "gt", "ge"]],
    *[Op(n, arity=2, dtypes=["bool", "float32", "int64"], rule=getattr(np, n)) for n in ["logical_and", "logical_or",
                                                                                        "logical_xor"]],
    Op("where", lambda c, a, b: fl.where(c > 0, a, b), lambda c, a, b: torch.where(c > 0, a, b), arity=3,
       rule=lambda c, a, b: np.where(c > 0, a, b)),
    Op("clamp", lambda x: fl.clamp(x, -1, 2), lambda x: torch.clamp(x, -1, 2), dtypes=FLOATS + INTS[:2],
       rule=lambda x: np.clip(x, -1, 2)),
    Op("lerp", lambda a, b, w: fl.lerp(a, b, w), lambda a, b, w: torch.lerp(a, b, w), arity=3,
       rule=np_rule(lambda a, b, w: a + w * (b - a))),
    Op("addcmul", lambda a, b, c: fl.addcmul(a, b, c, value=0.5), lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
       arity=3, rule=np_rule(lambda a, b, c: a + 0.5 * b * c)),
    Op("sum", rtol=1e-5, ref64=sum_ref()),
    Op("sum_dim", lambda x: fl.sum(x, 0, keepdim=True) if x.dim() else fl.sum(x),
       lambda x: torch.sum(x, 0, keepdim=True) if x.dim() else torch.sum(x), rtol=1e-5,
       ref64=lambda x, u: sum_ref(0 if x.ndim else None, keepdim=x.ndim > 0)(x, u)),
    Op("mean", lambda x: fl.mean(x), lambda x: torch.mean(x), rtol=1e-5, ref64=sum_ref(scale=True)),
    Op("prod", lambda x: fl.prod(x * 0.1 + 1), lambda x: torch.prod(x * 0.1 + 1), rtol=1e-5, ref64=prod_ref),
    Op("amax", lambda x: fl.amax(x), lambda x: torch.amax(x), dtypes=FLOATS + INTS, skip=("empty",)),
    Op("amin", lambda x: fl.amin(x), lambda x: torch.amin(x), dtypes=FLOATS + INTS, skip=("empty",)),
    Op("var", lambda x: fl.var(x), lambda x: torch.var(x), rtol=1e-5, dtypes=["float32", "float64"],
       skip=("empty", "0-dim"), ref64=var_ref),
    Op("norm", lambda x: fl.norm(x), lambda x: torch.norm(x), rtol=1e-5, dtypes=["float32", "float64"],
       ref64=norm_ref),
    Op("logsumexp", reduce_last(fl.logsumexp), reduce_last(torch.logsumexp), rtol=1e-5, skip=("empty",),
       ref64=lse_ref),
    Op("softmax", reduce_last(fl.softmax), reduce_last(torch.softmax), rtol=1e-5, skip=("empty",),
       ref64=softmax_ref(False)),
    Op("log_softmax", reduce_last(fl.log_softmax), reduce_last(torch.log_softmax), rtol=1e-5, skip=("empty",),
       ref64=softmax_ref(True)),
    Op("cumsum", reduce_last(fl.cumsum), reduce_last(torch.cumsum), rtol=1e-5, dtypes=FLOATS + INTS[:2],
       ref64=cumsum_ref),
    Op("cumprod", lambda x: fl.cumprod(x * 0.01 + 1, 0), lambda x: torch.cumprod(x * 0.01 + 1, 0), rtol=1e-5,
       ref64=cumprod_ref),
    Op("logcumsumexp", reduce_last(fl.logcumsumexp), reduce_last(torch.logcumsumexp), rtol=1e-5,
       ref64=logcumsumexp_ref),
    Op("sort_values", lambda x: fl.sort(x).values, lambda x: torch.sort(x, stable=True).values, dtypes=FLOATS + INTS),
    Op("argsort", lambda x: fl.argsort(x), lambda x: torch.sort(x, stable=True).indices, dtypes=["float32", "int64"]),
    Op("matmul", lambda a, b: fl.matmul(a, b.transpose(-1, -2)) if a.dim() >= 2 else a * b,
       lambda a, b: torch.matmul(a, b.transpose(-1, -2)) if a.dim() >= 2 else a * b, arity=2, rtol=1e-5,
       dtypes=["float32", "float64"], skip=("broadcast", "long"), ref64=matmul_ref),
]


def f64(x):
    return np.asarray(to_numpy(x), dtype=np.float64)


def check_edges(op, got, fargs, dtype):
    """The first len(EDGES) results of an "edge" sample against op.rule (module docstring)."""
    k = len(EDGES)
    want = np.asarray(op.rule(*[f64(a)[:k] for a in fargs]))
    want = to_numpy(torch.tensor(want).to(torch.bool if want.dtype == bool else getattr(torch, dtype)))
    want = want.astype(np.float64)
    g = f64(got)[:k]
    for i, (x, y) in enumerate(zip(g, want)):
        where = f"{op.name}[{dtype}] at {[float(f64(a)[i]) for a in fargs]}: got {x}, rule says {y}"
        if np.isnan(y) or np.isinf(y):
            assert (np.isnan(x) and np.isnan(y)) or x == y, where
        else:
            tol = op.tol(dtype)
            assert abs(x - y) <= tol + tol * abs(y), where
            if y == 0 and op.signed_zero:
                assert np.signbit(x) == np.signbit(y), where + " (sign of zero)"


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.name)
def test_op_matches_torch(op):
    rng = np.random.default_rng(zlib.crc32(op.name.encode()))
    checked = 0
    for dtype in op.dtypes:
        for kind, fargs, targs in samples(rng, op.arity, dtype, op.lo, op.hi):
            if kind in op.skip or (kind == "edge" and op.rule is None):
                continue  # reductions' edge values: test_reduction_edge_rules
            try:
                want = op.torch_fn(*targs)
            except RuntimeError:
                continue  # PyTorch has no kernel for this dtype (or refuses the input): nothing to compare with
            got = op.fn(*fargs)
            if kind == "channels_last" and op.rule is not None:  # elementwise: the layout is kept, as torch
                assert got.stride() == want.stride(), f"{op.name}[{dtype}]: strides {got.stride()}"
            if op.ref64 is not None and dtype in UNIT_ROUNDOFF:
                want, bound = op.ref64(*[f64(a) for a in fargs], UNIT_ROUNDOFF[dtype])
                assert tuple(got.shape) == np.shape(want), f"{op.name} {kind}: shape {tuple(got.shape)}"
                g, want = f64(got), np.asarray(want)
                ok = (np.abs(g - want) <= bound) | (np.isnan(g) & np.isnan(want))
                assert np.all(ok), f"{op.name}[{dtype}] {kind}: {g[~ok]} vs {want[~ok]} (bound {bound})"
                checked += 1
                continue
            tol = op.tol(dtype)
            if kind == "edge":
                check_edges(op, got, fargs, dtype)
                got, want = got[len(EDGES):], want[len(EDGES):]  # torch: only on the ordinary values
            assert_close(got, want, rtol=tol, atol=tol if tol else 0)
            checked += 1
    assert checked > 0


INF, NAN = math.inf, math.nan
# The edge rules of reductions, scans and sorts (IEEE arithmetic on the mathematical
# definition; NaN propagates through sums, products, extrema, norms and softmax rows; sort
# puts NaN last): (name, flambeau fn, input, expected).
REDUCTION_EDGE_RULES = [
    ("sum_inf", fl.sum, [1.0, INF], INF), ("sum_inf_minus_inf", fl.sum, [INF, -INF], NAN),
    ("sum_nan", fl.sum, [1.0, NAN, 2.0], NAN), ("sum_huge_overflows", fl.sum, [3e38, 3e38], INF),
    ("mean_inf", fl.mean, [1.0, INF], INF), ("mean_nan", fl.mean, [NAN, 1.0], NAN),
    ("prod_zero_inf", fl.prod, [0.0, INF], NAN), ("prod_inf", fl.prod, [-2.0, INF], -INF),
    ("amax_nan", fl.amax, [1.0, NAN, INF], NAN), ("amin_nan", fl.amin, [NAN, -INF], NAN),
    ("amax_inf", fl.amax, [-INF, 1.0, INF], INF), ("amin_all_minus_inf", fl.amin, [-INF, -INF], -INF),
    ("norm_inf", fl.norm, [1.0, -INF], INF), ("norm_nan", fl.norm, [NAN, 1.0], NAN),
    ("var_inf", fl.var, [1.0, INF, 2.0], NAN), ("var_nan", fl.var, [1.0, NAN], NAN),
    ("logsumexp_minus_inf", lambda x: fl.logsumexp(x, 0), [-INF, -INF], -INF),
    ("logsumexp_inf", lambda x: fl.logsumexp(x, 0), [1.0, INF], INF),
    ("logsumexp_nan", lambda x: fl.logsumexp(x, 0), [1.0, NAN], NAN),
    ("logsumexp_minus_inf_and_finite", lambda x: fl.logsumexp(x, 0), [-INF, 0.0], 0.0),
    ("softmax_nan", lambda x: fl.softmax(x, 0), [1.0, NAN, 2.0], [NAN, NAN, NAN]),
    ("softmax_minus_inf", lambda x: fl.softmax(x, 0), [-INF, 0.0], [0.0, 1.0]),
    ("log_softmax_minus_inf", lambda x: fl.log_softmax(x, 0), [-INF, 0.0], [-INF, 0.0]),
    ("softmax_huge", lambda x: fl.softmax(x, 0), [1e30, 1e30], [0.5, 0.5]),
    ("cumsum_inf", lambda x: fl.cumsum(x, 0), [1.0, INF, -INF, 1.0], [1.0, INF, NAN, NAN]),
    ("cumsum_nan", lambda x: fl.cumsum(x, 0), [NAN, 1.0], [NAN, NAN]),
    ("cumprod_inf_zero", lambda x: fl.cumprod(x, 0), [2.0, INF, 0.0], [2.0, INF, NAN]),
    ("logcumsumexp_minus_inf", lambda x: fl.logcumsumexp(x, 0), [-INF, 0.0, -INF], [-INF, 0.0, 0.0]),
    ("sort_nan_last", lambda x: fl.sort(x).values, [3.0, NAN, -INF, INF, -0.0, 1.0], [-INF, -0.0, 1.0, 3.0, INF, NAN]),
    ("argsort_nan_last", lambda x: fl.argsort(x).to(fl.float64), [NAN, 2.0, -INF], [2.0, 1.0, 0.0]),
    ("dot_inf_zero", lambda x: fl.dot(x[:1], x[1:]), [INF, 0.0], NAN),
    ("matmul_nan", lambda x: fl.matmul(x.reshape(1, 2), x.reshape(2, 1)), [NAN, 1.0], [[NAN]]),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", REDUCTION_EDGE_RULES, ids=lambda c: c[0])
def test_reduction_edge_rules(case, dtype):
    name, fn, x, want = case
    got = f64(fn(fl.tensor(x, dtype=getattr(fl, dtype))))
    want = np.asarray(want, dtype=np.float64)
    if dtype == "float64" and name == "sum_huge_overflows":
        want = np.asarray(6e38)
    assert got.shape == want.shape, name
    with np.errstate(invalid="ignore"):
        ok = (got == want) | (np.isnan(got) & np.isnan(want)) | (np.abs(got - want) <= 1e-6 * np.abs(want))
    assert np.all(ok), f"{name}[{dtype}]: got {got}, rule says {want}"


def test_int_division_by_zero_and_overflow_cases():
    a, ta = fl.tensor([7, -7, 0]), torch.tensor([7, -7, 0])
    assert (fl.floor_divide(a, 2).tolist()) == torch.floor_divide(ta, 2).tolist()
    assert fl.remainder(a, -3).tolist() == torch.remainder(ta, -3).tolist()
    assert math.isnan(fl.tensor(0.0).div(0.0).item())
