"""flambeau.backends: what the machine's backends can do (torch.backends' names)."""
from . import cpu  # noqa: F401
