"""nn.Module hooks against torch.nn.Module 2.13: each scenario runs on both libraries and the
logs (hook order, arguments, results) must agree, with values also checked by hand. Forward
pre/post hooks (prepend, with_kwargs, globals, always_call), removal by handle and `with`,
full backward pre/post hooks (gradients, replacement, inputs without grad), state_dict and
load_state_dict hooks, and the fast path when no hook exists."""
import warnings

import numpy as np
import pytest
import torch

import flambeau as fl

LIBS = [pytest.param(torch, id="torch"), pytest.param(fl, id="flambeau")]


def globals_of(lib):
    return lib.nn.modules.module


def arr(t):
    return None if t is None else np.asarray(t.detach().tolist())


def fixed_linear(lib):
    """y = x W^T + b with W = [[1, 2, 3], [4, 5, 6]], b = [0.5, -0.5] (float64)."""
    lin = lib.nn.Linear(3, 2).double()
    with lib.no_grad():
        lin.weight.copy_(lib.tensor([[1.0, 2, 3], [4, 5, 6]], dtype=lib.float64))
        lin.bias.copy_(lib.tensor([0.5, -0.5], dtype=lib.float64))
    return lin


def run_both(scenario):
    """scenario(lib) on torch and flambeau; returns flambeau's result after checking both agree."""
    got = {lib.__name__: scenario(lib) for lib in (torch, fl)}
    assert got["flambeau"] == got["torch"]
    return got["flambeau"]


# ---- forward hooks ---------------------------------------------------------------------------

def test_forward_hook_order_with_prepend_and_globals():
    def scenario(lib):
        log = []
        m = fixed_linear(lib)
        mm = globals_of(lib)

        def tag(name):
            return lambda *a: log.append(name)
        handles = [m.register_forward_pre_hook(tag("pre1")), m.register_forward_pre_hook(tag("pre0"), prepend=True),
                   m.register_forward_pre_hook(tag("pre_kw"), with_kwargs=True),
                   m.register_forward_hook(tag("post1")), m.register_forward_hook(tag("post0"), prepend=True),
                   mm.register_module_forward_pre_hook(tag("global pre")),
                   mm.register_module_forward_hook(tag("global post"))]
        m(lib.zeros(1, 3, dtype=lib.float64))
        for h in handles:
            h.remove()
        m(lib.zeros(1, 3, dtype=lib.float64))
        return log
    assert run_both(scenario) == ["global pre", "pre0", "pre1", "pre_kw", "global post", "post0", "post1"]


def test_forward_pre_hook_results_replace_args_and_kwargs():
    def scenario(lib):
        class Affine(lib.nn.Module):
            def forward(self, x, scale=1.0):
                return x * scale

        m, seen = Affine(), []
        h1 = m.register_forward_pre_hook(lambda mod, args: args[0] + 1)  # a non-tuple is wrapped in one
        h2 = m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"scale": 10.0}), with_kwargs=True)
        h3 = m.register_forward_hook(lambda mod, args, kwargs, out: seen.append((arr(args[0]).tolist(), kwargs)),
                                     with_kwargs=True)
        out = m(lib.tensor([1.0, 2.0]), scale=3.0)
        for h in (h1, h2, h3):
            h.remove()
        bad = m.register_forward_pre_hook(lambda mod, args, kwargs: args, with_kwargs=True)
        with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
            m(lib.tensor([1.0]))
        bad.remove()
        return arr(out).tolist(), seen
    assert run_both(scenario) == ([20.0, 30.0], [([2.0, 3.0], {"scale": 10.0})])


def test_forward_hook_replaces_output_and_sees_inputs():
    def scenario(lib):
        m = fixed_linear(lib)
        x = lib.tensor([[1.0, 0, -1]], dtype=lib.float64)
        seen = []
        m.register_forward_hook(lambda mod, args, out: seen.append((type(mod).__name__, arr(args[0]).tolist())))
        m.register_forward_hook(lambda mod, args, out: out + 100)
        m.register_forward_hook(lambda mod, args, out: None)  # None keeps the output
        return arr(m(x)).tolist(), seen
    # W x = [1 - 3, 4 - 6] = [-2, -2]; + b; + 100.
    assert run_both(scenario) == ([[98.5, 97.5]], [("Linear", [[1.0, 0.0, -1.0]])])


