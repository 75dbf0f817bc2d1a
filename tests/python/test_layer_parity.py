"""One implementation of each layer: every Python layer (flambeau.nn.modules.layers) is built by
the C++ layer of the same name (src/flambeau/nn/modules.h; _C._nn._make_layer runs its
constructor) and forwards through the same C++ functional. Checked here: both stacks have the
same layers, initialise to the same bits from the same seed with default and with explicit
arguments (so the Python defaults are the C++ ones), give bitwise-equal outputs and input
gradients on the same weights (_C._nn._cpp_layer keeps the C++ layer to compare forwards),
and reject the same arguments with the C++ message."""
import inspect

import numpy as np
import pytest

import flambeau as fl
from flambeau.nn.modules import container, conv, layers, normalization, rnn

# In one stack only, with the reason.
ONLY_ONE_STACK = {
    "Sequential": "container: no computation of its own (calls its children; see test_nn / module_test)",
    "ModuleList": "container without forward",
    "ModuleDict": "container without forward",
}

f64 = fl.float64
CONFIGS = [  # (layer, constructor arguments, inputs(seed) -> list of tensors, training)
    ("Linear", dict(in_features=5, out_features=3), "x5", True),
    ("Linear", dict(in_features=5, out_features=3, bias=False, dtype=f64), "x5d", True),
    ("Embedding", dict(num_embeddings=10, embedding_dim=4), "idx", True),
    ("Embedding", dict(num_embeddings=10, embedding_dim=4, padding_idx=-2, dtype=f64), "idx", True),
    ("LayerNorm", dict(normalized_shape=(4,)), "x4", True),
    ("LayerNorm", dict(normalized_shape=[2, 4], eps=1e-3, elementwise_affine=True, bias=False, dtype=f64), "x24d",
     True),
    ("RMSNorm", dict(normalized_shape=4), "x4", True),
    ("RMSNorm", dict(normalized_shape=(4,), eps=1e-3, elementwise_affine=True, dtype=f64), "x4d", True),
    ("Dropout", dict(), "x5", True),
    ("Dropout", dict(p=0.25), "x5", True),
    ("Dropout", dict(p=0.25), "x5", False),
    ("GELU", dict(), "x5", True),
    ("GELU", dict(approximate="tanh"), "x5", True),
    ("ReLU", dict(), "x5", True),
    ("SiLU", dict(), "x5", True),
    ("Tanh", dict(), "x5", True),
    ("Sigmoid", dict(), "x5", True),
    ("Identity", dict(), "x5", True),
    ("Flatten", dict(), "x24d", True),
    ("Flatten", dict(start_dim=0, end_dim=1), "x24d", True),
    ("Unflatten", dict(dim=1, unflattened_size=(2, 2)), "x4d", True),
    ("Conv1d", dict(in_channels=2, out_channels=4, kernel_size=3), "img1d", True),
    ("Conv1d", dict(in_channels=2, out_channels=4, kernel_size=3, stride=1, padding="same", dilation=2, groups=2,
                    bias=False, padding_mode="circular", dtype=f64), "img1dd", True),
    ("Conv2d", dict(in_channels=2, out_channels=4, kernel_size=(3, 2)), "img2d", True),
    ("Conv2d", dict(in_channels=2, out_channels=4, kernel_size=3, stride=(2, 1), padding=1, dilation=1, groups=1,
                    bias=True, padding_mode="reflect", dtype=f64), "img2dd", True),
    ("Conv3d", dict(in_channels=2, out_channels=2, kernel_size=2), "img3d", True),
    ("Conv3d", dict(in_channels=2, out_channels=2, kernel_size=2, stride=1, padding="same", dilation=2, groups=2,
                    bias=True, padding_mode="zeros", dtype=f64), "img3dd", True),
    ("ConvTranspose1d", dict(in_channels=2, out_channels=4, kernel_size=3), "img1d", True),
    ("ConvTranspose2d", dict(in_channels=2, out_channels=4, kernel_size=3, stride=2, padding=1, output_padding=1,
                             groups=2, bias=True, dilation=1, padding_mode="zeros", dtype=f64), "img2dd", True),
    ("ConvTranspose2d", dict(in_channels=2, out_channels=4, kernel_size=(2, 3)), "img2d", True),
    ("ConvTranspose3d", dict(in_channels=2, out_channels=2, kernel_size=2), "img3d", True),
    ("BatchNorm1d", dict(num_features=2), "img1d", True),
    ("BatchNorm1d", dict(num_features=2, eps=1e-3, momentum=None, affine=True, track_running_stats=True,
                         dtype=f64, bias=False), "img1dd", False),
    ("BatchNorm2d", dict(num_features=2), "img2d", True),
    ("BatchNorm2d", dict(num_features=2, eps=1e-3, momentum=0.3, affine=False, track_running_stats=False,
                         dtype=f64, bias=True), "img2dd", False),
    ("BatchNorm3d", dict(num_features=2), "img3d", False),
    ("InstanceNorm1d", dict(num_features=2), "img1d", True),
    ("InstanceNorm2d", dict(num_features=2, eps=1e-3, momentum=0.3, affine=True, track_running_stats=True,
                            dtype=f64, bias=True), "img2dd", True),
    ("InstanceNorm3d", dict(num_features=2), "img3d", True),
    ("GroupNorm", dict(num_groups=2, num_channels=2), "img2d", True),
    ("GroupNorm", dict(num_groups=1, num_channels=2, eps=1e-3, affine=True, dtype=f64, bias=False), "img1dd", True),
    ("LocalResponseNorm", dict(size=2), "img2d", True),
    ("LocalResponseNorm", dict(size=3, alpha=0.1, beta=0.5, k=2.0), "img3d", True),
    ("LSTM", dict(input_size=3, hidden_size=4), "seq", True),
    ("LSTM", dict(input_size=3, hidden_size=4, num_layers=2, bias=False, batch_first=True, dropout=0.0,
                  bidirectional=True, proj_size=2, dtype=f64), "seqd", True),
    ("GRU", dict(input_size=3, hidden_size=4), "seq", True),
    ("GRU", dict(input_size=3, hidden_size=4, num_layers=2, bias=True, batch_first=False, dropout=0.5,
                 bidirectional=True, dtype=f64), "seqd", True),
    ("RNN", dict(input_size=3, hidden_size=4), "seq", True),
    ("RNN", dict(input_size=3, hidden_size=4, num_layers=2, nonlinearity="relu", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=f64), "seqd", False),
    ("LSTMCell", dict(input_size=3, hidden_size=4), "cell", True),
    ("GRUCell", dict(input_size=3, hidden_size=4, bias=False, dtype=f64), "celld", True),
    ("RNNCell", dict(input_size=3, hidden_size=4, bias=True, nonlinearity="relu", dtype=f64), "celld", True),
    ("LinearCrossEntropyLoss", dict(in_features=4, num_classes=7), "lce", True),
    ("LinearCrossEntropyLoss", dict(in_features=4, num_classes=7, bias=True, dtype=f64, reduction="sum",
                                    weight=None, ignore_index=2, label_smoothing=0.1, z_loss=1e-3), "lced", True),
]


