"""Python score_mods compiled into native ones (flambeau.compile traces them, C++ with their
derivative runs in the kernel): against the built-in native mods (bitwise where the ops are the
same in the same order) and against the composite path that materialises the scores (within
float32 rounding), forward and gradients (q, k, v and captured tensors); mods the generator
does not know fall back to the composite path with its results; the per-function cache."""
import numpy as np
import pytest

import flambeau as fl
import flambeau.compiler
from flambeau.nn.attention import flex_attention as ffa

from conftest import to_numpy

H, L = 4, 200
SLOPES = np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
N_REL = 256
TABLE = np.random.default_rng(7).standard_normal((H, 2 * N_REL - 1)).astype(np.float32) * 0.5
# Composite vs kernel: the same scores, summed in another order over S <= 200 keys (softmax,
# P @ V, and the backward's reductions): |error| <= ~S * eps32 * |terms| ~ 200 * 6e-8 ~ 1.2e-5.
TOL = dict(rtol=3e-5, atol=3e-5)


def inputs(seed, B=2, Hkv=H, S=L):
    r = np.random.default_rng(seed)
    return [fl.tensor(r.standard_normal(s).astype(np.float32)).requires_grad_()
            for s in ((B, H, L, 16), (B, Hkv, S, 16), (B, Hkv, S, 16))]


def run(mod, qkv, mask=ffa.causal_mask, path="native", caps=()):
    """out, lse and the gradients of q, k, v and caps for a fixed upstream gradient."""
    q, k, v = (t.detach().requires_grad_() for t in qkv)
    for c in caps:
        c.grad = None
    bm = ffa.create_block_mask(mask, 1, 1, L, k.shape[2], BLOCK_SIZE=64) if mask is not None else None
    gqa = q.shape[1] != k.shape[1]
    if path == "native":
        out, lse = ffa.flex_attention(q, k, v, score_mod=mod, block_mask=bm, enable_gqa=gqa, return_lse=True)
    else:
        out, lse = ffa._composite(q, k, v, mod, bm, None, gqa)
    g = np.random.default_rng(9).standard_normal(tuple(out.shape)).astype(np.float32)
    (out * fl.tensor(g)).sum().backward()
    return [to_numpy(x) for x in (out, lse, q.grad, k.grad, v.grad)] + [to_numpy(c.grad) for c in caps]


def compiles(fn):
    impl, why = fl._C._flex.compile_score_mod(fn)
    return impl is not None


def test_alibi_and_relative_bias_in_python_are_the_native_mods_bitwise():
    qkv = inputs(0)
    slopes = fl.tensor(SLOPES)
    alibi = lambda s, b, h, q, kv: s + slopes[h] * (kv - q)  # noqa: E731
    assert compiles(alibi)
    for a, b in zip(run(alibi, qkv), run(ffa.alibi(slopes), qkv)):
        np.testing.assert_array_equal(a, b)
    # The learnable table: the same float64 accumulation in the same order, so its gradient too.
    table = fl.tensor(TABLE, requires_grad=True)
    rel = lambda s, b, h, q, kv: s + table[h, q - kv + (N_REL - 1)]  # noqa: E731
    assert compiles(rel)
    window = ffa.sliding_window(100)
    got = run(rel, qkv, window, caps=[table])
    want = run(ffa.relative_bias(table), qkv, window, caps=[table])
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["softcap", "where_causal", "alibi_grad", "relative_bias_1d", "casts", "mixed"])
def test_compiled_mod_matches_the_composite_path(name):
    slopes = fl.tensor(SLOPES, requires_grad=True)
    bias1d = fl.tensor(np.linspace(-1, 1, 2 * L).astype(np.float32), requires_grad=True)
    mods = {
        "softcap": (lambda s, b, h, q, kv: (s / 3.0).tanh() * 3.0, []),
        "where_causal": (lambda s, b, h, q, kv: fl.where(q >= kv, s, s - 2.0) * 1.5, []),
        "alibi_grad": (lambda s, b, h, q, kv: s + slopes[h] * (kv - q) * 0.1, [slopes]),
        "relative_bias_1d": (lambda s, b, h, q, kv: s + bias1d[q - kv + L], [bias1d]),
        "casts": (lambda s, b, h, q, kv: s + ((q - kv).to(float) * 0.01).float() + (kv % 7).to(fl.float32) * 0.1, []),
        "mixed": (lambda s, b, h, q, kv: fl.maximum(s, s.abs().sqrt() - 1) * fl.sigmoid(s)
                  + fl.exp(-s.abs()) - fl.log(s * s + 1) * 0.5 + fl.rsqrt(s * s + 4), []),
    }
    mod, caps = mods[name]
    assert compiles(mod)
    qkv = inputs(1)
    for a, b in zip(run(mod, qkv, caps=caps), run(mod, qkv, path="composite", caps=caps)):
        np.testing.assert_allclose(a, b, **TOL)


