"""nn.RNN / LSTM / GRU, their cells and nn.utils.rnn (issue 22 item 6): torch's state_dicts
load both ways; outputs, final states and every gradient (input, initial states, all
parameters) match torch 2.13 in float64 over layers, directions, batch_first, proj_size,
bias=False, default / given states, unbatched and packed (unsorted) inputs; dropout only
between layers in training; the same bits on 1 and 2 threads; reprs; bad input."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_raises_naming
from flambeau.nn.utils import rnn as frnn
from torch.nn.utils import rnn as trnn

TOL = dict(rtol=1e-12, atol=1e-12)


def pair(kind, **kw):
    """The torch module (float64) and the flambeau module with torch's weights loaded."""
    torch.manual_seed(0)
    t = getattr(torch.nn, kind)(**kw).double()
    f = getattr(fl.nn, kind)(**kw, dtype=fl.float64)
    assert list(f.state_dict()) == list(t.state_dict())
    f.load_state_dict({k: fl.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    return t, f


def flat(out):
    """The tensors of a module's result in order: output, h_n(, c_n)."""
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in flat(o)]
    if hasattr(out, "data") and hasattr(out, "batch_sizes"):
        return [out.data]
    return [out]


def run(lib, m, x, states, seed=1):
    """Forward, a weighted sum of all results backward; returns results and gradients."""
    xt = lib.tensor(x, requires_grad=True)
    st = [lib.tensor(s, requires_grad=True) for s in states]
    hx = None if not st else (tuple(st) if len(st) == 2 else st[0])
    out = m(xt, hx) if hx is not None else m(xt)
    res = flat(out)
    rng = np.random.default_rng(seed)
    loss = sum((r * lib.tensor(rng.standard_normal(tuple(r.shape)))).sum() for r in res)
    loss.backward()
    grads = [xt.grad.numpy()] + [s.grad.numpy() for s in st]
    grads += [p.grad.numpy() for _, p in sorted(m.named_parameters())]
    return [r.detach().numpy() for r in res], grads


def check(kind, x, states=(), **kw):
    t, f = pair(kind, **kw)
    got, want = run(fl, f, x, states), run(torch, t, x, states)
    for a, b in zip(got[0] + got[1], want[0] + want[1]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, **TOL)
    return t, f


R = np.random.default_rng(7)
CASES = [  # (kind, kwargs)
    ("LSTM", dict(input_size=5, hidden_size=4)),
    ("LSTM", dict(input_size=5, hidden_size=4, num_layers=2, bidirectional=True)),
    ("LSTM", dict(input_size=5, hidden_size=4, num_layers=2, batch_first=True)),
    ("LSTM", dict(input_size=5, hidden_size=6, proj_size=3)),
    ("LSTM", dict(input_size=5, hidden_size=6, num_layers=2, proj_size=2, bidirectional=True, bias=False)),
    ("GRU", dict(input_size=5, hidden_size=4)),
    ("GRU", dict(input_size=5, hidden_size=4, num_layers=2, bidirectional=True, batch_first=True)),
    ("GRU", dict(input_size=5, hidden_size=4, bias=False)),
    ("RNN", dict(input_size=5, hidden_size=4)),
    ("RNN", dict(input_size=5, hidden_size=4, num_layers=2, nonlinearity="relu", bidirectional=True)),
    ("RNN", dict(input_size=5, hidden_size=4, bias=False, batch_first=True)),
]
IDS = [f"{k}-{'-'.join(f'{a}={v}' for a, v in kw.items() if a not in ('input_size', 'hidden_size'))}"
       for k, kw in CASES]


def state_shapes(kind, kw, batch):
    d = 2 if kw.get("bidirectional") else 1
    n = kw.get("num_layers", 1) * d
    h, p = kw["hidden_size"], kw.get("proj_size", 0) or kw["hidden_size"]
    b = () if batch is None else (batch,)
    return [(n, *b, p), (n, *b, h)] if kind == "LSTM" else [(n, *b, p)]


@pytest.mark.parametrize("kind,kw", CASES, ids=IDS)
@pytest.mark.parametrize("given_states", [False, True])
@pytest.mark.parametrize("training", [True, False])
def test_matches_torch(kind, kw, given_states, training):
    x = R.standard_normal((3, 7, 5) if kw.get("batch_first") else (7, 3, 5))
    states = [R.standard_normal(s) for s in state_shapes(kind, kw, 3)] if given_states else []
    kw = dict(kw, dropout=0.0)
    t, f = pair(kind, **kw)
    t.train(training), f.train(training)
    got, want = run(fl, f, x, states), run(torch, t, x, states)
    for a, b in zip(got[0] + got[1], want[0] + want[1]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, **TOL)


UNBATCHED = [CASES[i] for i in (1, 3, 6, 9)]


@pytest.mark.parametrize("kind,kw", UNBATCHED, ids=[IDS[i] for i in (1, 3, 6, 9)])
def test_unbatched_input(kind, kw):
    x = R.standard_normal((6, 5))
    check(kind, x, **kw)
    check(kind, x, [R.standard_normal(s) for s in state_shapes(kind, kw, None)], **kw)


def test_state_dict_loads_both_ways():
    kw = dict(input_size=3, hidden_size=4, num_layers=2, bidirectional=True, proj_size=2)
    f = fl.nn.LSTM(**kw, dtype=fl.float64)
    t = torch.nn.LSTM(**kw).double()
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in f.state_dict().items()})
    x = R.standard_normal((4, 2, 3))
    out_f, (h_f, c_f) = f(fl.tensor(x))
    out_t, (h_t, c_t) = t(torch.tensor(x))
    for a, b in ((out_f, out_t), (h_f, h_t), (c_f, c_t)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), **TOL)
    assert [(n, tuple(p.shape)) for n, p in f.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t.named_parameters()] == \
        fl._C._nn._rnn_parameter_shapes("LSTM", 3, 4, 2, True, True, 2)


