"""flambeau.autograd.graph (as torch.autograd.graph): the backward pass itself. queue_callback
is the short name of torch's Variable._execution_engine.queue_callback."""
from .. import _C

__all__ = ["queue_callback"]


def queue_callback(callback):
    """Runs callback() once the backward pass running on this thread has processed its whole
    graph, before backward() / grad() returns: in the order queued, including callbacks queued
    by a callback; an exception propagates out of backward. Call it from a hook or a
    Function's backward (RuntimeError outside a backward pass); a backward started inside a
    hook has its own queue. DDP waits for its gradient all-reduces this way."""
    _C._queue_callback(callback)
