"""Real data: two epochs of examples/cnn_fashion_mnist.py (conv-batchnorm-relu-maxpool twice,
then linear) reach at least 91% test accuracy (issue 22 item 8)."""
import importlib.util
import os

import pytest

import flambeau as fl

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "cnn_fashion_mnist.py")


@pytest.mark.skipif(not os.path.exists("/usr/share/datasets/fashion-mnist"), reason="dataset-fashion-mnist not installed")
def test_two_epochs_reach_91_percent():
    spec = importlib.util.spec_from_file_location("cnn_fashion_mnist", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    logs = []
    acc, times = module.train(fl, epochs=2, log=logs.append)
    assert acc >= 0.91, logs
    assert len(times) == 2
