"""flambeau.cpu.amp: torch.cpu.amp.autocast, i.e. flambeau.autocast("cpu", ...)."""
from .. import amp as _amp

__all__ = ["autocast"]


class autocast(_amp.autocast):
    """torch.cpu.amp.autocast(enabled, dtype, cache_enabled): autocast("cpu", ...)."""

    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cpu", dtype=_amp._C.bfloat16 if dtype is None else dtype, enabled=enabled,
                         cache_enabled=cache_enabled)
