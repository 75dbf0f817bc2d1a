"""flambeau.distributed.checkpoint: save and load a state dict from every rank of a group
(torch.distributed.checkpoint's save/load), in Hugging Face's sharded safetensors layout.

save(state_dict, checkpoint_id): the state dict (nested dicts and lists are flattened to
dotted names, as torch's DCP does) is cut into whole tensors, each written by one rank
(balanced by bytes), as `model-<id>-<rank>-of-<world>.safetensors`; rank 0 then writes
`model.safetensors.index.json` ({"metadata": ..., "weight_map": {name: file}}), which
`flambeau.load` and Hugging Face tools read. Values that are not tensors (numbers,
strings, None, in optimizer state) travel as JSON in the index's metadata.

Atomic: the index is replaced by a rename only after every rank's file is on disk, and the
files of the previous save are removed only after that, so a crash at any point leaves a
checkpoint that loads (the old one or the new one). A failure on any rank raises on all.

load(state_dict, checkpoint_id): fills the state dict in place (tensors are copied into,
other values replaced) from a checkpoint saved by any number of ranks; an FSDP shard
(fully_shard) gets its rows, so a checkpoint reshards to any world size.
"""
import json
import os
import uuid

import flambeau as fl
from flambeau import _C

__all__ = ["save", "load"]

INDEX = "model.safetensors.index.json"
_EXTRA = "flambeau.non_tensor_values"


def _flatten(obj, prefix, out):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise TypeError(f"[checkpoint] state dict keys must be str or int, got {type(k).__name__} at "
                                f"'{prefix}'")
            _flatten(v, f"{prefix}{k}.", out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}{i}.", out)
    else:
        out[prefix[:-1]] = obj
    return out


def _group(process_group):
    import flambeau.distributed as dist
    if process_group is not None:
        return process_group.comm
    return dist._world().comm if dist.is_initialized() else None


def _owners(tensors, world):
    """name -> rank: biggest tensors first, each to the rank with the fewest bytes so far
    (the same answer on every rank)."""
    load, owner = [0] * world, {}
    for name in sorted(tensors, key=lambda n: (-tensors[n].numel() * tensors[n].element_size(), n)):
        r = min(range(world), key=lambda q: (load[q], q))
        owner[name] = r
        load[r] += tensors[name].numel() * tensors[name].element_size()
    return owner


def _together(comm, what, fn):
    """Runs fn() here, then raises on every rank if it failed on any (this rank's own error
    where it failed here), so that no rank waits for one that gave up."""
    error = None
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - re-raised below, after the other ranks know
        error = e
    flag = fl.tensor([0 if error is None else 1], dtype=fl.int64)
    if comm is not None:
        comm.all_reduce(flag)
    if error is not None:
        raise error
    if int(flag.item()):
        raise RuntimeError(f"[checkpoint] {what} failed on {int(flag.item())} rank(s); the previous checkpoint "
                           f"is intact")


