"""torch's default DDP communication hooks: hook(process_group, bucket) -> Future of the
reduced flat gradient. `process_group` is the state passed to register_comm_hook (None:
the DDP module's group)."""
import flambeau as fl
from flambeau.futures import Future

__all__ = ["allreduce_hook", "bf16_compress_hook", "fp16_compress_hook"]


def _comm(process_group):
    import flambeau.distributed as dist
    return (process_group if process_group is not None else dist._world()).comm


def _allreduce_average(process_group, tensor):
    """Divides by the group's size, then starts all_reduce(SUM); the future gives `tensor`."""
    comm = _comm(process_group)
    tensor.div_(comm.get_size())
    work = comm.all_reduce(tensor, async_op=True)
    return Future(lambda: (work.wait(), tensor)[1])


def allreduce_hook(process_group, bucket):
    """The average over ranks of the bucket, in place (DDP's default)."""
    return _allreduce_average(process_group, bucket.buffer())


def _compress_hook(dtype, process_group, bucket):
    buffer = bucket.buffer()
    compressed = buffer.to(dtype)
    fut = _allreduce_average(process_group, compressed)

    def decompress(f):
        buffer.copy_(f.value())
        return buffer

    return fut.then(decompress)


def bf16_compress_hook(process_group, bucket):
    """The average computed on a bfloat16 copy (half the bytes), cast back."""
    return _compress_hook(fl.bfloat16, process_group, bucket)


def fp16_compress_hook(process_group, bucket):
    """The average computed on a float16 copy, cast back."""
    return _compress_hook(fl.float16, process_group, bucket)
