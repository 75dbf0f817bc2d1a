"""The Tensor API against PyTorch 2.13: factories, properties, conversions, views,
indexing and assignment, errors, generators, threads and memory statistics."""
import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import assert_close


def pair(shape=(4, 5, 6)):
    t = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)
    return fl.tensor(t.numpy()), t


def test_factories_and_properties():
    x = fl.zeros(2, 3)
    assert x.shape == (2, 3) and x.dtype is fl.float32 and x.stride() == (3, 1) and x.numel() == 6
    assert fl.zeros((2, 3), dtype=fl.int64).dtype is fl.int64
    assert repr(fl.float32) == "flambeau.float32" and fl.float is fl.float32
    assert str(x.device) == "cpu" and repr(x.device) == "device(type='cpu')"
    assert fl.ones(3).tolist() == [1.0, 1.0, 1.0]
    assert fl.full((2,), 7).dtype is fl.int64
    assert fl.arange(5).tolist() == list(range(5)) and fl.arange(0, 1, 0.25).dtype is fl.float32
    assert fl.tensor([[1, 2], [3, 4]]).dtype is fl.int64
    assert fl.tensor([True, False]).dtype is fl.bool
    assert fl.tensor([1, 2.5]).dtype is fl.float32
    assert fl.tensor(3.5).shape == () and fl.tensor(3.5).item() == 3.5
    assert fl.tensor([[1, 2]], dtype=fl.float64).tolist() == [[1.0, 2.0]]
    with pytest.raises(ValueError, match="expected sequence of length 2 at dim 1"):
        fl.tensor([[1, 2], [3]])
    assert repr(fl.tensor([[1.0, 2.5], [3.0, 4.0]])) == repr(torch.tensor([[1.0, 2.5], [3.0, 4.0]])).replace("torch", "flambeau") or \
        repr(fl.tensor([[1.0, 2.5], [3.0, 4.0]])) == "tensor([[1.0000, 2.5000],\n        [3.0000, 4.0000]])"
    assert fl.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert fl.linspace(0, 1, 5).tolist() == torch.linspace(0, 1, 5).tolist()


def test_tolist_keeps_every_bit():
    # float64 is not rounded through float32.
    assert fl.tensor([0.1, 1 / 3], dtype=fl.float64).tolist() == [0.1, 1 / 3]
    assert fl.tensor([0.1], dtype=fl.float32).tolist() == torch.tensor([0.1]).tolist()


def test_operators_follow_torch_promotion():
    a, ta = fl.tensor([1, 2, 3]), torch.tensor([1, 2, 3])
    for f, t in [(a + 2.5, ta + 2.5), (2 - a, 2 - ta), (a * a, ta * ta), (a / 2, ta / 2), (a // 2, ta // 2),
                 (a % 2, ta % 2), (a ** 2, ta ** 2), (-a, -ta), (abs(-a), abs(-ta)), (a == 2, ta == 2),
                 (a < 2, ta < 2), (a >= 2, ta >= 2)]:
        assert_close(f, t)
    m = fl.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert (m @ m).tolist() == [[7.0, 10.0], [15.0, 22.0]]
    b = fl.tensor([1.0, 2.0])
    same = b
    b += 1
    assert b is same and b.tolist() == [2.0, 3.0]
    assert b.add_(1) is b and b.tolist() == [3.0, 4.0]
    mask = fl.tensor([True, False])
    assert (mask & fl.tensor([True, True])).tolist() == [True, False]
    assert (~mask).tolist() == [False, True]
    assert bool(fl.tensor([1])) and float(fl.tensor(2.5)) == 2.5 and int(fl.tensor(7)) == 7


INDEX_KEYS = [
    (1,), (slice(1, 3),), (slice(None, None, 2), None), (Ellipsis, 1), (1, Ellipsis, None), (-1, slice(-3, None)),
    (slice(1, 3), None), (None, None), (True,), (slice(4, 1),),
    ([0, 2, 3],), (slice(None), [1, 0]), ([0, 1], [2, 3]), ([0, 1], slice(None), [2, 3]),
    ([[0], [1]], [1, 2]), (1, [0, 2], slice(None)), (Ellipsis, [5, 0]),
]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=repr)
def test_getitem_matches_torch(key):
    x, t = pair()
    fkey = tuple(fl.tensor(k) if isinstance(k, list) else k for k in key)
    tkey = tuple(torch.tensor(k) if isinstance(k, list) else k for k in key)
    assert_close(x[fkey], t[tkey])


@pytest.mark.parametrize("key", [None, 1, -2, Ellipsis, slice(1, 3), True], ids=repr)
def test_a_key_that_is_not_a_tuple(key):
    x, t = pair()
    assert_close(x[key], t[key])
    x[key] = 5.0
    t[key] = 5.0
    assert_close(x, t)


