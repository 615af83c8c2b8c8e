"""Handlers of ordering and scans: sort / argsort / msort / topk, cumprod.

Sorting along a dim of n elements is composed from compares and reductions (n x n per row,
fused into a few loops): each element's rank is the number of elements that go before it,
`rank[i] = sum_j (x[j] < x[i]) + sum_{j < i} (x[j] == x[i])` (stable: ties keep their order;
descending swaps < for >), the index of the element at sorted position p is
`sum_i i * (rank[i] == p)`, and the values are a gather at those indices. topk is a sort and a
slice. NaNs are not ordered as torch orders them (last): a sort of NaNs is wrong.

cumprod along a dim of n is a product over a lower-triangular mask of n x n factors.
"""

from __future__ import annotations

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.registry import HandlerTable
from frontends.torch_import.common import float_input

HANDLERS = HandlerTable()
handles = HANDLERS.handles


def _to_last(g, x, dim):
    rank = len(g.shape(x))
    perm = [d for d in range(rank) if d != dim] + [dim]
    return g.transpose(x, perm), list(np.argsort(perm))


def _sort(imp, x, dim, descending: bool, k=None):
    """(values, int64 indices) of x sorted along dim (the first k when k is given)."""
    g = imp.g
    shape = g.shape(x)
    if not shape:
        return x, np.zeros((), np.int64)
    if g.dtype(x) == np.bool_:
        x = g.cast(x, np.int32)
    dim %= len(shape)
    n = shape[dim]
    k = n if k is None else k
    xt, back = _to_last(g, x, dim)
    lead = g.shape(xt)[:-1]
    a = g.reshape(xt, lead + (n, 1))  # x[i]
    b = g.reshape(xt, lead + (1, n))  # x[j]
    before = g.compare("gt" if descending else "lt", b, a)
    earlier = np.tril(np.ones((n, n), np.bool_), -1)  # j < i
    tie = g.select(earlier, g.compare("eq", b, a), np.array(False))
    rank = g.reduce(aicc.ReduceSumOp, g.cast(g.select(before, np.array(True), tie), np.int64), [len(lead) + 1], False)
    # idx[p] = sum_i i * (rank[i] == p), for the first k positions p
    hit = g.compare("eq", g.reshape(rank, lead + (n, 1)), np.arange(k, dtype=np.int64).reshape(1, k))
    idx = g.reduce(aicc.ReduceSumOp, g.select(hit, np.arange(n, dtype=np.int64).reshape(n, 1), np.array(0, np.int64)),
                   [len(lead)], False)  # lead + (k,)
    vals = g.emit(lambda d, i: aicc_nn.GatherElementsOp(d, i, len(lead)), xt, idx)
    vals = g.cast(vals, imp.out_dtype(0))
    return g.transpose(vals, back), g.transpose(idx, back)


@handles("aten.sort.default")
def _sort_default(imp, a):
    return list(_sort(imp, a["input"], a.get("dim", -1), bool(a.get("descending", False))))


@handles("aten.sort.stable")
def _sort_stable(imp, a):
    return list(_sort(imp, a["input"], a.get("dim", -1), bool(a.get("descending", False))))


@handles("aten.argsort.default", "aten.argsort.stable")
def _argsort(imp, a):
    return _sort(imp, a["input"], a.get("dim", -1), bool(a.get("descending", False)))[1]


@handles("aten.msort.default")
def _msort(imp, a):
    return _sort(imp, a["input"], 0, False)[0]


@handles("aten.topk.default")
def _topk(imp, a):
    """topk: the first k of a stable sort (ties: the lower index first, as torch's CPU kernel
    for sorted=True); sorted=False returns the same order."""
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    if not shape:
        return [x, np.zeros((), np.int64)]
    return list(_sort(imp, x, a.get("dim", -1), bool(a.get("largest", True)), int(a["k"])))


@handles("aten.cumprod.default")
def _cumprod(imp, a):
    g = imp.g
    dt = imp.out_dtype()
    x = imp.operand(a["input"], dt) if dt.kind in "iu" else float_input(imp, a["input"])
    shape = g.shape(x)
    if not shape or 0 in shape:
        return x
    dim = a["dim"] % len(shape)
    n = shape[dim]
    xt, back = _to_last(g, x, dim)
    lead = g.shape(xt)[:-1]
    keep = np.tril(np.ones((n, n), np.bool_))  # [i, k]: k <= i
    f = g.select(keep, g.reshape(xt, lead + (1, n)), np.ones((), g.dtype(xt)))
    return g.transpose(g.reduce(aicc.ReduceProdOp, f, [len(lead) + 1], False), back)

