"""Trains a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist) with flambeau:
conv-batchnorm-relu-maxpool twice, then a linear layer, with AdamW and a cosine learning rate. --compare trains the
same model in PyTorch 2.13 afterwards, on the same data order, and prints both epoch times.
Usage: .venv/bin/python examples/cnn_fashion_mnist.py [epochs] [--compare]"""
import gzip
import sys
import time

import numpy as np

import flambeau as fl

DATA = "/usr/share/datasets/fashion-mnist"


def load(kind):
    """(images [n, 1, 28, 28] float32 normalised, labels [n] int64) as numpy arrays."""
    with gzip.open(f"{DATA}/{kind}-images-idx3-ubyte.gz") as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(f"{DATA}/{kind}-labels-idx1-ubyte.gz") as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)
    return (images.astype(np.float32) / 255.0 - 0.2860) / 0.3530, labels.astype(np.int64)


def cnn(lib):
    """The model in library lib (flambeau or torch): the same layers under the same names."""
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 10))


def accuracy(lib, model, x, y, batch=1000):
    model.eval()
    correct = 0
    with lib.no_grad():
        for i in range(0, len(x), batch):
            logits = model(lib.from_numpy(x[i:i + batch]))
            correct += int((logits.argmax(1).numpy() == y[i:i + batch]).sum())
    model.train()
    return correct / len(x)


def train(lib=fl, epochs=2, batch=64, lr=3e-3, seed=0, log=print):
    """Returns (test accuracy, seconds per epoch). The data order comes from numpy's seeded
    generator, so both libraries see the same batches."""
    lib.manual_seed(seed)
    x, y = load("train")
    xt, yt = load("t10k")
    model = cnn(lib)
    opt = lib.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    steps = epochs * ((len(x) + batch - 1) // batch)
    schedule = lib.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    rng = np.random.default_rng(seed)
    times = []
    for epoch in range(epochs):
        start, order = time.perf_counter(), rng.permutation(len(x))
        for step, i in enumerate(range(0, len(x), batch)):
            idx = order[i:i + batch]
            loss = lib.nn.functional.cross_entropy(model(lib.from_numpy(x[idx])), lib.from_numpy(y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            schedule.step()
            if step % 200 == 0:
                log(f"[{lib.__name__}] epoch {epoch + 1} step {step:3d}  loss {loss.item():.4f}")
        times.append(time.perf_counter() - start)
        acc = accuracy(lib, model, xt, yt)
        log(f"[{lib.__name__}] epoch {epoch + 1}: test accuracy {acc:.4f} ({times[-1]:.1f} s)")
    return acc, times


def main(argv):
    epochs = int(argv[0]) if argv and argv[0].isdigit() else 2
    fl.set_num_threads(2)
    acc, times = train(fl, epochs)
    if "--compare" in argv:
        import torch
        torch.set_num_threads(2)
        t_acc, t_times = train(torch, epochs)
        f, t = np.median(times), np.median(t_times)
        print(f"epoch time: flambeau {f:.1f} s, torch {t:.1f} s, ratio {t / f:.2f}x; "
              f"test accuracy flambeau {acc:.4f}, torch {t_acc:.4f}")


if __name__ == "__main__":
    main(sys.argv[1:])
