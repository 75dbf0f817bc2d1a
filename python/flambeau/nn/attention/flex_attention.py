"""FlexAttention with torch.nn.attention.flex_attention's names, on flambeau's C++ kernel.

    from flambeau.nn.attention.flex_attention import flex_attention, create_block_mask, causal_mask
    block_mask = create_block_mask(causal_mask, B, H, S, S)
    out = flex_attention(q, k, v, block_mask=block_mask)

* Built-in mods run natively inside the block-sparse kernel (forward and backward):
  masks ``causal_mask``, ``sliding_window(w)``, ``prefix_lm(n)``, ``document_mask(doc_ids)``,
  ``noop_mask``, combined with ``and_masks`` / ``or_masks``; score mods ``alibi(slopes)``,
  ``tanh_softcap(cap)``, ``relative_bias(table)`` (the table may require grad).
* A mask_mod written in Python is compiled by ``create_block_mask`` when it is integer and
  bool arithmetic of the indices (flambeau.compile traces it once and generates C++: it
  then runs as a native mod). Otherwise it receives index tensors (b and h scalars, q_idx
  [n, 1], kv_idx [1, KV_LEN]) and is evaluated one block row at a time (memory
  O(BLOCK_SIZE x KV_LEN)); its partial blocks are stored, and the kernel runs natively.
* A score_mod written in Python is compiled by ``flex_attention`` when it is elementwise
  arithmetic of the score and the indices (+ - * /, exp, log, tanh, sigmoid, sqrt, rsqrt, abs,
  maximum, minimum, where, comparisons, casts) and reads captured tensors by index
  (``bias[h]``, ``table[q_idx - kv_idx + off]``): flambeau.compile traces it once on a score
  tile (score [n, k], b and h 0-dim, q_idx [n, 1], kv_idx [1, k]) and generates C++ with its
  derivative, so it runs as a native mod, forward and backward (captured float tensors get
  gradients). The compiled mod is cached per function and the tensors its closure, defaults
  and globals hold. Otherwise (and for float64 inputs) it runs on the composite path with
  broadcastable tensors: score [B, H, n, KV_LEN] and b [B, 1, 1, 1], h [1, H, 1, 1], q_idx
  [1, 1, n, 1], kv_idx [1, 1, 1, KV_LEN]; scores are materialised 128 query rows at a time
  with ordinary flambeau ops (autograd gives every gradient). Correct but much slower, and
  its backward keeps all score tiles (O(B*H*Q_LEN*KV_LEN) memory).
* kernel_options are accepted and ignored. The backward is bitwise reproducible (no atomics,
  independent of the thread count), so there is no separate deterministic mode.
"""
import inspect
import math
import weakref
from typing import NamedTuple, Optional

from ... import _C

_flex = _C._flex

__all__ = ["BlockMask", "flex_attention", "create_block_mask", "create_mask", "or_masks", "and_masks", "noop_mask",
           "AuxRequest", "AuxOutput", "causal_mask", "sliding_window", "prefix_lm", "document_mask", "alibi",
           "tanh_softcap", "relative_bias"]

_DEFAULT_SPARSE_BLOCK_SIZE = 128


def _fl():
    import flambeau
    return flambeau


# ---- native mods ------------------------------------------------------------------------------

class _NativeMask:
    """A mask_mod that runs in C++; calling it from Python evaluates ``fn`` on tensors."""

    def __init__(self, impl, fn):
        self._impl, self._fn = impl, fn
        self.__name__ = impl.name

    def __call__(self, b, h, q_idx, kv_idx):
        return self._fn(b, h, q_idx, kv_idx)

    def __repr__(self):
        return f"<flambeau mask_mod {self._impl.name}>"


class _NativeScore:
    """A score_mod that runs in C++; calling it from Python evaluates ``fn`` on tensors."""

    def __init__(self, impl, fn):
        self._impl, self._fn = impl, fn
        self.__name__ = impl.name

    def __call__(self, score, b, h, q_idx, kv_idx):
        return self._fn(score, b, h, q_idx, kv_idx)

    def __repr__(self):
        return f"<flambeau score_mod {self._impl.name}>"


def _ones_like_index(b, h, q_idx, kv_idx):
    return (q_idx - q_idx) + (kv_idx - kv_idx) == 0


