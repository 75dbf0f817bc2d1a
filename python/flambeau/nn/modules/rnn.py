"""RNN, LSTM, GRU and RNNCell, LSTMCell, GRUCell, as torch.nn's. The C++ layers
(src/flambeau/nn/modules_rnn.cpp) check the arguments and make the parameters with torch's
names, order and initialisation (so state_dicts load both ways); forward calls the C++
computation they call (nn/rnn.h: one input-projection GEMM per layer and direction over the
whole sequence, a fused recurrence with its own backward). PackedSequence inputs are handled
here as torch does: the batch sorted by length, h_n back in the caller's order."""
import warnings

from ... import _C
from ..utils.rnn import PackedSequence
from .layers import _build
from .module import Module



class RNNBase(Module):
    _name = "RNN"

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, dtype=None, nonlinearity=None):
        super().__init__()
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)):
            raise ValueError(f"[{self._name}] dropout should be a number in range [0, 1] representing the "
                             f"probability of an element being zeroed, got {dropout!r}")
        args = dict(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers, bias=bias,
                    batch_first=batch_first, dropout=float(dropout), bidirectional=bidirectional, dtype=dtype)
        if nonlinearity is not None:
            args["nonlinearity"] = nonlinearity
        if mode == "LSTM":
            args["proj_size"] = proj_size
        _build(self, self._name, **args)
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and "
                          f"num_layers={num_layers}", stacklevel=3)
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        self._flat_weights_names = list(self._parameters)  # torch's order, as the C++ layer registered them

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        w = self._flat_weights
        return [w[i:i + per] for i in range(0, len(w), per)]

    def reset_parameters(self):
        import math
        from .. import init
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _run(self, input, hx, cx):
        packed = isinstance(input, PackedSequence)
        if packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            if sorted_indices is not None:
                hx = None if hx is None else hx.index_select(1, sorted_indices)
                cx = None if cx is None else cx.index_select(1, sorted_indices)
            sizes = [int(b) for b in batch_sizes.tolist()]
        else:
            data, sizes = input, None
        out, h, c = _C._nn._rnn(self._name, self.mode, self.input_size, self.hidden_size, self.num_layers, self.bias,
                                self.batch_first, self.dropout, self.bidirectional, self.proj_size,
                                self._flat_weights, data, hx, cx, self.training, sizes)
        if packed:
            out = PackedSequence(out, batch_sizes, sorted_indices, unsorted_indices)
            if unsorted_indices is not None:
                h = h.index_select(1, unsorted_indices)
                c = None if c is None else c.index_select(1, unsorted_indices)
        return out, h, c

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)


class RNN(RNNBase):
    """Elman RNN: h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), tanh or relu."""
    _name = "RNN"

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, 0, dtype, nonlinearity=nonlinearity)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        out, h, _ = self._run(input, hx, None)
        return out, h


class LSTM(RNNBase):
    """LSTM with torch's gates (i, f, g, o), optional projection (proj_size); returns
    (output, (h_n, c_n))."""
    _name = "LSTM"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, dtype)

    def forward(self, input, hx=None):
        if hx is None:
            h0 = c0 = None
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError(f"[LSTM] hx must be a tuple (h_0, c_0), got {type(hx).__name__}")
            h0, c0 = hx
        out, h, c = self._run(input, h0, c0)
        return out, (h, c)


class GRU(RNNBase):
    """GRU with torch's gates (r, z, n)."""
    _name = "GRU"

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, 0,
                         dtype)

    def forward(self, input, hx=None):
        out, h, _ = self._run(input, hx, None)
        return out, h


class RNNCellBase(Module):
    _name = "RNNCell"
    _mode = "RNN_TANH"

    def __init__(self, input_size, hidden_size, bias, dtype, nonlinearity=None):
        super().__init__()
        args = dict(input_size=input_size, hidden_size=hidden_size, bias=bias, dtype=dtype)
        if nonlinearity is not None:
            args["nonlinearity"] = nonlinearity
        _build(self, self._name, **args)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias

    def _cell(self, input, hx, cx):
        return _C._nn._rnn_cell(self._name, self._mode, input, hx, cx, self.weight_ih, self.weight_hh, self.bias_ih,
                                self.bias_hh)

    def reset_parameters(self):
        import math
        from .. import init
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)


class RNNCell(RNNCellBase):
    _name = "RNNCell"

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, dtype, nonlinearity=nonlinearity)
        self.nonlinearity = nonlinearity
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"

    def forward(self, input, hx=None):
        return self._cell(input, hx, None)[0]


class LSTMCell(RNNCellBase):
    _name = "LSTMCell"
    _mode = "LSTM"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, dtype)

    def forward(self, input, hx=None):
        h0, c0 = (None, None) if hx is None else hx
        return self._cell(input, h0, c0)


class GRUCell(RNNCellBase):
    _name = "GRUCell"
    _mode = "GRU"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, dtype)

    def forward(self, input, hx=None):
        return self._cell(input, hx, None)[0]