def test_always_call_hooks_run_when_forward_raises():
    def scenario(lib):
        class Failing(lib.nn.Module):
            def forward(self, x):
                raise ValueError("forward failed")

        m, log = Failing(), []
        m.register_forward_hook(lambda mod, args, out: log.append("plain"))
        m.register_forward_hook(lambda mod, args, out: log.append(("always", out)), always_call=True)
        m.register_forward_hook(lambda mod, args, kwargs, out: log.append(("always kw", kwargs)), always_call=True,
                                with_kwargs=True)

        def broken(mod, args, out):
            raise KeyError("silenced")
        m.register_forward_hook(broken, always_call=True)
        g = globals_of(lib).register_module_forward_hook(lambda mod, args, out: log.append("global always"),
                                                         always_call=True)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with pytest.raises(ValueError, match="forward failed"):
                    m(lib.zeros(2), )
        finally:
            g.remove()
        log.append(any("always_call=True" in str(w.message) for w in caught))
        return log
    assert run_both(scenario) == ["global always", ("always", None), ("always kw", {}), True]


def test_always_call_hook_that_already_ran_does_not_run_again():
    def scenario(lib):
        m, log = fixed_linear(lib), []
        m.register_forward_hook(lambda mod, args, out: log.append("always"), always_call=True)

        def fail(mod, args, out):
            raise ValueError("late hook failed")
        m.register_forward_hook(fail)
        with pytest.raises(ValueError, match="late hook failed"):
            m(lib.zeros(1, 3, dtype=lib.float64))
        return log
    assert run_both(scenario) == ["always"]


def test_handles_remove_and_work_as_context_managers():
    def scenario(lib):
        m, log = fixed_linear(lib), []
        x = lib.zeros(1, 3, dtype=lib.float64)
        with m.register_forward_pre_hook(lambda mod, args: log.append("in with"), with_kwargs=False):
            m(x)
        h = m.register_forward_hook(lambda mod, args, kwargs, out: log.append("kw"), with_kwargs=True,
                                    always_call=True)
        m(x)
        h.remove()
        h.remove()  # twice is fine
        m(x)
        return log, len(m._forward_hooks), len(m._forward_hooks_with_kwargs), len(m._forward_hooks_always_called)
    assert run_both(scenario) == (["in with", "kw"], 0, 0, 0)


def test_handle_ids_key_the_ordered_dicts():
    m = fl.nn.Linear(2, 2)
    a, b = m.register_forward_hook(lambda *x: None), m.register_forward_hook(lambda *x: None, prepend=True)
    assert b.id > a.id and list(m._forward_hooks) == [b.id, a.id]
    assert isinstance(a, fl.utils.hooks.RemovableHandle)


def test_no_hooks_calls_forward_directly(monkeypatch):
    m = fl.nn.Linear(3, 2)
    x = fl.ones(1, 3)

    def fail(*a):
        raise AssertionError("the hook path ran without hooks")
    monkeypatch.setattr(fl.nn.Module, "_call_with_hooks", fail)
    assert m(x).tolist() == m.forward(x).tolist()
    h = m.register_forward_hook(lambda *a: None)
    with pytest.raises(AssertionError, match="hook path"):
        m(x)
    h.remove()
    m(x)


def test_containers_call_children_through_hooks():
    def scenario(lib):
        seq = lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.ReLU())
        names = []
        with globals_of(lib).register_module_forward_hook(lambda mod, args, out: names.append(type(mod).__name__)):
            seq(lib.zeros(1, 3))
        return names
    assert run_both(scenario) == ["Linear", "ReLU", "Sequential"]


# ---- full backward hooks ---------------------------------------------------------------------

def test_full_backward_hooks_see_the_gradients():
    def scenario(lib):
        m, mm, log = fixed_linear(lib), globals_of(lib), []
        x = lib.tensor([[1.0, 0, -1], [2, 1, 0]], dtype=lib.float64, requires_grad=True)
        c = lib.tensor([[1.0, 2], [3, 4]], dtype=lib.float64)
        m.register_full_backward_pre_hook(lambda mod, go: log.append(("pre", [arr(g).tolist() for g in go])))
        m.register_full_backward_pre_hook(lambda mod, go: log.append("pre0"), prepend=True)
        m.register_full_backward_hook(lambda mod, gi, go: log.append(("post", [arr(g).tolist() for g in gi],
                                                                      [arr(g).tolist() for g in go])))
        m.register_full_backward_hook(lambda mod, gi, go: log.append("post0"), prepend=True)
        with mm.register_module_full_backward_pre_hook(lambda mod, go: log.append("global pre")), \
                mm.register_module_full_backward_hook(lambda mod, gi, go: log.append("global post")):
            (m(x) * c).sum().backward()
        return log, arr(x.grad).tolist(), arr(m.weight.grad).tolist()
    log, xg, wg = run_both(scenario)
    c = [[1.0, 2], [3, 4]]
    grad_x = [[9.0, 12, 15], [19, 26, 33]]  # c W
    assert log == ["global pre", "pre0", ("pre", [c]), "global post", "post0", ("post", [grad_x], [c])]
    assert xg == grad_x and wg == [[7.0, 3, -1], [10, 4, -2]]  # c^T x


