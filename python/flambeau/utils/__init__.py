"""flambeau.utils: checkpoint (as torch.utils.checkpoint); collect_env (python -m
flambeau.utils.collect_env)."""
from . import checkpoint  # noqa: F401
