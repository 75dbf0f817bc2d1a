"""flambeau.utils: checkpoint (as torch.utils.checkpoint)."""
from . import checkpoint  # noqa: F401
