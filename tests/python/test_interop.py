"""Zero-copy exchange with numpy and PyTorch (DLPack both ways), and 8 Python threads
running ops at once."""
import threading

import numpy as np
import pytest
import torch

import flambeau as fl


def test_numpy_shares_memory_both_ways():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = fl.from_numpy(a)
    assert x.data_ptr() == a.ctypes.data and x.shape == (3, 4) and x.dtype is fl.float32
    a[0, 0] = 100
    assert x[0, 0].item() == 100
    x[1, 1] = -5.0
    assert a[1, 1] == -5
    y = fl.ones(2, 3, dtype=fl.float64)
    n = y.numpy()
    assert n.ctypes.data == y.data_ptr() and n.dtype == np.float64
    n[0, 0] = 7
    assert y[0, 0].item() == 7
    t = fl.arange(12).reshape(3, 4).t()  # non-contiguous views keep their strides
    assert (t.numpy() == np.arange(12).reshape(3, 4).T).all()
    assert fl.as_tensor(a).data_ptr() == a.ctypes.data
    assert fl.tensor(a).data_ptr() != a.ctypes.data  # tensor() copies
    with pytest.raises(TypeError):
        fl.ones(2).to(fl.bfloat16).numpy()
    z = fl.arange(4, dtype=fl.int32)
    v = np.from_dlpack(z)  # numpy consumes flambeau's DLPack capsule: no copy
    assert v.ctypes.data == z.data_ptr() and v.dtype == np.int32 and v.tolist() == [0, 1, 2, 3]
    assert np.asarray(z).ctypes.data == z.data_ptr()
    w = fl.zeros(2, 3)
    w[0] = [1, 2, 3]
    w[1] = np.array([4.0, 5.0, 6.0])
    assert w.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_torch_shares_memory_both_ways():
    t = torch.arange(6, dtype=torch.float32)
    x = fl.from_dlpack(t)
    assert x.data_ptr() == t.data_ptr()
    t[0] = 42
    assert x[0].item() == 42
    y = fl.arange(6, dtype=fl.float64)
    u = torch.from_dlpack(y)
    assert u.data_ptr() == y.data_ptr() and u.dtype == torch.float64
    u[1] = -1
    assert y[1].item() == -1
    del y
    assert u[1].item() == -1  # the capsule keeps the storage alive


@pytest.mark.parametrize("name", ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
                                  "float32", "float64"])
def test_every_dtype_crosses_dlpack(name):
    t = (torch.arange(10) % 3).to(getattr(torch, name))
    x = fl.from_dlpack(t)
    assert x.dtype is getattr(fl, name)
    back = torch.from_dlpack(x)
    assert back.dtype == t.dtype and back.data_ptr() == t.data_ptr() and torch.equal(back, t)


def test_eight_threads_run_ops_concurrently():
    results = {}

    def work(i):
        g = fl.Generator(i)
        a = fl.randn(256, 256, generator=g)
        out = []
        for _ in range(20):
            b = (a @ a.t()).softmax(-1).sum(dim=1)
            out.append(b.sum().item())
        results[i] = (out, a.numpy().copy())

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, (out, a) in results.items():
        want = torch.from_numpy(a)
        want = (want @ want.t()).softmax(-1).sum(dim=1).sum().item()
        assert all(abs(v - want) < 1e-3 for v in out), i
        assert len(set(out)) == 1  # the same bits every time
