"""flambeau.compile and flambeau.compiler (issue 20, first part): tracing on the first call of
each kind, results bitwise equal to eager (the "eager" backend replays the same ops), guards
(shapes, dtypes, strides, Python numbers, grad mode, a module's parameters and mode),
cache_size_limit, graph breaks (fullgraph raises naming the op; otherwise eager with one
warning), the backend registry (names, callables, tags, the default), reset, disable,
is_compiling, compiled modules and training through a compiled function."""
import shutil
import warnings

import pytest

import flambeau as fl
from flambeau import compiler


def seeded(*shape, seed=0):
    return fl.randn(*shape, generator=fl.Generator().manual_seed(seed))


def chain(x, y, scale=2.0):
    a = fl.sin(x) * scale
    b = fl.sin(x) * scale  # merged by CSE
    fl.exp(x)  # dead
    return fl.tanh(a + b + y) - x


def bitwise(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and bool((a == b).all()) or bool(
        (a.isnan() & b.isnan()).any())


def test_results_equal_eager_and_the_graph_is_optimised():
    f = fl.compile(chain, backend="eager")
    x, y = seeded(4, 5, seed=1), seeded(4, 5, seed=2)
    first, second = f(x, y), f(x, y)
    assert bitwise(first, chain(x, y)) and bitwise(second, chain(x, y))
    (g,) = f.graphs()
    assert g.ops == ["sin", "mul", "add", "add", "tanh", "sub"]
    text = str(g)
    assert "%2 = sin(%0)" in text and "return (" in text
    assert g.to_dot().startswith("digraph")
    assert bitwise(g(x, y)[0], chain(x, y))


def test_guards_retrace_on_a_new_kind_of_call():
    traces = []

    @compiler.register_backend(name="recording")
    def recording(graph, example_inputs):
        traces.append([tuple(t.shape) for t in example_inputs])
        return graph

    f = fl.compile(chain, backend="recording")
    x, y = seeded(4, 5, seed=1), seeded(4, 5, seed=2)
    f(x, y)
    f(seeded(4, 5, seed=3), seeded(4, 5, seed=4))  # same kind: no new trace
    assert len(traces) == 1
    f(seeded(2, 5), seeded(2, 5))  # shape
    f(x.double(), y.double())  # dtype
    xt = seeded(5, 4).t()
    out = f(xt, y)  # strides
    assert bitwise(out, chain(xt, y))
    assert bitwise(f(x, y, scale=3.0), chain(x, y, scale=3.0))  # a Python number is specialised
    with fl.no_grad():
        f(x, y)  # grad mode
    assert len(traces) == 6


def test_cache_size_limit_then_eager_with_one_warning():
    f = fl.compile(chain, backend="eager")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 11):
            x = seeded(n, seed=n)
            assert bitwise(f(x, x), chain(x, x))
    assert len(f.graphs()) == 8
    assert [str(m.message) for m in w if "cache_size_limit" in str(m.message)] != []
    assert len([m for m in w if "cache_size_limit" in str(m.message)]) == 1


def test_breaks_raise_under_fullgraph_and_run_eagerly_otherwise():
    def reads(x):
        return x * x.sum().item()

    with pytest.raises(RuntimeError, match="'item'"):
        fl.compile(reads, fullgraph=True, backend="eager")(seeded(3))
    f = fl.compile(reads, backend="eager")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for seed in (1, 2, 3):
            x = seeded(3, seed=seed)
            assert bitwise(f(x), reads(x))  # each call's own value: never a stale one
    assert len([m for m in w if "breaks at 'item'" in str(m.message)]) == 1
    with pytest.raises(RuntimeError, match="'nonzero'"):
        fl.compile(lambda x: fl.nonzero(x), fullgraph=True, backend="eager")(seeded(4))


