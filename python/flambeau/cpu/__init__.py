"""flambeau.cpu: CPU-specific names, as torch.cpu (amp.autocast)."""
from . import amp  # noqa: F401
