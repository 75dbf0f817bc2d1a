"""Activation checkpointing: recompute a function's activations during backward."""
from ..autograd import checkpoint  # noqa: F401
