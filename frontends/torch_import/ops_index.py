"""Handlers of indexing: embedding, index_select, index.Tensor (one or several index
tensors), gather.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.registry import HandlerTable

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
