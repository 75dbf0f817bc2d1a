"""flambeau.distributed.fsdp: FSDP2's fully_shard (torch.distributed.fsdp.fully_shard).

fully_shard(module) shards the parameters the module holds (those no earlier fully_shard
call on a submodule took) on dim 0 over the mesh's ranks: each becomes a ShardedParameter
(this rank's rows; to_local(), full_tensor(), placements), so the optimizer and its state
are sharded too. Before the module's forward its parameters are all-gathered (the next
module's all-gather is issued meanwhile), after it they are resharded (reshard_after_forward,
the default except for the root), gathered again before its backward, and its gradients
are reduce-scattered (averaged) into the shards' .grad as its backward ends. Apply it to
each block, then to the root. See Note [FSDP's unsharded parameters] (distributed/fsdp.h)."""
from ._fully_shard import (FSDPModule, MixedPrecisionPolicy, Shard, ShardedParameter, UnshardHandle,  # noqa: F401
                           fully_shard)

__all__ = ["FSDPModule", "MixedPrecisionPolicy", "Shard", "ShardedParameter", "UnshardHandle", "fully_shard"]
