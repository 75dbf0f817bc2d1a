"""The cpp backend's GEMM templates from Python: gemm_backends given as a list (as torch's
max_autotune_gemm_backends), mode="max-autotune" caching its choice on disk, and an unknown
candidate refused. The C++ tests (tests/compile/templates_test.cpp) check each pattern."""
import os

import pytest

import flambeau as fl

F = fl.nn.functional


def mlp(x, w1, b1, w2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2) + x


def inputs():
    g = fl.Generator().manual_seed(0)
    return [fl.rand(*s, generator=g) * 2 - 1 for s in ((48, 64), (96, 64), (96,), (64, 96))]


@pytest.mark.parametrize("backends", [["blas"], ["template"], ["blas", "template"]])
def test_gemm_backends_list_matches_eager(backends, tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMBEAU_CACHE_DIR", str(tmp_path))
    xs = inputs()
    f = fl.compile(mlp, options={"gemm_backends": backends})
    with fl.no_grad():
        f(*xs)
        got, want = f(*xs), mlp(*xs)
    assert bool((got == want).all())  # K <= 96: BLAS sums each block as eager's call does


def test_max_autotune_caches_the_winner(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMBEAU_CACHE_DIR", str(tmp_path))
    xs = inputs()
    f = fl.compile(mlp, mode="max-autotune")
    with fl.no_grad():
        f(*xs)
        assert bool((f(*xs) == mlp(*xs)).all())
    # one choice per GEMM pattern (the two linears), each "template" or "blas" and its key
    files = sorted(os.listdir(tmp_path / "autotune"))
    assert len(files) == 2
    for name in files:
        winner, key = (tmp_path / "autotune" / name).read_text().splitlines()
        assert winner in ("template", "blas") and key.startswith("gemm linear")


def test_unknown_gemm_backend_raises(tmp_path, monkeypatch):
    monkeypatch.setenv("FLAMBEAU_CACHE_DIR", str(tmp_path))
    f = fl.compile(mlp, options={"gemm_backends": ["triton"]})
    with pytest.raises(ValueError, match="unknown GEMM backend 'triton'"), fl.no_grad():
        f(*inputs())
        f(*inputs())
