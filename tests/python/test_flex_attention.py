"""flambeau.nn.attention.flex_attention against PyTorch 2.13: forward (values and logsumexp)
against torch's flex_attention on the CPU, gradients against torch's math path in float64
(SDPA with a dense mask, or the materialised formula for score mods), block-mask structure
against torch's create_block_mask, determinism and errors."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from torch.nn.attention import flex_attention as tfa

import flambeau as fl
from flambeau.nn.attention import flex_attention as ffa

from conftest import assert_close, to_numpy


def inputs(B, Hq, Hkv, L, S, E=16, Ev=16, seed=0, dtype="float32"):
    r = np.random.default_rng(seed)
    arrs = [r.standard_normal(s).astype(np.float32) for s in ((B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev))]
    f = [fl.tensor(a).to(getattr(fl, dtype)).requires_grad_() for a in arrs]
    t = [torch.tensor(a).to(getattr(torch, dtype)).requires_grad_() for a in arrs]
    return f, t


def tflex(q, k, v, **kw):
    """torch's flex_attention (its CPU path has no backward: inputs detached)."""
    with torch.no_grad():
        return tfa.flex_attention(q.detach(), k.detach(), v.detach(), **kw)


DOC = np.repeat(np.arange(5), [30, 50, 20, 60, 40])  # 200 positions in 5 documents
FDOC, TDOC = fl.tensor(DOC), torch.tensor(DOC)
SLOPES = np.array([0.5, 0.25, 0.125, 0.0625], np.float32)
N_REL = 256
TABLE = np.random.default_rng(7).standard_normal((4, 2 * N_REL - 1)).astype(np.float32) * 0.5

