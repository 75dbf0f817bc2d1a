"""fully_shard and its parameter groups (see flambeau.distributed.fsdp)."""
import dataclasses

import flambeau as fl
from flambeau import _C
from flambeau._C import _distributed as _d
from flambeau.nn.modules.module import Module, Parameter


@dataclasses.dataclass(frozen=True)
class MixedPrecisionPolicy:
    """param_dtype: of the unsharded parameters, the all-gather and the compute (the shards
    and the optimizer keep theirs); reduce_dtype: of the reduce-scatter; output_dtype: cast
    of floating outputs; cast_forward_inputs: floating inputs cast to param_dtype."""
    param_dtype: object = None
    reduce_dtype: object = None
    output_dtype: object = None
    cast_forward_inputs: bool = True


class Shard:
    """The placement of a tensor cut on dimension `dim` over a mesh dimension."""

    def __init__(self, dim):
        self.dim = dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class ShardedParameter(Parameter):
    """This rank's rows of a parameter sharded on dim 0 (FSDP2's DTensor with Shard(0))."""

    def to_local(self):
        return self.detach()

    def full_tensor(self):
        """The whole parameter (an all-gather: every rank of the group calls it)."""
        return self._fsdp_group.full_tensor(self._fsdp_index)

    @property
    def placements(self):
        return (Shard(0),)

    @property
    def device_mesh(self):
        return self._fsdp_group.mesh

    def _shard_rows(self):
        """(first row, row count) of the whole parameter held here."""
        info = self._fsdp_group.infos[self._fsdp_index]
        return info.first_row, info.rows


class UnshardHandle:
    def __init__(self, group):
        self._group = group

    def wait(self):
        self._group.unshard()


