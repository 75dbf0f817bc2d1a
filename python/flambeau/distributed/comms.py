"""Communicators in torchcomms' shape: new_comm() makes a TorchComm on a backend ("gloo",
"mpi"); its collectives take async_op and the keywords timeout (timedelta or seconds) and
hints, and return a Work (None for a blocking call in torch.distributed's layer)."""
import datetime
import enum

from flambeau._C import _distributed as _d

__all__ = ["ReduceOp", "RedOpType", "TorchComm", "Work", "new_comm", "DistError", "DistBackendError",
           "DistStoreError", "DistNetworkError"]

DistError = _d.DistError
DistBackendError = _d.DistBackendError
DistStoreError = _d.DistStoreError
DistNetworkError = _d.DistNetworkError
Work = _d.Work


def _work_exception(self):
    """The error the work finished with, or None."""
    try:
        self._raise_error()
    except Exception as e:  # noqa: BLE001 - any translated error is the answer
        return e
    return None


Work.exception = _work_exception


class RedOpType(enum.IntEnum):
    SUM = 0
    PRODUCT = 1
    MIN = 2
    MAX = 3
    BAND = 4
    BOR = 5
    BXOR = 6
    AVG = 7
    PREMUL_SUM = 8


class ReduceOp:
    """torch.distributed.ReduceOp: ReduceOp.SUM ... ReduceOp.AVG, and ReduceOp.PREMUL_SUM(factor)
    (the factor multiplies each rank's input before the sum)."""

    RedOpType = RedOpType

    def __init__(self, op=RedOpType.SUM, factor=1.0):
        self.type = RedOpType(int(op.type if isinstance(op, ReduceOp) else op))
        self.factor = float(factor)

    def __eq__(self, other):
        if isinstance(other, ReduceOp):
            return self.type == other.type and self.factor == other.factor
        if isinstance(other, (int, RedOpType)):
            return self.type == other
        return NotImplemented

    def __hash__(self):
        return hash((self.type, self.factor))

    def __repr__(self):
        if self.type == RedOpType.PREMUL_SUM:
            return f"ReduceOp.PREMUL_SUM({self.factor})"
        return f"ReduceOp.{self.type.name}"


for _t in RedOpType:
    if _t != RedOpType.PREMUL_SUM:
        setattr(ReduceOp, _t.name, ReduceOp(_t))


def _premul_sum(factor):
    if hasattr(factor, "item"):
        factor = factor.item()
    return ReduceOp(RedOpType.PREMUL_SUM, float(factor))


ReduceOp.PREMUL_SUM = staticmethod(_premul_sum)


def _op(op):
    op = op if isinstance(op, ReduceOp) else ReduceOp(op)
    return int(op.type), op.factor


def _seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        return timeout.total_seconds()
    return float(timeout)