def test_full_backward_hooks_replace_gradients():
    def scenario(lib):
        m = fixed_linear(lib)
        x = lib.tensor([[1.0, 0, -1]], dtype=lib.float64, requires_grad=True)
        m.register_full_backward_pre_hook(lambda mod, go: (go[0] * 2,))
        m.register_full_backward_hook(lambda mod, gi, go: (gi[0] + 1000,))
        y = m(x)
        y.sum().backward()
        return arr(x.grad).tolist(), arr(m.weight.grad).tolist(), y.grad_fn.name()
    assert run_both(scenario) == ([[1010.0, 1014, 1018]], [[2.0, 0, -2], [2, 0, -2]], "BackwardHookFunctionBackward")


def test_grad_input_has_none_for_inputs_without_grad():
    """Two documented differences from torch 2.13: a tensor argument that does not require
    grad gets None in grad_input (torch gives zeros when another argument requires grad), and
    an output that received no gradient shows zeros in grad_output (torch: None)."""
    def scenario(lib):
        class Mix(lib.nn.Module):
            def forward(self, a, b, k, c):
                return a * b * k + c, c * 0

        m, log = Mix(), []
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0])
        c = lib.tensor([5.0, 6.0], requires_grad=True)
        listed = lambda grads: [None if g is None else arr(g).tolist() for g in grads]  # noqa: E731
        m.register_full_backward_pre_hook(lambda mod, go: log.append(listed(go)))
        m.register_full_backward_hook(lambda mod, gi, go: log.append((listed(gi), listed(go))))
        y, z = m(a, b, 2.0, c)
        (y * lib.tensor([1.0, 10.0])).sum().backward()
        return log, arr(a.grad).tolist(), arr(c.grad).tolist()
    ours, theirs = scenario(fl), scenario(torch)
    assert ours == ([[[1.0, 10.0], [0.0, 0.0]], ([[6.0, 80.0], None, None, [1.0, 10.0]], [[1.0, 10.0], [0.0, 0.0]])],
                    [6.0, 80.0], [1.0, 10.0])
    assert theirs == ([[[1.0, 10.0], None], ([[6.0, 80.0], [0.0, 0.0], None, [1.0, 10.0]], [[1.0, 10.0], None])],
                      [6.0, 80.0], [1.0, 10.0])


def test_backward_hooks_when_no_input_requires_grad():
    def scenario(lib):
        m, log = fixed_linear(lib), []
        x = lib.tensor([[1.0, 0, -1]], dtype=lib.float64)
        h = m.register_full_backward_hook(lambda mod, gi, go: log.append((gi, arr(go[0]).tolist())))
        with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are computed with "
                                             "respect to module outputs since no inputs require gradients"):
            m(x).sum().backward()
        h.remove()
        m.register_full_backward_hook(lambda mod, gi, go: (lib.zeros(3),))
        y = m(x).sum()
        with pytest.raises(RuntimeError, match="no input requires gradient"), pytest.warns(UserWarning):
            y.backward()
        return log, arr(m.weight.grad).tolist()
    assert run_both(scenario) == ([((None,), [[1.0, 1.0]])], [[1.0, 0, -1], [1, 0, -1]])


def test_backward_hooks_wrong_counts_raise():
    def scenario(lib):
        x = lib.tensor([[1.0, 0, -1]], dtype=lib.float64, requires_grad=True)
        m = fixed_linear(lib)
        h = m.register_full_backward_pre_hook(lambda mod, go: (go[0], go[0]))
        with pytest.raises(RuntimeError, match="Backward pre hook returned an invalid number of grad_output, got 2"):
            m(x).sum().backward()
        h.remove()
        m.register_full_backward_hook(lambda mod, gi, go: (None, None))
        with pytest.raises(RuntimeError, match="Backward hook returned an invalid number of grad_input, got 2"):
            m(x).sum().backward()
        return True
    assert run_both(scenario)


