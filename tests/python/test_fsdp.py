"""flambeau.distributed.fsdp.fully_shard (FSDP2) in real processes on 127.0.0.1 (the
scenarios are in dist/ddp_worker.py): against DDP (bitwise on 2 ranks, 1e-5 on 3), padded
odd-sized shards, reshard_after_forward True/False/int (4 ranks, pairs), the separate reduce-scatter group
(no bit changes; its reduce-scatters overlap the all-gathers), memory released after
forward, gradient accumulation without sync, bf16 MixedPrecisionPolicy, and checkpoints
saved by 2 ranks and loaded by 1 and 3."""
import pytest

import flambeau as fl
import flambeau.distributed as dist
from dist import harness
from flambeau.distributed.fsdp import fully_shard

pytestmark = pytest.mark.skipif(not dist.is_gloo_available(), reason="no Gloo in this build")


def run(scenario, world, *args):
    harness.run(scenario, world, timeout=180, script=harness.DDP_WORKER, args=args).check_ok()


@pytest.mark.parametrize("world", [2, 3, 4])
def test_fsdp_matches_ddp(world):
    run("fsdp", world)


@pytest.mark.parametrize("world", [2, 3])
def test_memory_released_accumulation_and_bf16(world):
    run("fsdp_memory_and_accumulation", world)


def test_separate_reduce_scatter_group_overlaps_all_gathers():
    run("fsdp_overlap", 2)


def test_checkpoint_of_two_ranks_loads_on_one_and_three(tmp_path):
    run("fsdp_checkpoint", 2, tmp_path, "save")
    run("fsdp_checkpoint", 1, tmp_path, "load")
    run("fsdp_checkpoint", 3, tmp_path, "load")


def test_bad_arguments():
    with pytest.raises(TypeError, match="flambeau.nn.Module"):
        fully_shard("not a module")
    with pytest.raises(TypeError, match="bool or an int"):
        fully_shard(fl.nn.Linear(2, 2), reshard_after_forward="yes")
