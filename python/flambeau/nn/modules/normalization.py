"""BatchNorm1d/2d/3d, InstanceNorm1d/2d/3d, GroupNorm and LocalResponseNorm, as torch.nn's.
Each C++ layer (src/flambeau/nn/modules_norm.cpp) makes the parameters and buffers; forward
follows the same rules as its forward and calls the same functional."""
from .. import functional as F
from .layers import _build
from .module import Module


class _NormBase(Module):
    _dims = 2

    def __init__(self, num_features, eps, momentum, affine, track_running_stats, dtype, bias):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _build(self, type(self).__name__, num_features=num_features, eps=eps, momentum=momentum, affine=affine,
               track_running_stats=track_running_stats, dtype=dtype, bias=bias)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True, dtype=None, *,
                 bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype, bias)

    def _check_input_dim(self, input):
        n = self._dims
        ok = input.dim() in (2, 3) if n == 1 else input.dim() == n + 2
        if not ok:
            want = "2D or 3D" if n == 1 else f"{n + 2}D"
            raise ValueError(f"[{type(self).__name__}] expected {want} input (got {input.dim()}D input of shape "
                             f"{tuple(input.shape)})")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        use_batch = self.training or self.running_mean is None
        pass_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if pass_running else None,
                            self.running_var if pass_running else None, self.weight, self.bias, use_batch, factor,
                            self.eps)


class BatchNorm1d(_BatchNorm):
    _dims = 1


class BatchNorm2d(_BatchNorm):
    _dims = 2


class BatchNorm3d(_BatchNorm):
    _dims = 3


class _InstanceNorm(_NormBase):
    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=False, track_running_stats=False, dtype=None, *,
                 bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype, bias)

    def forward(self, input):
        n = self._dims
        if input.dim() not in (n + 1, n + 2):
            raise ValueError(f"[{type(self).__name__}] expected {n + 1}D (unbatched) or {n + 2}D (batched) input, "
                             f"got shape {tuple(input.shape)}")
        unbatched = input.dim() == n + 1
        features = input.shape[0 if unbatched else 1]
        if self.affine and features != self.num_features:
            raise ValueError(f"[{type(self).__name__}] expected input's size at dim={0 if unbatched else 1} to match "
                             f"num_features ({self.num_features}), but got: {features} (input shape "
                             f"{tuple(input.shape)})")
        x = input.unsqueeze(0) if unbatched else input
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats, self.momentum, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    _dims = 1


class InstanceNorm2d(_InstanceNorm):
    _dims = 2


class InstanceNorm3d(_InstanceNorm):
    _dims = 3


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, dtype=None, *, bias=True):
        super().__init__()
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _build(self, "GroupNorm", num_groups=num_groups, num_channels=num_channels, eps=eps, affine=affine,
               dtype=dtype, bias=bias)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=0.0001, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k
        _build(self, "LocalResponseNorm", size=size, alpha=alpha, beta=beta, k=k)

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
