"""End-of-backward callbacks from Python (torch's Variable._execution_engine.queue_callback and
flambeau.autograd.graph.queue_callback): order and re-queueing, exceptions, the error outside
backward, nested backward, and DDP's pattern, each run on torch and flambeau alike."""
import pytest
import torch

import flambeau as fl


def queue(lib):
    return lib.autograd.Variable._execution_engine.queue_callback


def run_both(scenario):
    got = {lib.__name__: scenario(lib) for lib in (torch, fl)}
    assert got["flambeau"] == got["torch"]
    return got["flambeau"]


def test_callbacks_run_after_the_graph_in_order_and_may_requeue():
    def scenario(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 3

        def hook(g):
            log.append("hook")

            def first():
                log.append(("first", None if x.grad is None else x.grad.tolist()))
                queue(lib)(lambda: log.append("queued by first"))
            queue(lib)(first)
            queue(lib)(lambda: log.append("second"))
        h.register_hook(hook)
        h.sum().backward()
        log.append("returned")
        return log
    assert run_both(scenario) == ["hook", ("first", [3.0, 3.0]), "second", "queued by first", "returned"]


def test_graph_alias_is_the_same_queue():
    x = fl.tensor([1.0], requires_grad=True)
    log = []
    (x * 2).register_hook(lambda g: fl.autograd.graph.queue_callback(lambda: log.append("alias")))
    y = x * 2
    y.register_hook(lambda g: fl.autograd.graph.queue_callback(lambda: log.append("alias")))
    y.sum().backward()
    assert log == ["alias"]


def test_error_outside_backward():
    with pytest.raises(RuntimeError, match=r"\[queue_callback\].*backward pass"):
        queue(fl)(lambda: None)
    with pytest.raises(RuntimeError, match="backward pass"):
        fl.autograd.graph.queue_callback(lambda: None)
    with pytest.raises(TypeError, match="callable"):
        x = fl.tensor([1.0], requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: queue(fl)(3))
        y.sum().backward()


def test_exception_in_a_callback_propagates():
    def scenario(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2

        def fail():
            raise KeyError("callback failed")

        def hook(g):
            queue(lib)(fail)
            queue(lib)(lambda: log.append("later"))
        y.register_hook(hook)
        with pytest.raises(KeyError, match="callback failed"):
            y.sum().backward()
        # The queue is gone with the pass: queueing now is an error again.
        with pytest.raises(RuntimeError):
            queue(lib)(lambda: None)
        return log
    run_both(scenario)


def test_nested_backward_has_its_own_queue():
    def scenario(lib):
        log = []
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2

        def hook(g):
            queue(lib)(lambda: log.append("outer"))
            with lib.enable_grad():
                w = lib.tensor([5.0], requires_grad=True)
                z = w * w
                z.register_hook(lambda gz: queue(lib)(lambda: log.append("inner")))
                z.sum().backward()
            log.append(("inner returned", w.grad.tolist()))
        y.register_hook(hook)
        y.sum().backward()
        return log
    assert run_both(scenario) == ["inner", ("inner returned", [10.0]), "outer"]


def test_ddp_pattern_callback_sees_every_grad():
    """DDP launches a bucket's all-reduce in each parameter's post-accumulate-grad hook and
    waits for all of them in one callback queued by the first hook."""
    def scenario(lib):
        torch.manual_seed(0)
        model = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.Tanh(), lib.nn.Linear(8, 2))
        params = list(model.parameters())
        state = {"queued": 0, "ready": [], "seen": None}

        def finalize():
            state["seen"] = [p.grad is not None for p in params]
            state["ready_when_run"] = len(state["ready"])
            for p in params:  # what DDP does with the reduced buckets: write the averaged grads
                p.grad.mul_(0.5)

        def on_grad(i):
            def hook(p):
                state["ready"].append(i)
                if state["queued"] == 0:
                    queue(lib)(finalize)
                state["queued"] += 1
            return hook
        for i, p in enumerate(params):
            p.register_post_accumulate_grad_hook(on_grad(i))
        x = lib.tensor([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, -1.0, 3.0]])
        model(x).pow(2).sum().backward()
        return state["seen"], state["ready_when_run"], sorted(state["ready"]), state["queued"]
    assert run_both(scenario) == ([True] * 4, 4, [0, 1, 2, 3], 4)


def test_ddp_pattern_grads_match_torch():
    torch.manual_seed(0)
    tm = torch.nn.Linear(3, 2).double()
    fm = fl.nn.Linear(3, 2).double()
    fm.load_state_dict({k: fl.from_dlpack(v.detach().clone()) for k, v in tm.state_dict().items()})
    grads = {}
    for lib, m in ((torch, tm), (fl, fm)):
        done = []

        def hook(p, lib=lib, m=m, done=done):
            if not done:
                done.append(1)
                queue(lib)(lambda: [q.grad.mul_(0.5) for q in m.parameters()])
        for p in m.parameters():
            p.register_post_accumulate_grad_hook(hook)
        x = lib.tensor([[1.0, 2.0, -1.0]], dtype=lib.float64)
        m(x).sum().backward()
        grads[lib.__name__] = [p.grad.tolist() for p in m.parameters()]
    assert grads["flambeau"] == grads["torch"] == [[[0.5, 1.0, -0.5]] * 2, [0.5, 0.5]]
