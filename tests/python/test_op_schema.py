"""The op schemas (src/flambeau/ops/op_schemas.h and the elementwise tables of core/op_list.h):
every schema is bound in Python with exactly its argument names, defaults and keyword-only
marker, and agrees with PyTorch 2.13's schema of the op of the same name (aten, `self` read as
`input`), except where KNOWN_DIFFERENCES says why."""
import ast
import re

import pytest
import torch

import flambeau as fl

SCHEMAS = {op["name"]: op for op in fl._C._op_schemas()}

# Where flambeau's Python signature differs from aten's schema, and why.
KNOWN_DIFFERENCES = {
    "pow": "the binary ops share one schema (input, other); torch names pow's second argument 'exponent'",
    "var": "one Python function for torch's three overloads (unbiased positional, correction keyword-only)",
    "std": "one Python function for torch's three overloads (unbiased positional, correction keyword-only)",
    "unique": "torch.unique is a Python function (torch.functional), not an aten op",
    "sort": "torch's Python binding takes dim and descending positionally, as here (aten: keyword-only)",
    "argsort": "torch's Python binding takes dim and descending positionally, as here (aten: keyword-only)",
}


def literal(text):
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


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_binding_follows_the_schema(name):
    op = SCHEMAS[name]
    args = op["arguments"]
    expected = [(a["name"], literal(a["default"]) if a["default"] is not None else "<required>") for a in args]
    kwarg_only = [a["kwarg_only"] for a in args]
    kw = kwarg_only.index(True) if True in kwarg_only else None
    assert python_signature(getattr(fl._C, name)) == (expected, kw)
    assert getattr(fl, name) is getattr(fl._C, name)
    if op["method"]:
        assert python_signature(getattr(fl.Tensor, name)) == ([("self", "<required>")] + expected[1:], kw)


def torch_match(op):
    """The aten overload of op's name that has every argument of op (no out= overloads)."""
    ours = [a["name"] for a in op["arguments"]]
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
            assert literal(a["default"]) == t.default_value, f"{name}({a['name']}): default differs"


def test_known_differences_are_current():
    for name in KNOWN_DIFFERENCES:
        assert name in SCHEMAS
    assert torch_match(SCHEMAS["pow"]) is None and torch_match(SCHEMAS["unique"]) is None


def test_malformed_schema_is_rejected_with_its_column():
    assert fl._C._parse_schema("mylib::fused_bias_gelu(Tensor x, Tensor b) -> Tensor") == "mylib::fused_bias_gelu"
    with pytest.raises(ValueError, match=r"\[parse_schema\] unexpected type 'Tensr' at column 3"):
        fl._C._parse_schema("f(Tensr x) -> Tensor")
