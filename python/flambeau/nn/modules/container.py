"""Containers of modules, as torch.nn's: Sequential, ModuleList, ModuleDict."""
from collections import OrderedDict

from .module import Module


class _ModuleSequence(Module):
    """Submodules kept in order, indexable and iterable (Sequential, ModuleList)."""

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(_ModuleSequence):
    def __init__(self, *modules):
        super().__init__()
        items = modules[0].items() if len(modules) == 1 and isinstance(modules[0], OrderedDict) else \
            ((str(i), m) for i, m in enumerate(modules))
        for name, m in items:
            self.add_module(name, m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(_ModuleSequence):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, m):
        self.add_module(str(len(self._modules)), m)
        return self


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, k):
        return self._modules[k]

    def __setitem__(self, k, m):
        self.add_module(k, m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()
