"""Custom-op libraries through the stable C ABI, from Python: the example extension
(examples/extension/fused_ops.c) compiled here against the installed package's header,
its ops as flambeau.ops.mylib.*, their gradients, random draws, the op hook (compile,
profiler), an extension built against the frozen version-1 header, and broken libraries."""
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler to build the test extensions")


def build(tmp, name, source, include=None, defines=()):
    """Compiles one C source into a loadable extension; returns its path."""
    out = os.path.join(tmp, f"lib{name}.so")
    includes = [include] if include else fl.utils.cpp_extension.include_paths()
    cmd = [CC, "-std=c11", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", *(f"-I{i}" for i in includes),
           *(f"-D{d}=1" for d in defines), source, "-o", out, "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    return out


_BUILT = {}  # once per process: a shuffled run may set the module's fixtures up more than once,
# and a library loads once per path (its ops stay registered)


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    if _BUILT:
        return _BUILT
    tmp = str(tmp_path_factory.mktemp("extensions"))
    bad = os.path.join(ROOT, "tests", "stable", "ext_bad.c")
    paths = {
        "example": build(tmp, "example", os.path.join(ROOT, "examples", "extension", "fused_ops.c")),
        "v1": build(tmp, "v1", os.path.join(ROOT, "tests", "stable", "ext_v1.c"),
                    include=os.path.join(ROOT, "tests", "stable", "v1")),
    }
    for variant in ["init_fails", "newer_abi", "not_extension", "duplicate", "bad_schema", "kernel_errors"]:
        paths[variant] = build(tmp, "py_" + variant, bad, defines=["FLB_TEST_" + variant.upper()])
    fl.ops.load_library(paths["example"])
    _BUILT.update(paths)
    return _BUILT


def test_the_wheel_ships_the_header():
    (include,) = fl.utils.cpp_extension.include_paths()
    assert os.path.isfile(os.path.join(include, "flambeau", "stable", "c_api.h"))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_bias_gelu_values_and_gradients_match_torch(libs, dtype):
    xt = torch.randn(5, 8, dtype=getattr(torch, dtype), requires_grad=True)
    bt = torch.randn(8, dtype=getattr(torch, dtype), requires_grad=True)
    x = fl.tensor(xt.detach().numpy()).requires_grad_()
    b = fl.tensor(bt.detach().numpy()).requires_grad_()
    y = fl.ops.mylib.fused_bias_gelu(x, b)
    yt = torch.nn.functional.gelu(xt + bt)
    tol = 1e-13 if dtype == "float64" else 1e-6
    assert_close(y, yt, rtol=tol, atol=tol)
    assert y.grad_fn.name() == "FusedBiasGeluBackward0"
    g = np.random.randn(5, 8)
    y.backward(fl.tensor(g).to(getattr(fl, dtype)))
    yt.backward(torch.tensor(g, dtype=getattr(torch, dtype)))
    assert_close(x.grad, xt.grad, rtol=tol, atol=tol)
    assert_close(b.grad, bt.grad, rtol=10 * tol, atol=10 * tol)  # b's gradient: a sum over 5 rows


def test_gradcheck_through_the_backward_kernel(libs):
    x = fl.randn(3, 4, dtype=fl.float64).requires_grad_()
    b = fl.randn(4, dtype=fl.float64).requires_grad_()
    assert fl.autograd.gradcheck(fl.ops.mylib.fused_bias_gelu, (x, b), atol=1e-8, rtol=1e-6)


def test_dropout_draws_flambeaus_stream_and_the_next_draw_continues(libs):
    x = fl.randn(7, 9)
    fl.manual_seed(3)
    out, mask = fl.ops.mylib.random_dropout(x, 0.4)
    after = fl.rand(5)
    fl.manual_seed(3)
    reference = fl.nn.functional.dropout(x, 0.4)
    assert torch.equal(torch.from_dlpack(out), torch.from_dlpack(reference))
    assert torch.equal(torch.from_dlpack(mask), torch.from_dlpack((reference != 0).to(fl.float32)))
    assert torch.equal(torch.from_dlpack(fl.rand(5)), torch.from_dlpack(after))
    # A generator given by keyword: its stream; the default one does not move.
    g, h = fl.Generator(8), fl.Generator(8)
    offset = fl.default_generator().get_offset()
    _, m = fl.ops.mylib.random_dropout(fl.ones(50, dtype=fl.float64), p=0.5, generator=g)
    keep = fl.empty(50, dtype=fl.float64).bernoulli_(0.5, generator=h)
    assert torch.equal(torch.from_dlpack(m), torch.from_dlpack(keep))
    assert g.get_offset() == h.get_offset() and fl.default_generator().get_offset() == offset
    # The default p=0.5 of the schema.
    fl.manual_seed(4)
    _, m1 = fl.ops.mylib.random_dropout(x)
    fl.manual_seed(4)
    _, m2 = fl.ops.mylib.random_dropout(x, 0.5, None)
    assert torch.equal(torch.from_dlpack(m1), torch.from_dlpack(m2))


def test_dropout_backward(libs):
    x = fl.randn(100, dtype=fl.float64).requires_grad_()
    out, mask = fl.ops.mylib.random_dropout(x, 0.2)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), mask.numpy() / 0.8)


