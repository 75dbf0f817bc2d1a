"""Real data: one epoch of examples/fashion_mnist.py reaches at least 84% test accuracy."""
import importlib.util
import os

import pytest

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "fashion_mnist.py")


@pytest.mark.skipif(not os.path.exists("/usr/share/datasets/fashion-mnist"), reason="dataset-fashion-mnist not installed")
def test_one_epoch_reaches_84_percent():
    spec = importlib.util.spec_from_file_location("fashion_mnist", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    logs = []
    acc = module.train(epochs=1, log=logs.append)
    assert acc >= 0.84, logs