def test_backend_registry_and_default():
    assert "eager" not in compiler.list_backends() and "cpp" in compiler.list_backends()  # eager: debug
    assert "eager" in compiler.list_backends(exclude_tags=())
    calls = []

    def counting(graph, example_inputs):
        calls.append(graph.ops)
        return graph

    before = compiler.get_default_backend()
    try:
        compiler.set_default_backend(counting)
        f = fl.compile(chain)
        x = seeded(3)
        assert bitwise(f(x, x), chain(x, x))
        f(x, x)
        assert len(calls) == 1
        compiler.set_default_backend(None)
        assert compiler.get_default_backend() == "cpp"
    finally:
        compiler.set_default_backend(before)
    with pytest.raises(ValueError, match="no backend named 'nope'"):
        fl.compile(chain, backend="nope")
    with pytest.raises(ValueError, match="nope"):
        compiler.set_default_backend("nope")

    def raising(graph, example_inputs):
        raise KeyError("backend failed")

    with pytest.raises(KeyError, match="backend failed"):
        fl.compile(chain, backend=raising)(seeded(2), seeded(2))
    with pytest.raises(TypeError, match="callable"):
        fl.compile(chain, backend=lambda g, e: 42)(seeded(2), seeded(2))
    with pytest.raises(ValueError, match="mode"):
        fl.compile(chain, mode="fastest")
    assert fl.compile(chain, disable=True) is chain


def test_reset_disable_and_is_compiling():
    seen = []

    @compiler.disable
    def helper(x):
        return x + 1

    def fn(x):
        seen.append(compiler.is_compiling())
        return helper(fl.sin(x))

    with pytest.raises(RuntimeError, match="helper"):
        fl.compile(fn, fullgraph=True, backend="eager")(seeded(3))
    assert seen == [True] and not compiler.is_compiling()
    f = fl.compile(chain, backend="eager")
    x = seeded(3)
    f(x, x)
    assert len(f.graphs()) == 1
    compiler.reset()
    assert f.graphs() == []
    assert bitwise(f(x, x), chain(x, x)) and len(f.graphs()) == 1


