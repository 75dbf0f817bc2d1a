"""flambeau.nn.utils.rnn, as torch.nn.utils.rnn: PackedSequence, pack_padded_sequence,
pad_packed_sequence, pad_sequence, pack_sequence. Packing and unpacking are one index_select
each (so their gradients are one index_add); the RNN modules take and return PackedSequence."""
from collections import namedtuple

from ... import _C

__all__ = ["PackedSequence", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "pack_sequence"]


class PackedSequence(namedtuple("PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """data [N, *]: the steps' rows one after the other (step t has batch_sizes[t] rows, the
    batch sorted by decreasing length); sorted_indices / unsorted_indices: the permutation
    to that order and back (None when the input was already sorted)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        return self if data is self.data else type(self)(data, self.batch_sizes, self.sorted_indices,
                                                         self.unsorted_indices)

    @property
    def is_cuda(self):
        return False

    def is_pinned(self):
        return False


def _invert_permutation(perm):
    if perm is None:
        return None
    p = [int(i) for i in perm.tolist()]
    inv = [0] * len(p)
    for i, j in enumerate(p):
        inv[j] = i
    return _C.tensor(inv, dtype=_C.int64)


def _lengths_list(lengths):
    if isinstance(lengths, _C.Tensor):
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Packs a padded batch [T, B, *] ([B, T, *] when batch_first) of sequences of the given
    lengths. enforce_sorted: lengths must be decreasing; else the batch is sorted here and
    the permutation kept in the result."""
    lens = _lengths_list(lengths)
    b_dim = 0 if batch_first else 1
    if input.dim() < 2:
        raise ValueError(f"[pack_padded_sequence] expected an input of at least 2 dims, got shape "
                         f"{tuple(input.shape)}")
    if len(lens) != input.shape[b_dim]:
        raise ValueError(f"[pack_padded_sequence] expected {input.shape[b_dim]} lengths for an input of shape "
                         f"{tuple(input.shape)} (batch_first={batch_first}), got {len(lens)}")
    if any(n <= 0 for n in lens):
        raise RuntimeError("[pack_padded_sequence] Length of all samples has to be greater than 0, but found an "
                           f"element in 'lengths' that is <= 0 (lengths {lens})")
    if enforce_sorted:
        if any(lens[i] < lens[i + 1] for i in range(len(lens) - 1)):
            raise RuntimeError("[pack_padded_sequence] `lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` to "
                               "pack_padded_sequence and/or pack_sequence to sidestep this requirement if you do "
                               f"not need ONNX exportability (lengths {lens})")
        sorted_indices = None
        order = list(range(len(lens)))
    else:
        order = sorted(range(len(lens)), key=lambda i: -lens[i])
        sorted_indices = _C.tensor(order, dtype=_C.int64)
    x = input.transpose(0, 1) if batch_first else input
    T, B = x.shape[0], x.shape[1]
    slens = [lens[i] for i in order]
    if slens[0] > T:
        raise RuntimeError(f"[pack_padded_sequence] a length ({slens[0]}) exceeds the input's {T} steps (input "
                           f"shape {tuple(input.shape)})")
    batch_sizes = [sum(1 for n in slens if n > t) for t in range(slens[0])]
    rows = [t * B + order[b] for t, bs in enumerate(batch_sizes) for b in range(bs)]
    flat = x.reshape([T * B] + list(x.shape[2:]))
    data = flat.index_select(0, _C.tensor(rows, dtype=_C.int64))
    return PackedSequence(data, _C.tensor(batch_sizes, dtype=_C.int64), sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The padded batch [T, B, *] ([B, T, *] when batch_first) of a PackedSequence, in the
    original batch order, and the lengths (int64)."""
    data, batch_sizes, sorted_indices, unsorted_indices = sequence
    bs = [int(b) for b in batch_sizes.tolist()]
    T, B, N = len(bs), bs[0], data.shape[0]
    if total_length is not None:
        if total_length < T:
            raise ValueError("[pad_packed_sequence] Expected total_length to be at least the length of the longest "
                             f"sequence in the input, but got total_length={total_length} and max sequence length "
                             f"being {T}")
        T_out = total_length
    else:
        T_out = T
    unsort = list(range(B)) if unsorted_indices is None else [int(i) for i in unsorted_indices.tolist()]
    offsets, acc = [], 0
    for b in bs:
        offsets.append(acc)
        acc += b
    rows = []
    for t in range(T_out):
        for j in range(B):
            s = unsort[j]  # original batch entry j sits at sorted position s
            rows.append(offsets[t] + s if t < T and s < bs[t] else N)
    pad = _C.full([1] + list(data.shape[1:]), padding_value, dtype=data.dtype)
    ext = _C.cat([data, pad], 0)
    out = ext.index_select(0, _C.tensor(rows, dtype=_C.int64)).reshape([T_out, B] + list(data.shape[1:]))
    sorted_lengths = [sum(1 for b in bs if b > s) for s in range(B)]
    lengths = _C.tensor([sorted_lengths[unsort[j]] for j in range(B)], dtype=_C.int64)
    if batch_first:
        out = out.transpose(0, 1)
    return out, lengths


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stacks sequences [L_i, *] into [max L, B, *] ([B, max L, *] when batch_first), padded
    with padding_value on the right (or the left)."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"[pad_sequence] Expected padding_side to be one of left or right, but got {padding_side}.")
    if isinstance(sequences, _C.Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("[pad_sequence] received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        n = longest - s.shape[0]
        if n:
            fill = _C.full([n] + list(s.shape[1:]), padding_value, dtype=s.dtype)
            s = _C.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return _C.stack(padded, 0 if batch_first else 1)


def pack_sequence(sequences, enforce_sorted=True):
    """pack_padded_sequence of pad_sequence(sequences) with their lengths."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences of a padded batch, each cut to its length."""
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    return [x[i, :int(n)] for i, n in enumerate(_lengths_list(lengths))]


def unpack_sequence(packed_sequences):
    """The list of sequences of a PackedSequence, in the original batch order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
