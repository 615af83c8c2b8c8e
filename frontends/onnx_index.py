"""ONNX handlers for data-dependent indexing: GatherND, ScatterND, ScatterElements, TopK, and
the refusal of NonMaxSuppression.

All are compositions of aicc ops with static shapes:
- GatherND linearizes each index tuple (plus the batch offset) and is one aicc.gather on the
  data viewed as (positions, rest).
- ScatterND / ScatterElements compare every update's flat target position with every data
  position (an (updates x positions) one-hot, O(M * P)). reduction='none' writes the last
  update that hits a position (the reference's sequential writes): a reduce_max of the
  matching update numbers, then a gather; add / mul / max / min reduce the hits.
- TopK ranks each element among its axis (rank = how many come before it: larger, or equal
  at a lower index, as the reference's stable sort) and picks rank r for r < k with a one-hot
  sum: exact, ties to the lower index, O(n^2) per row.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.onnx_common import const, unsupported
from frontends.registry import HandlerTable

__all__ = ["HANDLERS"]

HANDLERS = HandlerTable()
handles = HANDLERS.handles


def _wrap(g, idx, size):
    """Negative indices counted from the end (int64)."""
    idx = g.cast(idx, np.int64)
    if isinstance(idx, np.ndarray):
        return np.where(idx < 0, idx + size, idx)
    neg = g.compare("lt", idx, np.array(0, np.int64))
    return g.select(neg, g.add(idx, np.array(size, np.int64)), idx)


def _take_last(g, idx, j):
    """idx[..., j] (the last axis dropped)."""
    shape = g.shape(idx)
    if isinstance(idx, np.ndarray):
        return idx[..., j]
    r = len(shape)
    y = g.emit(lambda v: aicc_nn.SliceOp(v, [0] * (r - 1) + [j], [1] * r, list(shape[:-1]) + [1]), idx)
    return g.reshape(y, shape[:-1])


def _gather(g, data, idx, axis):
    if isinstance(data, np.ndarray) and isinstance(idx, np.ndarray):
        return np.take(data, idx, axis=axis)
    return g.emit(lambda d, i: aicc_nn.GatherOp(d, i, axis), data, idx)


@handles("GatherND")
def _op_gather_nd(imp, node, ins, at):
    g, data, idx = imp.g, ins[0], ins[1]
    b = int(at.get("batch_dims", 0))
    ds, ish = g.shape(data), g.shape(idx)
    k = ish[-1]
    if 0 in ds or 0 in ish or b + k > len(ds):
        raise unsupported(imp, node, f"data {ds} with indices {ish}")
    nb = math.prod(ds[:b])
    inner = ds[b:b + k]
    rest = ds[b + k:]
    flat = None
    stride = 1
    for j in range(k - 1, -1, -1):
        term = _wrap(g, _take_last(g, idx, j), inner[j])
        term = g.mul(term, np.array(stride, np.int64)) if stride != 1 else term
        flat = term if flat is None else g.add(flat, term)
        stride *= inner[j]
    positions = math.prod(inner)
    if b:  # each batch entry reads its own block of positions
        batch = np.arange(nb, dtype=np.int64).reshape(ds[:b] + (1,) * (len(ish) - 1 - b)) * positions
        flat = g.add(flat, batch)
    src = g.reshape(data, (nb * positions, *rest))
    return [_gather(g, src, flat, 0)]


def _lowest(dt):
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


def _highest(dt):
    return np.inf if dt.kind == "f" else np.iinfo(dt).max


def _scatter_rows(imp, node, data2, flat, upd2, reduction):
    """data2 (P, R) with the rows upd2 (M, R) written to rows flat (M,) (int64, in range)."""
    g = imp.g
    p, r = g.shape(data2)
    m = g.shape(flat)[0]
    dt = g.dtype(data2)
    upd2 = g.cast(upd2, dt)
    match = g.compare("eq", g.reshape(flat, (m, 1)), np.arange(p, dtype=np.int64).reshape(1, p))  # (M, P)
    if reduction == "none":
        last = g.reduce(aicc.ReduceMaxOp, g.select(match, np.arange(m, dtype=np.int64).reshape(m, 1),
                                                   np.array(-1, np.int64)), [0], False)  # (P,)
        hit = g.reshape(g.compare("ge", last, np.array(0, np.int64)), (p, 1))
        got = _gather(g, upd2, g.emit(aicc.MaximumOp, last, np.array(0, np.int64)), 0)
        return g.select(hit, got, data2)
    m3 = g.reshape(match, (m, p, 1))
    u3 = g.reshape(upd2, (m, 1, r))
    if reduction == "add":
        return g.add(data2, g.reduce(aicc.ReduceSumOp, g.select(m3, u3, np.array(0, dt)), [0], False))
    if reduction == "mul":
        if dt.kind != "f":
            raise unsupported(imp, node, f"reduction='mul' on {dt}")
        return g.mul(data2, g.reduce(aicc.ReduceProdOp, g.select(m3, u3, np.array(1, dt)), [0], False))
    if reduction in ("max", "min"):
        fill = _lowest(dt) if reduction == "max" else _highest(dt)
        cls = aicc.ReduceMaxOp if reduction == "max" else aicc.ReduceMinOp
        red = g.reduce(cls, g.select(m3, u3, np.array(fill, dt)), [0], False)
        hit = g.reduce(aicc.ReduceMaxOp, g.cast(match, np.int32), [0], False)
        hit = g.reshape(g.compare("gt", hit, np.array(0, np.int32)), (p, 1))
        both = g.emit(aicc.MaximumOp if reduction == "max" else aicc.MinimumOp, data2, red)
        return g.select(hit, both, data2)
    raise unsupported(imp, node, f"reduction='{reduction}'")


def _check_runtime(imp, node, *vals):
    g = imp.g
    for v in vals:
        if 0 in g.shape(v):
            raise unsupported(imp, node, "an empty tensor")


@handles("ScatterND")
def _op_scatter_nd(imp, node, ins, at):
    g, data, idx, upd = imp.g, ins[0], ins[1], ins[2]
    _check_runtime(imp, node, data, idx, upd)
    ds, ish = g.shape(data), g.shape(idx)
    k = ish[-1]
    inner = ds[:k]
    rest = ds[k:]
    flat, stride = None, 1
    for j in range(k - 1, -1, -1):
        term = _wrap(g, _take_last(g, idx, j), inner[j])
        term = g.mul(term, np.array(stride, np.int64)) if stride != 1 else term
        flat = term if flat is None else g.add(flat, term)
        stride *= inner[j]
    m = math.prod(ish[:-1])
    r = math.prod(rest)
    flat = g.reshape(flat, (m,))
    out = _scatter_rows(imp, node, g.reshape(data, (math.prod(inner), r)), flat,
                        g.reshape(upd, (m, r)), at.get("reduction", "none"))
    return [g.reshape(out, ds)]


@handles("ScatterElements", "Scatter")
def _op_scatter_elements(imp, node, ins, at):
    g, data, idx, upd = imp.g, ins[0], ins[1], ins[2]
    _check_runtime(imp, node, data, idx, upd)
    ds, ish = g.shape(data), g.shape(idx)
    rank = len(ds)
    axis = at.get("axis", 0) % rank
    if g.shape(upd) != ish or len(ish) != rank or any(i > d for i, d in zip(ish, ds)):
        raise unsupported(imp, node, f"data {ds}, indices {ish} and updates {g.shape(upd)}")
    strides = [math.prod(ds[d + 1:]) for d in range(rank)]
    # the flat data position of every update: its own coordinates, the index along `axis`
    base = np.zeros(ish, np.int64)
    for d in range(rank):
        if d != axis:
            base = base + (np.arange(ish[d], dtype=np.int64) * strides[d]).reshape(
                (1,) * d + (-1,) + (1,) * (rank - d - 1))
    flat = g.add(g.mul(_wrap(g, idx, ds[axis]), np.array(strides[axis], np.int64)), base)
    m = math.prod(ish)
    out = _scatter_rows(imp, node, g.reshape(data, (math.prod(ds), 1)), g.reshape(flat, (m,)),
                        g.reshape(upd, (m, 1)), at.get("reduction", "none"))
    return [g.reshape(out, ds)]


@handles("TopK")
def _op_topk(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_numeric(node.op_type, x)
    shape = g.shape(x)
    rank = len(shape)
    if rank == 0 or 0 in shape:
        raise unsupported(imp, node, "an empty or rank-0 input")
    axis = at.get("axis", -1) % rank
    k = int(const(imp, node, ins[1], "k input").reshape(-1)[0])
    n = shape[axis]
    if not 0 <= k <= n:
        raise unsupported(imp, node, f"k={k} for an axis of {n}")
    out_shape = shape[:axis] + (k,) + shape[axis + 1:]
    if k == 0:
        return [np.zeros(out_shape, g.dtype(x)), np.zeros(out_shape, np.int64)]
    largest = bool(at.get("largest", 1))
    after = (1,) * (rank - axis - 1)
    # x_i along axis at position `axis`, x_j at a new axis after it: (..., n_i, n_j, ...)
    xi = g.reshape(x, shape[:axis + 1] + (1,) + shape[axis + 1:])
    xj = g.reshape(x, shape[:axis] + (1,) + shape[axis:])
    before = g.compare("gt" if largest else "lt", xj, xi)
    lower = (np.arange(n)[None, :] < np.arange(n)[:, None]).reshape((n, n) + after)  # j < i
    tie = g.select(g.compare("eq", xj, xi), lower, np.array(False))
    ahead = g.select(before, np.array(True), tie)
    rnk = g.reduce(aicc.ReduceSumOp, g.cast(ahead, np.int64), [axis + 1], False)  # (..., n, ...)
    # one-hot of rank r at (..., n_i, k_r, ...)
    pick = g.compare("eq", g.reshape(rnk, shape[:axis + 1] + (1,) + shape[axis + 1:]),
                     np.arange(k, dtype=np.int64).reshape((k,) + after))
    dt = g.dtype(x)
    vals = g.reduce(aicc.ReduceSumOp, g.select(pick, xi, np.array(0, dt)), [axis], False)
    pos = np.arange(n, dtype=np.int64).reshape((n, 1) + after)
    idx = g.reduce(aicc.ReduceSumOp, g.select(pick, pos, np.array(0, np.int64)), [axis], False)
    return [vals, idx]


@handles("NonMaxSuppression")
def _op_nms(imp, node, ins, at):
    raise unsupported(imp, node, "an output whose size depends on the input values (aicc "
                      "compiles static shapes)")