# name -> (flambeau mask_mod, torch mask_mod, flambeau score_mod factory, torch score_mod factory)
CASES = {
    "none": (None, None, None, None),
    "causal": (ffa.causal_mask, lambda b, h, q, kv: q >= kv, None, None),
    "sliding_window_40": (ffa.sliding_window(40), lambda b, h, q, kv: (q >= kv) & (q - kv <= 40), None, None),
    "prefix_lm_64": (ffa.prefix_lm(64), lambda b, h, q, kv: (kv < 64) | (q >= kv), None, None),
    "document_causal": (ffa.and_masks(ffa.document_mask(FDOC), ffa.causal_mask),
                        lambda b, h, q, kv: (TDOC[q] == TDOC[kv]) & (q >= kv), None, None),
    "python_mask_mod": (lambda b, h, q, kv: (q - kv) % 3 != 1, lambda b, h, q, kv: (q - kv) % 3 != 1, None, None),
    "alibi_causal": (ffa.causal_mask, lambda b, h, q, kv: q >= kv, lambda: ffa.alibi(fl.tensor(SLOPES)),
                     lambda: (lambda s, b, h, q, kv: s + torch.tensor(SLOPES)[h] * (kv - q))),
    "softcap": (None, None, lambda: ffa.tanh_softcap(3.0), lambda: (lambda s, b, h, q, kv: torch.tanh(s / 3.0) * 3.0)),
    "relative_bias_window": (ffa.sliding_window(100), lambda b, h, q, kv: (q >= kv) & (q - kv <= 100),
                             lambda: ffa.relative_bias(fl.tensor(TABLE)),
                             lambda: (lambda s, b, h, q, kv: s + torch.tensor(TABLE)[h, q - kv + N_REL - 1])),
    "python_score_mod": (ffa.causal_mask, lambda b, h, q, kv: q >= kv,
                         lambda: (lambda s, b, h, q, kv: s * 0.5 + (q - kv) * 0.01),
                         lambda: (lambda s, b, h, q, kv: s * 0.5 + (q - kv) * 0.01)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_forward_matches_torch_flex(name):
    fmask, tmask, fscore, tscore = CASES[name]
    B, Hq, Hkv, L, S = 2, 4, 2, 200, 200  # GQA, not a multiple of 128
    (fq, fk, fv), (tq, tk, tv) = inputs(B, Hq, Hkv, L, S)
    fbm = ffa.create_block_mask(fmask, 1, 1, L, S) if fmask is not None else None
    tbm = tfa.create_block_mask(tmask, 1, 1, L, S, device="cpu") if tmask is not None else None
    fo, fl_lse = ffa.flex_attention(fq, fk, fv, score_mod=fscore() if fscore else None, block_mask=fbm,
                                    enable_gqa=True, return_lse=True)
    to, tl_lse = tflex(tq, tk, tv, score_mod=tscore() if tscore else None, block_mask=tbm, enable_gqa=True,
                       return_aux=tfa.AuxRequest(lse=True))
    assert_close(fo, to, rtol=1e-4, atol=1e-4)
    assert_close(fl_lse, tl_lse.lse, rtol=1e-4, atol=1e-4)


def reference64(q, k, v, mask=None, score=None, G=1):
    """float64 math path: SDPA (math) with a dense mask, or the formula when a score mod is used."""
    k, v = (t.repeat_interleave(G, 1) for t in (k, v))
    if score is None:
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
            return TF.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    B, H, L, S = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    idx = [torch.arange(n).view(*([1] * i), n, *([1] * (3 - i))) for i, n in enumerate((B, H, L, S))]
    s = score(s, *idx)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return s.softmax(-1) @ v


@pytest.mark.parametrize("name", ["causal", "document_causal", "alibi_causal", "softcap", "relative_bias_window",
                                  "python_score_mod", "python_mask_mod"])
def test_gradients_match_math_path(name):
    fmask, tmask, fscore, tscore = CASES[name]
    B, Hq, Hkv, L, S = 1, 4, 2, 200, 200
    (fq, fk, fv), (tq, tk, tv) = inputs(B, Hq, Hkv, L, S, seed=1)
    fbm = ffa.create_block_mask(fmask, B, 1, L, S, BLOCK_SIZE=64) if fmask is not None else None
    fo = ffa.flex_attention(fq, fk, fv, score_mod=fscore() if fscore else None, block_mask=fbm, enable_gqa=True)
    g = np.random.default_rng(2).standard_normal(tuple(fo.shape)).astype(np.float32)
    fo.backward(fl.tensor(g))
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (tq, tk, tv))
    mask = tfa.create_mask(tmask, B, 1, L, S, device="cpu") if tmask is not None else None
    to = reference64(q64, k64, v64, mask, tscore() if tscore else None, G=Hq // Hkv)
    to.backward(torch.tensor(g, dtype=torch.float64))
    assert_close(fo, to, rtol=1e-4, atol=1e-4, check_dtype=False)
    for f, t in ((fq, q64), (fk, k64), (fv, v64)):
        assert_close(f.grad, t.grad, rtol=1e-4, atol=1e-4, check_dtype=False)


@pytest.mark.parametrize("name", ["causal", "document_causal", "softcap", "python_score_mod"])
def test_gradients_through_out_and_lse(name):
    # loss = <g, out> + <h, lse>: the lse output is differentiable, as in PyTorch.
    fmask, tmask, fscore, tscore = CASES[name]
    B, Hq, Hkv, L, S = 1, 4, 2, 200, 200
    (fq, fk, fv), (tq, tk, tv) = inputs(B, Hq, Hkv, L, S, seed=3)
    fbm = ffa.create_block_mask(fmask, B, 1, L, S, BLOCK_SIZE=64) if fmask is not None else None
    fo, flse = ffa.flex_attention(fq, fk, fv, score_mod=fscore() if fscore else None, block_mask=fbm,
                                  enable_gqa=True, return_lse=True)
    r = np.random.default_rng(4)
    g, h = r.standard_normal(tuple(fo.shape)).astype(np.float32), r.standard_normal((B, Hq, L)).astype(np.float32)
    ((fo * fl.tensor(g)).sum() + (flse * fl.tensor(h)).sum()).backward()
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (tq, tk, tv))
    k2, v2 = (t.repeat_interleave(Hq // Hkv, 1) for t in (k64, v64))
    sc = q64 @ k2.transpose(-1, -2) / q64.shape[-1] ** 0.5
    if tscore:
        idx = [torch.arange(n).view(*([1] * i), n, *([1] * (3 - i))) for i, n in enumerate((B, Hq, L, S))]
        sc = tscore()(sc, *idx)
    if tmask:
        sc = sc.masked_fill(~tfa.create_mask(tmask, B, 1, L, S, device="cpu"), float("-inf"))
    tlse = sc.logsumexp(-1)
    to = (sc - tlse[..., None]).exp() @ v2
    ((to * torch.tensor(g, dtype=torch.float64)).sum() + (tlse * torch.tensor(h, dtype=torch.float64)).sum()).backward()
    assert_close(flse, tlse, rtol=1e-4, atol=1e-4, check_dtype=False)
    for f, t in ((fq, q64), (fk, k64), (fv, v64)):
        assert_close(f.grad, t.grad, rtol=1e-4, atol=1e-4, check_dtype=False)


def test_learnable_relative_bias_gradient_and_determinism():
    L = 200
    (fq, fk, fv), (tq, tk, tv) = inputs(2, 4, 4, L, L, seed=3)
    grads = []
    for threads in (1, 2, 2):
        fl.set_num_threads(threads)
        table = fl.tensor(TABLE, requires_grad=True)
        for t in (fq, fk, fv):
            t.grad = None
        bm = ffa.create_block_mask(ffa.causal_mask, 1, 4, L, L, BLOCK_SIZE=64)
        out = ffa.flex_attention(fq, fk, fv, score_mod=ffa.relative_bias(table), block_mask=bm)
        (out * out).sum().backward()
        grads.append([to_numpy(x) for x in (out, fq.grad, fk.grad, fv.grad, table.grad)])
    fl.set_num_threads(2)
    for a, b in zip(grads[0], grads[1]):
        np.testing.assert_array_equal(a, b)  # bitwise, 1 vs 2 threads
    for a, b in zip(grads[1], grads[2]):
        np.testing.assert_array_equal(a, b)  # bitwise, run twice
    tab = torch.tensor(TABLE, dtype=torch.float64, requires_grad=True)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (tq, tk, tv))
    mask = torch.tril(torch.ones(L, L, dtype=torch.bool))
    to = reference64(q64, k64, v64, mask, lambda s, b, h, q, kv: s + tab[h, q - kv + N_REL - 1])
    (to * to).sum().backward()
    for f, t in zip(grads[0], (to, q64.grad, k64.grad, v64.grad, tab.grad)):
        np.testing.assert_allclose(f, t.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_python_score_mod_with_captured_tensor_gets_gradient():
    L = 70
    (fq, fk, fv), (tq, tk, tv) = inputs(1, 2, 2, L, L, seed=4)
    fb = fl.tensor(np.linspace(-1, 1, 2 * L).astype(np.float32), requires_grad=True)
    tb = torch.tensor(np.linspace(-1, 1, 2 * L), requires_grad=True)
    ffa.flex_attention(fq, fk, fv, score_mod=lambda s, b, h, q, kv: s + fb[q - kv + L]).sum().backward()
    q64, k64, v64 = (t.detach().double() for t in (tq, tk, tv))
    reference64(q64, k64, v64, None, lambda s, b, h, q, kv: s + tb[q - kv + L]).sum().backward()
    assert_close(fb.grad, tb.grad, rtol=1e-4, atol=1e-5, check_dtype=False)


def test_fully_masked_rows_give_zero_and_minus_inf_lse():
    (fq, fk, fv), (tq, tk, tv) = inputs(1, 2, 2, 130, 130, seed=5)
    fbm = ffa.create_block_mask(lambda b, h, q, kv: (q % 5 != 2) & (kv <= q), 1, 1, 130, 130)
    tbm = tfa.create_block_mask(lambda b, h, q, kv: (q % 5 != 2) & (kv <= q), 1, 1, 130, 130, device="cpu")
    fo, flse = ffa.flex_attention(fq, fk, fv, block_mask=fbm, return_lse=True)
    to, aux = tflex(tq, tk, tv, block_mask=tbm, return_aux=tfa.AuxRequest(lse=True))
    assert_close(fo, to, rtol=1e-4, atol=1e-4)
    assert_close(flse, aux.lse, rtol=1e-4, atol=1e-4)
    assert np.all(to_numpy(fo)[:, :, 2::5] == 0) and np.all(np.isneginf(to_numpy(flse)[:, :, 2::5]))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16bit_inputs(dtype):
    (fq, fk, fv), (tq, tk, tv) = inputs(1, 2, 2, 150, 300, seed=6, dtype=dtype)
    fbm = ffa.create_block_mask(ffa.prefix_lm(100), 1, 1, 150, 300)
    tbm = tfa.create_block_mask(lambda b, h, q, kv: (kv < 100) | (q >= kv), 1, 1, 150, 300, device="cpu")
    fo = ffa.flex_attention(fq, fk, fv, block_mask=fbm)
    to = tflex(tq.float(), tk.float(), tv.float(), block_mask=tbm)
    assert repr(fo.dtype) == f"flambeau.{dtype}"
    assert_close(fo, to, rtol=2e-2, atol=2e-2, check_dtype=False)


def test_decode_one_query_against_a_long_cache():
    S = 9000  # 71 KV blocks: split into 3 chunks
    (fq, fk, fv), (tq, tk, tv) = inputs(1, 8, 2, 1, S, seed=8)
    fo, flse = ffa.flex_attention(fq, fk, fv, enable_gqa=True, return_lse=True)
    to, aux = tflex(tq, tk, tv, enable_gqa=True, return_aux=tfa.AuxRequest(lse=True))
    assert_close(fo, to, rtol=1e-4, atol=1e-5)
    assert_close(flse, aux.lse, rtol=1e-4, atol=1e-4)


def test_block_mask_structure_matches_torch():
    for fm, tm in ((ffa.causal_mask, lambda b, h, q, kv: q >= kv),
                   (ffa.sliding_window(200), lambda b, h, q, kv: (q >= kv) & (q - kv <= 200)),
                   (lambda b, h, q, kv: (b + h + q // 100 + kv // 70) % 3 != 0,
                    lambda b, h, q, kv: (b + h + q // 100 + kv // 70) % 3 != 0)):
        f = ffa.create_block_mask(fm, 2, 2, 512, 768)
        t = tfa.create_block_mask(tm, 2, 2, 512, 768, device="cpu")
        for name in ("kv_num_blocks", "full_kv_num_blocks", "q_num_blocks", "full_q_num_blocks"):
            np.testing.assert_array_equal(to_numpy(getattr(f, name)), getattr(t, name).numpy(), err_msg=name)
        for num, idx in (("kv_num_blocks", "kv_indices"), ("full_kv_num_blocks", "full_kv_indices"),
                         ("q_num_blocks", "q_indices"), ("full_q_num_blocks", "full_q_indices")):
            n, fi, ti = to_numpy(getattr(f, num)), to_numpy(getattr(f, idx)), getattr(t, idx).numpy()
            for pos in np.ndindex(n.shape):  # entries past the count are unspecified
                np.testing.assert_array_equal(fi[pos][:n[pos]], ti[pos][:n[pos]], err_msg=idx)
        assert f.sparsity() == pytest.approx(t.sparsity())
        np.testing.assert_array_equal(to_numpy(f.to_dense()), t.to_dense().numpy())
        assert f.shape == tuple(t.shape) and f.BLOCK_SIZE == t.BLOCK_SIZE and f.seq_lengths == t.seq_lengths
        np.testing.assert_array_equal(to_numpy(f[1].kv_num_blocks), t[1].kv_num_blocks.numpy())
        np.testing.assert_array_equal(to_numpy(f[:, 1].kv_num_blocks), t[:, 1].kv_num_blocks.numpy())
    adj = f._adjust(200, 300)
    assert adj.seq_lengths == (200, 300) and tuple(adj.kv_indices.shape) == (2, 2, 2, 3)
    r = ffa.BlockMask.from_kv_blocks(f.kv_num_blocks, f.kv_indices, f.full_kv_num_blocks, f.full_kv_indices,
                                     mask_mod=f.mask_mod, seq_lengths=(512, 768))
    np.testing.assert_array_equal(to_numpy(r.q_indices), to_numpy(f.q_indices))


def test_sliced_mask_keeps_its_heads():
    L = 256
    (fq, fk, fv), _ = inputs(1, 1, 1, L, L, seed=9)
    per_head = lambda b, h, q, kv: (q >= kv) | (h == 1)  # noqa: E731
    full = ffa.create_block_mask(ffa.or_masks(ffa.causal_mask, lambda b, h, q, kv: h == 1), 1, 2, L, L, BLOCK_SIZE=64)
    assert isinstance(full.mask_mod, type(per_head))  # Python combination -> Python mask_mod
    a = ffa.flex_attention(fq, fk, fv, block_mask=full[:, 1])
    b = ffa.flex_attention(fq, fk, fv)
    assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_create_mask_and_combinators():
    m = ffa.create_mask(ffa.and_masks(ffa.causal_mask, ffa.sliding_window(2)), 1, 1, 5, 5)
    t = tfa.create_mask(lambda b, h, q, kv: (q >= kv) & (q - kv <= 2), 1, 1, 5, 5, device="cpu")
    np.testing.assert_array_equal(to_numpy(m), t.numpy())
    assert ffa.noop_mask(fl.tensor(0), fl.tensor(0), fl.tensor(3), fl.tensor(4)).item()
    with pytest.raises(RuntimeError):
        ffa.and_masks(ffa.causal_mask, 3)


def test_errors():
    (fq, fk, fv), _ = inputs(1, 2, 2, 64, 64)
    with pytest.raises(ValueError, match="flex_attention"):
        ffa.flex_attention(fq[0], fk, fv)
    with pytest.raises(ValueError, match="enable_gqa"):
        ffa.flex_attention(fl.zeros(1, 4, 64, 16), fk, fv)
    with pytest.raises(TypeError, match="dtype"):
        ffa.flex_attention(fq, fk.double(), fv)
    with pytest.raises(ValueError, match="_adjust"):
        ffa.flex_attention(fq, fk, fv, block_mask=ffa.create_block_mask(ffa.causal_mask, 1, 1, 128, 128))
    with pytest.raises(ValueError, match="create a new block mask"):
        ffa.flex_attention(fq, fk, fv, block_mask=ffa.create_block_mask(ffa.causal_mask, 1, 1, 32, 32))
    with pytest.raises(ValueError, match="alibi"):
        ffa.flex_attention(fq, fk, fv, score_mod=ffa.alibi(fl.ones(3)))
    with pytest.raises(ValueError, match="score_mod"):
        ffa.flex_attention(fq, fk, fv, score_mod=lambda b, h, q, kv: q >= kv)
    with pytest.raises(ValueError, match="both"):
        ffa.flex_attention(fq, fk, fv, return_lse=True, return_aux=ffa.AuxRequest(lse=True))
    with pytest.raises(ValueError, match="create_block_mask"):
        ffa.create_block_mask(ffa.causal_mask, 1, 1, 0, 8)


def test_strided_inputs_and_rectangular_blocks():
    r = np.random.default_rng(10)
    x = [r.standard_normal((2, 150, 2, 16)).astype(np.float32) for _ in range(3)]  # [B, L, H, E]
    fq, fk, fv = (fl.tensor(a).transpose(1, 2) for a in x)  # non-contiguous views
    tq, tk, tv = (torch.tensor(a).transpose(1, 2) for a in x)
    fbm = ffa.create_block_mask(ffa.sliding_window(50), 1, 2, 150, 150, BLOCK_SIZE=(64, 32))
    tbm = tfa.create_block_mask(lambda b, h, q, kv: (q >= kv) & (q - kv <= 50), 1, 2, 150, 150, device="cpu",
                                BLOCK_SIZE=(64, 32))
    assert fbm.BLOCK_SIZE == (64, 32)
    assert_close(ffa.flex_attention(fq, fk, fv, block_mask=fbm), tflex(tq, tk, tv, block_mask=tbm),
                 rtol=1e-4, atol=1e-4)


def test_float64_takes_the_composite_path():
    (fq, fk, fv), (tq, tk, tv) = inputs(1, 2, 2, 90, 90, seed=11, dtype="float64")
    bm = ffa.create_block_mask(ffa.causal_mask, 1, 1, 90, 90, BLOCK_SIZE=32)
    fo, flse = ffa.flex_attention(fq, fk, fv, score_mod=ffa.tanh_softcap(2.0), block_mask=bm, return_lse=True)
    fo.sum().backward()
    q64, k64, v64 = (t.detach().requires_grad_() for t in (tq, tk, tv))
    mask = torch.tril(torch.ones(90, 90, dtype=torch.bool))
    to = reference64(q64, k64, v64, mask, lambda s, b, h, q, kv: torch.tanh(s / 2.0) * 2.0)
    to.sum().backward()
    assert_close(fo, to, rtol=1e-10, atol=1e-12)
    assert_close(fq.grad, q64.grad, rtol=1e-9, atol=1e-11)
    assert repr(flse.dtype) == "flambeau.float32"