def _write_atomically(path, text):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save(state_dict, checkpoint_id=None, *, process_group=None, storage_writer=None, planner=None):
    """Writes state_dict into the directory checkpoint_id from every rank of the group."""
    if checkpoint_id is None:
        raise ValueError("[checkpoint.save] checkpoint_id (the directory) is required")
    if storage_writer is not None or planner is not None:
        raise NotImplementedError("[checkpoint.save] storage_writer and planner are not supported")
    path = os.fspath(checkpoint_id)
    comm = _group(process_group)
    rank, world = (comm.get_rank(), comm.get_size()) if comm is not None else (0, 1)
    flat = _flatten(state_dict, "", {})
    # FSDP's shards are saved whole (an all-gather each, in the same order on every rank).
    tensors = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v) for k, v in flat.items()
               if isinstance(v, fl.Tensor)}
    extra = {k: v for k, v in flat.items() if not isinstance(v, fl.Tensor)}
    try:
        json.dumps(extra)
    except TypeError as e:
        raise TypeError(f"[checkpoint.save] values that are not tensors must be JSON numbers, strings, bools "
                        f"or None: {e}") from None
    # One id for this save, rank 0's: the files of every rank carry it.
    token = fl.tensor(list(uuid.uuid4().bytes[:8]), dtype=fl.uint8)
    if comm is not None:
        comm.broadcast(token, 0)
    sid = bytes(token.tolist()).hex()
    owner = _owners(tensors, world)
    files = {r: f"model-{sid}-{r + 1:05d}-of-{world:05d}.safetensors" for r in range(world)}
    def write_mine():
        os.makedirs(path, exist_ok=True)
        mine = {k: t.detach().contiguous() for k, t in tensors.items() if owner[k] == rank}
        fl.safetensors.save_file(mine, os.path.join(path, files[rank]), {"format": "pt"})

    _together(comm, "writing a shard", write_mine)
    _together(comm, "writing the index", lambda: rank == 0 and _publish(path, tensors, extra, owner, files, world))


def _publish(path, tensors, extra, owner, files, world):
    """Rank 0: the index (replaced atomically), then the shards no index names any more."""
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total, _EXTRA: json.dumps(extra), "world_size": world},
             "weight_map": {k: files[owner[k]] for k in sorted(tensors)}}
    _write_atomically(os.path.join(path, INDEX), json.dumps(index, indent=2))
    keep = set(files.values())
    for name in os.listdir(path):  # earlier saves' shards (and a failed save's)
        if name.startswith("model-") and name.endswith(".safetensors") and name not in keep:
            os.unlink(os.path.join(path, name))


def load(state_dict, checkpoint_id=None, *, process_group=None, storage_reader=None, planner=None):
    """Fills state_dict in place from the checkpoint in the directory checkpoint_id."""
    if checkpoint_id is None:
        raise ValueError("[checkpoint.load] checkpoint_id (the directory) is required")
    if storage_reader is not None or planner is not None:
        raise NotImplementedError("[checkpoint.load] storage_reader and planner are not supported")
    path = os.path.join(os.fspath(checkpoint_id), INDEX)
    tensors, metadata = _C._io.load(path, False)
    metadata = dict(metadata)
    extra = json.loads(metadata.get(_EXTRA, "{}"))
    want = _flatten(state_dict, "", {})
    missing = [k for k, v in want.items() if (k not in tensors if isinstance(v, fl.Tensor) else k not in extra)]
    if missing:
        raise KeyError(f"[checkpoint.load] {checkpoint_id} lacks {len(missing)} entries: {missing[:8]}")
    for k, v in want.items():
        if isinstance(v, fl.Tensor):
            src = tensors[k]
            if hasattr(v, "_shard_rows"):  # an FSDP shard: this rank's rows of the whole tensor
                first, rows = v._shard_rows()
                src = src.reshape((-1,) + tuple(src.shape[1:]) if src.dim() else (1,))[first:first + rows]
            if tuple(src.shape) != tuple(v.shape):
                raise ValueError(f"[checkpoint.load] '{k}': the checkpoint has shape {tuple(src.shape)}, the "
                                 f"state dict {tuple(v.shape)}")
            with fl.no_grad():
                v.copy_(src)
    _restore(state_dict, "", extra)


def _restore(obj, prefix, extra):
    """obj with its non-tensor leaves replaced by the saved values (dicts and lists in place)."""
    if isinstance(obj, dict):
        for k in list(obj):
            obj[k] = _restore(obj[k], f"{prefix}{k}.", extra)
        return obj
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            obj[i] = _restore(v, f"{prefix}{i}.", extra)
        return obj
    if isinstance(obj, tuple):
        return tuple(_restore(v, f"{prefix}{i}.", extra) for i, v in enumerate(obj))
    if isinstance(obj, fl.Tensor):
        return obj
    return extra.get(prefix[:-1], obj)