def test_backward_hooks_on_a_model_match_torch():
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.GELU(), torch.nn.Linear(6, 3)).double()
    fm = fl.nn.Sequential(fl.nn.Linear(4, 6), fl.nn.GELU(), fl.nn.Linear(6, 3)).double()
    fm.load_state_dict({k: fl.from_dlpack(v.detach().clone()) for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((5, 4))
    logs = {}
    for lib, m in ((torch, tm), (fl, fm)):
        log = logs[lib.__name__] = []
        for name, sub in m.named_modules():
            sub.register_full_backward_hook(lambda mod, gi, go, name=name: log.append(
                (name, [arr(g) for g in gi], [arr(g) for g in go])))
        x = lib.tensor(xs.tolist(), dtype=lib.float64, requires_grad=True)
        (m(x) ** 2).sum().backward()
    assert [e[0] for e in logs["flambeau"]] == [e[0] for e in logs["torch"]] == ["2", "1", "0", ""]
    for (_, fgi, fgo), (_, tgi, tgo) in zip(logs["flambeau"], logs["torch"]):
        for f, t in zip(fgi + fgo, tgi + tgo):
            np.testing.assert_allclose(f, t, rtol=1e-12, atol=1e-12)


# ---- state_dict hooks ----------------------------------------------------------------------

def small_model(lib):
    torch.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Sequential(lib.nn.Linear(3, 1)))


def test_state_dict_pre_and_post_hooks():
    def scenario(lib):
        m, log = small_model(lib), []
        for sub in (m, m[1], m[1][0]):
            sub.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: log.append(("pre", prefix, keep_vars)))
            sub.register_state_dict_post_hook(lambda mod, sd, prefix, meta: log.append(("post", prefix, list(sd),
                                                                                         meta)))
        m[1][0].register_state_dict_post_hook(lambda mod, sd, prefix, meta: sd.__setitem__(prefix + "extra", 1))
        sd = m.state_dict(keep_vars=True)
        bad = m.register_state_dict_post_hook(lambda *a: {})
        with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
            m.state_dict()
        bad.remove()
        return log, list(sd), sd["0.weight"] is m[0].weight
    log, keys, same = run_both(scenario)
    log = log[:6]  # the first state_dict() call
    assert keys == ["0.weight", "0.bias", "1.0.weight", "1.0.bias", "1.0.extra"] and same
    assert [e[:2] for e in log] == [("pre", ""), ("pre", "1."), ("pre", "1.0."), ("post", "1.0."), ("post", "1."),
                                    ("post", "")]
    assert log[3][3] == {"version": 1}


def test_private_state_dict_hook_may_replace_the_result():
    def scenario(lib):
        m = small_model(lib)
        m._register_state_dict_hook(lambda mod, sd, prefix, meta: {k.upper(): v for k, v in sd.items()})
        return list(m.state_dict())
    assert run_both(scenario) == ["0.WEIGHT", "0.BIAS", "1.0.WEIGHT", "1.0.BIAS"]


def test_load_state_dict_hooks():
    def scenario(lib):
        src = small_model(lib)
        sd = {k.replace("1.0.", "1.0.old_"): v.detach().clone() for k, v in src.state_dict().items()}
        m, log = small_model(lib), []
        with lib.no_grad():
            for p in m.parameters():
                p.zero_()

        def rename(mod, state, prefix, meta, strict, missing, unexpected, errors):
            log.append(("pre", type(mod).__name__, prefix, sorted(state), strict))
            for k in [k for k in state if k.startswith(prefix + "old_")]:
                state[prefix + k[len(prefix) + 4:]] = state.pop(k)
        m[1][0].register_load_state_dict_pre_hook(rename)
        for sub in (m, m[1]):
            sub.register_load_state_dict_post_hook(lambda mod, keys: log.append(("post", type(mod).__name__,
                                                                                list(keys.missing_keys))))
        result = m.load_state_dict(sd)
        loaded = [arr(p).tolist() for p in m.parameters()] == [arr(p).tolist() for p in src.parameters()]
        return log, list(result), repr(result), loaded
    log, result, text, loaded = run_both(scenario)
    assert log[0] == ("pre", "Linear", "1.0.", ["1.0.old_bias", "1.0.old_weight"], True)
    assert log[1:] == [("post", "Sequential", []), ("post", "Sequential", [])]
    assert result == [[], []] and text == "<All keys matched successfully>" and loaded


def test_load_state_dict_post_hook_may_forgive_missing_keys():
    def scenario(lib):
        m = small_model(lib)
        sd = {k: v for k, v in m.state_dict().items() if k != "0.bias"}
        with pytest.raises(RuntimeError, match="0.bias"):
            m.load_state_dict(sd)
        h = m.register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.remove("0.bias"))
        result = m.load_state_dict(sd)
        h.remove()
        m.register_load_state_dict_post_hook(lambda mod, keys: 1)
        with pytest.raises(AssertionError, match="not expected to return new values"):
            m.load_state_dict(m.state_dict())
        return tuple(map(list, result))
    assert run_both(scenario) == ([], [])


def test_global_hooks_import_paths():
    from flambeau.nn.modules.module import (register_module_forward_hook, register_module_forward_pre_hook,  # noqa
                                            register_module_full_backward_hook,
                                            register_module_full_backward_pre_hook)
    from flambeau.utils.hooks import RemovableHandle
    h = register_module_forward_pre_hook(lambda *a: None)
    assert isinstance(h, RemovableHandle) and h.id in fl.nn.modules.module._global_forward_pre_hooks
    h.remove()
    assert not fl.nn.modules.module._global_forward_pre_hooks
