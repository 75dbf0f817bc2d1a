"""The op schemas (src/flambeau/ops/op_schemas.h and the elementwise tables of core/op_list.h):
every schema is bound in Python with exactly its argument names, defaults and keyword-only
marker, and agrees with PyTorch 2.13's signature of the op of the same name (its aten schema,
`self` read as `input`, or the Python function where torch writes the op in Python), except
where KNOWN_DIFFERENCES says why."""
import ast
import inspect
import re
import zlib

import numpy as np
import pytest
import torch

import flambeau as fl

SCHEMAS = {op["name"]: op for op in fl._C._op_schemas()}

# Where flambeau's Python signature differs from aten's schema, and why.
KNOWN_DIFFERENCES = {
    "pow": "the binary ops share one schema (input, other); torch names pow's second argument 'exponent'",
    "var": "one Python function for torch's three overloads (unbiased positional, correction keyword-only)",
    "std": "one Python function for torch's three overloads (unbiased positional, correction keyword-only)",
    "unique": "torch.unique is a Python wrapper taking (*args, **kwargs); its documented signature "
              "(input, sorted=True, return_inverse=False, return_counts=False, dim=None) is ours",
    "unique_consecutive": "torch.unique_consecutive is a Python wrapper taking (*args, **kwargs); its documented "
                          "signature (input, return_inverse=False, return_counts=False, dim=None) is ours",
    "norm": "torch's default p='fro' equals p=2 on the reduced elements; flambeau's p is a number (2.0)",
    "dropout": "flambeau's dropout takes a generator; torch's F.dropout an inplace flag",
    "linear_cross_entropy": "z_loss and chunk_size are flambeau's (torch 2.13 takes an options object); "
                            "flambeau.nn.functional's wrapper also takes ignore_index=None for -100, as torch",
    "einsum": "torch.einsum is a Python wrapper taking (*args) (an equation and operands, or the sublist form); "
              "its aten schema (equation, tensors, *, path=None) is ours, the operands as varargs",
    "sort": "torch's Python binding takes dim and descending positionally, as here (aten: keyword-only)",
    **dict.fromkeys(["tril_indices", "triu_indices"], "dtype=None means int64 (torch's schema: dtype=long)"),
    "argsort": "torch's Python binding takes dim and descending positionally, as here (aten: keyword-only)",
}


MEMORY_FORMATS = ("contiguous_format", "preserve_format", "channels_last", "channels_last_3d")


def literal(text, lib=fl):
    """A schema default as a Python value (a memory format: flambeau's object of that name,
    or for lib=torch the number aten's schema boxes it as, c10::MemoryFormat's value)."""
    if text in MEMORY_FORMATS:
        return MEMORY_FORMATS.index(text) if lib is torch else getattr(lib, text)
    return None if text is None else ast.literal_eval(text)


def python_signature(fn):
    """[(name, default), ...] and the keyword-only position of a nanobind function's first
    overload, from its signature text."""
    text, _, defaults = fn.__nb_signature__[0]
    params = text[text.index("(") + 1:text.rindex(") ->")]
    names, kw, d = [], None, 0
    for p in re.split(r",\s*(?![^\[]*\])", params):
        if p == "*":
            kw = len(names)
            continue
        name = p.split(":")[0].split("=")[0].strip()
        has_default = "=" in p
        names.append((name, defaults[d] if has_default else "<required>"))
        d += has_default
    return names, kw


# Ops whose list argument Python takes as varargs, as torch's (torch.meshgrid(a, b),
# x.repeat(2, 3), torch.einsum("ij,jk", a, b)): the binding reads (..., *tensors, ...), later
# arguments keyword-only. The value: the list argument's position.
VARARGS = {"meshgrid": 0, "cartesian_prod": 0, "block_diag": 0, "repeat": 1, "einsum": 1}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_binding_follows_the_schema(name):
    op = SCHEMAS[name]
    args = op["arguments"]
    expected = [(a["name"], literal(a["default"]) if a["default"] is not None else "<required>") for a in args]
    kwarg_only = [a["kwarg_only"] for a in args]
    kw = kwarg_only.index(True) if True in kwarg_only else None
    if name in VARARGS:
        star = VARARGS[name]
        expected[star] = ("*" + expected[star][0], "<required>")
        kw = None
    if op["functional"]:
        assert python_signature(getattr(fl._C._nn, name)) == (expected, kw)
        assert callable(getattr(fl.nn.functional, name))
    elif op["function"]:
        assert python_signature(getattr(fl._C, name)) == (expected, kw)
        assert getattr(fl, name) is getattr(fl._C, name)
    else:
        assert not hasattr(fl._C, name)
    if op["method"]:
        assert python_signature(getattr(fl.Tensor, name)) == ([("self", "<required>")] + expected[1:], kw)