noop_mask = _NativeMask(_flex.noop_mask(), _ones_like_index)
noop_mask.__doc__ = "Returns a noop mask_mod: every query attends to every key."
causal_mask = _NativeMask(_flex.causal_mask(), lambda b, h, q, kv: q >= kv)


def sliding_window(window: int):
    """Causal sliding window: q_idx - window <= kv_idx <= q_idx."""
    return _NativeMask(_flex.sliding_window_mask(int(window)), lambda b, h, q, kv: (q >= kv) & (q - kv <= window))


def prefix_lm(prefix_length: int):
    """Bidirectional over the first ``prefix_length`` keys, causal after."""
    return _NativeMask(_flex.prefix_lm_mask(int(prefix_length)), lambda b, h, q, kv: (kv < prefix_length) | (q >= kv))


def document_mask(doc_ids):
    """Queries attend to keys of the same document; doc_ids int [S] or [B, S] (packed sequences)."""
    ids = doc_ids if doc_ids.dim() == 2 else doc_ids.unsqueeze(0)
    return _NativeMask(_flex.document_mask(doc_ids), lambda b, h, q, kv: _doc_eval(ids, b, q, kv))


def _doc_eval(ids, b, q, kv):
    bi = b if ids.shape[0] > 1 else b - b
    return ids[bi, q] == ids[bi, kv]


def alibi(slopes):
    """ALiBi: score + slopes[h] * (kv_idx - q_idx); slopes [H]."""
    return _NativeScore(_flex.alibi(slopes), lambda s, b, h, q, kv: s + slopes[h] * (kv - q))


def tanh_softcap(cap: float):
    """cap * tanh(score / cap) (Gemma-2 style logit soft-capping)."""
    return _NativeScore(_flex.tanh_softcap(float(cap)), lambda s, b, h, q, kv: (s / cap).tanh() * cap)


def relative_bias(table):
    """score + table[h, q_idx - kv_idx + N - 1], table [H, 2N - 1] or [2N - 1], N >= the lengths.
    The table may require grad; its gradient is reduced in a fixed order (bitwise reproducible)."""
    n = (table.shape[-1] + 1) // 2
    t2 = table if table.dim() == 2 else table.unsqueeze(0)

    def fn(s, b, h, q, kv):
        return s + t2[h if t2.shape[0] > 1 else h - h, q - kv + (n - 1)]
    return _NativeScore(_flex.relative_bias(table), fn)


def _is_native(mods):
    return all(isinstance(m, _NativeMask) for m in mods)


