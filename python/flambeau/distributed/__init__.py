"""flambeau.distributed: torch.distributed's API on flambeau's communicators (Gloo, MPI).

init_process_group / destroy_process_group, new_group, the collectives with torch's
signatures (ranks in src/dst arguments are global ranks, as in torch), the 2.13 names
all_gather_single / reduce_scatter_single, and torchcomms' new_comm for direct use.
"""
import atexit
import datetime
import os
import warnings

from flambeau._C import _distributed as _d
from flambeau.distributed.comms import (DistBackendError, DistError, DistNetworkError, DistStoreError,
                                        ReduceOp, RedOpType, TorchComm, Work, new_comm)
from flambeau.distributed.device_mesh import DeviceMesh, init_device_mesh

Store = _d.Store
TCPStore = _d.TCPStore
FileStore = _d.FileStore
HashStore = _d.HashStore
PrefixStore = _d.PrefixStore

__all__ = [
    "Backend", "DeviceMesh", "DistBackendError", "DistError", "DistNetworkError", "DistStoreError", "FileStore",
    "GroupMember", "HashStore", "P2POp", "PrefixStore", "ProcessGroup", "ReduceOp", "RedOpType", "Store",
    "TCPStore", "TorchComm", "Work", "all_gather", "all_gather_into_tensor", "all_gather_single", "all_reduce",
    "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast", "destroy_process_group",
    "gather", "get_backend", "get_global_rank", "get_group_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "init_device_mesh", "init_process_group", "irecv", "is_available", "is_gloo_available",
    "is_initialized", "is_mpi_available", "isend", "new_comm", "new_group", "recv", "reduce", "reduce_scatter",
    "reduce_scatter_single", "reduce_scatter_tensor", "scatter", "send",
]

default_pg_timeout = datetime.timedelta(minutes=30)


class Backend(str):
    """Backend names, as torch.distributed.Backend."""
    GLOO = "gloo"
    MPI = "mpi"

    def __new__(cls, name):
        value = str(name).lower()
        if value not in (cls.GLOO, cls.MPI) and not _d.is_backend_available(value):
            raise ValueError(f"[init_process_group] unknown backend '{name}' (known: gloo, mpi)")
        return str.__new__(cls, value)


class ProcessGroup:
    """A group of ranks with its communicator. rank() and size() are within the group."""

    def __init__(self, comm, name):
        self._comm = comm
        self.group_name = name

    def rank(self):
        return self._comm.get_rank()

    def size(self):
        return self._comm.get_size()

    def name(self):
        return self._comm.get_backend()

    @property
    def comm(self):
        return self._comm

    def __repr__(self):
        return f"ProcessGroup(name={self.group_name!r}, rank={self.rank()}, size={self.size()})"


class GroupMember:
    WORLD = None
    NON_GROUP_MEMBER = object()


class _State:
    world = None
    groups = []
    group_count = 0
    warned = set()


def is_available():
    return True


def is_gloo_available():
    return _d.is_backend_available("gloo")


def is_mpi_available():
    return _d.is_backend_available("mpi")


def is_initialized():
    return _State.world is not None