class TorchComm:
    """A communicator (torchcomms' TorchComm). Work on one communicator runs in issue order on
    its own thread; different communicators run concurrently."""

    def __init__(self, impl):
        self._c = impl

    # Introspection
    def get_rank(self):
        return self._c.rank

    def get_size(self):
        return self._c.size

    def get_name(self):
        return self._c.name

    def get_backend(self):
        return self._c.backend

    def get_backend_version(self):
        return self._c.backend_version

    def get_device(self):
        from flambeau import device
        return device("cpu")

    @property
    def global_ranks(self):
        return list(self._c.global_ranks)

    # Collectives
    def all_reduce(self, tensor, op=ReduceOp.SUM, async_op=False, *, hints=None, timeout=None):
        return self._c.all_reduce(tensor, *_op(op), async_op, _seconds(timeout), hints)

    def reduce(self, tensor, root, op=ReduceOp.SUM, async_op=False, *, hints=None, timeout=None):
        return self._c.reduce(tensor, root, *_op(op), async_op, _seconds(timeout), hints)

    def broadcast(self, tensor, root, async_op=False, *, hints=None, timeout=None):
        return self._c.broadcast(tensor, root, async_op, _seconds(timeout), hints)

    def all_gather(self, tensor_list, tensor, async_op=False, *, hints=None, timeout=None):
        return self._c.all_gather(list(tensor_list), tensor, async_op, _seconds(timeout), hints)

    def all_gather_single(self, output, input, async_op=False, *, hints=None, timeout=None):
        return self._c.all_gather_single(output, input, async_op, _seconds(timeout), hints)

    def reduce_scatter(self, output, input_list, op=ReduceOp.SUM, async_op=False, *, hints=None, timeout=None):
        return self._c.reduce_scatter(output, list(input_list), *_op(op), async_op, _seconds(timeout), hints)

    def reduce_scatter_single(self, output, input, op=ReduceOp.SUM, async_op=False, *, hints=None, timeout=None):
        return self._c.reduce_scatter_single(output, input, *_op(op), async_op, _seconds(timeout), hints)

    def all_to_all_single(self, output, input, async_op=False, *, hints=None, timeout=None):
        return self._c.all_to_all_single(output, input, [], [], async_op, _seconds(timeout), hints)

    def all_to_all_v_single(self, output, input, output_split_sizes, input_split_sizes, async_op=False, *,
                            hints=None, timeout=None):
        return self._c.all_to_all_single(output, input, list(output_split_sizes or []),
                                         list(input_split_sizes or []), async_op, _seconds(timeout), hints)

    def all_to_all(self, output_tensor_list, input_tensor_list, async_op=False, *, hints=None, timeout=None):
        return self._c.all_to_all(list(output_tensor_list), list(input_tensor_list), async_op,
                                  _seconds(timeout), hints)

    def gather(self, output_tensor_list, input_tensor, root, async_op=False, *, hints=None, timeout=None):
        return self._c.gather(list(output_tensor_list or []), input_tensor, root, async_op, _seconds(timeout), hints)

    def scatter(self, output_tensor, input_tensor_list, root, async_op=False, *, hints=None, timeout=None):
        return self._c.scatter(output_tensor, list(input_tensor_list or []), root, async_op, _seconds(timeout), hints)

    def send(self, tensor, dst, async_op=False, *, hints=None, timeout=None):
        return self._c.send(tensor, dst, async_op, _seconds(timeout), hints)

    def recv(self, tensor, src, async_op=False, *, hints=None, timeout=None):
        return self._c.recv(tensor, src, async_op, _seconds(timeout), hints)

    def barrier(self, async_op=False, *, hints=None, timeout=None):
        return self._c.barrier(async_op, _seconds(timeout), hints)

    def batch_op_create(self):
        return BatchSendRecv(self)

    def split(self, ranks, name, hints=None, timeout=None):
        """A communicator over `ranks` (every rank calls; a rank outside passes []); None for
        a rank not in it."""
        c = self._c.split(list(ranks), name, _seconds(timeout), hints)
        return None if c is None else TorchComm(c)

    # Fault tolerance
    def get_init_handle(self):
        """This process's handle, to pass in reconfigure()'s init_handles."""
        return self._c.get_init_handle()

    def reconfigure(self, uuid, init_handles, timeout=None, hints=None):
        """Rebuilds the group after a failure from the processes whose handles are listed (in
        rank order; the same list and uuid on all of them). Needs enable_reconfigure=True."""
        return self._c.reconfigure(str(uuid), list(init_handles), _seconds(timeout))

    def abort(self):
        self._c.abort()

    def is_aborted(self):
        return self._c.is_aborted()

    def is_abort_supported(self):
        return True

    def set_timeout(self, timeout):
        self._c.set_timeout(_seconds(timeout))

    def finalize(self):
        self._c.finalize()

    # Hooks: each returns a handle with remove().
    def register_pre_hook(self, hook):
        """hook(op_name, seq, inputs, outputs, failed) before each op, on the comm's thread."""
        return _Handle(self._c, self._c.register_pre_hook(hook))

    def register_post_hook(self, hook):
        return _Handle(self._c, self._c.register_post_hook(hook))

    def register_abort_hook(self, hook):
        return _Handle(self._c, self._c.register_abort_hook(hook))

    # Flight recorder
    def dump_flight_recorder(self, include_completed=True):
        import json
        return json.loads(self._c.dump_flight_recorder(include_completed))

    def dump_flight_recorder_file(self, dir, include_completed=True):
        return self._c.dump_flight_recorder_file(str(dir), include_completed)

    def __repr__(self):
        return f"TorchComm(name={self.get_name()!r}, backend={self.get_backend()!r}, rank={self.get_rank()}, size={self.get_size()})"


class _Handle:
    def __init__(self, comm, hook_id):
        self._comm, self._id = comm, hook_id

    def remove(self):
        self._comm.remove_hook(self._id)


class BatchSendRecv:
    """torchcomms' batch: .send(t, dst), .recv(t, src), then .issue(async_op)."""

    def __init__(self, comm):
        self._comm, self._ops = comm, []

    def send(self, tensor, dst):
        self._ops.append((True, tensor, dst))
        return self

    def recv(self, tensor, src):
        self._ops.append((False, tensor, src))
        return self

    def issue(self, async_op=False, *, hints=None, timeout=None):
        ops, self._ops = self._ops, []
        return self._comm._c.batch_p2p(ops, async_op, _seconds(timeout), hints)


def new_comm(backend, device="cpu", *, abort_process_on_timeout_or_error=None, timeout=None, store=None,
             name=None, enable_reconfigure=False, hints=None, rank=None, size=None):
    """A communicator on `backend` ("gloo" or "mpi"). Rendezvous through `store` (rank and size
    from the arguments or RANK / WORLD_SIZE), else env:// (MASTER_ADDR, MASTER_PORT); "mpi" takes
    both from MPI. timeout defaults to TORCHCOMM_TIMEOUT_SECONDS (600 s) and
    abort_process_on_timeout_or_error to TORCHCOMM_ABORT_ON_ERROR (true)."""
    dev = str(device)
    impl = _d.new_comm(backend, dev, abort_process_on_timeout_or_error, _seconds(timeout), store, name,
                       enable_reconfigure, hints, -1 if rank is None else rank, -1 if size is None else size)
    return TorchComm(impl)