def _combine(mask_mods, is_and):
    """The intersection (is_and) or union of mask_mods: native when they all are."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")
    if _is_native(mask_mods):
        native = (_flex.and_masks if is_and else _flex.or_masks)([m._impl for m in mask_mods])
        return _NativeMask(native, lambda b, h, q, kv: _fold(mask_mods, b, h, q, kv, is_and))

    def combined(b, h, q_idx, kv_idx):
        return _fold(mask_mods, b, h, q_idx, kv_idx, is_and)
    combined.__name__ = "and_mask" if is_and else "or_mask"
    return combined


def and_masks(*mask_mods):
    """A mask_mod that is the intersection of the given ones (native when they all are)."""
    return _combine(mask_mods, True)


def or_masks(*mask_mods):
    """A mask_mod that is the union of the given ones (native when they all are)."""
    return _combine(mask_mods, False)


def _fold(mods, b, h, q, kv, is_and):
    out = _ones_like_index(b, h, q, kv) if is_and else ~_ones_like_index(b, h, q, kv)
    for m in mods:
        out = (out & m(b, h, q, kv)) if is_and else (out | m(b, h, q, kv))
    return out


def _get_mod_type(fn):
    """2 for a mask_mod (4 positional parameters), 1 for a score_mod (5), as PyTorch."""
    if isinstance(fn, _NativeMask):
        return 2
    if isinstance(fn, _NativeScore):
        return 1
    n = sum(1 for p in inspect.signature(fn).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    if n not in (4, 5):
        raise ValueError(f"mod functions take 4 (mask_mod) or 5 (score_mod) positional arguments, got {n}")
    return 1 if n == 5 else 2


# ---- BlockMask --------------------------------------------------------------------------------

def _pair(bs):
    return (int(bs), int(bs)) if isinstance(bs, int) else (int(bs[0]), int(bs[1]))


class BlockMask:
    """Block sparsity of a mask (PyTorch's layout; int32 tensors):
    kv_num_blocks [B, H, nq] / kv_indices [B, H, nq, nk]: partial blocks (mask_mod evaluated),
    full_kv_num_blocks / full_kv_indices: blocks where everything attends (no mask_mod),
    q_num_blocks / q_indices / full_q_*: the transposes used by the backward.
    Build it with create_block_mask() or BlockMask.from_kv_blocks()."""

    def __init__(self, impl, mask_mod=None, native=True):
        self._impl = impl
        self.mask_mod = mask_mod if mask_mod is not None else noop_mask
        self._native = native  # the kernel can evaluate the partial blocks itself

    # tensors
    kv_num_blocks = property(lambda self: self._impl.kv_num_blocks)
    kv_indices = property(lambda self: self._impl.kv_indices)
    full_kv_num_blocks = property(lambda self: self._impl.full_kv_num_blocks)
    full_kv_indices = property(lambda self: self._impl.full_kv_indices)
    q_num_blocks = property(lambda self: self._impl.q_num_blocks)
    q_indices = property(lambda self: self._impl.q_indices)
    full_q_num_blocks = property(lambda self: self._impl.full_q_num_blocks)
    full_q_indices = property(lambda self: self._impl.full_q_indices)

    @property
    def BLOCK_SIZE(self):
        return (self._impl.q_block, self._impl.kv_block)

    @property
    def seq_lengths(self):
        return (self._impl.q_len, self._impl.kv_len)

    @property
    def shape(self):
        return tuple(self.kv_num_blocks.shape[:2]) + self.seq_lengths

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None, full_kv_indices=None,
                       BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, mask_mod=None, seq_lengths=None, compute_q_blocks=True):
        qb, kb = _pair(BLOCK_SIZE)
        native = mask_mod is None or isinstance(mask_mod, _NativeMask)
        impl = _flex.from_kv_blocks(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, qb, kb,
                                    mask_mod._impl if isinstance(mask_mod, _NativeMask) else None,
                                    tuple(seq_lengths) if seq_lengths is not None else None)
        return cls(impl, mask_mod, native)

    def __getitem__(self, index):
        """Index the batch and head dims (ints keep the dim, as PyTorch's code does)."""
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) > 2:
            raise IndexError("BlockMask indexing takes at most (batch, head)")
        bounds = []
        for i, n in enumerate(self.kv_num_blocks.shape[:2]):
            ix = index[i] if i < len(index) else slice(None)
            if isinstance(ix, int):
                ix = ix + n if ix < 0 else ix
                bounds.append((ix, ix + 1))
            elif isinstance(ix, slice) and ix.step in (None, 1):
                start, stop, _ = ix.indices(n)
                bounds.append((start, stop))
            else:
                raise IndexError(f"BlockMask supports ints and unit-step slices, got {ix!r}")
        (b0, b1), (h0, h1) = bounds
        return BlockMask(self._impl.slice(b0, b1, h0, h1), self.mask_mod, self._native)

    def _adjust(self, new_q_len, new_kv_len):
        """Crops the mask to its top-left new_q_len x new_kv_len corner (e.g. for decoding)."""
        return BlockMask(self._impl.adjust(int(new_q_len), int(new_kv_len)), self.mask_mod, self._native)

    def numel(self):
        return self._impl.numel()

    def sparsity(self):
        """Percentage of the score matrix in no block (100 * (1 - computed / numel))."""
        return self._impl.sparsity()

    def to_dense(self):
        """int32 [B, H, nq, nk]: 1 for the blocks that are computed (partial or full)."""
        return self._impl.to_dense()

    def to_string(self, grid_size=(20, 20), limit=4):
        d = self.to_dense()
        rows = [self._impl.to_string()]
        for b in range(min(d.shape[0], limit)):
            for h in range(min(d.shape[1], limit)):
                rows.append(f"(b={b}, h={h})")
                g = d[b, h].tolist()
                for r in g[:grid_size[0]]:
                    rows.append("".join("██" if x else "  " for x in r[:grid_size[1]]))
        return "\n".join(rows)

    def __repr__(self):
        return self._impl.to_string()

    def __str__(self):
        return self.to_string()


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                      _compile=False, separate_full_blocks=True):
    """A BlockMask for mask_mod(b, h, q_idx, kv_idx) -> bool. Built block by block: native
    mods classify blocks in C++ (in parallel, closed form where one exists); a Python mask_mod
    is evaluated one block row of index tensors at a time. B or H None means 1 (broadcast)."""
    B = 1 if B is None else int(B)
    H = 1 if H is None else int(H)
    qb, kb = _pair(BLOCK_SIZE)
    if _get_mod_type(mask_mod) != 2:
        raise ValueError("create_block_mask expects a mask_mod(b, h, q_idx, kv_idx); got a score_mod")
    if not isinstance(mask_mod, _NativeMask):
        impl, _ = _flex.compile_mask_mod(mask_mod)  # integer and bool arithmetic of the indices: native
        if impl is not None:  # (the BlockMask keeps the function it was given, as torch's)
            return BlockMask(_flex.create_block_mask(impl, B, H, int(Q_LEN), int(KV_LEN), qb, kb), mask_mod)
    if isinstance(mask_mod, _NativeMask):
        return BlockMask(_flex.create_block_mask(mask_mod._impl, B, H, int(Q_LEN), int(KV_LEN), qb, kb), mask_mod)
    fl = _fl()
    kv_idx = fl.arange(int(KV_LEN)).view(1, int(KV_LEN))

    def rows(b, h, q0, n):
        with fl.no_grad():
            m = mask_mod(fl.tensor(b), fl.tensor(h), fl.arange(q0, q0 + n).view(n, 1), kv_idx)
            if not isinstance(m, fl.Tensor):
                m = fl.tensor(bool(m))
            return m.expand(n, int(KV_LEN))
    return BlockMask(_flex.create_block_mask_from_rows(rows, B, H, int(Q_LEN), int(KV_LEN), qb, kb), mask_mod)


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device=None):
    """The dense bool mask [B, H, Q_LEN, KV_LEN] of a mask_mod (or of a score_mod: where it
    is not -inf), evaluated with broadcast index tensors. Memory O(B*H*Q_LEN*KV_LEN)."""
    fl = _fl()
    B, H = B or 1, H or 1
    b, h, q, kv = _index_grid(B, H, 0, Q_LEN, KV_LEN)
    with fl.no_grad():
        if _get_mod_type(mod_fn) == 2:
            m = mod_fn(b, h, q, kv)
        else:
            m = mod_fn(fl.zeros(B, H, Q_LEN, KV_LEN), b, h, q, kv) != float("-inf")
        return m.expand(B, H, Q_LEN, KV_LEN).contiguous()


