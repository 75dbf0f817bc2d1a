"""Shared helpers of the Python tests: flambeau is compared with PyTorch 2.13 and numpy.

Every test starts from the same seeds (numpy's global RNG, Python's `random`, torch and
flambeau), so it gives the same inputs alone, in the suite and in any order.
`--shuffle-seed N` runs the collected tests in an order shuffled with N (replay a failure
with the seed printed in the header); scripts/test.sh runs file order and two shuffles."""
import os
import random
import sys

# The tests run against the installed package (scripts/setup.sh: pip install .), never the
# sources in python/, which lack the compiled extension: drop python/ from sys.path should it
# be there (pytest started from python/, or PYTHONPATH). The repository root may stay.
_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != os.path.realpath(_SOURCES)]

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import flambeau as fl  # noqa: E402

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


def assert_raises_naming(call, error, words, unchanged=()):
    """call() raises `error` whose message holds every one of `words` (the op, the shapes);
    each (tensor, numpy array) pair of `unchanged` still holds the array's values."""
    with pytest.raises(error) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    for t, original in unchanged:
        np.testing.assert_array_equal(t.numpy(), original)


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    np.random.seed(0)
    fl.manual_seed(0)
    torch.manual_seed(0)


def pytest_addoption(parser):
    parser.addoption("--shuffle-seed", type=int, default=None,
                     help="run the tests in an order shuffled with this seed")


def pytest_report_header(config):
    seed = config.getoption("--shuffle-seed")
    return f"test order: {'shuffled, --shuffle-seed ' + str(seed) if seed is not None else 'file order'}"


def pytest_collection_modifyitems(config, items):
    seed = config.getoption("--shuffle-seed")
    if seed is not None:
        random.Random(seed).shuffle(items)


def pytest_terminal_summary(terminalreporter, config):
    seed = config.getoption("--shuffle-seed")
    if seed is not None:  # also under -q, which hides the header
        terminalreporter.write_line(f"test order was shuffled with --shuffle-seed {seed}")
