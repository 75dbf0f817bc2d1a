"""Shared helpers of the Python tests: flambeau is compared with PyTorch 2.13 and numpy."""
import numpy as np
import pytest
import torch

import flambeau as fl

DTYPE_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]


def fl_dtype(name):
    return getattr(fl, name)


def torch_dtype(name):
    return getattr(torch, name)


def to_numpy(x):
    """numpy copy of a flambeau or torch tensor (bfloat16 widened to float32)."""
    if isinstance(x, fl.Tensor):
        x = torch.from_dlpack(x)
    if x.dtype == torch.bfloat16:
        x = x.float()
    return x.detach().numpy().copy()


def same_dtype(f, t):
    return repr(f.dtype).split(".")[1] == str(t.dtype).split(".")[1]


def assert_close(f, t, rtol=1e-6, atol=1e-6, check_dtype=True):
    if check_dtype:
        assert same_dtype(f, t), f"dtype {f.dtype} vs {t.dtype}"
    assert tuple(f.shape) == tuple(t.shape), f"shape {f.shape} vs {tuple(t.shape)}"
    np.testing.assert_allclose(to_numpy(f).astype(np.float64), to_numpy(t).astype(np.float64), rtol=rtol, atol=atol,
                               equal_nan=True)


@pytest.fixture(autouse=True)
def _seed():
    fl.manual_seed(0)
    torch.manual_seed(0)
