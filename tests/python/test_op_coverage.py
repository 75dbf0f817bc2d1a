"""Every op bound in Python is compared with PyTorch: each public function of flambeau,
flambeau._C and flambeau.nn.functional, and each public Tensor method, is either covered by
an entry of the OpInfo database (test_opinfo.OPS, test_opinfo_more.CASES) or listed below
with the reason it is not. An entry covers the op of its name and its variants (entries
named op_...). An in-place method op_ is covered with op: it runs op's kernel into self
(test_tensor.py and the C++ tests check the in-place forms). A new binding without either
fails here."""
import inspect

import flambeau as fl
import flambeau.nn.functional as F
import test_opinfo
import test_opinfo_more

NOT_COMPARED = {
    # Factories and conversions from Python or other libraries: no op to compare.
    **dict.fromkeys(["tensor", "as_tensor", "from_dlpack", "from_numpy", "zeros", "ones", "empty", "full", "arange",
                     "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like"],
                    "factory (test_tensor.py and tests/core/factory_test.cpp check values and dtypes)"),
    # Random sampling: torch draws other numbers; statistics are checked instead.
    **dict.fromkeys(["rand", "randn", "randint", "randperm", "multinomial", "bernoulli", "bernoulli_", "uniform_",
                     "normal_", "exponential_", "dropout", "manual_seed", "default_generator"],
                    "random (distribution tests in tests/core/random_test.cpp)"),
    # I/O.
    **dict.fromkeys(["load", "save"], "I/O (test_safetensors.py)"),
    "compile": "the compiler, not an op (test_compile.py)",
    # Settings, capabilities and autocast switches.
    **dict.fromkeys(["get_num_threads", "set_num_threads", "bf16_matmul_backend", "is_grad_enabled",
                     "clear_autocast_cache", "is_autocast_cache_enabled", "set_autocast_cache_enabled",
                     "get_autocast_dtype", "is_autocast_enabled", "set_autocast_dtype", "set_autocast_enabled"],
                    "a setting, not an op (test_autocast.py, tests/core/parallel_test.cpp)"),
    "result_type": "returns a dtype, not a tensor (promotion is checked by every binary OpInfo entry)",
    # Tensor attributes, autograd and interop.
    **dict.fromkeys(["shape", "dtype", "device", "ndim", "dim", "numel", "size", "stride", "storage_offset",
                     "element_size", "data_ptr", "is_contiguous", "is_cpu", "is_floating_point", "item", "tolist",
                     "numpy"], "metadata or conversion to Python (test_tensor.py, test_interop.py)"),
    **dict.fromkeys(["requires_grad", "requires_grad_", "grad", "grad_fn", "is_leaf", "backward", "detach",
                     "retain_grad", "register_hook", "register_post_accumulate_grad_hook"],
                    "autograd (test_autograd.py, test_grad_fn_names.py)"),
}


def public_ops():
    def functions(mod):
        return {n for n in dir(mod) if not n.startswith("_") and callable(getattr(mod, n))
                and not inspect.isclass(getattr(mod, n)) and not inspect.ismodule(getattr(mod, n))}
    return functions(fl._C) | functions(fl) | functions(F) | {n for n in dir(fl.Tensor) if not n.startswith("_")}


ENTRIES = [op.name for op in test_opinfo.OPS] + list(test_opinfo_more.CASES)


def covered(name):
    base = name[:-1] if name.endswith("_") else name
    return any(e == base or e.startswith(base + "_") for e in ENTRIES)


def test_every_public_op_is_compared_with_torch():
    missing = sorted(n for n in public_ops() if not covered(n) and n not in NOT_COMPARED)
    assert not missing, f"neither in the OpInfo database nor in NOT_COMPARED (with a reason): {missing}"


def test_exclusions_are_current():
    ops = public_ops()
    stale = sorted(n for n in NOT_COMPARED if n not in ops or covered(n))
    assert not stale, f"NOT_COMPARED entries that are not bound or are now covered: {stale}"


def test_the_rule_finds_a_missing_op():
    assert covered("exp2") and covered("scatter_reduce_") and not covered("no_such_op")
