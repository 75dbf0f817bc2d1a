"""flambeau.nn against torch.nn: modules with copied weights give the same outputs and
gradients; losses in every mode; state_dict; train/eval; init statistics."""
import math

import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close


def copy_into(fmod, tmod):
    fmod.load_state_dict({k: fl.from_dlpack(v.detach().clone()) for k, v in tmod.state_dict().items()})


def build(nn, d=6):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, d, padding_idx=0)
            self.norm = nn.LayerNorm(d)
            self.rms = nn.RMSNorm(d, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
            self.heads = nn.ModuleList([nn.Linear(d, 5), nn.Linear(d, 5, bias=False)])

        def forward(self, tokens):
            h = self.emb(tokens)
            h = h + self.mlp(self.norm(h))
            h = self.rms(h)
            return self.heads[0](h) + self.heads[1](h)
    return Block()


def test_block_outputs_and_gradients_match_torch():
    torch.manual_seed(0)
    tm, fm = build(torch.nn).double(), build(fl.nn).double()
    copy_into(fm, tm)
    tokens = [[1, 4, 0, 9], [3, 3, 10, 2]]
    target = [[1, 4, 0, 2], [3, -100, 1, 2]]
    tl = torch.nn.functional.cross_entropy(tm(torch.tensor(tokens)).reshape(-1, 5), torch.tensor(target).reshape(-1),
                                           label_smoothing=0.1)
    fl_out = fm(fl.tensor(tokens)).reshape(-1, 5)
    flo = fl.nn.functional.cross_entropy(fl_out, fl.tensor(target).reshape(-1), label_smoothing=0.1)
    assert_close(flo, tl, rtol=1e-12, atol=1e-12)
    tl.backward()
    flo.backward()
    tgrads = dict(tm.named_parameters())
    names = [n for n, _ in fm.named_parameters()]
    assert names == list(tgrads)
    for name, p in fm.named_parameters():
        assert_close(p.grad, tgrads[name].grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_match_torch(reduction):
    r = np.random.default_rng(2)
    x = r.standard_normal((6, 4))
    t_idx = np.array([0, 3, 1, -100, 2, 3])
    probs = r.random((6, 4))
    probs /= probs.sum(1, keepdims=True)
    w = r.random(4) + 0.5
    F, TF = fl.nn.functional, torch.nn.functional
    fx, tx = fl.tensor(x), torch.tensor(x)
    for kw in [{}, {"weight": w}, {"label_smoothing": 0.2}, {"weight": w, "label_smoothing": 0.3}]:
        fkw = {k: fl.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        assert_close(F.cross_entropy(fx, fl.tensor(t_idx), reduction=reduction, **fkw),
                     TF.cross_entropy(tx, torch.tensor(t_idx), reduction=reduction, **tkw), rtol=1e-12, atol=1e-12)
        assert_close(F.cross_entropy(fx, fl.tensor(probs), reduction=reduction, **fkw),
                     TF.cross_entropy(tx, torch.tensor(probs), reduction=reduction, **tkw), rtol=1e-12, atol=1e-12)
    lp, tlp = fx.log_softmax(1), tx.log_softmax(1)
    assert_close(F.nll_loss(lp, fl.tensor(t_idx), weight=fl.tensor(w), reduction=reduction),
                 TF.nll_loss(tlp, torch.tensor(t_idx), weight=torch.tensor(w), reduction=reduction), rtol=1e-12)
    y = r.standard_normal((6, 4))
    assert_close(F.mse_loss(fx, fl.tensor(y), reduction=reduction), TF.mse_loss(tx, torch.tensor(y), reduction=reduction))
    assert_close(F.l1_loss(fx, fl.tensor(y), reduction=reduction), TF.l1_loss(tx, torch.tensor(y), reduction=reduction))
    tb = (r.random((6, 4)) > 0.5).astype(np.float64)
    assert_close(F.binary_cross_entropy_with_logits(fx * 5, fl.tensor(tb), reduction=reduction,
                                                    pos_weight=fl.tensor(w)),
                 TF.binary_cross_entropy_with_logits(tx * 5, torch.tensor(tb), reduction=reduction,
                                                     pos_weight=torch.tensor(w)), rtol=1e-12, atol=1e-12)


def test_module_state_train_eval_and_init():
    m = fl.nn.Sequential(fl.nn.Linear(3, 4), fl.nn.Dropout(0.5), fl.nn.Linear(4, 2))
    sd = m.state_dict()
    assert list(sd) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    with pytest.raises(RuntimeError, match="missing keys"):
        m.load_state_dict({"0.weight": sd["0.weight"]})
    with pytest.raises(RuntimeError, match="size mismatch"):
        m.load_state_dict({**sd, "0.bias": fl.zeros(5)})
    missing, unexpected = m.load_state_dict({"0.weight": sd["0.weight"], "x": fl.zeros(1)}, strict=False)
    assert "0.bias" in missing and unexpected == ["x"]
    x = fl.ones(1000, 3)
    m.eval()
    assert not m[1].training and m(x).tolist() == m(x).tolist()
    m.train()
    drop = fl.nn.functional.dropout(fl.ones(10000), 0.5, True)
    assert abs(drop.mean().item() - 1.0) < 0.05 and set(np.unique(drop.numpy())) <= {0.0, 2.0}
    w = fl.empty(400, 300)
    fl.nn.init.xavier_uniform_(w)
    assert abs(w.std().item() - math.sqrt(2.0 / 700)) < 0.002
    fl.nn.init.kaiming_normal_(w, nonlinearity="relu")
    assert abs(w.std().item() - math.sqrt(2.0 / 300)) < 0.002
    fl.nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
    assert w.abs().max().item() <= 0.04 and abs(w.std().item() - 0.0176) < 0.001
    m.zero_grad()
    assert isinstance(m[0].weight, fl.nn.Parameter) and m[0].weight.requires_grad
    w0 = m[0].weight
    opt = fl.optim.SGD(m.parameters(), lr=0.1)
    m.double()
    assert m[0].weight is w0 and w0.dtype is fl.float64 and w0.requires_grad
    m(fl.ones(2, 3, dtype=fl.float64)).sum().backward()
    before = w0.tolist()
    opt.step()  # the optimizer built before .double() updates the converted parameter
    assert w0.tolist() != before


@pytest.mark.parametrize("case", ["plain", "causal", "bool_mask", "additive_mask", "gqa"])
def test_sdpa_matches_torch(case):
    r = np.random.default_rng(9)
    hk = 2 if case == "gqa" else 4
    q, k, v = r.standard_normal((2, 4, 40, 16)), r.standard_normal((2, hk, 70, 16)), r.standard_normal((2, hk, 70, 8))
    mask = None
    if case == "bool_mask":
        mask = r.random((40, 70)) > 0.3
        mask[:, 0] = True
    if case == "additive_mask":
        mask = r.standard_normal((1, 40, 70))
    kw = dict(is_causal=case == "causal", enable_gqa=case == "gqa")
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    fq, fk, fv = (fl.tensor(a, requires_grad=True) for a in (q, k, v))
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, None if mask is None else torch.tensor(mask), **kw)
    fo = fl.nn.functional.scaled_dot_product_attention(fq, fk, fv, None if mask is None else fl.tensor(mask), **kw)
    assert_close(fo, to, rtol=1e-10, atol=1e-12)
    g = r.standard_normal(tuple(to.shape))
    to.backward(torch.tensor(g))
    fo.backward(fl.tensor(g))
    for f, t in [(fq, tq), (fk, tk), (fv, tv)]:
        assert_close(f.grad, t.grad, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rms", [False, True])
def test_fused_norms_match_torch(dtype, rms):
    r = np.random.default_rng(3)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=2e-5)
    for shape, k in [((4, 7), 1), ((2, 3, 10), 2), ((3, 1031), 1), ((5,), 1)]:
        ns = shape[-k:]
        for affine in range(3):  # none, weight, weight + bias
            x = r.standard_normal(shape) * 2 + 0.5
            arrays = [x] + [r.standard_normal(ns) for _ in range(affine if not rms else min(affine, 1))]
            fl_in = [fl.tensor(a, dtype=getattr(fl, dtype), requires_grad=True) for a in arrays]
            t_in = [torch.tensor(a, dtype=getattr(torch, dtype), requires_grad=True) for a in arrays]
            if rms:
                fo = fl.nn.functional.rms_norm(fl_in[0], ns, *fl_in[1:])
                to = torch.nn.functional.rms_norm(t_in[0], ns, *t_in[1:])
            else:
                fo = fl.nn.functional.layer_norm(fl_in[0], ns, *fl_in[1:])
                to = torch.nn.functional.layer_norm(t_in[0], ns, *t_in[1:])
            assert_close(fo, to, **tol)
            g = r.standard_normal(shape)
            fo.backward(fl.tensor(g, dtype=getattr(fl, dtype)))
            to.backward(torch.tensor(g, dtype=getattr(torch, dtype)))
            for f, t in zip(fl_in, t_in):
                assert_close(f.grad, t.grad, **tol)


def test_loss_gradients_match_torch():
    r = np.random.default_rng(4)
    F, TF = fl.nn.functional, torch.nn.functional
    x = r.standard_normal((6, 4))
    t_idx = np.array([0, 3, 1, -100, 2, 3])
    probs = r.dirichlet(np.ones(4), 6)
    w = r.random(4) + 0.5
    y = r.standard_normal((6, 4))
    tb = (r.random((6, 4)) > 0.5).astype(np.float64)
    cases = [
        ("cross_entropy", lambda m, a, lib: m.cross_entropy(a, lib.tensor(t_idx), weight=lib.tensor(w),
                                                          label_smoothing=0.1)),
        ("cross_entropy probs", lambda m, a, lib: m.cross_entropy(a, lib.tensor(probs), weight=lib.tensor(w),
                                                                label_smoothing=0.2, reduction="sum")),
        ("nll_loss", lambda m, a, lib: m.nll_loss(a.log_softmax(1), lib.tensor(t_idx), weight=lib.tensor(w))),
        ("mse_loss", lambda m, a, lib: m.mse_loss(a, lib.tensor(y))),
        ("l1_loss", lambda m, a, lib: m.l1_loss(a, lib.tensor(y), reduction="sum")),
        ("bce", lambda m, a, lib: m.binary_cross_entropy_with_logits(a * 5, lib.tensor(tb), weight=lib.tensor(y[0]),
                                                                     pos_weight=lib.tensor(w))),
    ]
    for name, loss in cases:
        fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        fl_loss, t_loss = loss(F, fx, fl), loss(TF, tx, torch)
        assert_close(fl_loss, t_loss, rtol=1e-12, atol=1e-12)
        fl_loss.backward()
        t_loss.backward()
        assert_close(fx.grad, tx.grad, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fused_cross_entropy_gradients_match_torch(reduction, dtype):
    # [N, C] logits with class indices take the fused path: every option, values and gradients.
    r = np.random.default_rng(9)
    x = (r.standard_normal((37, 300)) * 3).astype(dtype)
    t = r.integers(0, 300, 37)
    t[[3, 11]] = -100
    w = (r.random(300) + 0.5).astype(dtype)
    g = r.standard_normal(37).astype(dtype) if reduction == "none" else None
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "float64" else dict(rtol=2e-5, atol=1e-6)
    for kw in [{}, {"weight": w}, {"label_smoothing": 0.2}, {"weight": w, "label_smoothing": 0.3},
               {"ignore_index": 7}]:
        fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        fkw = {k: fl.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
        tt = np.where(t < 0, kw.get("ignore_index", -100), t)
        fo = fl.nn.functional.cross_entropy(fx, fl.tensor(tt), reduction=reduction, **fkw)
        to = torch.nn.functional.cross_entropy(tx, torch.tensor(tt), reduction=reduction, **tkw)
        assert_close(fo, to, **tol)
        (fo * fl.tensor(g)).sum().backward() if g is not None else fo.backward()
        (to * torch.tensor(g)).sum().backward() if g is not None else to.backward()
        assert_close(fx.grad, tx.grad, **tol)


def test_cross_entropy_extra_dims_match_torch():
    r = np.random.default_rng(5)
    x = r.standard_normal((2, 5, 3, 4))
    t = r.integers(0, 5, (2, 3, 4))
    t[0, 1, 2] = -100
    for reduction in ["mean", "none"]:
        assert_close(fl.nn.functional.cross_entropy(fl.tensor(x), fl.tensor(t), reduction=reduction, label_smoothing=0.1),
                     torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(t), reduction=reduction,
                                                       label_smoothing=0.1), rtol=1e-12, atol=1e-12)


def test_nn_errors_and_init_identity():
    F = fl.nn.functional
    with pytest.raises(ValueError, match=r"\[cross_entropy\] reduction must be"):
        F.cross_entropy(fl.ones(2, 3), fl.tensor([0, 1]), reduction="avg")
    with pytest.raises(IndexError, match=r"\[cross_entropy\] target 3 is out of bounds for 3 classes"):
        F.cross_entropy(fl.ones(2, 3), fl.tensor([0, 3]))
    with pytest.raises(ValueError, match=r"\[layer_norm\] normalized_shape \(4,\)"):
        F.layer_norm(fl.ones(2, 3), (4,))
    with pytest.raises(ValueError, match="dropout probability"):
        F.dropout(fl.ones(3), 1.5)
    p = fl.nn.Parameter(fl.empty(4, 3))
    assert fl.nn.init.kaiming_uniform_(p, a=math.sqrt(5)) is p
    assert p.requires_grad and p.grad_fn is None and p.abs().max().item() <= 1 / math.sqrt(3)
    g1, g2 = fl.Generator(5), fl.Generator(5)
    a, b = fl.empty(50, 40), fl.empty(50, 40)
    fl.nn.init.trunc_normal_(a, std=0.5, generator=g1)
    fl.nn.init.trunc_normal_(b, std=0.5, generator=g2)
    assert a.tolist() == b.tolist() and a.abs().max().item() <= 2.0
    assert fl.nn.init.calculate_gain("leaky_relu", 0.2) == torch.nn.init.calculate_gain("leaky_relu", 0.2)
