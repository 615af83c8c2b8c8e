"""Handlers of indexing: embedding, index_select, index.Tensor with one index tensor, gather.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc_nn
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


@handles("aten.index.Tensor")
def _index_tensor(imp, a):
    g, x = imp.g, a["input"]
    idx = list(a["indices"])
    used = [i for i, v in enumerate(idx) if v is not None]
    if len(used) != 1:
        raise imp.unsupported("indexing with more than one index tensor")
    v = idx[used[0]]
    if g.dtype(v) == np.bool_:
        raise imp.unsupported("indexing with a boolean mask")
    return _index(imp, x, v, used[0])


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
