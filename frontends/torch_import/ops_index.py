"""Handlers of indexing: embedding, embedding_bag, index_select, index.Tensor (one or
several index tensors), gather, diagonal.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.registry import HandlerTable
from frontends.torch_import.common import Refused

HANDLERS = HandlerTable()
handles = HANDLERS.handles


def _index(imp, x, idx, axis):
    g = imp.g
    size = g.shape(x)[axis]
    if isinstance(idx, np.ndarray):
        if np.any((idx < -size) | (idx >= size)):
            raise imp.unsupported("out-of-range indices")
        idx = np.where(idx < 0, idx + size, idx).astype(np.int64)
        if isinstance(x, np.ndarray):
            return np.take(x, idx, axis=axis)
    elif g.dtype(idx).kind not in "iu":
        raise imp.unsupported(f"indices of dtype {g.dtype(idx)}")
    return g.emit(lambda d, i: aicc_nn.GatherOp(d, i, axis), x, idx)


@handles("aten.embedding.default")
def _embedding(imp, a):
    return _index(imp, a["weight"], a["indices"], 0)


@handles("aten.index_select.default")
def _index_select(imp, a):
    return _index(imp, a["input"], a["index"], a["dim"] % len(imp.g.shape(a["input"])))


@handles("aten.index.Tensor", "aten._unsafe_index.Tensor")
def _index_tensor(imp, a):
    g, x = imp.g, a["input"]
    idx = list(a["indices"])
    used = [i for i, v in enumerate(idx) if v is not None]
    for i in used:
        if g.dtype(idx[i]) == np.bool_:
            raise imp.unsupported("indexing with a boolean mask")
    if len(used) == 1:
        return _index(imp, x, idx[used[0]], used[0])
    return _index_many(imp, x, {i: idx[i] for i in used})


def linear_index(imp, shape, idx: dict):
    """(lin, B): the index tensors `idx` ({dim: tensor}) broadcast to one shape B and combined
    into the row-major linear index of the indexed dims of `shape` (int64, negatives wrapped)."""
    g = imp.g
    b_shape = tuple(np.broadcast_shapes(*(g.shape(v) for v in idx.values())))
    lin, stride = None, 1
    for d in sorted(idx, reverse=True):
        v, n = idx[d], shape[d]
        if isinstance(v, np.ndarray):
            if np.any((v < -n) | (v >= n)):
                raise imp.unsupported("out-of-range indices")
            v = np.where(v < 0, v + n, v).astype(np.int64)
        else:
            if g.dtype(v).kind not in "iu":
                raise imp.unsupported(f"indices of dtype {g.dtype(v)}")
            v = g.binary(aicc.ModOp, g.cast(v, np.int64), np.array(n, np.int64))  # -1 -> n - 1
        term = v if stride == 1 else g.mul(v, np.array(stride, np.int64))
        lin = term if lin is None else g.add(lin, term)
        stride *= n
    return g.broadcast_to(lin, b_shape), b_shape


def _index_many(imp, x, idx: dict):
    """x[i0, i1, ...] with several index tensors (advanced indexing): the indexed dims move to
    the front and flatten into one, the index tensors broadcast to one shape B and combine
    into a linear index there (int64 arithmetic, negatives wrapped), and one gather reads it.
    B stands where the indexed dims were when they are adjacent, else in front (NumPy's rule)."""
    g = imp.g
    shape = g.shape(x)
    used = sorted(idx)
    rest = [d for d in range(len(shape)) if d not in idx]
    lin, b_shape = linear_index(imp, shape, idx)
    n = math.prod(shape[d] for d in used)
    flat = g.reshape(g.transpose(x, used + rest), (n,) + tuple(shape[d] for d in rest))
    out = _index(imp, flat, lin, 0)  # B + rest
    adjacent = used == list(range(used[0], used[-1] + 1))
    if adjacent and used[0] > 0:  # B back between the leading and the trailing dims
        nb, lead = len(b_shape), used[0]
        perm = list(range(nb, nb + lead)) + list(range(nb)) + list(range(nb + lead, nb + len(rest)))
        out = g.transpose(out, perm)
    return out


@handles("aten.gather.default")
def _gather(imp, a):
    """torch.gather: constant indices are one take from the flattened input; computed ones an
    aicc.gather_elements (an index outside the dim is not checked at run time)."""
    g, x, idx = imp.g, a["input"], a["index"]
    shape = g.shape(x)
    if not shape:
        return g.reshape(x, imp.out_shape())
    dim = a["dim"] % len(shape)
    if 0 in g.shape(idx):
        return np.zeros(g.shape(idx), imp.out_dtype())
    if not isinstance(idx, np.ndarray):
        return g.emit(lambda d, i: aicc_nn.GatherElementsOp(d, i, dim), x, idx)
    grid = list(np.indices(idx.shape))
    grid[dim] = np.where(idx < 0, idx + shape[dim], idx)
    flat = np.ravel_multi_index(tuple(grid), shape).astype(np.int64)  # one take from the flat tensor
    return _index(imp, g.reshape(x, (math.prod(shape),)), flat, 0)


@handles("aten._embedding_bag_forward_only.default", "aten._embedding_bag.default")
def _embedding_bag(imp, a):
    """F.embedding_bag: the rows of the indices, summed / averaged / maxed per bag. A bag
    matrix (bag of position l == b) is built from the offsets with compares (computed offsets
    work too); padding_idx rows and empty bags count nothing (0, as torch)."""
    g = imp.g
    weight, indices, offsets = a["weight"], a["indices"], a["offsets"]
    mode, psw = int(a.get("mode", 0)), a.get("per_sample_weights")
    if len(g.shape(indices)) != 1:
        raise imp.unsupported("2-D indices (torch passes them flattened)")
    (n,) = g.shape(indices)
    nb = g.shape(offsets)[0] - (1 if a.get("include_last_offset") else 0)
    rows = _index(imp, weight, indices, 0)  # (L, D)
    pos = np.arange(n, dtype=np.int64)
    # bag of position l: (number of offsets <= l) - 1; past the last offset with include_last_offset: none
    seg = g.sub(g.reduce(aicc.ReduceSumOp, g.cast(g.compare("le", g.reshape(g.cast(offsets, np.int64), (g.shape(offsets)[0], 1)),
                                                                 pos.reshape(1, n)), np.int64), [0], False), np.array(1, np.int64))
    member = g.compare("eq", g.reshape(seg, (1, n)), np.arange(nb, dtype=np.int64).reshape(nb, 1))  # (B, L)
    pad = a.get("padding_idx", -1)
    if pad is not None and pad >= 0:
        member = g.select(g.reshape(g.compare("ne", indices, np.array(pad, g.dtype(indices))), (1, n)), member, np.array(False))
    dt = g.dtype(weight)
    if psw is not None:
        rows = g.mul(rows, g.reshape(psw, (n, 1)))
    if mode in (0, 1):  # sum, mean
        out = g.matmul(g.cast(member, dt), rows)
        if mode == 1:
            count = g.reduce(aicc.ReduceSumOp, g.cast(member, dt), [1], True)
            out = g.div(out, g.binary(aicc.MaximumOp, count, np.array(1, dt)))
    else:  # max
        d = g.shape(rows)[1]
        m = g.select(g.reshape(member, (nb, n, 1)), g.reshape(rows, (1, n, d)), np.array(-np.inf, dt))
        out = g.reduce(aicc.ReduceMaxOp, m, [1], False)
        out = g.select(g.compare("eq", out, np.array(-np.inf, dt)), np.zeros((), dt), out)
    why = Refused("embedding_bag's bookkeeping outputs (offset2bag, bag sizes, max indices)")
    return [out, why, why, why]


@handles("aten.diagonal.default")
def _diagonal(imp, a):
    """torch.diagonal: the two dims move to the end, flatten, and one gather reads the
    (i, i + offset) elements; the diagonal is the last dim."""
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    d1, d2, off = a.get("dim1", 0) % len(shape), a.get("dim2", 1) % len(shape), a.get("offset", 0)
    n1, n2 = shape[d1], shape[d2]
    i = np.arange(max(0, min(n1 + min(off, 0), n2 - max(off, 0))), dtype=np.int64)
    r, c = i - min(off, 0), i + max(off, 0)
    rest = [d for d in range(len(shape)) if d not in (d1, d2)]
    flat = g.reshape(g.transpose(x, rest + [d1, d2]), tuple(shape[d] for d in rest) + (n1 * n2,))
    return _index(imp, flat, (r * n2 + c).astype(np.int64), len(rest))