def test_initialisation_range():
    fl.manual_seed(0)
    m = fl.nn.GRU(3, 16, num_layers=2)
    for p in m.parameters():
        a = p.detach().numpy()
        assert np.abs(a).max() <= 0.25 and np.abs(a).max() > 0.2


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_packed_unsorted_matches_torch(kind, bidirectional):
    lengths = [3, 6, 1, 4]
    kw = dict(input_size=5, hidden_size=4, num_layers=2, bidirectional=bidirectional)
    t, f = pair(kind, **kw)
    x = R.standard_normal((6, 4, 5))
    states = [R.standard_normal(s) for s in state_shapes(kind, kw, 4)]
    res = []
    for lib, m, mod in ((fl, f, frnn), (torch, t, trnn)):
        xt = lib.tensor(x, requires_grad=True)
        st = [lib.tensor(s, requires_grad=True) for s in states]
        packed = mod.pack_padded_sequence(xt, lib.tensor(lengths), enforce_sorted=False)
        out, hn = m(packed, tuple(st) if kind == "LSTM" else st[0])
        padded, lens = mod.pad_packed_sequence(out, total_length=7)
        rs = [padded] + flat(hn)
        rng = np.random.default_rng(2)
        sum((r * lib.tensor(rng.standard_normal(tuple(r.shape)))).sum() for r in rs).backward()
        res.append([r.detach().numpy() for r in rs] + [lens.numpy(), packed.batch_sizes.numpy(),
                                                        packed.sorted_indices.numpy(), xt.grad.numpy()]
                   + [s.grad.numpy() for s in st] + [p.grad.numpy() for _, p in sorted(m.named_parameters())])
    for a, b in zip(*res):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, **TOL)


def test_pack_utils_match_torch():
    seqs = [R.standard_normal((n, 2)) for n in (4, 2, 5)]
    for batch_first in (False, True):
        for side in ("right", "left"):
            a = frnn.pad_sequence([fl.tensor(s) for s in seqs], batch_first=batch_first, padding_value=-1.0,
                                  padding_side=side)
            b = trnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first=batch_first, padding_value=-1.0,
                                  padding_side=side)
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    pf = frnn.pack_sequence([fl.tensor(s) for s in seqs], enforce_sorted=False)
    pt = trnn.pack_sequence([torch.tensor(s) for s in seqs], enforce_sorted=False)
    for a, b in zip(pf, pt):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    x = R.standard_normal((3, 5, 2))
    pf = frnn.pack_padded_sequence(fl.tensor(x), [5, 3, 2], batch_first=True)
    pt = trnn.pack_padded_sequence(torch.tensor(x), [5, 3, 2], batch_first=True)
    np.testing.assert_array_equal(pf.data.numpy(), pt.data.numpy())
    assert pf.sorted_indices is None and pt.sorted_indices is None
    ua, la = frnn.pad_packed_sequence(pf, batch_first=True, padding_value=9.0)
    ub, lb = trnn.pad_packed_sequence(pt, batch_first=True, padding_value=9.0)
    np.testing.assert_array_equal(ua.numpy(), ub.numpy())
    np.testing.assert_array_equal(la.numpy(), lb.numpy())


