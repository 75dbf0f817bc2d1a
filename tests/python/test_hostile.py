"""Hostile input: calls a user with a typo could make (huge and negative shapes, bad indices,
hooks returning the wrong type, every dtype, empty 16-bit matmuls, odd numpy arrays).

Each row runs in a child process, so a crash (a signal) fails that row without taking the
test run down. Rows run a group at a time in one child (cheap); the child prints a line
before and after each row, so a row that kills its child is named, and the rows after it
rerun in a fresh child. A row either raises (the Python class, and a message naming the op)
or succeeds and checks its result with asserts.
"""
import json
import os
import subprocess
import sys

import pytest

# (name, code, expected): expected is ("raises", class name, substring of the message) or
# ("ok",) when the code must run through (its asserts check the values).
ROWS = [
    # Sizes whose byte count or element count overflows int64 (PyTorch: "Storage size
    # calculation overflowed"), allocations no machine can serve, negative sizes.
    ("zeros_2p62", "fl.zeros(2**62)", ("raises", "ValueError", "[empty] storage size calculation overflowed")),
    ("randn_2p31_sq", "fl.randn(2**31, 2**31)", ("raises", "ValueError", "[empty] storage size")),
    ("expand_2p62_contiguous", "fl.randn(1).expand(2**62).contiguous()", ("raises", "ValueError", "[empty]")),
    ("expand_numel_overflow", "fl.randn(1, 1).expand(2**62, 2**62)", ("raises", "ValueError", "[expand]")),
    ("expand_negative", "fl.randn(1).expand(-2)", ("raises", "ValueError", "[expand]")),
    ("zeros_empty_dim_overflow", "fl.zeros(0, 2**62, 2**62)", ("raises", "ValueError", "[empty]")),
    ("zeros_beyond_int64", "fl.zeros(2**64)", ("raises", "ValueError", "[shape] size")),
    ("empty_2p61_bytes", "fl.empty(2**58, dtype=fl.float64)", ("raises", "RuntimeError", "[allocate] out of memory")),
    ("ones_2p62_bytes", "fl.ones(2**62, dtype=fl.uint8)", ("raises", "RuntimeError", "[allocate] out of memory")),
    ("zeros_negative", "fl.zeros(-1)", ("raises", "ValueError", "negative dimension")),
    ("randn_negative", "fl.randn(2, -3)", ("raises", "ValueError", "negative dimension")),
    ("full_negative", "fl.full((-1,), 1.0)", ("raises", "ValueError", "negative dimension")),
    ("arange_too_long_float", "fl.arange(0, 2**62, 1e-10)", ("raises", "ValueError", "[arange]")),
    ("arange_too_long_int", "fl.arange(-2**63 + 1, 2**63 - 1)", ("raises", "ValueError", "[arange]")),
    ("linspace_negative", "fl.linspace(0, 1, -1)", ("raises", "ValueError", "[linspace]")),
    ("linspace_huge", "fl.linspace(0, 1, 2**62)", ("raises", "ValueError", "[empty]")),
    ("cat_overflow", "x = fl.randn(1).expand(2**62); fl.cat([x, x])", ("raises", "ValueError", "[cat]")),
    ("empty_shapes", """
for shape in [(0,), (0, 3), (3, 0), (2, 0, 4)]:
    t = fl.zeros(shape)
    assert t.shape == shape and t.numel() == 0
    assert t.sum().item() == 0 and t.reshape(-1).shape == (0,)
    assert t.contiguous().shape == shape
""", ("ok",)),
    # Reshape and views.
    ("reshape_incompatible", "fl.randn(6).reshape(4, 2)", ("raises", "ValueError", "[reshape]")),
    ("view_incompatible", "fl.randn(6).view(4, -1)", ("raises", "ValueError", "[view]")),
    ("view_overflow_on_empty", "fl.zeros(0).view(2**32, 2**32, 0)", ("raises", "ValueError", "[view]")),
    ("reshape_two_inferred", "fl.randn(6).reshape(-1, -1)", ("raises", "ValueError", "[reshape]")),
    ("as_strided_beyond_storage", "fl.zeros(4).as_strided((2, 2), (2, 2))", ("raises", "ValueError", "[as_strided]")),
    ("as_strided_offset_beyond", "fl.zeros(4).as_strided((2,), (1,), 10**18)", ("raises", "ValueError", "[as_strided]")),
    ("as_strided_overflow", "fl.zeros(4).as_strided((2**62, 4), (2**62, 1))", ("raises", "ValueError", "[as_strided]")),
    ("as_strided_negative_stride", "fl.zeros(4).as_strided((2,), (-1,))", ("raises", "ValueError", "[as_strided]")),
    ("as_strided_in_bounds", """
t = fl.arange(6.0).as_strided((2, 2), (3, 1), 1)
assert t.tolist() == [[1.0, 2.0], [4.0, 5.0]]
assert fl.zeros(4).as_strided((0, 2**62), (2**62, 1)).shape == (0, 2**62)
""", ("ok",)),
    # Indices out of range.
    ("gather_oob", "fl.randn(2, 5).gather(1, fl.tensor([[7]]))", ("raises", "IndexError", "[gather]")),
    ("gather_negative", "fl.randn(2, 5).gather(1, fl.tensor([[-1]]))", ("raises", "IndexError", "[gather]")),
    ("index_select_oob", "fl.randn(3).index_select(0, fl.tensor([3]))", ("raises", "IndexError", "[index_select]")),
    ("scatter_oob", "fl.zeros(3).scatter(0, fl.tensor([5]), fl.ones(1))", ("raises", "IndexError", "[scatter]")),
    ("getitem_oob", "fl.randn(10)[10]", ("raises", "IndexError", "10")),
    ("getitem_negative_beyond", "fl.randn(10)[-11]", ("raises", "IndexError", "-11")),
    ("getitem_tensor_oob", "fl.randn(10)[fl.tensor([2, 12])]", ("raises", "IndexError", "12")),
    ("getitem_bad_type", "fl.randn(10)['a']", ("raises", "TypeError", "str")),
    # Hooks that return the wrong type (or shape).
    ("hook_returns_str", """
a = fl.randn(3, requires_grad=True)
a.register_hook(lambda g: "x")
a.sum().backward()
""", ("raises", "TypeError", "[register_hook] expected a Tensor or None, got str")),
    ("nonleaf_hook_returns_int", """
a = fl.randn(3, requires_grad=True)
b = a * 2
b.register_hook(lambda g: 1)
b.sum().backward()
""", ("raises", "TypeError", "[register_hook] expected a Tensor or None, got int")),
    ("hook_changes_shape", """
a = fl.randn(3, requires_grad=True)
a.register_hook(lambda g: fl.zeros(4))
a.sum().backward()
""", ("raises", "ValueError", "[register_hook] the hook changed the gradient's shape")),
    ("hook_raises", """
a = fl.randn(3, requires_grad=True)
def hook(g):
    raise KeyError("from the hook")
a.register_hook(hook)
a.sum().backward()
""", ("raises", "KeyError", "from the hook")),
    ("post_accumulate_hook_returns_value", """
a = fl.randn(3, requires_grad=True)
a.register_post_accumulate_grad_hook(lambda p: 3)
a.sum().backward()
""", ("raises", "TypeError", "[register_post_accumulate_grad_hook] the hook must return None, got int")),
    ("function_backward_returns_str", """
class Twice(fl.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2
    @staticmethod
    def backward(ctx, g):
        return "x"
Twice.apply(fl.randn(3, requires_grad=True)).sum().backward()
""", ("raises", "TypeError", "[TwiceBackward]")),
    ("function_backward_returns_list_of_str", """
class Twice(fl.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2
    @staticmethod
    def backward(ctx, g):
        return ["x"]
Twice.apply(fl.randn(3, requires_grad=True)).sum().backward()
""", ("raises", "TypeError", "[TwiceBackward] expected a Tensor or None, got")),
    ("backward_grad_tensors_of_str", """
a = fl.randn(3, requires_grad=True)
fl.autograd.backward([a * 2], ["x"])
""", ("raises", "TypeError", "got str")),
    # 16-bit matmuls with an empty dimension must succeed: an empty or all-zero result.
    *[(f"{op}_{dt}_empty", code.replace("DT", f"fl.{dt}"), ("ok",))
      for dt in ("bfloat16", "float16")
      for op, code in [
          ("matmul_m0", "r = fl.ones(0, 4, dtype=DT) @ fl.ones(4, 4, dtype=DT)\nassert r.shape == (0, 4) and r.dtype == DT"),
          ("matmul_k0", "r = fl.ones(4, 0, dtype=DT) @ fl.ones(0, 4, dtype=DT)\n"
                        "assert r.shape == (4, 4) and r.dtype == DT and r.float().abs().sum().item() == 0"),
          ("mm_k0", "r = fl.mm(fl.ones(4, 0, dtype=DT), fl.ones(0, 4, dtype=DT))\n"
                    "assert r.shape == (4, 4) and r.float().abs().sum().item() == 0"),
          ("bmm_m0", "r = fl.bmm(fl.ones(2, 0, 4, dtype=DT), fl.ones(2, 4, 4, dtype=DT))\nassert r.shape == (2, 0, 4)"),
          ("bmm_k0", "r = fl.bmm(fl.ones(2, 4, 0, dtype=DT), fl.ones(2, 0, 4, dtype=DT))\n"
                     "assert r.shape == (2, 4, 4) and r.float().abs().sum().item() == 0"),
          ("linear_m0", "r = F.linear(fl.ones(0, 4, dtype=DT), fl.ones(3, 4, dtype=DT), fl.ones(3, dtype=DT))\n"
                        "assert r.shape == (0, 3)"),
          ("linear_k0", "r = F.linear(fl.ones(2, 0, dtype=DT), fl.ones(3, 0, dtype=DT), fl.ones(3, dtype=DT))\n"
                        "assert r.shape == (2, 3) and r.float().tolist() == [[1.0] * 3] * 2"),
          ("addmm_k0", "r = fl.addmm(fl.full((4, 4), 2.0, dtype=DT), fl.ones(4, 0, dtype=DT), fl.ones(0, 4, dtype=DT))\n"
                       "assert r.shape == (4, 4) and r.float().sum().item() == 32"),
      ]],
    # Every dtype through a few ops.
    *[(f"dtype_{dt}", f"""
dt = fl.{dt}
t = fl.ones((2, 3), dtype=dt)
assert t.dtype == dt and t.shape == (2, 3)
assert t.sum().item() == 6
assert t.t().contiguous().shape == (3, 2) and t.reshape(3, 2).shape == (3, 2)
assert fl.cat([t, t]).shape == (4, 3)
assert t[fl.tensor([1, 0])].shape == (2, 3) and t[:, 1:].shape == (2, 2)
assert t.gather(1, fl.tensor([[2], [0]])).shape == (2, 1)
assert (t == t).all().item()
assert t.float().sum().item() == 6.0
e = fl.zeros((0, 3), dtype=dt)
assert e.sum(0).shape == (3,) and e.sum().item() == 0
assert fl.zeros((), dtype=dt).shape == ()
""", ("ok",)) for dt in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                           "float64")],
    # numpy arrays of every layout and some dtypes flambeau lacks.
    ("from_numpy_strided", """
a = np.arange(10, dtype=np.float32)[::2]
assert fl.from_numpy(a).tolist() == [0.0, 2.0, 4.0, 6.0, 8.0]
b = np.broadcast_to(np.arange(3, dtype=np.int64), (2, 3))
assert fl.from_numpy(b).tolist() == [[0, 1, 2], [0, 1, 2]]
assert fl.from_numpy(np.zeros((0, 5), np.float64)).shape == (0, 5)
assert fl.from_numpy(np.array(3.5, np.float32)).item() == 3.5
assert fl.from_numpy(np.arange(6, dtype=np.int16).reshape(2, 3).T).tolist() == [[0, 3], [1, 4], [2, 5]]
""", ("ok",)),
    ("from_numpy_negative_strides", "fl.from_numpy(np.arange(5.0)[::-1])", ("raises", "ValueError", "[from_dlpack]")),
    ("from_numpy_complex", "fl.from_numpy(np.zeros(3, np.complex64))", ("raises", "TypeError", "")),
    ("from_numpy_object", "fl.from_numpy(np.array([1, 'a'], dtype=object))", ("raises", "TypeError", "")),
    ("from_numpy_big_endian", "fl.from_numpy(np.zeros(3, '>f4'))", ("raises", "TypeError", "")),
    ("from_numpy_not_array", "fl.from_numpy([1, 2])", ("raises", "TypeError", "[from_numpy]")),
]