def _store_from_init_method(init_method, rank, world_size, timeout):
    if init_method is None or init_method == "env://":
        addr = os.environ.get("MASTER_ADDR")
        port = os.environ.get("MASTER_PORT")
        if not addr or not port:
            raise ValueError("[init_process_group] env:// needs MASTER_ADDR and MASTER_PORT in the environment")
        return TCPStore(addr, int(port), world_size, rank == 0, timeout, wait_for_workers=False)
    if init_method.startswith("tcp://"):
        hostport = init_method[len("tcp://"):].split("?")[0]
        host, _, port = hostport.rpartition(":")
        return TCPStore(host.strip("[]"), int(port), world_size, rank == 0, timeout, wait_for_workers=False)
    if init_method.startswith("file://"):
        return FileStore(init_method[len("file://"):], world_size)
    raise ValueError(f"[init_process_group] unsupported init_method '{init_method}' (env://, tcp://, file://)")


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Joins the default process group (torch's signature). backend: "gloo" (default) or "mpi";
    rendezvous through store, or init_method env:// (default), tcp://host:port or file://path."""
    if _State.world is not None:
        raise RuntimeError("[init_process_group] the default process group is already initialized")
    backend = Backend(backend or "gloo")
    timeout = timeout or default_pg_timeout
    if backend == Backend.MPI:
        comm = new_comm("mpi", timeout=timeout, name="world", abort_process_on_timeout_or_error=False)
    else:
        if rank is None or rank < 0:
            rank = int(os.environ.get("RANK", -1))
        if world_size is None or world_size < 0:
            world_size = int(os.environ.get("WORLD_SIZE", -1))
        if rank < 0 or world_size <= 0:
            raise ValueError(f"[init_process_group] rank {rank} and world_size {world_size}: pass rank= and "
                             "world_size= or set RANK and WORLD_SIZE")
        if store is None:
            store = _store_from_init_method(init_method, rank, world_size, timeout)
        comm = new_comm(str(backend), timeout=timeout, store=store, name="world", rank=rank, size=world_size,
                        abort_process_on_timeout_or_error=False, hints=pg_options)
    _State.world = ProcessGroup(comm, group_name or "default_pg")
    GroupMember.WORLD = _State.world


def destroy_process_group(group=None):
    """Finalizes a group's communicator; without an argument, every group and the default one."""
    if group is None or group is _State.world:
        for g in _State.groups:
            g.comm.finalize()
        if _State.world is not None:
            _State.world.comm.finalize()
        _State.world, _State.groups, _State.group_count = None, [], 0
        GroupMember.WORLD = None
    else:
        group.comm.finalize()
        _State.groups = [g for g in _State.groups if g is not group]


atexit.register(destroy_process_group)


def _world():
    if _State.world is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to call "
                           "init_process_group.")
    return _State.world


def _group(group):
    if group is GroupMember.NON_GROUP_MEMBER:
        raise ValueError("this rank is not a member of the group")
    return _world() if group is None else group


def get_rank(group=None):
    if group is None and _State.world is None:
        return -1
    g = _group(group)
    return g.rank()


def get_world_size(group=None):
    if group is None and _State.world is None:
        return -1
    return _group(group).size()


def get_backend(group=None):
    return _group(group).comm.get_backend()


def get_process_group_ranks(group):
    return _group(group).comm.global_ranks


def get_global_rank(group, group_rank):
    ranks = get_process_group_ranks(group)
    if not 0 <= group_rank < len(ranks):
        raise ValueError(f"[get_global_rank] group rank {group_rank} is out of range for a group of {len(ranks)}")
    return ranks[group_rank]


def get_group_rank(group, global_rank):
    ranks = get_process_group_ranks(group)
    if global_rank not in ranks:
        raise ValueError(f"[get_group_rank] global rank {global_rank} is not part of the group")
    return ranks.index(global_rank)


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None):
    """A group over `ranks` (global ranks; every rank of the world calls it). A rank outside it
    gets GroupMember.NON_GROUP_MEMBER."""
    world = _world()
    ranks = sorted(ranks) if ranks is not None else list(range(world.size()))
    _State.group_count += 1
    name = group_desc or f"group{_State.group_count}"
    me = world.rank()
    comm = world.comm.split(ranks if me in ranks else [], name, hints=pg_options, timeout=timeout)
    if comm is None:
        return GroupMember.NON_GROUP_MEMBER
    g = ProcessGroup(comm, name)
    _State.groups.append(g)
    return g


def _local(group, global_rank, what):
    g = _group(group)
    if group is None:
        return g, global_rank
    ranks = g.comm.global_ranks
    if global_rank not in ranks:
        raise ValueError(f"[{what}] global rank {global_rank} is not part of the group (ranks {ranks})")
    return g, ranks.index(global_rank)


def _result(work, async_op):
    return work if async_op else None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    return _result(_group(group).comm.all_reduce(tensor, op, async_op), async_op)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    g, root = (_group(group), group_src) if group_src is not None else _local(group, src, "broadcast")
    return _result(g.comm.broadcast(tensor, root, async_op), async_op)


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    g, root = (_group(group), group_dst) if group_dst is not None else _local(group, dst, "reduce")
    return _result(g.comm.reduce(tensor, root, op, async_op), async_op)


