"""flambeau.nn.functional.linear_cross_entropy / nn.LinearCrossEntropyLoss (fused, chunked):
against flambeau's unfused cross_entropy(linear(...)) (+ z-loss) over every option
combination, against torch 2.13's F.linear_cross_entropy and nn.LinearCrossEntropyLoss
(reference path and its chunked options), autograd behaviour, weight tying, errors."""
import itertools

import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close, to_numpy

F, TF = fl.nn.functional, torch.nn.functional


def make(n, d, v, ignored, probs, seed, dtype=np.float64):
    r = np.random.default_rng(seed)
    x = r.uniform(-1, 1, (n, d)).astype(dtype)
    w = r.uniform(-1, 1, (v, d)).astype(dtype)
    b = r.uniform(-1, 1, v).astype(dtype)
    cw = r.uniform(0.5, 2, v).astype(dtype)
    if probs:
        p = r.random((n, v)).astype(dtype)
        t = p / p.sum(1, keepdims=True)
    else:
        t = r.integers(0, v, n)
        if ignored:
            t[::3] = -100
    return x, w, b, cw, t


def run_fl(fn, x, w, b, cw, t, reduction, **kw):
    """Loss and the gradients of x, W (and b) for upstream ones (scalar) or a fixed ramp."""
    fx, fw = fl.tensor(x).requires_grad_(), fl.tensor(w).requires_grad_()
    fb = fl.tensor(b).requires_grad_() if b is not None else None
    loss = fn(fx, fw, fl.tensor(t), linear_bias=fb, weight=None if cw is None else fl.tensor(cw),
              reduction=reduction, **kw)
    g = fl.tensor(np.linspace(0.5, 1.5, loss.numel()).reshape(tuple(loss.shape)).astype(x.dtype)) \
        if reduction == "none" else None
    loss.backward(g)
    return [loss, fx.grad, fw.grad] + ([fb.grad] if fb is not None else [])


def run_torch(x, w, b, cw, t, reduction, **kw):
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True) if b is not None else None
    loss = TF.linear_cross_entropy(tx, tw, torch.tensor(t), linear_bias=tb,
                                   weight=None if cw is None else torch.tensor(cw), reduction=reduction, **kw)
    g = torch.tensor(np.linspace(0.5, 1.5, loss.numel()).reshape(tuple(loss.shape)).astype(x.dtype)) \
        if reduction == "none" else None
    loss.backward(g)
    return [loss, tx.grad, tw.grad] + ([tb.grad] if tb is not None else [])


def reference(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
              label_smoothing=0.0, z_loss=0.0):
    """The unfused composite written here from public ops: cross_entropy(linear(...)) + z-loss."""
    logits = F.linear(input, linear_weight, linear_bias)
    ce = F.cross_entropy(logits, target, weight=weight, reduction=reduction, label_smoothing=label_smoothing)
    if z_loss == 0:
        return ce
    lse = logits.logsumexp(-1)
    if target.is_floating_point():
        counted, norm = fl.ones_like(lse), float(lse.shape[0])
    else:
        counted = (target != -100).to(lse.dtype)
        norm = (counted * weight[fl.where(target != -100, target, 0)]).sum() if weight is not None else counted.sum()
    z = lse * lse * counted * z_loss
    return ce + z if reduction == "none" else ce + z.sum() if reduction == "sum" else ce + z.sum() / norm


def relclose(a, b, rel):
    a, b = to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64)
    np.testing.assert_allclose(a, b, rtol=rel, atol=rel * max(np.abs(b).max(initial=0.0), 1e-30))


COMBOS = [c for c in itertools.product(["mean", "sum", "none"], [False, True], [0.0, 0.15], [False, True],
                                       [0.0, 0.02], [False, True], [False, True]) if not (c[1] and c[6])]