CELLS = [("LSTMCell", dict(input_size=5, hidden_size=4)), ("GRUCell", dict(input_size=5, hidden_size=4)),
         ("RNNCell", dict(input_size=5, hidden_size=4)),
         ("RNNCell", dict(input_size=5, hidden_size=4, nonlinearity="relu", bias=False)),
         ("GRUCell", dict(input_size=5, hidden_size=4, bias=False))]


@pytest.mark.parametrize("kind,kw", CELLS, ids=[f"{k}-{len(kw)}" for k, kw in CELLS])
@pytest.mark.parametrize("batch", [3, None])
@pytest.mark.parametrize("given_states", [False, True])
def test_cells_match_torch(kind, kw, batch, given_states):
    b = () if batch is None else (batch,)
    x = R.standard_normal((*b, 5))
    states = [R.standard_normal((*b, 4)) for _ in range(2 if kind == "LSTMCell" else 1)] if given_states else []
    check(kind, x, states, **kw)


def test_dropout_between_layers_only_in_training():
    m = fl.nn.LSTM(8, 64, num_layers=2, dropout=0.5, dtype=fl.float64)
    x = fl.tensor(R.standard_normal((5, 16, 8)))
    m.eval()
    ref = m(x)[0].numpy()
    np.testing.assert_array_equal(m(x)[0].numpy(), ref)  # eval: deterministic, no dropout
    m.train()
    a, b = m(x)[0].numpy(), m(x)[0].numpy()
    assert not np.array_equal(a, b) and not np.array_equal(a, ref)
    # The second layer's input is dropped: with p=1 it sees zeros, so its output is input-independent.
    m1 = fl.nn.LSTM(8, 16, num_layers=2, dropout=1.0, dtype=fl.float64)
    y1 = m1(x)[0].numpy()
    y2 = m1(fl.tensor(R.standard_normal((5, 16, 8))))[0].numpy()
    np.testing.assert_array_equal(y1, y2)
    assert np.all(y1 == y1[:, :1])  # every batch entry the same
    # Statistics: layer 0 outputs ones, layer 1 passes its input through (relu, identity W_ih):
    # the output shows the dropout mask between them, zeros with rate p, others 1 / (1 - p).
    p, h = 0.3, 64
    r = fl.nn.RNN(4, h, num_layers=2, nonlinearity="relu", dropout=p, dtype=fl.float64)
    with fl.no_grad():
        for name, w in r.named_parameters():
            w.zero_()
        r.bias_ih_l0.fill_(1.0)
        r.weight_ih_l1.copy_(fl.tensor(np.eye(h)))
    x = fl.tensor(R.standard_normal((5, 16, 4)))
    y = r(x)[0].numpy()
    zero = np.mean(y == 0)
    assert abs(zero - p) < 0.03, zero
    np.testing.assert_allclose(y[y != 0], 1 / (1 - p), rtol=1e-15)
    r.eval()
    np.testing.assert_array_equal(r(x)[0].numpy(), np.ones((5, 16, h)))
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        fl.nn.GRU(3, 4, dropout=0.3)


def test_same_bits_on_1_and_2_threads():
    kw = dict(input_size=16, hidden_size=32, num_layers=2, bidirectional=True)
    x = R.standard_normal((9, 5, 16)).astype(np.float32)
    out = []
    for n in (1, 2):
        fl.set_num_threads(n)
        for kind in ("LSTM", "GRU", "RNN"):
            fl.manual_seed(3)
            m = getattr(fl.nn, kind)(**kw)
            xt = fl.tensor(x, requires_grad=True)
            o = m(xt)[0]
            (o * o).sum().backward()
            out.append([o.detach().numpy().tobytes(), xt.grad.numpy().tobytes()]
                       + [p.grad.numpy().tobytes() for p in m.parameters()])
    fl.set_num_threads(2)
    assert out[:3] == out[3:]


