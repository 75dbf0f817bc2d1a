"""flambeau.nn.parallel.DistributedDataParallel in real processes on 127.0.0.1 (the
scenarios are in dist/ddp_worker.py; dist/harness.py bounds each run and ends every
process by its pid). Bitwise checks run on 2 ranks, where the average of two gradients
does not depend on the order of the sum or the bucket an element lands in."""
import pytest

import flambeau.distributed as dist
from dist import harness

pytestmark = pytest.mark.skipif(not dist.is_gloo_available(), reason="no Gloo in this build")


def run(scenario, world=2):
    res = harness.run(scenario, world, timeout=120, script=harness.DDP_WORKER)
    res.check_ok()
    return res


@pytest.mark.parametrize("world", [2, 3])
def test_ddp_matches_one_process_on_the_whole_batch(world):
    run("reference", world)


def test_bucket_views_static_graph_small_buckets_and_hooks_change_no_bit():
    run("variants")


def test_no_sync_accumulates_like_averaging_by_hand():
    run("no_sync")


def test_unused_parameters():
    run("unused")


def test_bucket_all_reduces_overlap_backward():
    run("overlap")


def test_buckets_rebuilt_in_ready_order():
    run("rebuild")