class PythonArg:
    """An argument of a torch function written in Python, as aten's schema argument reads."""

    def __init__(self, p):
        self.kwarg_only = p.kind == inspect.Parameter.KEYWORD_ONLY
        self.default_value = None if p.default is inspect.Parameter.empty else p.default


def torch_match(op):
    """torch's arguments of op by name: the Python function's (torch.unique, torch.split are
    written in Python), else those of the aten overload that has every argument of op (no
    out= overloads)."""
    ours = [a["name"] for a in op["arguments"]]
    fn = getattr(torch.nn.functional if op["functional"] else torch, op["name"], None)
    if op["functional"] and hasattr(torch.nn.functional, op["name"] + "_with_indices"):
        # max_pool*d, adaptive_max_pool*d: boolean_dispatch wrappers taking (*args, **kwargs) over
        # <op>_with_indices, whose signature is the documented one.
        fn = getattr(torch.nn.functional, op["name"] + "_with_indices")
    if inspect.isfunction(fn):
        params = inspect.signature(fn).parameters
        return {n: PythonArg(p) for n, p in params.items()} if all(n in params for n in ours) else None
    for s in torch._C._jit_get_schemas_for_operator("aten::" + op["name"]):
        names = ["input" if a.name == "self" else a.name for a in s.arguments]
        if "out" not in names and all(n in names for n in ours):
            return {n: a for n, a in zip(names, s.arguments)}
    return None


@pytest.mark.parametrize("name", sorted(set(SCHEMAS) - set(KNOWN_DIFFERENCES)))
def test_schema_agrees_with_torch(name):
    op = SCHEMAS[name]
    theirs = torch_match(op)
    assert theirs is not None, f"no aten::{name} overload takes {[a['name'] for a in op['arguments']]}"
    for a in op["arguments"]:
        t = theirs[a["name"]]
        assert a["kwarg_only"] == t.kwarg_only, f"{name}({a['name']}): keyword-only differs"
        if a["default"] is not None and t.default_value is not None:
            assert literal(a["default"], torch) == t.default_value, f"{name}({a['name']}): default differs"


def test_known_differences_are_current():
    for name in KNOWN_DIFFERENCES:
        assert name in SCHEMAS
    assert torch_match(SCHEMAS["pow"]) is None and torch_match(SCHEMAS["var"]) is None
    assert torch_match(SCHEMAS["unique"]) is None


def test_malformed_schema_is_rejected_with_its_column():
    assert fl._C._parse_schema("mylib::fused_bias_gelu(Tensor x, Tensor b) -> Tensor") == "mylib::fused_bias_gelu"
    with pytest.raises(ValueError, match=r"\[parse_schema\] unexpected type 'Tensr' at column 3"):
        fl._C._parse_schema("f(Tensr x) -> Tensor")


# Public callables bound without a schema, and why (besides test_op_coverage.NOT_COMPARED:
# factories taking *sizes, random sampling, I/O, settings, tensor attributes and autograd).
HAND_BOUND = {
    **dict.fromkeys(["view", "reshape", "permute", "expand"],
                    "Tensor methods taking *sizes (x.view(2, 3)), which a schema cannot say; the function forms "
                    "torch.reshape/permute are in the table"),
    **dict.fromkeys(["to", "float", "double", "half", "bfloat16", "long", "int", "bool"],
                    "dtype conversions (Tensor.to's dtype form and its shorthands)"),
    "T": "a property",
    **dict.fromkeys(["calculate_gain", "constant_", "kaiming_normal_", "kaiming_uniform_", "normal_", "trunc_normal_",
                     "uniform_", "xavier_normal_", "xavier_uniform_"],
                    "flambeau.nn.init (in _C._nn): initialisers filling a parameter in place, which torch writes "
                    "in Python"),
    "logsigmoid": "torch.nn.functional's name for log_sigmoid (the schema's name, as in aten), an alias in Python",
    **dict.fromkeys([f"{kind}max_pool{n}d_with_indices" for kind in ("", "adaptive_") for n in (1, 2, 3)],
                    "torch.nn.functional's names for the (values, indices) forms: Python functions calling the "
                    "max_pool*d / adaptive_max_pool*d schema ops with return_indices=True"),
    "linear_cross_entropy_reference": "test-only: the unfused composite linear_cross_entropy is checked against",
}