_CHILD = r'''
import json, sys, traceback
import numpy as np
import flambeau as fl
import flambeau.nn.functional as F
for name, code in json.loads(sys.stdin.read()):
    print(json.dumps(["start", name]), flush=True)
    try:
        exec(code, {"fl": fl, "F": F, "np": np})
        result = ["ok"]
    except AssertionError:
        result = ["assert", traceback.format_exc(limit=-1)]
    except BaseException as e:
        result = ["raised", [c.__name__ for c in type(e).__mro__], str(e)]
    print(json.dumps(["done", name, result]), flush=True)
'''

_GROUP = 12  # rows per child process
_TIMEOUT_S = 60


def _run_rows(rows):
    """{name: outcome} for rows run in children; a row that kills its child gets
    ["died", how] and the rows after it go to a fresh child."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    results, todo = {}, list(rows)
    while todo:
        group, todo = todo[:_GROUP], todo[_GROUP:]
        proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)
        try:
            out, err = proc.communicate(json.dumps([[n, c] for n, c, _ in group]), timeout=_TIMEOUT_S)
            how = f"exit status {proc.returncode}"
            if proc.returncode < 0:
                how = f"signal {-proc.returncode}"
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            how = f"timeout after {_TIMEOUT_S} s"
        started = None
        for line in out.splitlines():
            msg = json.loads(line)
            if msg[0] == "start":
                started = msg[1]
            else:
                results[msg[1]] = msg[2]
                started = None
        if started is not None:  # this row took the child down: the rest go to a new one
            results[started] = ["died", how, err[-2000:]]
            names = [n for n, _, _ in group]
            todo = group[names.index(started) + 1:] + todo
        else:  # the child died before its first row (e.g. the import failed)
            for n, _, _ in group:
                results.setdefault(n, ["died", how + " before the row started", err[-2000:]])
    return results


# Session scope: a shuffled run leaves and re-enters this module many times, and a module
# fixture would run the child process again each time (about 1.2 s).
@pytest.fixture(scope="session")
def outcomes():
    return _run_rows(ROWS)


def test_row_names_unique():
    names = [n for n, _, _ in ROWS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name,code,expected", ROWS, ids=[r[0] for r in ROWS])
def test_hostile(outcomes, name, code, expected):
    got = outcomes[name]
    assert got[0] != "died", f"{name}: the child process died ({got[1]}):\n{got[2]}"
    if expected[0] == "ok":
        assert got[0] == "ok", f"{name}: expected success, got {got}"
        return
    _, cls, needle = expected
    assert got[0] == "raised", f"{name}: expected {cls}, got {got}"
    mro, message = got[1], got[2]
    assert cls in mro, f"{name}: expected {cls}, got {mro[0]}: {message}"
    assert needle in message, f"{name}: message {message!r} does not contain {needle!r}"
    for cxx in ("std::", "bad_cast", "bad_alloc", "basic_string", "nanobind", "cast_error"):
        assert cxx not in message, f"{name}: a C++ name reaches the user: {message!r}"
