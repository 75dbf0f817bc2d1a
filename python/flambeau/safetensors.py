"""safetensors files, as the `safetensors` package's torch API, natively in C++.

Files are memory-mapped private and copy-on-write: tensors view the file without copies
and writing to them never changes it. Every file is validated before use; a bad one
raises ValueError("[safetensors] <path>: <what is wrong>").

Dtypes flambeau lacks load as raw uint8 bytes: U16/U32/U64/C64 gain a last dimension of
their element size, the 8-bit floats keep their shape (`float8_to_float32` decodes
F8_E4M3 / F8_E5M2). `safe_open(...).get_slice(name).get_dtype()` gives the file's dtype.
"""
import os

from . import _C

__all__ = ["load_file", "save_file", "safe_open", "float8_to_float32"]

float8_to_float32 = _C._io.float8_to_float32


def load_file(filename, device="cpu", *, copy=False):
    """name -> tensor of a safetensors file (also a sharded index or its directory)."""
    _check_device(device)
    return _C._io.load(os.fspath(filename), copy)[0]


def save_file(tensors, filename, metadata=None):
    """Writes `tensors` (a dict name -> tensor) atomically; metadata: dict str -> str."""
    if not isinstance(tensors, dict):
        raise TypeError(f"[safetensors] expected a dict of tensors, got {type(tensors).__name__}")
    for k, v in (metadata or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"[safetensors] metadata must map str to str, got {k!r}: {v!r}")
    _C._io.save(list(tensors.items()), os.fspath(filename), list((metadata or {}).items()))


def _check_device(device):
    if str(device) != "cpu":
        raise ValueError(f"[safetensors] only device='cpu' is supported, got {device!r}")


class safe_open:
    """Lazy access to one file: opening reads only the header.

        with flambeau.safetensors.safe_open("model.safetensors") as f:
            w = f.get_tensor("wte.weight")
            rows = f.get_slice("wte.weight")[100:200]
    """

    def __init__(self, filename, framework="flambeau", device="cpu"):
        if framework not in ("flambeau", "fl"):
            raise ValueError(f"[safetensors] framework must be 'flambeau', got {framework!r}")
        _check_device(device)
        self._f = _C._io.SafeOpen(os.fspath(filename))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def keys(self):
        return self._f.keys()

    def offset_keys(self):
        return self._f.keys()

    def metadata(self):
        """The __metadata__ dict, or None when the file has none."""
        return self._f.metadata()

    def get_tensor(self, name):
        return self._f.get_tensor(name)

    def get_slice(self, name):
        return _Slice(self._f, name)


class _Slice:
    """A tensor not read yet; indexing reads only the bytes it needs."""

    def __init__(self, f, name):
        self._f, self._name = f, name
        self._dtype, self._shape = f.info(name)

    def get_shape(self):
        return list(self._shape)

    def get_dtype(self):
        return self._dtype

    def __getitem__(self, key):
        rest = ()
        if isinstance(key, tuple) and key and isinstance(key[0], slice):
            key, rest = key[0], key[1:]
        if isinstance(key, slice) and key.step in (None, 1) and self._shape:
            start = 0 if key.start is None else key.start
            stop = self._shape[0] if key.stop is None else key.stop
            rows = self._f.get_rows(self._name, start, stop)  # copies just these rows
            return rows[(slice(None),) + rest] if rest else rows
        # Anything else indexes a view of the mapping (only touched pages are read).
        full = key if not rest else (key,) + rest
        return self._f.get_tensor(self._name)[full].clone()