def test_every_public_op_has_a_schema():
    import test_op_coverage

    def functions(mod):
        return {n for n in dir(mod) if not n.startswith("_") and callable(getattr(mod, n))
                and not inspect.isclass(getattr(mod, n)) and not inspect.ismodule(getattr(mod, n))}
    public = (functions(fl._C) | functions(fl) | functions(fl.nn.functional) | functions(fl._C._nn)
              | {n for n in dir(fl.Tensor) if not n.startswith("_")})
    in_place_of_schema_op = {n for n in public if n.endswith("_") and n[:-1] in SCHEMAS}
    missing = sorted(public - set(SCHEMAS) - in_place_of_schema_op - set(HAND_BOUND)
                     - set(test_op_coverage.NOT_COMPARED))
    assert not missing, f"public ops without a schema line (src/flambeau/ops/op_schemas.h): {missing}"
    assert not [n for n in HAND_BOUND if n in SCHEMAS and n not in ("reshape", "permute")]


# Generated comparisons: each op whose arguments the rules below can fill runs on the same
# float64 data in flambeau and in torch (required arguments only, then with each bool flag
# that defaults to False set), and must agree: values within a few float64 roundoffs
# (summation orders differ), integer and bool results exactly. Ops whose inputs need a
# particular shape or meaning (indices, masks, matrices) are left to the OpInfo database.
DOMAINS = {name: (lo, hi) for name, _, lo, hi in fl._C._unary_op_schema}  # where each unary op is sampled


def sample(rng, name, shape):
    lo, hi = DOMAINS.get(name, (0.5, 2.0))
    return rng.uniform(lo, hi, shape)


INT_ARGS = {"dim": 1, "k": 2, "dim0": 0, "dim1": 2, "index": 1, "start": 1, "length": 2, "chunks": 2}
LIST_ARGS = {"dim": [1, 2]}
TENSOR_ARGS = {"other", "end", "weight", "tensor1", "tensor2"}


def generated_calls(op):
    """[(description, positional args builder, kwargs)] for op, or [] when a rule is missing."""
    required, flags = [], []
    if any(a["kind"] == "Generator" for a in op["arguments"]):
        return []  # random: torch draws other numbers
    if op["functional"]:
        return []  # nn.functional's arguments have shapes of their own (test_opinfo_more, test_nn)
    for i, a in enumerate(op["arguments"]):
        if i == 0:
            if a["kind"] != "Tensor" or a["list"]:
                return []
            required.append(("tensor", None))
        elif a["default"] is not None:
            if a["kind"] == "bool" and a["default"] == "False":
                flags.append(a["name"])
        elif a["kind"] == "Tensor" and not a["list"] and a["name"] in TENSOR_ARGS:
            required.append(("tensor", None))
        elif a["kind"] == "int" and not a["list"] and a["name"] in INT_ARGS:
            required.append(("value", INT_ARGS[a["name"]]))
        elif a["kind"] == "int" and a["list"] and a["name"] in LIST_ARGS:
            required.append(("value", LIST_ARGS[a["name"]]))
        else:
            return []
    return [("required", required, {})] + [(f"{f}=True", required, {f: True}) for f in flags]


def call(lib, op, args, kwargs):
    name = op["name"]
    if name.startswith("linalg_"):
        return getattr(lib.linalg, name[len("linalg_"):])(*args, **kwargs)  # torch.linalg.det
    if op["function"] or op["functional"]:
        fn = getattr(lib, name, None) or getattr(lib.nn.functional, name)  # torch.nn.functional.gelu
        return fn(*args, **kwargs)
    return getattr(args[0], name)(*args[1:], **kwargs)