def test_softcap_in_python_matches_the_native_softcap():
    # eager's SIMD tanh (the Python mod's, compiled) and libm's (the native mod's) differ by a
    # few ulps: a relative 1e-6 on each score, well inside TOL after the softmax.
    qkv = inputs(2)
    got = run(lambda s, b, h, q, kv: (s / 3.0).tanh() * 3.0, qkv, mask=None)
    for a, b in zip(got, run(ffa.tanh_softcap(3.0), qkv, mask=None)):
        np.testing.assert_allclose(a, b, **TOL)


def test_gqa_and_a_longer_key_sequence():
    qkv = inputs(3, B=1, Hkv=2, S=300)
    mod = lambda s, b, h, q, kv: s - (q - kv).abs() * 0.02  # noqa: E731
    for a, b in zip(run(mod, qkv, mask=None), run(mod, qkv, mask=None, path="composite")):
        np.testing.assert_allclose(a, b, **TOL)


def test_unsupported_mods_fall_back_with_the_composite_results():
    disabled = flambeau.compiler.disable(lambda s, b, h, q, kv: s * 0.5)
    for mod in (lambda s, b, h, q, kv: fl.sin(s) + s,  # no derivative rule: fallback
                lambda s, b, h, q, kv: s - s.amax(-1, keepdim=True),  # a reduction
                disabled):
        assert not compiles(mod)
        qkv = inputs(4)
        for a, b in zip(run(mod, qkv), run(mod, qkv, path="composite")):
            np.testing.assert_array_equal(a, b)
    why = fl._C._flex.compile_score_mod(lambda s, b, h, q, kv: fl.sin(s) + s)[1]
    assert "derivative" in why and "sin" in why


def test_the_cache_follows_the_function_and_its_captured_tensors():
    global CACHED_BIAS
    CACHED_BIAS = fl.zeros(H)
    qkv = inputs(5)

    def mod(s, b, h, q, kv):
        return s + CACHED_BIAS[h]

    first = run(mod, qkv)
    impl = ffa._score_mods[mod][1]
    assert impl is not None
    run(mod, qkv)
    assert ffa._score_mods[mod][1] is impl  # the same function and tensor: no new trace
    with fl.no_grad():
        CACHED_BIAS += fl.tensor(SLOPES)  # in place: seen by the compiled mod
    changed = run(mod, qkv)
    assert ffa._score_mods[mod][1] is impl
    CACHED_BIAS = fl.zeros(H)  # a new tensor: a new trace
    again = run(mod, qkv)
    assert ffa._score_mods[mod][1] is not impl
    assert not np.array_equal(first[0], changed[0])
    np.testing.assert_array_equal(first[0], again[0])


def test_an_index_out_of_bounds_raises():
    small = fl.zeros(10)
    with pytest.raises(IndexError, match="out of bounds"):
        ffa.flex_attention(*inputs(6), score_mod=lambda s, b, h, q, kv: s + small[q - kv])
