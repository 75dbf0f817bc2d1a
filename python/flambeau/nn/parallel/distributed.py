"""flambeau.nn.parallel.DistributedDataParallel, torch's design over flambeau's C++ Reducer
(flambeau/distributed/ddp.h): parameters and buffers broadcast from rank 0 at
construction; gradients averaged over the group in buckets (reverse parameter order, the
first 1 MiB, then bucket_cap_mb) whose all_reduce starts while backward is still running;
the buckets rebuilt after the first iteration in the order gradients became ready.
gradient_as_bucket_view, no_sync(), static_graph, find_unused_parameters and
register_comm_hook(state, hook) as torch."""
import contextlib

from flambeau._C import _distributed as _d

from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

_MIB = 1024 * 1024


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 init_sync=True, process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 check_reduction=False, gradient_as_bucket_view=False, static_graph=False,
                 delay_all_reduce_named_params=None, param_to_hook_all_reduce=None, mixed_precision=None,
                 device_mesh=None):
        super().__init__()
        import flambeau.distributed as dist
        if device_ids not in (None, [], ["cpu"]) or output_device not in (None, "cpu"):
            raise ValueError(f"[DistributedDataParallel] CPU modules take no device_ids/output_device, got "
                             f"{device_ids}/{output_device}")
        if process_group is not None and device_mesh is not None:
            raise ValueError("[DistributedDataParallel] pass process_group or device_mesh, not both")
        if mixed_precision is not None or delay_all_reduce_named_params is not None:
            raise NotImplementedError("[DistributedDataParallel] mixed_precision and "
                                      "delay_all_reduce_named_params are not supported")
        if device_mesh is not None:
            if device_mesh.ndim != 1:
                raise ValueError(f"[DistributedDataParallel] needs a 1-D device mesh, got {device_mesh.ndim}-D")
            process_group = device_mesh.get_group()
        if process_group is dist.GroupMember.NON_GROUP_MEMBER:
            raise ValueError("[DistributedDataParallel] this rank is not a member of process_group")
        if not isinstance(module, Module):
            raise TypeError(f"[DistributedDataParallel] expected a flambeau.nn.Module, got {type(module).__name__}")
        self.module = module
        self.process_group = process_group if process_group is not None else dist._world()
        self.broadcast_buffers = broadcast_buffers
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.find_unused_parameters = find_unused_parameters
        comm = self.process_group.comm
        if init_sync:
            for t in list(module.parameters()) + list(module.buffers()):
                comm.broadcast(t, 0)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        cap = 25 * _MIB if bucket_cap_mb is None else int(bucket_cap_mb * _MIB)
        self.bucket_bytes_cap = cap
        self._reducer = _d.Reducer([p for _, p in named], comm._c, cap, min(_MIB, cap), gradient_as_bucket_view,
                                   find_unused_parameters, static_graph, [n for n, _ in named])
        self._comm_hook = None

    @property
    def reducer(self):
        return self._reducer

    def forward(self, *inputs, **kwargs):
        if self.broadcast_buffers and self._reducer.require_sync():
            comm = self.process_group.comm
            for b in self.module.buffers():
                comm.broadcast(b, 0)
        self._reducer.prepare_for_forward()
        return self.module(*inputs, **kwargs)

    @property
    def require_backward_grad_sync(self):
        return self._reducer.require_sync()

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients accumulate locally inside; the first backward after it reduces them all."""
        old = self._reducer.require_sync()
        self._reducer.set_require_sync(False)
        try:
            yield
        finally:
            self._reducer.set_require_sync(old)

    def register_comm_hook(self, state, hook):
        """hook(state, bucket) -> Future of the reduced flat gradient (a GradBucket: index(),
        is_last(), buffer(), gradients(), parameters()). Once, before the first backward."""
        if not callable(hook):
            raise TypeError(f"[register_comm_hook] hook must be callable, got {type(hook).__name__}")
        if self._comm_hook is not None:
            raise RuntimeError("[register_comm_hook] a communication hook is already registered")
        self._comm_hook = hook
        from flambeau.distributed.algorithms.ddp_comm_hooks import default_hooks
        builtin = {default_hooks.allreduce_hook: "allreduce", default_hooks.bf16_compress_hook: "bf16_compress"}
        if hook in builtin and state in (None, self.process_group):  # the same hook in C++, no GIL
            self._reducer.register_builtin_comm_hook(builtin[hook])
        else:
            self._reducer.register_comm_hook(lambda bucket: hook(state, bucket))

    def _get_ddp_logging_data(self):
        return {"bucket_indices": self._reducer.bucket_indices()}
