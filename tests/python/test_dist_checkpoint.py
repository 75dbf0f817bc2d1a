"""flambeau.distributed.checkpoint: saved by 2 ranks, loaded by 1 and by 3 (real processes
on 127.0.0.1, dist/ddp_worker.py); Hugging Face's sharded layout (flambeau.load reads the
directory); a save that fails on the way leaves the previous checkpoint loadable."""
import json
import os

import pytest

import flambeau as fl
import flambeau.distributed as dist
import flambeau.distributed.checkpoint as dcp
from dist import harness

pytestmark = pytest.mark.skipif(not dist.is_gloo_available(), reason="no Gloo in this build")


def run(scenario, world, *args):
    harness.run(scenario, world, timeout=120, script=harness.DDP_WORKER, args=args).check_ok()


def test_saved_by_two_ranks_loads_on_one_and_on_three(tmp_path):
    run("checkpoint_save", 2, tmp_path)
    ckpt = tmp_path / "ckpt"
    index = json.loads((ckpt / dcp.INDEX).read_text())
    files = set(index["weight_map"].values())
    assert len(files) == 2 and all((ckpt / f).exists() for f in files)
    assert sorted(os.listdir(ckpt)) == sorted(files | {dcp.INDEX})
    assert set(fl.load(ckpt)) == set(index["weight_map"])  # the directory reads as one checkpoint
    run("checkpoint_load", 1, tmp_path)
    run("checkpoint_load", 3, tmp_path)


def test_a_rank_that_cannot_write_fails_the_save_on_every_rank(tmp_path):
    run("checkpoint_fail", 2, tmp_path)


def _model_state(seed):
    fl.manual_seed(seed)
    m = fl.nn.Linear(5, 4)
    return m, {"model": m.state_dict(), "step": seed}


def test_failed_save_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    first, state = _model_state(1)
    dcp.save(state, tmp_path)
    before = sorted(os.listdir(tmp_path))
    _, other = _model_state(2)
    # A shard that cannot be written, then an index that cannot be replaced.
    monkeypatch.setattr(fl.safetensors, "save_file", lambda *a, **k: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError):
        dcp.save(other, tmp_path)
    monkeypatch.undo()
    monkeypatch.setattr(dcp, "_write_atomically", lambda *a: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError):
        dcp.save(other, tmp_path)
    monkeypatch.undo()
    m, loaded = _model_state(3)
    dcp.load(loaded, tmp_path)
    assert loaded["step"] == 1
    assert bool((loaded["model"]["weight"] == first.weight).all())
    # The next good save replaces it and removes every older shard.
    dcp.save(other, tmp_path)
    index = json.loads((tmp_path / dcp.INDEX).read_text())
    assert sorted(os.listdir(tmp_path)) == sorted(set(index["weight_map"].values()) | {dcp.INDEX})
    assert sorted(os.listdir(tmp_path)) != before


def test_load_names_missing_entries_and_wrong_shapes(tmp_path):
    _, state = _model_state(1)
    dcp.save(state, tmp_path)
    with pytest.raises(KeyError, match="lacks"):
        dcp.load({"model": {"weight": fl.zeros(4, 5), "extra": fl.zeros(1)}}, tmp_path)
    with pytest.raises(ValueError, match="shape"):
        dcp.load({"model": {"weight": fl.zeros(5, 4)}}, tmp_path)