def all_gather(tensor_list, tensor, group=None, async_op=False):
    return _result(_group(group).comm.all_gather(tensor_list, tensor, async_op), async_op)


def all_gather_single(output_tensor, input_tensor, group=None, async_op=False):
    """Gathers every rank's input_tensor into output_tensor (world_size x input, rank order)."""
    return _result(_group(group).comm.all_gather_single(output_tensor, input_tensor, async_op), async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    return _result(_group(group).comm.reduce_scatter(output, input_list, op, async_op), async_op)


def reduce_scatter_single(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduces input (world_size x output) across ranks; rank r gets block r in output."""
    return _result(_group(group).comm.reduce_scatter_single(output, input, op, async_op), async_op)


def _warn_renamed(old, new):
    if old not in _State.warned:
        _State.warned.add(old)
        warnings.warn(f"flambeau.distributed.{old} is deprecated, use {new} (PyTorch 2.13's name)",
                      FutureWarning, stacklevel=3)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Deprecated name of all_gather_single."""
    _warn_renamed("all_gather_into_tensor", "all_gather_single")
    return all_gather_single(output_tensor, input_tensor, group, async_op)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Deprecated name of reduce_scatter_single."""
    _warn_renamed("reduce_scatter_tensor", "reduce_scatter_single")
    return reduce_scatter_single(output, input, op, group, async_op)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                      async_op=False):
    return _result(_group(group).comm.all_to_all_v_single(output, input, output_split_sizes, input_split_sizes,
                                                          async_op), async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    return _result(_group(group).comm.all_to_all(output_tensor_list, input_tensor_list, async_op), async_op)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    g, root = (_group(group), group_dst) if group_dst is not None else _local(group, 0 if dst is None else dst,
                                                                                "gather")
    return _result(g.comm.gather(gather_list if g.rank() == root else [], tensor, root, async_op), async_op)


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    g, root = (_group(group), group_src) if group_src is not None else _local(group, 0 if src is None else src,
                                                                                "scatter")
    return _result(g.comm.scatter(tensor, scatter_list if g.rank() == root else [], root, async_op), async_op)


def barrier(group=None, async_op=False, device_ids=None):
    return _result(_group(group).comm.barrier(async_op), async_op)


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    g, peer = (_group(group), group_dst) if group_dst is not None else _local(group, dst, "send")
    g.comm.send(tensor, peer, False)


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receives into tensor from src (a source is required: there is no receive-from-any);
    returns src."""
    if src is None and group_src is None:
        raise ValueError("[recv] src is required (receiving from any source is not supported)")
    g, peer = (_group(group), group_src) if group_src is not None else _local(group, src, "recv")
    g.comm.recv(tensor, peer, False)
    return src if src is not None else peer


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    g, peer = (_group(group), group_dst) if group_dst is not None else _local(group, dst, "isend")
    return g.comm.send(tensor, peer, True)


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    if src is None and group_src is None:
        raise ValueError("[irecv] src is required (receiving from any source is not supported)")
    g, peer = (_group(group), group_src) if group_src is not None else _local(group, src, "irecv")
    return g.comm.recv(tensor, peer, True)


class P2POp:
    """One point-to-point op for batch_isend_irecv: P2POp(isend, tensor, peer) or irecv."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op not in (isend, irecv):
            raise ValueError("[P2POp] op must be flambeau.distributed.isend or irecv")
        self.op, self.tensor, self.peer, self.group, self.tag, self.group_peer = op, tensor, peer, group, tag, group_peer


def batch_isend_irecv(p2p_op_list):
    """Posts all the sends and receives at once; returns a list with the batch's Work."""
    if not p2p_op_list:
        raise ValueError("[batch_isend_irecv] the list of P2P ops is empty")
    group = p2p_op_list[0].group
    batch = []
    for p in p2p_op_list:
        if p.group is not group:
            raise ValueError("[batch_isend_irecv] all ops of a batch must use the same group")
        g, peer = (_group(group), p.group_peer) if p.group_peer is not None else _local(group, p.peer,
                                                                                         "batch_isend_irecv")
        batch.append((p.op is isend, p.tensor, peer))
    return [_group(group).comm._c.batch_p2p(batch, True)]