class _Info:
    """One parameter of a group: where it lives, how it is cut, its two forms."""

    def __init__(self, module, name, param, rank, world, offset):
        self.module, self.name = module, name
        self.shape = tuple(param.shape) if param.dim() else (1,)
        self.dim0 = self.shape[0]
        self.row = param.numel() // self.dim0 if self.dim0 else 0
        self.chunk = -(-self.dim0 // world)  # rows per rank, the last ranks may hold fewer
        self.padded = self.chunk * self.row
        self.offset = offset
        self.first_row = min(rank * self.chunk, self.dim0)
        self.rows = max(0, min(self.chunk, self.dim0 - self.first_row))
        self.requires_grad = param.requires_grad
        self.orig_shape = tuple(param.shape)

    def rows_of(self, r):
        return max(0, min(self.chunk, self.dim0 - r * self.chunk))


_running_root = [None]  # the root group whose forward is running
_reduce_inputs = []  # [work, input] of reduce-scatters in flight: inputs dropped once done
_rs_groups = {}  # ranks -> the process group reduce-scatters run on when separate
_post_forward_comms = {}  # (ranks, k) -> this rank's communicator of k consecutive ranks


def _post_forward_comm(comm, k):
    """For reshard_after_forward=k: the communicator of this rank's k consecutive ranks (the
    rows of the group's ranks viewed as [N / k, k], as torch's post-forward mesh). Every rank
    makes all N / k of them, one split each."""
    key = (tuple(comm.global_ranks), k)
    if key not in _post_forward_comms:
        rank, mine = comm.get_rank(), None
        for first in range(0, comm.get_size(), k):
            members = list(range(first, first + k))
            c = comm.split(members if rank in members else [], f"fsdp.post_forward.{k}.{first}")
            mine = c if c is not None else mine
        _post_forward_comms[key] = mine
    return _post_forward_comms[key]


def _reshard_setting(value, world):
    """reshard_after_forward as True, False, None or an int k (1 < k < world, dividing it),
    as torch reads it: k = 1 is False (with a warning), k = world is True."""
    if value is None or isinstance(value, bool):
        return value
    if value < 1 or value > world or world % value:
        raise ValueError(f"[fully_shard] reshard_after_forward as an int must divide the shard group's size {world}, "
                         f"got {value}")
    if value == 1:
        import warnings
        warnings.warn("[fully_shard] reshard_after_forward=1 (int) reshards to one rank: the same as False")
        return False
    return True if value == world else value


class _Group:
    """The parameters one fully_shard call owns: one all-gather and one reduce-scatter."""

    def __init__(self, module, params, process_group, mesh, reshard_after_forward, mp):
        self.module, self.pg, self.mesh, self.mp = module, process_group, mesh, mp
        self.comm = process_group.comm
        self.rs_comm = self.comm
        self.rank, self.world = self.comm.get_rank(), self.comm.get_size()
        dtypes = {p.dtype for _, _, p in params}
        if len(dtypes) > 1:
            raise TypeError(f"[fully_shard] the parameters of one call must share a dtype, got {sorted(map(str, dtypes))}")
        self.dtype = dtypes.pop() if dtypes else fl.float32
        self.compute_dtype = mp.param_dtype or self.dtype
        self.reshard_after_forward = _reshard_setting(reshard_after_forward, self.world)
        self.post_forward = None  # (communicator, this rank's 1/k of the gathered buffer) after an int reshard
        self.post_comm = None
        if self.reshard_after_forward not in (None, True, False):
            self.post_comm = _post_forward_comm(self.comm, self.reshard_after_forward)
        self.reshard_after_backward = True
        self.requires_grad_sync = True
        self.forward_prefetch = self.backward_prefetch = None  # explicit lists of groups
        self.is_root = None
        self.order = []  # a root's groups in the order of its first forward (for prefetching)
        self.root = None
        self.infos, offset = [], 0
        with fl.no_grad():
            for module_, name, p in params:
                info = _Info(module_, name, p, self.rank, self.world, offset)
                offset += info.padded
                full = p.detach().reshape(info.shape)
                shard = ShardedParameter(full[info.first_row:info.first_row + info.rows].clone())
                shard.requires_grad_(p.requires_grad)
                shard._fsdp_group, shard._fsdp_index = self, len(self.infos)
                info.sharded = shard
                unsharded = Parameter(fl.empty(info.orig_shape, dtype=self.compute_dtype))
                unsharded.requires_grad_(p.requires_grad)
                _d._fsdp_release_memory(unsharded)
                info.unsharded = unsharded
                if p.requires_grad:
                    unsharded.register_post_accumulate_grad_hook(self._grad_ready)
                module_._parameters[name] = shard
                self.infos.append(info)
        self.total = offset
        self.needs_grads = sum(i.requires_grad for i in self.infos)
        self.state = "sharded"
        self.gather = None  # (work, output) of an all-gather in flight
        self.pending_rs = None  # (work, output, input) of a reduce-scatter in flight
        self.ready = 0
        self.callback_queued = False
        self.backward_seen = False

    # ---- unshard / reshard --------------------------------------------------------------
    def start_gather(self, backward=False):
        """An async all-gather of the whole parameters: in backward from the slices an int
        reshard_after_forward kept (over k ranks), otherwise from the shards."""
        if self.state == "unsharded" or self.gather is not None:
            return
        if not backward:
            self.post_forward = None
        with fl.no_grad():
            out = fl.empty(self.world * self.total, dtype=self.compute_dtype)
            if self.post_forward is not None:  # from the k ranks' slices kept after forward
                comm, inp = self.post_forward
                self.post_forward = None
                self.gather = (comm.all_gather_single(out, inp, async_op=True), out, inp)
                return
            inp = fl.zeros(self.total, dtype=self.compute_dtype)
            for i in self.infos:
                if i.rows:
                    inp[i.offset:i.offset + i.rows * i.row].copy_(i.sharded.detach().reshape(-1))
            self.gather = (self.comm.all_gather_single(out, inp, async_op=True), out, inp)

    def unshard(self, backward=False):
        if self.state == "unsharded":
            return
        self.start_gather(backward)
        work, out, _ = self.gather
        work.wait()
        self.gather = None
        for i in self.infos:
            u = i.unsharded
            _d._fsdp_allocate_memory(u)
            flat = u.detach().reshape(-1)
            for r in range(self.world):
                n = i.rows_of(r) * i.row
                if n:
                    at = r * self.total + i.offset
                    _d._fsdp_fill(flat[r * i.chunk * i.row:r * i.chunk * i.row + n], out[at:at + n])
            i.module._parameters[i.name] = u
        self.state = "unsharded"

    def reshard(self):
        if self.state == "sharded":
            return
        self.post_forward = None
        for i in self.infos:
            i.module._parameters[i.name] = i.sharded
            _d._fsdp_release_memory(i.unsharded)
        self.state = "sharded"

    def reshard_to(self, k):
        """Reshards keeping 1/k of the gathered buffer: the parts of ranks [j N/k, (j+1) N/k)
        for this rank's place j among its k consecutive ranks, whose all-gather rebuilds it."""
        if self.state == "sharded":
            return
        per = self.world // k
        first = (self.rank % k) * per
        with fl.no_grad():
            piece = fl.zeros(per * self.total, dtype=self.compute_dtype)
            for i in self.infos:
                flat = i.unsharded.detach().reshape(-1)
                for r in range(first, first + per):
                    n = i.rows_of(r) * i.row
                    if n:
                        at = (r - first) * self.total + i.offset
                        piece[at:at + n].copy_(flat[r * i.chunk * i.row:r * i.chunk * i.row + n])
        self.reshard()
        self.post_forward = (self.post_comm, piece)

    def full_tensor(self, index):
        i = self.infos[index]
        with fl.no_grad():
            inp = fl.zeros(i.padded, dtype=self.dtype)
            if i.rows:
                inp[:i.rows * i.row].copy_(i.sharded.detach().reshape(-1))
            out = fl.empty(self.world * i.padded, dtype=self.dtype)
            self.comm.all_gather_single(out, inp)
            rows = [out[r * i.padded:r * i.padded + i.rows_of(r) * i.row] for r in range(self.world)]
            return fl.cat(rows).reshape(i.orig_shape)

    # ---- forward ------------------------------------------------------------------------
    def pre_forward(self, module, args, kwargs):
        if self.is_root is None:  # the first forward decides: a group not inside another's is a root
            self.is_root = _running_root[0] is None
            self.root = self if self.is_root else _running_root[0]
            if self.reshard_after_forward is None:
                self.reshard_after_forward = not self.is_root
            self.root.order.append(self)
        if self.is_root:
            _running_root[0] = self
        self.unshard()
        for g in self._next(self.forward_prefetch, +1):
            g.start_gather()
        if self.mp.param_dtype is not None and self.mp.cast_forward_inputs:
            cast = _caster(self.mp.param_dtype)
            args = tuple(cast(a) for a in args)
            kwargs = {k: cast(v) for k, v in kwargs.items()}
        return args, kwargs

    def post_forward_hook(self, module, args, output):
        if self.is_root:
            _running_root[0] = None
        if self.reshard_after_forward is True or (self.reshard_after_forward and not _C.is_grad_enabled()):
            self.reshard()  # (no backward will gather it again: nothing kept)
        elif self.reshard_after_forward:
            self.reshard_to(self.reshard_after_forward)
        if self.mp.output_dtype is not None:
            output = _map_tensors(output, _caster(self.mp.output_dtype))
        if _C.is_grad_enabled():
            for t in _tensors(output):
                if t.requires_grad:
                    t.register_hook(self._pre_backward)
        return output

    def _next(self, explicit, step):
        """The groups to gather ahead: the explicit list, else the neighbour in the root's
        forward order (the next one in forward, the previous one in backward)."""
        if explicit is not None:
            return explicit
        order = self.root.order if self.root is not None else []
        k = order.index(self) + step if self in order else -1
        return [order[k]] if 0 <= k < len(order) else []

    # ---- backward -----------------------------------------------------------------------
    def _pre_backward(self, grad):
        if not self.backward_seen:
            self.backward_seen = True
            self._queue_end()
            self.unshard(backward=True)
            for g in self._next(self.backward_prefetch, -1):
                g.start_gather(backward=True)
        return None

    def _queue_end(self):
        if not self.callback_queued:
            self.callback_queued = True
            _C._queue_callback(self._end_of_backward)

    def _grad_ready(self, unsharded):
        self._queue_end()
        self.ready += 1
        if self.ready == self.needs_grads and self.requires_grad_sync:
            self._start_reduce_scatter()

    def _start_reduce_scatter(self):
        if self.pending_rs is not None:
            return
        _reduce_inputs[:] = [e for e in _reduce_inputs if not e[0].is_completed()]  # free finished inputs
        dtype = self.mp.reduce_dtype or self.compute_dtype
        with fl.no_grad():
            inp = fl.zeros(self.world * self.total, dtype=dtype)
            for i in self.infos:
                g = i.unsharded.grad
                if g is None:
                    continue
                flat = g.detach().reshape(-1)
                for r in range(self.world):
                    n = i.rows_of(r) * i.row
                    if n:
                        at = r * self.total + i.offset
                        inp[at:at + n].copy_(flat[r * i.chunk * i.row:r * i.chunk * i.row + n])
                i.unsharded.grad = None
            inp.div_(self.world)  # an average, divided first (as DDP's default hook)
            out = fl.empty(self.total, dtype=dtype)
            work = self.rs_comm.reduce_scatter_single(out, inp, async_op=True)
            self.pending_rs = (work, out)
            _reduce_inputs.append((work, inp))  # kept alive until the reduce-scatter is done

    def _end_of_backward(self):
        self.callback_queued = False
        self.backward_seen = False
        self.ready = 0
        if self.requires_grad_sync:
            self._start_reduce_scatter()  # parameters that got no gradient count as zero
            work, out = self.pending_rs
            self.pending_rs = None
            work.wait()
            _reduce_inputs[:] = [e for e in _reduce_inputs if not e[0].is_completed()]
            with fl.no_grad():
                for i in self.infos:
                    if not i.requires_grad:
                        continue
                    piece = out[i.offset:i.offset + i.rows * i.row].reshape(i.sharded.shape).to(self.dtype)
                    if i.sharded.grad is None:
                        i.sharded.grad = piece.clone()
                    else:
                        i.sharded.grad.add_(piece)
        if self.reshard_after_backward:
            self.reshard()


def _tensors(x):
    if isinstance(x, fl.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _map_tensors(x, fn):
    if isinstance(x, fl.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(v, fn) for v in x)
    if isinstance(x, dict):
        return {k: _map_tensors(v, fn) for k, v in x.items()}
    return x


def _caster(dtype):
    return lambda t: t.to(dtype) if isinstance(t, fl.Tensor) and t.is_floating_point() else t


class FSDPModule:
    """Methods fully_shard adds to a module (its class becomes FSDP<Class>)."""

    def _fsdp_modules(self, recurse):
        return [m for m in (self.modules() if recurse else [self]) if isinstance(m, FSDPModule)]

    def unshard(self, async_op=False):
        g = self._fsdp_group
        if async_op:
            g.start_gather()
            return UnshardHandle(g)
        g.unshard()
        return None

    def reshard(self):
        self._fsdp_group.reshard()

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """Module.state_dict with the ShardedParameters themselves as values (torch's FSDP2
        gives DTensors), so that flambeau.distributed.checkpoint saves them whole."""
        return super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=True)

    def set_requires_gradient_sync(self, requires_gradient_sync, *, recurse=True):
        for m in self._fsdp_modules(recurse):
            m._fsdp_group.requires_grad_sync = bool(requires_gradient_sync)

    def set_reshard_after_forward(self, reshard_after_forward, recurse=True):
        for m in self._fsdp_modules(recurse):
            m._fsdp_group.reshard_after_forward = bool(reshard_after_forward)

    def set_reshard_after_backward(self, reshard_after_backward, *, recurse=True):
        for m in self._fsdp_modules(recurse):
            m._fsdp_group.reshard_after_backward = bool(reshard_after_backward)

    def set_modules_to_forward_prefetch(self, modules):
        self._fsdp_group.forward_prefetch = [_group_of(m, "set_modules_to_forward_prefetch") for m in modules]

    def set_modules_to_backward_prefetch(self, modules):
        self._fsdp_group.backward_prefetch = [_group_of(m, "set_modules_to_backward_prefetch") for m in modules]

    def set_separate_reduce_scatter_group(self, enable=True, *, recurse=True):
        """Reduce-scatters on their own communicator (one per set of ranks), so that they
        run while the next all-gathers do; enable=False goes back to the shared one."""
        import flambeau.distributed as dist
        for m in self._fsdp_modules(recurse):
            g = m._fsdp_group
            if not enable:
                g.rs_comm = g.comm
                continue
            ranks = tuple(g.comm.global_ranks)
            if ranks not in _rs_groups:
                _rs_groups[ranks] = dist.new_group(list(ranks))
            g.rs_comm = _rs_groups[ranks].comm


def _group_of(module, what):
    if not isinstance(module, FSDPModule):
        raise TypeError(f"[{what}] expects modules that fully_shard was applied to, got {type(module).__name__}")
    return module._fsdp_group


_fsdp_classes = {}


def fully_shard(module, *, mesh=None, reshard_after_forward=None, shard_placement_fn=None,
                mp_policy=MixedPrecisionPolicy(), offload_policy=None, ignored_params=None):
    """Shards module's own parameters (see the module docstring); returns the module, whose
    class becomes FSDP<Class> with FSDPModule's methods. A list applies to each."""
    import flambeau.distributed as dist
    if isinstance(module, (list, tuple)):
        return [fully_shard(m, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=mp_policy,
                            ignored_params=ignored_params) for m in module]
    if not isinstance(module, Module):
        raise TypeError(f"[fully_shard] expects a flambeau.nn.Module, got {type(module).__name__}")
    if isinstance(module, FSDPModule):
        raise ValueError(f"[fully_shard] fully_shard was already applied to this {type(module).__name__}")
    if shard_placement_fn is not None or offload_policy is not None:
        raise NotImplementedError("[fully_shard] shard_placement_fn and offload_policy are not supported")
    if reshard_after_forward is not None and not isinstance(reshard_after_forward, int):
        raise TypeError(f"[fully_shard] reshard_after_forward must be a bool or an int, got "
                        f"{type(reshard_after_forward).__name__}")
    if mesh is not None and mesh.ndim != 1:
        raise NotImplementedError(f"[fully_shard] needs a 1-D mesh (HSDP is not supported), got {mesh.ndim}-D")
    pg = mesh.get_group() if mesh is not None else dist._world()
    ignored = {id(p) for p in (ignored_params or ())}
    params, seen = [], set()
    for sub in module.modules():
        for name, p in list(sub._parameters.items()):
            # a ShardedParameter belongs to a submodule fully_shard already took
            if p is None or id(p) in seen or id(p) in ignored or isinstance(p, ShardedParameter):
                continue
            seen.add(id(p))
            params.append((sub, name, p))
    group = _Group(module, params, pg, mesh, reshard_after_forward, mp_policy)
    cls = type(module)
    if cls not in _fsdp_classes:
        _fsdp_classes[cls] = type(f"FSDP{cls.__name__}", (FSDPModule, cls), {})
    module.__class__ = _fsdp_classes[cls]
    object.__setattr__(module, "_fsdp_group", group)
    module.register_forward_pre_hook(group.pre_forward, with_kwargs=True)
    module.register_forward_hook(group.post_forward_hook, always_call=True)  # also after an exception
    return module
