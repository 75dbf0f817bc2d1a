"""flambeau.graphs: an MLP captured in Python replays with eager's bits and sees new inputs
copied into its static input; get_graph_data's topology and correlation ids; refusals and
misuse raise clearly; an exception inside `with graph(g)` drops the capture."""
import numpy as np
import pytest

import flambeau as flb
import flambeau.nn.functional as F
from flambeau import graphs
from flambeau.profiler import profile


def _seeded(shape, seed):
    return flb.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_mlp_replay_is_eager_bits_and_sees_new_inputs():
    flb.manual_seed(0)
    mlp = flb.nn.Sequential(flb.nn.Linear(16, 32), flb.nn.GELU(), flb.nn.Linear(32, 8))
    static_in = _seeded((4, 16), 1)
    g = graphs.Graph()
    with flb.no_grad(), graphs.graph(g):
        static_out = F.softmax(mlp(static_in), dim=-1)
    assert not graphs.is_current_stream_capturing()
    for seed in (2, 3):
        x = _seeded((4, 16), seed)
        static_in.copy_(x)
        g.replay()
        with flb.no_grad():
            expected = F.softmax(mlp(x), dim=-1)
        assert np.array_equal(static_out.numpy(), expected.numpy())


def test_graph_data_topology_and_correlation_ids():
    x = _seeded((3, 3), 4)
    g = graphs.Graph()
    with profile() as prof:
        with graphs.graph(g):
            a = flb.mm(x, x)
            b = flb.exp(x)
            a.add_(b)
            c = a * 2.0
    data = g.get_graph_data()
    assert [n["op_name"] for n in data["nodes"]] == ["mm", "exp", "add_", "mul"]
    assert [n["kernel_name"] for n in data["nodes"]][0] == "flambeau::mm"
    assert {n["type"] for n in data["nodes"]} == {"kernel"}
    assert data["nodes"][0]["shapes"] == [(3, 3), (3, 3)]
    assert sorted(data["edges"]) == [(0, 2), (1, 2), (2, 3)]
    assert data["execution_order"] == [0, 1, 2, 3]
    ops = [e for e in prof.events() if e.category == "cpu_op"]
    assert [e.correlation_id for e in ops] == [n["correlation_id"] for n in data["nodes"]]
    x.copy_(_seeded((3, 3), 5))
    g.replay()
    expected = (flb.mm(x, x) + flb.exp(x)) * 2.0
    assert np.array_equal(c.numpy(), expected.numpy())


def test_debug_dump_writes_dot(tmp_path):
    x = _seeded((2, 2), 6)
    g = graphs.CUDAGraph()
    with graphs.graph(g, pool=graphs.graph_pool_handle()):
        y = flb.exp(x).sum()
    path = tmp_path / "g.dot"
    g.debug_dump(path)
    text = path.read_text()
    assert text.startswith("digraph") and "n0 -> n1;" in text and "flambeau::sum" in text
    assert g.pool() is not None


@pytest.mark.parametrize("body, message", [
    (lambda x: float(x.sum()), "refused at item"),
    (lambda x: flb.nonzero(x > 0), "refused at nonzero: its output's shape depends on the input's values"),
    (lambda x: flb.randn(3, generator=flb.Generator().manual_seed(1)), "refused at randn: it draws from an explicit Generator"),
])
def test_refusals_name_the_op(body, message):
    x = _seeded((5,), 7)
    g = graphs.Graph()
    with pytest.raises(RuntimeError, match=message):
        with graphs.graph(g):
            body(x)
    assert not graphs.is_capturing()
    with pytest.raises(RuntimeError, match="nothing was captured"):
        g.replay()


def test_default_generator_is_graph_safe():
    flb.manual_seed(11)
    first, second = flb.randn(4), flb.randn(4)
    flb.manual_seed(11)
    g = graphs.Graph()
    with graphs.graph(g):
        r = flb.randn(4)
    assert np.array_equal(r.numpy(), first.numpy())
    g.replay()
    assert np.array_equal(r.numpy(), second.numpy())


def test_exception_in_block_drops_the_capture():
    g = graphs.Graph()
    with pytest.raises(KeyError):
        with graphs.graph(g):
            flb.ones(2) + 1
            raise KeyError("boom")
    assert not graphs.is_capturing()
    with graphs.graph(g):  # the graph is reusable
        flb.ones(2) + 1
    g.replay()


def test_misuse():
    g = graphs.Graph()
    with pytest.raises(RuntimeError, match="capture_begin\\(\\) was not called"):
        g.capture_end()
    g.capture_begin()
    with pytest.raises(RuntimeError, match="capturing another graph"):
        graphs.Graph().capture_begin()
    g.capture_end()
    with pytest.raises(RuntimeError, match="reset\\(\\) first"):
        g.capture_begin()
    with pytest.raises(ValueError, match="capture_error_mode"):
        graphs.Graph().capture_begin(capture_error_mode="bogus")