def _index_grid(B, H, q0, n, S):
    fl = _fl()
    return (fl.arange(B).view(B, 1, 1, 1), fl.arange(H).view(1, H, 1, 1), fl.arange(q0, q0 + n).view(1, 1, n, 1),
            fl.arange(S).view(1, 1, 1, S))


# ---- flex_attention ---------------------------------------------------------------------------

class AuxRequest(NamedTuple):
    lse: bool = False
    max_scores: bool = False


class AuxOutput(NamedTuple):
    lse: Optional[object] = None
    max_scores: Optional[object] = None


def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, *, return_aux=None):
    """softmax(where(mask_mod, score_mod(q k^T * scale), -inf)) v over the blocks of block_mask.

    query [B, Hq, L, E], key [B, Hkv, S, E], value [B, Hkv, S, Ev] -> [B, Hq, L, Ev];
    with return_lse (or return_aux=AuxRequest(lse=True)) also the logsumexp [B, Hq, L]
    (float32, natural log; -inf and an output of 0 for rows that see no key)."""
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux")
    want_lse = return_lse or (return_aux is not None and return_aux.lse)
    if return_aux is not None and return_aux.max_scores:
        raise NotImplementedError("flex_attention: max_scores is not implemented")
    if score_mod is not None and _get_mod_type(score_mod) != 1:
        raise ValueError("flex_attention expects a score_mod(score, b, h, q_idx, kv_idx)")
    if block_mask is not None and not isinstance(block_mask, BlockMask):
        raise TypeError(f"flex_attention: block_mask must be a BlockMask, got {type(block_mask).__name__}")
    native = (block_mask is None or block_mask._native) and str(query.dtype) != "flambeau.float64"
    mod = None
    if native and score_mod is not None:
        mod = score_mod._impl if isinstance(score_mod, _NativeScore) else _compiled_score_mod(score_mod)
        native = mod is not None
    if native:
        out, lse = _flex.flex_attention(query, key, value, mod, block_mask._impl if block_mask is not None else None,
                                        scale, enable_gqa, want_lse)
    else:
        out, lse = _composite(query, key, value, score_mod, block_mask, scale, enable_gqa)
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None)
    return (out, lse) if return_lse else out