def make_inputs(kind):
    rng = np.random.default_rng(3)

    def floats(*shape, dtype=fl.float32):
        return fl.tensor(rng.standard_normal(shape).tolist(), dtype=dtype)
    return {
        "x5": lambda: [floats(6, 5) * 2],
        "x5d": lambda: [floats(6, 5, dtype=f64)],
        "x4": lambda: [floats(3, 6, 4)],
        "x4d": lambda: [floats(6, 4, dtype=f64)],
        "x24d": lambda: [floats(3, 2, 4, dtype=f64)],
        "idx": lambda: [fl.tensor([[0, 8, 9], [3, 8, 1]])],
        "lce": lambda: [floats(6, 4), fl.tensor([0, 6, 2, 2, 5, 1])],
        "lced": lambda: [floats(6, 4, dtype=f64), fl.tensor([0, 6, 2, 2, 5, 1])],
        "seq": lambda: [floats(5, 2, 3)],
        "seqd": lambda: [floats(5, 2, 3, dtype=f64)],
        "cell": lambda: [floats(2, 3)],
        "celld": lambda: [floats(2, 3, dtype=f64)],
        "img1d": lambda: [floats(2, 2, 7)],
        "img1dd": lambda: [floats(2, 2, 7, dtype=f64)],
        "img2d": lambda: [floats(2, 2, 5, 6)],
        "img2dd": lambda: [floats(2, 2, 5, 6, dtype=f64)],
        "img3d": lambda: [floats(1, 2, 3, 4, 3)],
        "img3dd": lambda: [floats(1, 2, 5, 4, 3, dtype=f64)],
    }[kind]()


def bits(t):
    a = t.detach().numpy()
    return a.dtype, a.shape, a.tobytes()


def python_layers():
    return {name for mod in (layers, container, conv, normalization, rnn) for name, cls in vars(mod).items()
            if inspect.isclass(cls) and issubclass(cls, fl.nn.Module) and not name.startswith("_")
            and cls.__module__ == mod.__name__ and name not in ("RNNBase", "RNNCellBase")}


def test_both_stacks_have_the_same_layers():
    py, cpp = python_layers(), set(fl._C._nn._cpp_layer_names())
    assert py - cpp - set(ONLY_ONE_STACK) == set(), "Python layers without a C++ twin"
    assert cpp - py - set(ONLY_ONE_STACK) == set(), "C++ layers without a Python twin"
    tested = {c[0] for c in CONFIGS}
    assert (py & cpp) - tested == set(), "layers in both stacks that this test does not compare"


