"""flambeau.utils: checkpoint (as torch.utils.checkpoint); collect_env (python -m
flambeau.utils.collect_env); cpp_extension (the stable C header's include path)."""
from . import checkpoint, cpp_extension  # noqa: F401
