"""Graph capture on the CPU: torch.cuda's CUDAGraph API, with flambeau's names.

    g = flambeau.graphs.Graph()
    with flambeau.graphs.graph(g):
        static_out = step(static_in)
    static_in.copy_(new_input)
    g.replay()            # static_out now holds step(new_input)

Capture records the ops one thread runs with their buffers (the graph keeps them: its
private memory pool); replay() re-runs their kernels on those buffers, without dispatch,
autograd or checks, the GIL released. What a replay could not repeat is refused when the
capture ends, naming the op: item() and other host syncs, ops whose output shape depends on
values, RNG on an explicit Generator (the default one is graph-safe: replays continue its
stream), and tensors whose values code outside the captured ops wrote.
"""
import contextlib

from .._C import _graphs

__all__ = ["Graph", "CUDAGraph", "graph", "graph_pool_handle", "is_capturing", "is_current_stream_capturing"]


class _Pool:
    """A memory pool handle (graph_pool_handle()). The CPU graphs keep their own buffers,
    so graphs given the same handle share nothing more than the handle."""

    def __repr__(self):
        return f"<flambeau.graphs pool {id(self):#x}>"


def graph_pool_handle():
    """A handle to pass as `pool=` to several captures (torch.cuda.graph_pool_handle)."""
    return _Pool()


class Graph:
    """A captured op sequence (torch.cuda.CUDAGraph's methods)."""

    def __init__(self, keep_graph=False):
        self._g = _graphs.Graph()
        self._pool = None

    def capture_begin(self, pool=None, capture_error_mode="global"):
        if capture_error_mode not in ("global", "thread_local", "relaxed"):
            raise ValueError(f"[Graph.capture_begin] capture_error_mode must be 'global', 'thread_local' or "
                             f"'relaxed', got {capture_error_mode!r}")
        self._g.capture_begin()
        self._pool = pool if pool is not None else _Pool()

    def capture_end(self):
        self._g.capture_end()

    def replay(self):
        self._g.replay()

    def reset(self):
        self._g.reset()
        self._pool = None

    def pool(self):
        """The pool handle of this graph's capture (pass it to another capture's pool=)."""
        if self._pool is None:
            raise RuntimeError("[Graph.pool] nothing was captured")
        return self._pool

    def instantiate(self):
        """Nothing to do on the CPU: a captured graph is ready to replay."""

    def enable_debug_mode(self):
        """The topology is always kept (debug_dump works without it)."""

    def debug_dump(self, debug_path):
        """Writes the graph as a Graphviz dot file."""
        self._g.debug_dump(str(debug_path))

    def get_graph_data(self):
        """The topology: {"nodes": [{id, type, kernel_name, op_name, shapes, correlation_id}],
        "edges": [(from_id, to_id)], "execution_order": [ids]}. correlation_id is the
        profiler's id of the captured op (the "correlation" arg of its trace event)."""
        return self._g.get_graph_data()

    def to_dot(self):
        return self._g.to_dot()


CUDAGraph = Graph


@contextlib.contextmanager
def graph(g, pool=None, stream=None, capture_error_mode="global"):
    """Captures the block's ops into g (torch.cuda.graph). An exception inside the block
    ends and drops the capture, then propagates."""
    g.capture_begin(pool=pool, capture_error_mode=capture_error_mode)
    try:
        yield g
    except BaseException:
        try:
            g.capture_end()
        except Exception:  # noqa: BLE001 - the block's own error is the one to report
            pass
        g.reset()
        raise
    g.capture_end()


def is_capturing():
    """Whether the calling thread is capturing a graph."""
    return _graphs.is_capturing()


is_current_stream_capturing = is_capturing