@pytest.mark.parametrize("name,args,inputs,training", CONFIGS,
                         ids=[f"{c[0]}-{'defaults' if len(c[1]) <= 2 and 'dtype' not in c[1] else 'args'}-{i}"
                              for i, c in enumerate(CONFIGS)])
def test_layer_matches_its_cpp_twin(name, args, inputs, training):
    if name == "LinearCrossEntropyLoss" and "weight" in args:
        args = dict(args, weight=fl.tensor(np.linspace(0.5, 2.0, 7).tolist(), dtype=f64))
    fl.manual_seed(11)
    py = getattr(fl.nn, name)(**args)
    fl.manual_seed(11)
    cpp_state, cpp_load, cpp_forward = fl._C._nn._cpp_layer(name, args)
    # Same initialisation from the same seed, same defaults.
    py_state = py.state_dict()
    assert list(py_state) == list(cpp_state)
    for k in py_state:
        assert bits(py_state[k]) == bits(cpp_state[k]), k
    # Random weights, copied into the C++ layer; then the same outputs and input gradients.
    rng = np.random.default_rng(5)
    with fl.no_grad():
        for p in py.parameters():
            p.copy_(fl.tensor(rng.standard_normal(tuple(p.shape)).tolist(), dtype=p.dtype))
    cpp_load(dict(py.state_dict()))
    py.train(training)
    outs, grads = [], []
    for run in ("python", "c++"):
        xs = make_inputs(inputs)
        for x in xs:
            if x.is_floating_point():
                x.requires_grad_()
        fl.manual_seed(23)  # dropout draws the same mask
        out = py(*xs) if run == "python" else cpp_forward(xs, training)
        while isinstance(out, tuple):  # RNN / LSTM / GRU / LSTMCell: compare the output
            out = out[0]
        out.sum().backward()
        outs.append(bits(out))
        grads.append([bits(x.grad) for x in xs if x.requires_grad])
    assert outs[0] == outs[1]
    assert grads[0] == grads[1]


@pytest.mark.parametrize("name,args", [
    ("Dropout", dict(p=1.5)),
    ("LSTM", dict(input_size=3, hidden_size=4, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                  bidirectional=False, proj_size=4, dtype=None)),
    ("RNN", dict(input_size=3, hidden_size=4, num_layers=1, nonlinearity="gelu", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=None)),
    ("GELU", dict(approximate="exact")),
    ("Linear", dict(in_features=-1, out_features=2)),
    ("Embedding", dict(num_embeddings=4, embedding_dim=2, padding_idx=4, dtype=f64)),
    ("LinearCrossEntropyLoss", dict(in_features=4, num_classes=7, bias=False, dtype=f64, reduction="avg",
                                    weight=None, ignore_index=-100, label_smoothing=0.0, z_loss=0.0)),
    ("LinearCrossEntropyLoss", dict(in_features=4, num_classes=7, bias=False, dtype=f64, reduction="mean",
                                    weight=None, ignore_index=-100, label_smoothing=2.0, z_loss=0.0)),
    ("LinearCrossEntropyLoss", dict(in_features=4, num_classes=7, bias=False, dtype=f64, reduction="mean",
                                    weight=None, ignore_index=-100, label_smoothing=0.0, z_loss=-1.0)),
])
def test_both_stacks_reject_the_same_arguments(name, args):
    with pytest.raises(ValueError, match=f"\\[{name}\\]"):
        getattr(fl.nn, name)(**args)
    with pytest.raises(ValueError, match=f"\\[{name}\\]"):
        fl._C._nn._cpp_layer(name, args)


def test_python_layers_adopt_the_cpp_tensors_and_initialisation():
    fl.manual_seed(7)
    lin = fl.nn.Linear(5, 3)
    first = [bits(p) for p in lin.parameters()]
    fl.manual_seed(7)
    lin.reset_parameters()  # the C++ initialisation (nn::init_linear_), in place
    assert [bits(p) for p in lin.parameters()] == first
    assert all(isinstance(p, fl.nn.Parameter) and p.requires_grad for p in lin.parameters())
    # Absent parameters and buffers are registered as None, as torch.
    assert list(lin._parameters) == ["weight", "bias"]
    assert fl.nn.Linear(5, 3, bias=False)._parameters["bias"] is None
    assert fl.nn.LayerNorm(4, elementwise_affine=False)._parameters == {"weight": None, "bias": None}
    loss = fl.nn.LinearCrossEntropyLoss(4, 7)
    assert loss._buffers == {"weight": None} and isinstance(loss.linear, fl.nn.Linear)
    assert [n for n, _ in loss.named_parameters()] == ["linear.weight"]