def as_arrays(r):
    if isinstance(r, (tuple, list)):
        return [a for x in r for a in as_arrays(x)]
    return [np.asarray(r.detach().numpy() if hasattr(r, "detach") else r.numpy())]


# Generated samples that torch refuses (so there is nothing to compare).
TORCH_REJECTS = {("clamp", "required"), ("matmul", "required"), ("t", "required"), ("diag", "required"),
                 ("trace", "required"), ("bincount", "required")} | {
    (n, "required") for n in ["linalg_det", "linalg_slogdet", "linalg_inv", "linalg_cholesky", "linalg_eigh",
                              "linalg_eigvalsh"]} | {("linalg_cholesky", "upper=True"), ("linalg_pinv", "hermitian=True")} | {
    # square matrices only
    (n, "keepdim=True") for n in ["sum", "mean", "prod", "max", "min"]}  # keepdim without a dim

# Factors defined up to the signs of their columns (LAPACK builds may choose other signs):
# compared through invariants in test_linalg.py.
UP_TO_SIGNS = {"linalg_svd"}
GENERATED = sorted(n for n, op in SCHEMAS.items() if generated_calls(op) and n not in UP_TO_SIGNS)


@pytest.mark.parametrize("name", GENERATED)
def test_generated_samples_match_torch(name):
    op = SCHEMAS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    for what, required, kwargs in generated_calls(op):
        data = [sample(rng, name, (3, 4, 5)) if kind == "tensor" else value for kind, value in required]
        t_args = [torch.tensor(d) if isinstance(d, np.ndarray) else d for d in data]
        f_args = [fl.tensor(d) if isinstance(d, np.ndarray) else d for d in data]
        if (name, what) in TORCH_REJECTS:
            with pytest.raises((RuntimeError, TypeError)):
                call(torch, op, t_args, kwargs)
            continue
        expected = call(torch, op, t_args, kwargs)
        got = call(fl, op, f_args, kwargs)
        e, g = as_arrays(expected), as_arrays(got)
        assert len(e) == len(g), f"{name} ({what}): {len(g)} results, torch {len(e)}"
        for x, y in zip(e, g):
            assert x.shape == y.shape, f"{name} ({what})"
            if x.dtype.kind == "f":
                np.testing.assert_allclose(y, x, rtol=1e-13, atol=1e-13, err_msg=f"{name} ({what})")
            else:
                np.testing.assert_array_equal(y, x, err_msg=f"{name} ({what})")


def test_the_rules_generate_the_common_ops():
    for name in ["sum", "mean", "var", "logsumexp", "softmax", "cumsum", "sort", "topk", "transpose", "narrow",
                 "add", "exp", "lerp", "addcmul", "clamp"]:
        assert name in GENERATED, name


# Ops with floating results and no derivative, as in torch.
NO_DERIVATIVE = {"histc": "a count of elements per bin (torch: 'the derivative for histc is not implemented')"}


@pytest.mark.parametrize("name", [n for n in GENERATED if not n.endswith("_")])  # in-place: test_inplace_views
def test_generated_gradcheck(name):
    """Every generated op with a floating result that requires grad passes gradcheck (float64,
    central differences) on each generated sample; ops with integer or bool results give
    results that do not require grad."""
    op = SCHEMAS[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    for what, required, kwargs in generated_calls(op):
        if (name, what) in TORCH_REJECTS:
            continue
        data = [sample(rng, name, (2, 3, 4)) if kind == "tensor" else value for kind, value in required]
        tensors = [fl.tensor(d).requires_grad_() for d in data if isinstance(d, np.ndarray)]

        def fn(*ts):
            it = iter(ts)
            args = [next(it) if isinstance(d, np.ndarray) else d for d in data]
            r = call(fl, op, args, kwargs)
            return r[0] if isinstance(r, (tuple, list)) else r
        out = fn(*tensors)
        if not out.is_floating_point():
            assert not out.requires_grad, f"{name} ({what})"
            continue
        if name in NO_DERIVATIVE:
            assert not out.requires_grad, f"{name} ({what})"
            continue
        assert out.requires_grad, f"{name} ({what}): no derivative"
        assert fl.autograd.gradcheck(fn, tensors), f"{name} ({what})"
