"""Handlers of ordering and scans: sort / argsort / msort / topk, bucketize / searchsorted,
cumprod / cummax / cummin / logcumsumexp.

Sorting along a dim of n elements is composed from compares and reductions (n x n per row,
fused into a few loops): each element's rank is the number of elements that go before it,
`rank[i] = sum_j (x[j] < x[i]) + sum_{j < i} (x[j] == x[i])` (stable: ties keep their order;
descending swaps < for >), the index of the element at sorted position p is
`sum_i i * (rank[i] == p)`, and the values are a gather at those indices. topk is a sort and a
slice. NaNs are not ordered as torch orders them (last): a sort of NaNs is wrong.

The scans other than cumsum (an aicc op) reduce along a dim of n over a lower-triangular mask
of n x n elements: cumprod a product, cummax / cummin a max / min (the index: the last
position holding it, as torch), logcumsumexp a logsumexp (exact, no running maximum).
bucketize / searchsorted count the boundaries before each value.
"""

from __future__ import annotations

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.registry import HandlerTable
from frontends.torch_import.common import float_input, op_name

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



def _masked_scan(imp, x, dim, fill):
    """(x moved so that dim is last and masked to (..., i, k) with x[k] where k <= i, `fill`
    elsewhere; the permutation back)."""
    g = imp.g
    n = g.shape(x)[dim]
    xt, back = _to_last(g, x, dim)
    lead = g.shape(xt)[:-1]
    keep = np.tril(np.ones((n, n), np.bool_))  # [i, k]: k <= i
    return g.select(keep, g.reshape(xt, lead + (1, n)), np.array(fill, g.dtype(xt))), back, len(lead) + 1


@handles("aten.cummax.default", "aten.cummin.default")
def _cummax(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    if not shape:
        return [x, np.zeros((), np.int64)]
    if g.dtype(x) == np.bool_:
        raise imp.unsupported("cummax / cummin of bool tensors")
    dim = a["dim"] % len(shape)
    is_max = "cummax" in op_name(imp.node.target)
    dt = g.dtype(x)
    fill = (-np.inf if is_max else np.inf) if dt.kind == "f" else (np.iinfo(dt).min if is_max else np.iinfo(dt).max)
    m, back, ax = _masked_scan(imp, x, dim, fill)
    vals = g.reduce(aicc.ReduceMaxOp if is_max else aicc.ReduceMinOp, m, [ax], True)  # (..., i, 1)
    n = shape[dim]
    at = g.select(g.compare("eq", m, vals), np.arange(n, dtype=np.int64), np.array(-1, np.int64))
    at = g.select(np.tril(np.ones((n, n), np.bool_)), at, np.array(-1, np.int64))
    idx = g.reduce(aicc.ReduceMaxOp, at, [ax], False)
    return [g.transpose(g.reshape(vals, g.shape(idx)), back), g.transpose(idx, back)]


@handles("aten.logcumsumexp.default")
def _logcumsumexp(imp, a):
    g = imp.g
    x = float_input(imp, a["input"])
    shape = g.shape(x)
    if not shape:
        return x
    m, back, ax = _masked_scan(imp, x, a["dim"] % len(shape), -np.inf)
    top = g.reduce(aicc.ReduceMaxOp, m, [ax], True)
    safe = g.select(g.compare("eq", top, np.array(-np.inf, g.dtype(x))), np.zeros((), g.dtype(x)), top)
    s = g.reduce(aicc.ReduceSumOp, g.unary(aicc.ExpOp, g.sub(m, safe)), [ax], True)
    out = g.add(g.unary(aicc.LogOp, s), safe)
    return g.transpose(g.reshape(out, g.shape(out)[:-1]), back)


def _count_before(imp, seq, v, right: bool, batched: bool):
    """For each value, the number of entries of the sorted `seq` before it (< v, or <= v when
    `right`), as int64; `seq` 1-D, or batched over the leading dims of v."""
    g = imp.g
    if isinstance(v, bool | int | float):
        v = np.array(v, g.dtype(seq))
    vs = g.shape(v)
    if g.dtype(seq) != g.dtype(v):
        if g.dtype(seq).kind == "f" or g.dtype(v).kind == "f":
            seq, v = g.cast(seq, np.float32), g.cast(v, np.float32)
        else:
            seq, v = g.cast(seq, np.int64), g.cast(v, np.int64)
    ss = g.shape(seq)
    b = g.reshape(seq, ss[:-1] + (1, ss[-1])) if batched else seq
    hit = g.compare("le" if right else "lt", b, g.reshape(v, vs + (1,)))
    return g.reduce(aicc.ReduceSumOp, g.cast(hit, np.int64), [len(vs)], False)


@handles("aten.bucketize.Tensor", "aten.bucketize.Scalar")
def _bucketize(imp, a):
    out = _count_before(imp, a["boundaries"], a["input"], bool(a.get("right", False)), False)
    return imp.g.cast(out, imp.out_dtype())


@handles("aten.searchsorted.Tensor", "aten.searchsorted.Scalar")
def _searchsorted(imp, a):
    if a.get("sorter") is not None:
        raise imp.unsupported("searchsorted with a sorter")
    right = bool(a.get("right", False)) or a.get("side") == "right"
    seq = a["sorted_sequence"]
    v = a["input"]
    batched = len(imp.g.shape(seq)) > 1
    return imp.g.cast(_count_before(imp, seq, v, right, batched), imp.out_dtype())