_score_mods = weakref.WeakKeyDictionary()  # Python score_mod -> (_captured_ids, native mod or None, why not)


def _captured_ids(fn):
    """The ids of the tensors fn's closure, defaults and the globals it names hold: a new tensor
    bound there makes the compiled mod stale (in-place updates are seen without retracing)."""
    found = list(getattr(fn, "__defaults__", None) or ())
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            found.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    code, names = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    if code is not None:
        found += [names[n] for n in code.co_names if n in names]
    tensor = _fl().Tensor
    return tuple(id(x) for x in found if isinstance(x, tensor))


def _compiled_score_mod(fn):
    """fn compiled into a native score_mod (None when it cannot be: a break in the trace, an op
    the generator does not know, a disabled function or an error; the composite path runs it)."""
    ids = _captured_ids(fn)
    try:
        hit = _score_mods.get(fn)
    except TypeError:  # not weakly referenceable: compiled on every call
        hit = None
    if hit is not None and hit[0] == ids:
        return hit[1]
    impl, why = _flex.compile_score_mod(fn)
    try:
        _score_mods[fn] = (ids, impl, why)
    except TypeError:
        pass
    return impl


def _composite(q, k, v, score_mod, block_mask, scale, enable_gqa):
    """The materialised reference path (Python score_mods, Python masks from from_kv_blocks,
    float64), 128 query rows at a time; gradients come from autograd."""
    fl = _fl()
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"[flex_attention] query, key and value must be 4-D, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    B, Hq, L, E = q.shape
    Hkv, S = k.shape[1], k.shape[2]
    if Hq != Hkv and not (enable_gqa and Hq % Hkv == 0):
        raise ValueError(f"[flex_attention] {Hq} query heads and {Hkv} key/value heads (enable_gqa={enable_gqa})")
    if block_mask is not None and block_mask.seq_lengths != (L, S):
        raise ValueError(f"[flex_attention] the block mask was made for {block_mask.seq_lengths}, got ({L}, {S})")
    wt = fl.float64 if str(q.dtype) == "flambeau.float64" else fl.float32
    G = Hq // Hkv
    kk, vv = (t if G == 1 else t.unsqueeze(2).expand(B, Hkv, G, S, t.shape[3]).reshape(B, Hq, S, t.shape[3])
              for t in (k, v))
    kk, vv = kk.to(wt), vv.to(wt)
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    kinds = None
    if block_mask is not None:
        qb, kb = block_mask.BLOCK_SIZE
        part = _flex.from_kv_blocks(block_mask.kv_num_blocks, block_mask.kv_indices, None, None, qb, kb, None,
                                    block_mask.seq_lengths).to_dense()
        kinds = part if block_mask.full_kv_num_blocks is None else part + 2 * _flex.from_kv_blocks(
            block_mask.full_kv_num_blocks, block_mask.full_kv_indices, None, None, qb, kb, None,
            block_mask.seq_lengths).to_dense()
    outs, lses = [], []
    step = _DEFAULT_SPARSE_BLOCK_SIZE
    for q0 in range(0, L, step):
        n = min(step, L - q0)
        b, h, qi, ki = _index_grid(B, Hq, q0, n, S)
        s = (q[:, :, q0:q0 + n].to(wt) @ kk.transpose(-1, -2)) * scale
        if score_mod is not None:
            s = score_mod(s, b, h, qi, ki)
        if kinds is not None:
            kd = kinds[b if kinds.shape[0] > 1 else b - b, h if kinds.shape[1] > 1 else h - h, qi // qb, ki // kb]
            mask = (kd == 2) | ((kd == 1) & block_mask.mask_mod(b, h, qi, ki))
            row_any = mask.any(-1, keepdim=True)
            s = s.masked_fill(~mask, float("-inf")).masked_fill(~row_any, 0.0)
            p = s.softmax(-1) * row_any
            lse = fl.logsumexp(s, -1).masked_fill(~row_any.squeeze(-1), float("-inf"))
        else:
            p, lse = s.softmax(-1), fl.logsumexp(s, -1)
        outs.append((p @ vv).to(q.dtype))
        lses.append(lse.to(fl.float32))
    return fl.cat(outs, 2), fl.cat(lses, 2)
