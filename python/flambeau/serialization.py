"""flambeau.load / flambeau.save: safetensors files (recognised by content), sharded
checkpoints (*.safetensors.index.json or a directory holding one)."""
import os

from . import _C


def load(f, map_location=None, *, mmap=True, weights_only=True):
    """An ordered dict name -> tensor. With mmap=True (default) tensors view the file's
    copy-on-write mapping; mmap=False copies them into owned memory."""
    if map_location is not None and str(map_location) != "cpu":
        raise ValueError(f"[load] only map_location='cpu' is supported, got {map_location!r}")
    return _C._io.load(os.fspath(f), not mmap)[0]


def save(obj, f, metadata=None):
    """Writes a dict name -> tensor as safetensors (atomically)."""
    from .safetensors import save_file

    save_file(obj, f, metadata)