def test_a_compiled_module_and_training_through_it():
    fl.manual_seed(0)
    m = fl.nn.Sequential(fl.nn.Linear(5, 8), fl.nn.Tanh(), fl.nn.Linear(8, 2))
    cm = fl.compile(m, backend="eager")
    assert cm.training and len(list(cm.parameters())) == 4
    x = seeded(4, 5, seed=3)
    for _ in range(2):  # trace, then the graph
        loss = cm(x).pow(2).mean()
        loss.backward()
        got = [p.grad.clone() for p in m.parameters()]
        m.zero_grad()
        m(x).pow(2).mean().backward()
        assert all(bitwise(a, p.grad) for a, p in zip(got, m.parameters()))
        m.zero_grad()
    cm.eval()  # the module's mode is guarded
    with fl.no_grad():
        assert bitwise(cm(x), m(x))
    # A new parameter object (not an in-place update) makes a new kind of call.
    m[0].weight = fl.nn.Parameter(m[0].weight.detach() * 2)
    with fl.no_grad():
        assert bitwise(cm(x), m(x))


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test builds into its own cache."""
    monkeypatch.setenv("FLAMBEAU_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_cpp_backend_fuses_pointwise_chains_bitwise(cache_dir):
    def ten(x, y):
        return ((((fl.sin(x) * 1.5 + y).tanh() * 0.5).exp() - 1).sigmoid() * x).relu() + y

    f = fl.compile(ten)  # the default backend: cpp
    x, y = seeded(3000, seed=1), seeded(3000, seed=2)
    assert bitwise(f(x, y), ten(x, y)) and bitwise(f(x, y), ten(x, y))
    assert any(p.suffix == ".so" for p in cache_dir.iterdir())
    b = seeded(7, seed=3)  # a broadcast operand and a 2-D shape
    g = fl.compile(lambda x, b: fl.relu(x + b) * 2.0)
    x2 = seeded(5, 7, seed=4)
    assert bitwise(g(x2, b), fl.relu(x2 + b) * 2.0) and bitwise(g(x2, b), fl.relu(x2 + b) * 2.0)


def test_decorator_forms():
    @fl.compile
    def f(x):
        return x * 2 + 1

    @fl.compile(backend="eager", fullgraph=True)
    def g(x):
        return (x * 2 + 1,)

    x = seeded(3)
    assert bitwise(f(x), x * 2 + 1) and bitwise(g(x)[0], x * 2 + 1)


@pytest.mark.skipif(not (shutil.which("aarch64-linux-gnu-g++") and shutil.which("qemu-aarch64")),
                    reason="needs g++-aarch64-linux-gnu and qemu-user")
@pytest.mark.parametrize("bits", [128, 256])
def test_armv9_sve_target_under_qemu(bits):
    def fn(x, w):
        y = fl.sigmoid(x) * 2.0 - x
        return y * fl.rsqrt((y * y).mean(-1, keepdim=True) + 1e-6) * w

    f = fl.compile(fn, options={"target": "armv9-a+sve2", "sve_bits": bits})
    x, w = seeded(9, 40, seed=1), seeded(40, seed=2)
    with fl.no_grad():
        want = fn(x, w)
        for _ in range(2):
            assert float((f(x, w) - want).abs().max()) <= 1e-5 * (1 + float(want.abs().max()))


def test_backend_options_are_checked():
    with pytest.raises(ValueError, match="no option 'fast'"):
        fl.compile(chain, options={"fast": True})(seeded(3), seeded(3))
    with pytest.raises(ValueError, match="sve_bits"):
        fl.compile(chain, options={"target": "armv9-a+sve2", "sve_bits": 512})(seeded(3), seeded(3))


def test_python_mask_mods_compile_to_native_ones():
    """create_block_mask compiles a mask_mod of integer and bool index arithmetic into a
    native one: the same blocks and the same attention as the tensor evaluation (forced
    here by a float comparison the generator refuses)."""
    from flambeau.nn.attention import flex_attention as F

    mods = {
        "window": lambda b, h, q, kv: (q >= kv) & (q - kv <= 5),
        "arith": lambda b, h, q, kv: ((q + kv) % 3 == 0) | (q // 4 == kv // 4) | (-q + abs(kv - 7) > 9),
        "logical": lambda b, h, q, kv: fl.logical_and(q >= kv, fl.logical_not(kv % 2 == 1)) | (h == 1),
        "where": lambda b, h, q, kv: fl.where(q > 10, fl.maximum(q, kv) == q, fl.minimum(q, kv) == kv),
        "intervals": lambda b, h, q, kv: ((abs(q - kv) <= 9) ^ (q * -2 + kv > -30)) | ((kv - h * 16) == q)
        | ((fl.maximum(q, kv) - fl.minimum(q, kv)) != 3) & (q < 8),
    }
    assert fl._C._flex.compile_mask_mod(lambda b, h, q, kv: (q * 0.5) >= kv)[0] is None
    S = 40
    qkv = [seeded(1, 2, S, 8, seed=i) for i in range(3)]
    for name, mod in mods.items():
        assert fl._C._flex.compile_mask_mod(mod)[0] is not None, name
        compiled = F.create_block_mask(mod, 1, 2, S, S, BLOCK_SIZE=16)
        assert compiled.mask_mod is mod and compiled._native, name
        reference = F.create_block_mask(lambda b, h, q, kv, m=mod: m(b, h, q, kv) & (q.float() >= -1), 1, 2, S, S,
                                        BLOCK_SIZE=16)
        assert not reference._native or not isinstance(reference.mask_mod, F._NativeMask)
        assert bool((compiled.to_dense() == reference.to_dense()).all()), name
        # full blocks skip the mask: the tile classification must agree exactly
        assert bool((compiled.full_kv_num_blocks == reference.full_kv_num_blocks).all()), name
        dense = F.create_mask(mod, 1, 2, S, S)
        want = F.create_mask(lambda b, h, q, kv, m=mod: m(b, h, q, kv) & (q.float() >= -1), 1, 2, S, S)
        assert bool((dense == want).all()), name
        out = F.flex_attention(*qkv, block_mask=compiled)
        ref = F.flex_attention(*qkv, block_mask=reference)
        assert bool((out == ref).all()), name


def test_tensors_the_function_makes_are_folded():
    """A tensor the function builds from Python data is owned by the graph alone: it and what
    is computed from it are computed once; a parameter is not folded."""
    w = fl.nn.Parameter(seeded(3, seed=5))

    def fn(x):
        table = fl.tensor([1.0, 2.0, 3.0]) * 2.0 + 1.0
        return x * table + x * w

    f = fl.compile(fn, backend="eager")
    x = seeded(4, 3, seed=6)
    with fl.no_grad():
        f(x)
        assert bitwise(f(x), fn(x))
        assert f.graphs()[0].ops == ["mul", "mul", "add"]
        w.mul_(2.0)
        assert bitwise(f(x), fn(x))


class _Block(fl.nn.Module):
    """A Llama-style block: RMSNorm, causal attention, SwiGLU, residuals."""

    def __init__(self, d=32, heads=4):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = fl.nn.RMSNorm(d), fl.nn.RMSNorm(d)
        self.qkv, self.o = fl.nn.Linear(d, 3 * d, bias=False), fl.nn.Linear(d, d, bias=False)
        self.gate, self.up, self.down = (fl.nn.Linear(d, 2 * d), fl.nn.Linear(d, 2 * d), fl.nn.Linear(2 * d, d))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.n1(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        a = fl.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, C))
        h = self.n2(x)
        return x + self.down(fl.nn.functional.silu(self.gate(h)) * self.up(h))


def _grads(f, m, x, w):
    for p in m.parameters():
        p.grad = None
    x.grad = None
    y = f(x)
    (y * w).sum().backward()
    return y.detach(), [p.grad.clone() for p in m.parameters()] + [x.grad.clone()]


@pytest.mark.parametrize("backend", ["cpp", "aot_eager"])
def test_compiled_training_compiles_the_backward(backend):
    """The backward of a compiled block is traced and compiled (one CompiledFunctionBackward
    node); its gradients are eager's within float32 rounding (rms_norm runs decomposed into
    ops: 32-element row sums, relative 32 * 2^-24 per statistic, a few times that after the
    backward), on the traced inputs and on new ones."""
    fl.manual_seed(0)
    m = _Block()
    cm = fl.compile(m, backend=backend)
    for seed in (1, 2):
        x = seeded(2, 8, 32, seed=seed).requires_grad_(True)
        w = seeded(2, 8, 32, seed=10 + seed)
        want, want_grads = _grads(m, m, x, w)
        cm(x)  # the trace
        y = cm(x)
        assert type(y.grad_fn).__name__ == "CompiledFunctionBackward" or y.grad_fn.name() == "CompiledFunctionBackward"
        got, got_grads = _grads(cm, m, x, w)
        assert float((got - want).abs().max()) <= 1e-5 * (1 + float(want.abs().max()))
        for a, b in zip(got_grads, want_grads):
            assert float((a - b).abs().max()) <= 1e-4 * (1 + float(b.abs().max()))


def test_compiled_training_is_bitwise_for_pointwise_ops_and_checks_saved_versions():
    w = seeded(16, seed=4).requires_grad_(True)

    def f(x):
        return fl.tanh(x * w) * fl.exp(x)

    cf = fl.compile(f)
    x = seeded(8, 16, seed=5).requires_grad_(True)
    cf(x)
    for _ in range(2):
        for t in (x, w):
            t.grad = None
        cf(x).sum().backward()
        got = [x.grad.clone(), w.grad.clone()]
        for t in (x, w):
            t.grad = None
        f(x).sum().backward()
        assert bitwise(got[0], x.grad) and bitwise(got[1], w.grad)
    ce = fl.compile(lambda x: fl.exp(x * w))
    ce(x)
    y = ce(x)
    with fl.no_grad():
        y.mul_(2)  # exp's output is saved (as eager's is): the backward refuses it
    with pytest.raises(Exception, match="modified|version|in-place|inplace"):
        y.sum().backward()