def test_getitem_with_masks_and_views():
    x, t = pair()
    m = t[:, :, 0] > 30
    assert_close(x[fl.tensor(m.numpy())], t[m])
    assert_close(x[x > 50], t[t > 50])
    assert_close(x[fl.tensor(2)], t[torch.tensor(2)])
    v = x[1:3]
    v[0, 0, 0] = 1000.0  # basic indexing gives views
    assert x[1, 0, 0].item() == 1000.0
    with pytest.raises(IndexError, match="out of bounds"):
        x[4]
    with pytest.raises(IndexError, match=r"\[index\] index 9 is out of bounds for dimension 0 with size 4"):
        x[fl.tensor([0, 9])]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0, 0, 0]
    with pytest.raises(TypeError):
        x["a"]


def test_setitem_matches_torch():
    for key, value in [((1,), 5.0), ((slice(None), 0), -1.0), (([0, 2],), 7.0), ((Ellipsis, [1, 3]), 2.0)]:
        x, t = pair()
        fkey = tuple(fl.tensor(k) if isinstance(k, list) else k for k in key)
        tkey = tuple(torch.tensor(k) if isinstance(k, list) else k for k in key)
        x[fkey] = value
        t[tkey] = value
        assert_close(x, t)
    x, t = pair()
    x[x > 40] = 0.0
    t[t > 40] = 0.0
    assert_close(x, t)
    x, t = pair((3, 4))
    x[1] = fl.tensor([1.0, 2.0, 3.0, 4.0])
    t[1] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    x[:, 1:3] = fl.tensor([9, 8])  # int values into a float tensor: converted
    t[:, 1:3] = torch.tensor([9, 8])
    assert_close(x, t)
    before = x.clone()
    with pytest.raises(IndexError):
        x[fl.tensor([0, 5])] = 1.0
    assert x.tolist() == before.tolist()


def test_errors_map_to_python_types():
    with pytest.raises(ValueError) as e:
        fl.ones(3) + fl.ones(4)
    assert "[add]" in str(e.value) and isinstance(e.value, RuntimeError)
    with pytest.raises(TypeError):
        fl.gather(fl.ones(3), 0, fl.ones(3))
    with pytest.raises(IndexError, match=r"\[gather\] index 7 is out of bounds for dimension 0 with size 3"):
        fl.gather(fl.ones(3), 0, fl.tensor([7]))
    with pytest.raises(NotImplementedError):
        fl.zeros(2, device="cuda")


def test_views_and_methods():
    x, t = pair((2, 3, 4))
    assert_close(x.view(6, 4), t.view(6, 4))
    assert_close(x.reshape((4, 6)), t.reshape((4, 6)))
    assert_close(x.permute(2, 0, 1), t.permute(2, 0, 1))
    assert_close(x.transpose(0, 2), t.transpose(0, 2))
    assert_close(x.unsqueeze(1).squeeze(1), t)
    assert_close(x.flatten(), t.flatten())
    assert_close(x.sum(dim=(0, 2)), t.sum(dim=(0, 2)))
    assert_close(x.max(dim=1).values, t.max(dim=1).values)
    assert_close(x.max(dim=1).indices, t.max(dim=1).indices)
    assert_close(x.softmax(-1), t.softmax(-1))
    assert x.T.shape == (4, 3, 2)
    assert [c.shape for c in fl.split(x, 2, dim=2)] == [c.shape for c in torch.split(t, 2, dim=2)]
    assert_close(fl.cat([x, x], dim=1), torch.cat([t, t], dim=1))
    assert_close(fl.stack([x, x]), torch.stack([t, t]))
    assert x.to(fl.bfloat16).dtype is fl.bfloat16 and x.long().dtype is fl.int64


def test_generators_and_sampling():
    g = fl.Generator(5)
    a = fl.randn(1000, generator=g)
    state = g.get_state()
    b = fl.randn(1000, generator=g)
    g.set_state(state)
    assert fl.randn(1000, generator=g).tolist() == b.tolist()
    assert abs(a.mean().item()) < 0.15
    fl.manual_seed(3)
    u = fl.rand(4)
    fl.manual_seed(3)
    assert fl.rand(4).tolist() == u.tolist()
    r = fl.randint(0, 10, (100,))
    assert r.dtype is fl.int64 and 0 <= r.min().item() and r.max().item() < 10
    p = fl.randperm(20)
    assert sorted(p.tolist()) == list(range(20))
    e = fl.empty(1000).uniform_(2, 3)
    assert 2 <= e.min().item() and e.max().item() < 3


def test_threads_and_memory_statistics():
    n = fl.get_num_threads()
    fl.set_num_threads(1)
    assert fl.get_num_threads() == 1
    fl.set_num_threads(n)
    fl.memory.reset_peak_stats()
    base = fl.memory.allocated()
    x = fl.empty(1 << 20)
    assert fl.memory.allocated() >= base + 4 * (1 << 20)
    del x
    assert fl.memory.allocated() == base
    assert fl.memory.max_allocated() >= base + 4 * (1 << 20)


def test_python_number_types_stand_for_dtypes():
    # as in PyTorch: float -> float64, int -> int64, bool -> bool
    x = fl.arange(3)
    assert x.to(float).dtype == fl.float64 and x.to(int).dtype == fl.int64 and x.to(bool).dtype == fl.bool
    assert fl.zeros(2, dtype=float).dtype == fl.float64
