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
