"""Convolution benchmarks (issue 22), flambeau vs PyTorch 2.13 in one process, 2 threads,
float32: conv2d forward + backward (input, weight and bias gradients) at ResNet shapes,
batch 32, and batch_norm (training) and max_pool2d (3x3 stride 2, as ResNet's stem) at the
same activation shapes, and a ResNet-18 SGD training step on 64x64 inputs; the CNN example's epoch time is examples/cnn_fashion_mnist.py --compare. Alternating runs, medians; ratio = torch time / flambeau time (> 1: flambeau faster).
--channels-last: the conv forward+backward, batch_norm and max_pool2d rows and the ResNet-18
step with channels-last inputs (and model.to(memory_format=channels_last)) in both libraries
instead.
Usage: .venv/bin/python bench/bench_conv.py [reps] [batch] [--channels-last]   (prints a Markdown table)"""
import os
import sys

import numpy as np
import torch

import flambeau as fl

sys.path.insert(0, os.path.dirname(__file__))
from timing import pair  # noqa: E402

# (name, C_in, C_out, H=W, kernel, stride, padding, groups)
CONV_SHAPES = [
    ("56x56 64->64 3x3", 64, 64, 56, 3, 1, 1, 1),
    ("28x28 128->128 3x3", 128, 128, 28, 3, 1, 1, 1),
    ("56x56 64->256 1x1", 64, 256, 56, 1, 1, 0, 1),
    ("112x112 3->64 7x7 stride 2", 3, 64, 112, 7, 2, 3, 1),
    ("depthwise 56x56x128 3x3", 128, 128, 56, 3, 1, 1, 128),
]


def conv_rows(batch, reps, r, channels_last=False):
    rows = []
    for name, cin, cout, hw, k, s, p, g in CONV_SHAPES:
        x = r.standard_normal((batch, cin, hw, hw)).astype(np.float32)
        w = (r.standard_normal((cout, cin // g, k, k)) * 0.1).astype(np.float32)
        b = r.standard_normal(cout).astype(np.float32)
        fx, fw, fb = (fl.tensor(a, requires_grad=True) for a in (x, w, b))
        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
        if channels_last:
            fx = fx.detach().to(memory_format=fl.channels_last).requires_grad_()
            tx = tx.detach().to(memory_format=torch.channels_last).requires_grad_()
            name += ", channels-last"

        def step(lib, F, x, w, b):
            y = F.conv2d(x, w, b, stride=s, padding=p, groups=g)
            y.backward(lib.ones_like(y))
        with fl.no_grad(), torch.no_grad():
            if not channels_last:
                rows.append((f"conv2d forward, {name}",
                             *pair(lambda: fl.nn.functional.conv2d(fx, fw, fb, stride=s, padding=p, groups=g),
                                   lambda: torch.nn.functional.conv2d(tx, tw, tb, stride=s, padding=p, groups=g),
                                   reps)))
        rows.append((f"conv2d forward+backward, {name}",
                     *pair(lambda: step(fl, fl.nn.functional, fx, fw, fb),
                           lambda: step(torch, torch.nn.functional, tx, tw, tb), reps)))
    return rows


# (name, C, H=W): the activations the conv rows make.
ACTIVATIONS = [("56x56x64", 64, 56), ("28x28x128", 128, 28), ("56x56x256", 256, 56), ("112x112x64", 64, 112)]


def norm_pool_rows(batch, reps, r, channels_last=False):
    rows = []
    for name, c, hw in ACTIVATIONS:
        x = r.standard_normal((batch, c, hw, hw)).astype(np.float32)
        fx, tx = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        if channels_last:
            fx = fx.detach().to(memory_format=fl.channels_last).requires_grad_()
            tx = tx.detach().to(memory_format=torch.channels_last).requires_grad_()
            name += ", channels-last"
        fw, tw = fl.ones(c, requires_grad=True), torch.ones(c, requires_grad=True)
        fb, tb = fl.zeros(c, requires_grad=True), torch.zeros(c, requires_grad=True)
        frm, frv, trm, trv = fl.zeros(c), fl.ones(c), torch.zeros(c), torch.ones(c)

        def bn(lib, x, w, b, m, v):
            y = lib.nn.functional.batch_norm(x, m, v, w, b, training=True)
            y.backward(lib.ones_like(y))
        rows.append((f"batch_norm forward+backward, {name}",
                     *pair(lambda: bn(fl, fx, fw, fb, frm, frv), lambda: bn(torch, tx, tw, tb, trm, trv), reps)))
        if hasattr(fl.nn.functional, "max_pool2d"):
            def pool(lib, x):
                y = lib.nn.functional.max_pool2d(x, 3, 2, 1)
                y.backward(lib.ones_like(y))
            rows.append((f"max_pool2d 3x3/2 forward+backward, {name}", *pair(lambda: pool(fl, fx),
                                                                              lambda: pool(torch, tx), reps)))
    return rows


def resnet18(L, classes=10):
    """torchvision's ResNet-18 layout (BasicBlock x [2, 2, 2, 2]) written against library L."""
    nn = L.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                         if stride != 1 or cin != cout else None)

        def forward(self, x):
            y = nn.functional.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return nn.functional.relu(y + (self.down(x) if self.down is not None else x))

    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def resnet_rows(batch, reps, r, channels_last=False):
    """One SGD training step of ResNet-18 on 64x64 inputs: forward, cross-entropy, backward, step."""
    x = r.standard_normal((batch, 3, 64, 64)).astype(np.float32)
    y = r.integers(0, 10, batch)
    steps = []
    for L in (fl, torch):
        model = resnet18(L)
        opt = L.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        xs, ys = L.tensor(x), L.tensor(y)
        if channels_last:
            model.to(memory_format=L.channels_last)
            xs = xs.to(memory_format=L.channels_last)

        def step(L=L, model=model, opt=opt, xs=xs, ys=ys):
            opt.zero_grad()
            L.nn.functional.cross_entropy(model(xs), ys).backward()
            opt.step()
        steps.append(step)
    name = "ResNet-18 training step, 64x64" + (", channels-last" if channels_last else "")
    return [(name, *pair(steps[0], steps[1], reps))]


def main(reps=5, batch=32, channels_last=False):
    fl.set_num_threads(2)
    torch.set_num_threads(2)
    r = np.random.default_rng(0)
    if channels_last:
        rows = conv_rows(batch, reps, r, True) + norm_pool_rows(batch, reps, r, True) + resnet_rows(batch, reps, r, True)
    else:
        rows = conv_rows(batch, reps, r) + norm_pool_rows(batch, reps, r) + resnet_rows(batch, reps, r)
    print(f"batch {batch}, float32, 2 threads, median of {reps}\n")
    print("| case | flambeau ms | torch ms | ratio |\n|---|---|---|---|")
    for name, f, t in rows:
        print(f"| {name} | {f * 1e3:.1f} | {t * 1e3:.1f} | {t / f:.2f}x |")


if __name__ == "__main__":
    numbers = [int(a) for a in sys.argv[1:] if not a.startswith("--")]
    main(*numbers, channels_last="--channels-last" in sys.argv)
