"""DDP communication hooks, as torch.distributed.algorithms.ddp_comm_hooks."""
from . import default_hooks  # noqa: F401