@pytest.mark.parametrize("dtype,rel", [(np.float64, 1e-10), (np.float32, 1e-5)])
def test_matches_unfused_every_combination(dtype, rel):
    for reduction, ignored, smoothing, weighted, z, bias, probs in COMBOS:
        x, w, b, cw, t = make(11, 5, 700, ignored, probs, 3, dtype)
        args = (x, w, b if bias else None, cw if weighted else None, t, reduction)
        kw = {"label_smoothing": smoothing, "z_loss": z}
        fused = run_fl(F.linear_cross_entropy, *args, chunk_size=4, **kw)
        ref = run_fl(reference, *args, **kw)
        for name, a, e in zip(["loss", "grad x", "grad W", "grad b"], fused, ref):
            try:
                relclose(a, e, rel)
            except AssertionError as err:
                raise AssertionError(f"{name} {reduction} ign={ignored} s={smoothing} w={weighted} z={z} "
                                     f"bias={bias} probs={probs}") from err


def test_matches_torch_reference_path():
    # Every option both have (no z-loss in torch): loss and gradients in float64.
    for reduction, ignored, smoothing, weighted, _, bias, probs in COMBOS:
        if _:
            continue
        x, w, b, cw, t = make(9, 4, 60, ignored, probs, 5)
        args = (x, w, b if bias else None, cw if weighted else None, t, reduction)
        kw = {"label_smoothing": smoothing}
        if not probs:
            kw["ignore_index"] = -100
        for a, e in zip(run_fl(F.linear_cross_entropy, *args, **kw), run_torch(*args, **kw)):
            assert_close(a, e, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_matches_torch_chunked_options(reduction):
    # torch's chunked path (options on): class indices, no smoothing; float32.
    x, w, b, cw, t = make(40, 16, 300, True, False, 9, np.float32)
    opts = torch.nn.LinearCrossEntropyOptions(batch_chunk_size=8)
    for bias, weighted in itertools.product([False, True], [False, True]):
        args = (x, w, b if bias else None, cw if weighted else None, t, reduction)
        mine = run_fl(F.linear_cross_entropy, *args, chunk_size=8)
        theirs = run_torch(*args, options=opts)
        for a, e in zip(mine, theirs):
            relclose(a, e.detach(), 1e-5)


def test_module_matches_torch_module():
    cw = np.linspace(0.5, 2.0, 50)
    for bias in [False, True]:
        fm = fl.nn.LinearCrossEntropyLoss(8, 50, bias=bias, dtype=fl.float64, weight=fl.tensor(cw),
                                          label_smoothing=0.1)
        tm = torch.nn.LinearCrossEntropyLoss(8, 50, bias=bias, dtype=torch.float64, weight=torch.tensor(cw),
                                             ignore_index=-100, label_smoothing=0.1)
        with torch.no_grad():
            tm.linear.weight.copy_(torch.from_numpy(to_numpy(fm.linear.weight)))
            if bias:
                tm.linear.bias.copy_(torch.from_numpy(to_numpy(fm.linear.bias)))
        assert [n for n, _ in fm.named_parameters()] == [n for n, _ in tm.named_parameters()]
        assert "weight" in fm.state_dict() and "linear.weight" in fm.state_dict()
        x = np.random.default_rng(1).standard_normal((7, 8))
        t = np.array([0, 49, -100, 3, 3, 10, 20])
        fl_loss, t_loss = fm(fl.tensor(x), fl.tensor(t)), tm(torch.tensor(x), torch.tensor(t))
        assert_close(fl_loss, t_loss, rtol=1e-10, atol=1e-12)
        fl_loss.backward()
        t_loss.backward()
        assert_close(fm.linear.weight.grad, tm.linear.weight.grad, rtol=1e-10, atol=1e-12)


def test_weight_tying_with_embedding():
    grads = []
    for fused in [True, False]:
        fl.manual_seed(3)
        emb = fl.nn.Embedding(30, 6, dtype=fl.float64)
        head = fl.nn.LinearCrossEntropyLoss(6, 30, dtype=fl.float64, z_loss=0.01)
        head.linear.weight = emb.weight
        assert len(list(fl.nn.ModuleList([emb, head]).parameters())) == 1
        tokens, target = fl.tensor([1, 4, 4, 29, 0]), fl.tensor([4, 4, 29, 0, -100])
        h = emb(tokens).tanh()
        loss = head(h, target) if fused else reference(h, emb.weight, target, z_loss=0.01)
        loss.backward()
        grads.append(emb.weight.grad)
    relclose(grads[0], grads[1], 1e-10)


def test_autograd_upstream_retain_graph_and_no_grad():
    x, w, b, cw, t = make(6, 3, 20, False, False, 2)
    fx, fw = fl.tensor(x).requires_grad_(), fl.tensor(w).requires_grad_()
    loss = F.linear_cross_entropy(fx, fw, fl.tensor(t))
    (loss * 3).backward(retain_graph=True)
    g3 = fw.grad.clone()
    loss.backward()
    relclose(fw.grad, g3 * (4 / 3), 1e-12)
    with pytest.raises(RuntimeError, match="a second time"):
        loss.backward()
    rows = F.linear_cross_entropy(fx, fw, fl.tensor(t), reduction="none")
    assert tuple(rows.shape) == (6,)
    fx.grad = None
    rows.backward(fl.ones(6, dtype=fl.float64), retain_graph=True)
    first = fx.grad.clone()
    rows.backward(fl.ones(6, dtype=fl.float64))
    relclose(fx.grad, first * 2, 1e-12)
    with fl.no_grad():
        out = F.linear_cross_entropy(fx, fw, fl.tensor(t))
    assert not out.requires_grad and out.grad_fn is None
    relclose(out, loss, 1e-12)


def test_bfloat16_close_to_float32():
    x, w, b, cw, t = make(16, 32, 400, True, False, 4, np.float32)
    xb = fl.tensor(x).to(fl.bfloat16)
    wb = fl.tensor(w).to(fl.bfloat16).requires_grad_()
    loss = F.linear_cross_entropy(xb, wb, fl.tensor(t))
    loss.backward()
    assert loss.dtype == fl.bfloat16 and wb.grad.dtype == fl.bfloat16
    w32 = wb.detach().to(fl.float32).requires_grad_()
    l32 = F.linear_cross_entropy(xb.to(fl.float32), w32, fl.tensor(t))
    l32.backward()
    relclose(loss.to(fl.float32), l32, 1e-2)
    relclose(wb.grad.to(fl.float32), w32.grad, 1e-2)


def test_errors():
    x, w, t = fl.ones(4, 3), fl.ones(10, 3), fl.tensor([0, 1, 2, 9])
    with pytest.raises(ValueError, match=r"\[linear_cross_entropy\] input of shape \(4, 3\) and linear_weight of "
                                         r"shape \(10, 5\) differ in in_features \(3 vs 5\)"):
        F.linear_cross_entropy(x, fl.ones(10, 5), t)
    with pytest.raises(ValueError, match=r"\[linear_cross_entropy\] reduction must be 'mean', 'sum' or 'none'"):
        F.linear_cross_entropy(x, w, t, reduction="avg")
    with pytest.raises(IndexError, match=r"\[linear_cross_entropy\] target 10 at row 1 is out of bounds for 10"):
        F.linear_cross_entropy(x, w, fl.tensor([0, 10, 1, -100]))
    with pytest.raises(ValueError, match=r"expected a target of shape \(4,\) for input of shape \(4, 3\)"):
        F.linear_cross_entropy(x, w, fl.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"class-probability target must have the logits' shape \(4, 10\)"):
        F.linear_cross_entropy(x, w, fl.ones(4, 3))
    with pytest.raises(TypeError, match=r"linear_weight \(float64\) must have input's dtype \(float32\)"):
        F.linear_cross_entropy(x, w.double(), t)
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        F.linear_cross_entropy(x, w, t, chunk_size=0)
    with pytest.raises(ValueError, match=r"\[LinearCrossEntropyLoss\] reduction"):
        fl.nn.LinearCrossEntropyLoss(3, 10, reduction="max")


def test_edge_cases_match_torch():
    # Every target ignored ('mean' is 0/0 = nan, gradients zero) and no rows at all.
    x, w, _, _, _ = make(3, 4, 5, False, False, 6)
    t = np.array([-100, -100, -100])
    for a, e in zip(run_fl(F.linear_cross_entropy, x, w, None, None, t, "mean"), run_torch(x, w, None, None, t, "mean")):
        assert_close(a, e, rtol=0, atol=0)
    for reduction in ["mean", "sum", "none"]:
        x0, t0 = np.zeros((0, 4)), np.zeros(0, dtype=np.int64)
        for a, e in zip(run_fl(F.linear_cross_entropy, x0, w, None, None, t0, reduction),
                        run_torch(x0, w, None, None, t0, reduction)):
            assert_close(a, e, rtol=0, atol=0)
