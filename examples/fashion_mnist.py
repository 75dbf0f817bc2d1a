"""Trains an MLP on Fashion-MNIST (Debian's dataset-fashion-mnist) with flambeau: the
nn modules, autograd and AdamW, as one would with PyTorch.
Usage: .venv/bin/python examples/fashion_mnist.py [epochs]"""
import gzip
import sys
import time

import numpy as np

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def load(kind):
    """(images [n, 784] float32 in [0, 1], labels [n] int64) from the IDX files."""
    with gzip.open(f"{DATA}/{kind}-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(f"{DATA}/{kind}-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    x = fl.from_numpy(images.astype(np.float32) / 255.0)
    return (x - 0.2860) / 0.3530, fl.from_numpy(labels.astype(np.int64))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))

    def forward(self, x):
        return self.net(x)


def accuracy(model, x, y, batch=2000):
    model.eval()
    correct = 0
    with fl.no_grad():
        for i in range(0, x.shape[0], batch):
            correct += (model(x[i:i + batch]).argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return correct / x.shape[0]


def train(epochs=1, batch=128, lr=2e-3, seed=0, log=print):
    fl.manual_seed(seed)
    x, y = load("train")
    xt, yt = load("t10k")
    model = MLP()
    opt = fl.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    n = x.shape[0]
    for epoch in range(epochs):
        start, order = time.time(), fl.randperm(n)
        for step, i in enumerate(range(0, n, batch)):
            idx = order[i:i + batch]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 100 == 0:
                log(f"epoch {epoch + 1} step {step:4d}  loss {loss.item():.4f}")
        acc = accuracy(model, xt, yt)
        log(f"epoch {epoch + 1}: test accuracy {acc:.4f} ({time.time() - start:.1f} s)")
    return acc


if __name__ == "__main__":
    train(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
