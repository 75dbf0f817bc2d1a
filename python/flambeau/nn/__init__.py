"""flambeau.nn (modules arrive with the autograd issue; functional ops are here)."""
from . import functional  # noqa: F401