@pytest.mark.parametrize("kind,kw", [
    ("LSTM", dict(input_size=10, hidden_size=20, num_layers=2, proj_size=5)),
    ("GRU", dict(input_size=10, hidden_size=20, bias=False, batch_first=True, dropout=0.5, num_layers=3)),
    ("RNN", dict(input_size=10, hidden_size=20, nonlinearity="relu", bidirectional=True)),
    ("LSTM", dict(input_size=1, hidden_size=2)),
    ("LSTMCell", dict(input_size=3, hidden_size=4, bias=False)),
    ("RNNCell", dict(input_size=3, hidden_size=4, nonlinearity="relu")),
    ("GRUCell", dict(input_size=3, hidden_size=4)),
])
def test_repr_matches_torch(kind, kw):
    assert repr(getattr(fl.nn, kind)(**kw)) == repr(getattr(torch.nn, kind)(**kw))


def test_bad_input():
    m = fl.nn.LSTM(5, 4, num_layers=2)
    x = fl.zeros([7, 3, 5])
    assert_raises_naming(lambda: m(fl.zeros([7, 3, 5, 1])), ValueError, ["LSTM", "2D or 3D", "4D"])
    assert_raises_naming(lambda: m(fl.zeros([7, 3, 6])), RuntimeError, ["LSTM", "input_size", "Expected 5, got 6"])
    assert_raises_naming(lambda: m(x, (fl.zeros([1, 3, 4]), fl.zeros([2, 3, 4]))), RuntimeError,
                         ["LSTM", "Expected hidden[0] size (2, 3, 4), got [1, 3, 4]"])
    assert_raises_naming(lambda: m(x, (fl.zeros([2, 3, 4]), fl.zeros([2, 2, 4]))), RuntimeError,
                         ["LSTM", "Expected hidden[1] size (2, 3, 4), got [2, 2, 4]"])
    assert_raises_naming(lambda: m(fl.zeros([7, 5]), (fl.zeros([2, 3, 4]), fl.zeros([2, 3, 4]))), RuntimeError,
                         ["LSTM", "unbatched 2-D", "3-D"])
    assert_raises_naming(lambda: fl.nn.GRU(5, 4)(x, fl.zeros([1, 2, 4])), RuntimeError,
                         ["GRU", "Expected hidden size (1, 3, 4), got [1, 2, 4]"])
    assert_raises_naming(lambda: fl.nn.LSTM(5, 4, proj_size=4), ValueError, ["LSTM", "proj_size", "hidden_size"])
    assert_raises_naming(lambda: fl.nn.LSTM(5, 4, proj_size=-1), ValueError, ["LSTM", "proj_size"])
    assert_raises_naming(lambda: fl.nn.RNN(5, 4, nonlinearity="gelu"), ValueError, ["RNN", "gelu"])
    assert_raises_naming(lambda: fl.nn.GRU(5, 4, dropout=1.5), ValueError, ["GRU", "dropout"])
    assert_raises_naming(lambda: fl.nn.GRU(5, 0), ValueError, ["GRU", "hidden_size"])
    assert_raises_naming(lambda: frnn.pack_padded_sequence(x, [2, 5, 1]), RuntimeError,
                         ["pack_padded_sequence", "sorted in decreasing order", "enforce_sorted"])
    assert_raises_naming(lambda: frnn.pack_padded_sequence(x, [3, 2, 0]), RuntimeError,
                         ["pack_padded_sequence", "greater than 0"])
    assert_raises_naming(lambda: frnn.pack_padded_sequence(x, [8, 2, 1]), RuntimeError,
                         ["pack_padded_sequence", "8"])
    p = frnn.pack_padded_sequence(x, [7, 2, 1])
    assert_raises_naming(lambda: frnn.pad_packed_sequence(p, total_length=3), ValueError,
                         ["pad_packed_sequence", "total_length=3", "7"])
    cell = fl.nn.LSTMCell(5, 4)
    assert_raises_naming(lambda: cell(fl.zeros([3, 6])), RuntimeError, ["LSTMCell", "input_size", "got 6 expected 5"])
    assert_raises_naming(lambda: cell(fl.zeros([2, 3, 5])), ValueError, ["LSTMCell", "1D or 2D", "3D"])
    assert_raises_naming(lambda: cell(fl.zeros([3, 5]), (fl.zeros([2, 4]), fl.zeros([3, 4]))), RuntimeError,
                         ["LSTMCell", "hx", "(3, 4)", "(2, 4)"])
