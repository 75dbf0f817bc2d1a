"""flambeau.optim: SGD, Adam and AdamW with torch.optim's arguments, update rules,
param_groups and state_dict format. Each step runs in C++, fused over all parameters."""
from .. import _C

Optimizer = _C._optim.Optimizer

__all__ = ["SGD", "Adam", "AdamW", "Optimizer"]


class _ParamGroup(dict):
    """torch's param_groups[0]: writing an option (e.g. group['lr'] = x) updates the optimizer."""

    def __init__(self, opt, values):
        super().__init__(values)
        self._opt = opt

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self._opt._set_group_option(key, value)


class _TorchStyle:
    """param_groups, state_dict and load_state_dict in torch.optim's format (one group)."""

    _BOOLS = ("nesterov", "maximize")

    def _group(self):
        o = self._options()
        g = {k: (bool(v) if k in self._BOOLS else v) for k, v in o.items() if k not in ("beta1", "beta2")}
        if "beta1" in o:
            g["betas"] = (o["beta1"], o["beta2"])
            g["amsgrad"] = False
        g.update(self.__dict__.get("_extra_group", {}))
        g["params"] = list(range(len(self.params)))
        return g

    def _set_group_option(self, key, value):
        if key == "betas":
            self._set_option("beta1", float(value[0]))
            self._set_option("beta2", float(value[1]))
        elif key in self._options():
            self._set_option(key, float(value))
        elif key not in ("params", "amsgrad"):
            self.__dict__.setdefault("_extra_group", {})[key] = value  # e.g. initial_lr

    @property
    def param_groups(self):
        g = self._group()
        g["params"] = list(self.__dict__.get("_param_objects", self.params))
        return [_ParamGroup(self, g)]

    def state_dict(self):
        per_param, _ = self._state()
        return {"state": {i: s for i, s in enumerate(per_param) if s}, "param_groups": [self._group()]}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError("[load_state_dict] the state dict's parameter groups do not match this optimizer's")
        known = self._options()
        options = {}
        for k, v in groups[0].items():
            if k == "betas":
                options["beta1"], options["beta2"] = float(v[0]), float(v[1])
            elif k in known:
                options[k] = float(v)
        by_pos = {p: i for i, p in enumerate(groups[0]["params"])}
        per_param = [{} for _ in self.params]
        for key, s in state_dict["state"].items():
            per_param[by_pos[key]] = {n: (t if isinstance(t, _C.Tensor) else _C.tensor(t)) for n, t in s.items()}
        self._load_state(per_param, options)
        extra = {k: v for k, v in groups[0].items() if k not in known and k not in ("betas", "params", "amsgrad")}
        self.__dict__["_extra_group"] = extra


class SGD(_TorchStyle, _C._optim.SGD):
    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 maximize=False):
        self._param_objects = list(params)
        super().__init__(self._param_objects, lr, momentum, dampening, weight_decay, nesterov, maximize)


class Adam(_TorchStyle, _C._optim.Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False):
        self._param_objects = list(params)
        super().__init__(self._param_objects, lr, tuple(betas), eps, weight_decay, maximize)


class AdamW(_TorchStyle, _C._optim.AdamW):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, maximize=False):
        self._param_objects = list(params)
        super().__init__(self._param_objects, lr, tuple(betas), eps, weight_decay, maximize)

from . import lr_scheduler  # noqa: E402,F401