def test_arguments_are_checked_by_the_schema(libs):
    op = fl.ops.mylib.fused_bias_gelu
    assert op.schema == "mylib::fused_bias_gelu(Tensor x, Tensor b) -> Tensor"
    assert "fused_bias_gelu" in dir(fl.ops.mylib)
    x, b = fl.ones(2, 3), fl.ones(3)
    np.testing.assert_array_equal(op(x, b=b).numpy(), op(x, b).numpy())
    with pytest.raises(TypeError, match=r"missing argument 'b'"):
        op(x)
    with pytest.raises(TypeError, match=r"takes 2 positional arguments, got 3"):
        op(x, b, b)
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'c'"):
        op(x, b, c=b)
    with pytest.raises(TypeError, match=r"multiple values for argument 'x'"):
        op(x, b, x=x)
    with pytest.raises(TypeError, match=r"argument 'p' must be float, got str"):
        fl.ops.mylib.random_dropout(x, "half")
    with pytest.raises(ValueError, match=r"\[mylib::fused_bias_gelu\] the kernel failed: b must have shape"):
        op(x, fl.ones(4))
    with pytest.raises(AttributeError, match=r"has no op 'no_such_op'"):
        fl.ops.mylib.no_such_op
    with pytest.raises(AttributeError):
        fl.ops.not_a_namespace.op


def test_compile_and_the_profiler_see_custom_ops(libs):
    def f(x, b):
        return fl.ops.mylib.fused_bias_gelu(x, b) * 2

    x, b = fl.randn(4, 6), fl.randn(6)
    compiled = fl.compile(f, fullgraph=True)
    np.testing.assert_array_equal(compiled(x, b).numpy(), f(x, b).numpy())
    with fl.profiler.profile() as prof:
        fl.ops.mylib.fused_bias_gelu(x, b)
    names = [e.key for e in prof.key_averages()]
    assert "mylib::fused_bias_gelu" in names, names


def test_an_extension_built_against_the_version1_header_works(libs):
    fl.ops.load_library(libs["v1"])
    base = fl.arange(24, dtype=fl.float32).reshape(4, 6)
    view = base[:, 1:5:2].t()
    np.testing.assert_array_equal(fl.ops.v1test.describe(view).numpy(), [2, 8, 1, 0, 0, 6, 2, 4, 2, 6])
    y = fl.ops.v1test.affine(view, 2.0, shift=1.0, negate=True, layout="transposed")
    np.testing.assert_array_equal(y.numpy(), -(view.numpy().astype(np.float64) * 2 + 1))
    f = fl.ops.v1test.filled([2, 2], fl.int16, value=3)
    assert f.dtype == fl.int16 and f.tolist() == [[3, 3], [3, 3]]
    fl.manual_seed(9)
    u = fl.ops.v1test.uniform(11)
    fl.manual_seed(9)
    np.testing.assert_array_equal(u.numpy(), fl.rand(11).numpy())
    assert fl.ops.v1test.seed(fl.Generator(31)).item() == 31


def test_broken_libraries_are_refused_and_flambeau_stays_usable(libs, tmp_path):
    with pytest.raises(ValueError, match="is not a flambeau extension"):
        fl.ops.load_library(libs["not_extension"])
    with pytest.raises(RuntimeError, match="built for flambeau C ABI version 99, but this flambeau provides version 1"):
        fl.ops.load_library(libs["newer_abi"])
    with pytest.raises(ValueError, match="init failed .*init fails on purpose"):
        fl.ops.load_library(libs["init_fails"])
    with pytest.raises(AttributeError):
        fl.ops.initfails.op
    with pytest.raises(ValueError, match="'dup::op' is already registered"):
        fl.ops.load_library(libs["duplicate"])
    with pytest.raises(ValueError, match="unexpected type 'Tensr'"):
        fl.ops.load_library(libs["bad_schema"])
    with pytest.raises(RuntimeError, match="no such file"):
        fl.ops.load_library(tmp_path / "missing.so")
    text = tmp_path / "not_a_library.so"
    text.write_text("hello")
    with pytest.raises(RuntimeError, match="cannot load"):
        fl.ops.load_library(text)
    assert not any("init_fails" in p for p in fl.ops.loaded_libraries())
    assert (fl.ones(2) + 1).tolist() == [2.0, 2.0]


def test_kernel_errors_name_the_op(libs):
    fl.ops.load_library(libs["kernel_errors"])
    x = fl.ones(2, 3, dtype=fl.float64)
    with pytest.raises(ValueError, match=r"\[kerr::fails\] the kernel failed: this kernel fails on purpose"):
        fl.ops.kerr.fails(x)
    with pytest.raises(RuntimeError, match="left result 0 unset"):
        fl.ops.kerr.leaves_unset(x)
    with pytest.raises(RuntimeError, match="shares memory with an argument"):
        fl.ops.kerr.returns_input(x)
    with pytest.raises(RuntimeError, match=r"the shape function says \(12345,\)"):
        fl.ops.kerr.wrong_shape(x)
    leaf = fl.ones(3, dtype=fl.float64).requires_grad_()
    y = fl.ops.kerr.no_backward(leaf)
    with pytest.raises(RuntimeError, match="has no backward kernel"):
        y.sum().backward()
    (leaf * 3).sum().backward()
    assert leaf.grad.tolist() == [3.0, 3.0, 3.0]
