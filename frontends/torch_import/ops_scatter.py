"""Handlers of the writes by index: index_put (`x[i, j] = v`, `+=` with accumulate, boolean
masks), index_add / index_copy, scatter / scatter_add / scatter_reduce.

aicc has no scatter op; each write is composed from compare, select, reductions and gathers
(every one of them fused and vectorized like any other op):

* a one-hot mask of the targets, `mask[k, p] = (index[k] == p)`, for K updates and N rows;
* accumulate: x + mask^T @ v (a matmul for floats, a masked sum for integers);
* assignment: the last update of each row wins (torch's CPU order for duplicates),
  w[p] = max_k where(mask[k, p], k, -1), then a gather of v at w where w >= 0;
* scatter_reduce: a masked sum / prod / max / min / mean over the index's dim.

The cost is K x N compares per element of a row: right for the writes of real models (cache
updates, a few positions, label smoothing), wasteful for a scatter of millions of elements.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.registry import HandlerTable
from frontends.torch_import.ops_index import linear_index
from frontends.torch_import.ops_shape import slice_dim

HANDLERS = HandlerTable()
handles = HANDLERS.handles


def _fill(dt, kind: str) -> np.ndarray:
    """The identity of a max (kind 'max') or min ('min') reduction in dtype dt."""
    if dt.kind == "f":
        return np.array(-np.inf if kind == "max" else np.inf, dt)
    info = np.iinfo(dt) if dt.kind in "iu" else None
    if info is None:  # bool
        return np.array(kind != "max", dt)
    return np.array(info.min if kind == "max" else info.max, dt)


def _scatter_rows(imp, x, lin, v, accumulate: bool):
    """x (N, R) with rows lin (K,) of v (K, R) written (or added) into it."""
    g = imp.g
    n, k = g.shape(x)[0], g.shape(lin)[0]
    mask = g.compare("eq", g.reshape(lin, (k, 1)), np.arange(n, dtype=np.int64).reshape(1, n))  # (K, N)
    if accumulate:
        r = g.shape(v)[1]
        if g.dtype(x) == np.bool_:  # logical or
            hit = g.select(g.reshape(mask, (k, n, 1)), g.cast(g.reshape(v, (k, 1, r)), np.int32), np.array(0, np.int32))
            hit = g.binary(aicc.MaximumOp, g.cast(x, np.int32), g.reduce(aicc.ReduceMaxOp, hit, [0], False))
            return g.compare("ne", hit, np.array(0, np.int32))
        if g.dtype(x).kind == "f":
            contrib = g.matmul(g.transpose(g.cast(mask, g.dtype(x)), (1, 0)), v)
        else:
            contrib = g.reduce(aicc.ReduceSumOp, g.select(g.reshape(mask, (k, n, 1)), g.reshape(v, (k, 1, r)),
                                                          np.zeros((), g.dtype(x))), [0], False)
        return g.add(x, contrib)
    last = g.reduce(aicc.ReduceMaxOp, g.select(mask, np.arange(k, dtype=np.int64).reshape(k, 1),
                                                np.array(-1, np.int64)), [0], False)  # (N,)
    rows = g.emit(lambda d, i: aicc_nn.GatherOp(d, i, 0), v, g.binary(aicc.MaximumOp, last, np.array(0, np.int64)))
    hit = g.reshape(g.compare("ge", last, np.array(0, np.int64)), (n, 1))
    return g.select(hit, rows, x)


def _put_mask(imp, x, mask, pos: int, values, accumulate: bool):
    """x[..., mask] = values (or +=) with one boolean mask at dim `pos`: one update value."""
    g = imp.g
    shape = g.shape(x)
    m_shape = g.shape(mask)
    tail = shape[pos + len(m_shape):]
    probe = shape[:pos] + (1,) + tail  # the result of x[mask] with a count of 1
    try:
        np.broadcast_shapes(g.shape(values), probe)
    except ValueError:
        raise imp.unsupported("assigning through a boolean mask several values (a data-dependent count)") from None
    if len(np.broadcast_shapes(g.shape(values), probe)) != len(probe):
        raise imp.unsupported("assigning through a boolean mask values of a higher rank")
    v = g.reshape(g.broadcast_to(values, probe), shape[:pos] + (1,) * len(m_shape) + tail)
    m = g.reshape(mask, (1,) * pos + m_shape + (1,) * len(tail))
    if accumulate:
        return g.add(x, g.select(m, v, np.zeros((), g.dtype(x))))
    return g.select(m, v, x)


@handles("aten.index_put.default", "aten._unsafe_index_put.default")
def _index_put(imp, a):
    g, x = imp.g, a["input"]
    shape, dt = g.shape(x), g.dtype(x)
    values = g.cast(a["values"], dt)
    accumulate = bool(a.get("accumulate", False))
    idx = list(a["indices"])
    used = [i for i, v in enumerate(idx) if v is not None]
    if not used:
        return g.broadcast_to(g.add(x, values) if accumulate else values, shape)
    bools = [i for i in used if g.dtype(idx[i]) == np.bool_]
    if bools:
        if len(used) != 1:
            raise imp.unsupported("a boolean mask next to other indices")
        return _put_mask(imp, x, idx[used[0]], used[0], values, accumulate)
    lin, b_shape = linear_index(imp, shape, {d: idx[d] for d in used})
    rest = [d for d in range(len(shape)) if d not in used]
    adjacent = used == list(range(used[0], used[-1] + 1))
    nb = len(b_shape)
    if adjacent:  # the shape of x[idx], B where the indexed dims were
        res = shape[:used[0]] + tuple(b_shape) + tuple(shape[d] for d in rest[used[0]:])
    else:
        res = tuple(b_shape) + tuple(shape[d] for d in rest)
    v = g.broadcast_to(values, res)
    if adjacent and used[0] > 0:  # B first
        lead = used[0]
        v = g.transpose(v, list(range(lead, lead + nb)) + list(range(lead)) + list(range(lead + nb, len(res))))
    k = math.prod(b_shape)
    r = math.prod(shape[d] for d in rest)
    n = math.prod(shape[d] for d in used)
    perm = used + rest
    xf = g.reshape(g.transpose(x, perm), (n, r))
    out = _scatter_rows(imp, xf, g.reshape(lin, (k,)), g.reshape(v, (k, r)), accumulate)
    out = g.reshape(out, tuple(shape[d] for d in perm))
    return g.transpose(out, list(np.argsort(perm)))


def _along(imp, x, dim: int, index, source, accumulate: bool, alpha=1):
    """index_add / index_copy: x's slices index[j] along dim get (or add) source's slice j."""
    g = imp.g
    shape = g.shape(x)
    if not shape:
        raise imp.unsupported("a 0-d input")
    dim %= len(shape)
    source = g.cast(source, g.dtype(x))
    if alpha != 1:
        source = g.mul(source, np.array(alpha, g.dtype(x)))
    index = g.reshape(index, (math.prod(g.shape(index)),))
    lin, _ = linear_index(imp, shape, {dim: index})
    perm = [dim] + [d for d in range(len(shape)) if d != dim]
    r = math.prod(shape) // shape[dim]
    k = g.shape(lin)[0]
    xf = g.reshape(g.transpose(x, perm), (shape[dim], r))
    src = g.reshape(g.transpose(g.broadcast_to(source, tuple(k if d == dim else shape[d] for d in range(len(shape)))),
                                perm), (k, r))
    out = _scatter_rows(imp, xf, lin, src, accumulate)
    return g.transpose(g.reshape(out, tuple(shape[d] for d in perm)), list(np.argsort(perm)))


@handles("aten.index_add.default")
def _index_add(imp, a):
    return _along(imp, a["input"], a["dim"], a["index"], a["source"], True, a.get("alpha", 1))


@handles("aten.index_copy.default")
def _index_copy(imp, a):
    return _along(imp, a["input"], a["dim"], a["index"], a["source"], False)


def _scatter(imp, x, dim: int, index, src, reduce: str, include_self: bool = True):
    """torch.scatter / scatter_add / scatter_reduce: out[.., index[.., j, ..], ..] (op)= src[.., j, ..]
    along dim. `reduce`: 'set', 'sum', 'prod', 'amax', 'amin' or 'mean'."""
    g = imp.g
    shape, dt = g.shape(x), g.dtype(x)
    if not shape:
        raise imp.unsupported("a scatter into a 0-d tensor")
    rank = len(shape)
    dim %= rank
    ishape = g.shape(index)
    if 0 in ishape:
        return x
    if len(ishape) != rank or any(ishape[d] != shape[d] for d in range(rank) if d != dim):
        raise imp.unsupported(f"an index of shape {ishape} for an input of shape {shape} (aicc scatters "
                              "with an index as large as the input off the scatter dim)")
    if isinstance(src, bool | int | float):
        src = np.full(ishape, src, dt)
    src = g.cast(src, dt)
    for d, n in enumerate(ishape):  # only the index's part of src is read
        if g.shape(src)[d] != n:
            src = slice_dim(g, src, d, 0, 1, n)
    n = shape[dim]
    if isinstance(index, np.ndarray):
        index = np.where(index < 0, index + n, index).astype(np.int64)
    else:
        index = g.binary(aicc.ModOp, g.cast(index, np.int64), np.array(n, np.int64))
    mask = g.compare("eq", g.reshape(index, ishape + (1,)), np.arange(n, dtype=np.int64))  # I + (N,)
    swap = list(range(rank + 1))
    swap[dim], swap[rank] = rank, dim

    def back(v):  # (I with dim reduced to 1) + (N,) -> x's shape
        return g.reshape(g.transpose(v, swap), shape)

    if reduce == "set":
        j = np.arange(ishape[dim], dtype=np.int64).reshape([ishape[dim] if d == dim else 1 for d in range(rank + 1)])
        last = back(g.reduce(aicc.ReduceMaxOp, g.select(mask, j, np.array(-1, np.int64)), [dim], True))
        got = g.emit(lambda d, i: aicc_nn.GatherElementsOp(d, i, dim), src,
                     g.binary(aicc.MaximumOp, last, np.array(0, np.int64)))
        return g.select(g.compare("ge", last, np.array(0, np.int64)), got, x)
    s = g.reshape(src, ishape + (1,))
    count = back(g.reduce(aicc.ReduceSumOp, g.cast(mask, np.int64), [dim], True))
    hit = g.compare("gt", count, np.array(0, np.int64))
    if reduce in ("sum", "mean"):
        if dt == np.bool_:
            raise imp.unsupported(f"scatter {reduce} of bool tensors")
        total = back(g.reduce(aicc.ReduceSumOp, g.select(mask, s, np.zeros((), dt)), [dim], True))
        if reduce == "sum":
            return g.add(x, total) if include_self else g.select(hit, total, x)
        if dt.kind != "f":
            raise imp.unsupported("scatter mean of integer tensors")
        if include_self:
            return g.div(g.add(x, total), g.cast(g.add(count, np.array(1, np.int64)), dt))
        return g.select(hit, g.div(total, g.cast(g.binary(aicc.MaximumOp, count, np.array(1, np.int64)), dt)), x)
    if reduce == "prod":
        if dt == np.bool_:
            raise imp.unsupported("scatter prod of bool tensors")
        p = back(g.reduce(aicc.ReduceProdOp, g.select(mask, s, np.ones((), dt)), [dim], True))
        return g.mul(x, p) if include_self else g.select(hit, p, x)
    if reduce in ("amax", "amin"):
        if dt == np.bool_:
            raise imp.unsupported(f"scatter {reduce} of bool tensors")
        kind = reduce[1:]
        cls, pick = (aicc.ReduceMaxOp, aicc.MaximumOp) if kind == "max" else (aicc.ReduceMinOp, aicc.MinimumOp)
        e = back(g.reduce(cls, g.select(mask, s, _fill(dt, kind)), [dim], True))
        return g.binary(pick, x, e) if include_self else g.select(hit, e, x)
    raise imp.unsupported(f"scatter reduction '{reduce}'")


_OLD_REDUCE = {"add": "sum", "multiply": "prod"}


@handles("aten.scatter.src", "aten.scatter.value")
def _scatter_src(imp, a):
    src = a["src"] if "src" in a else a["value"]
    return _scatter(imp, a["input"], a["dim"], a["index"], src, "set")


@handles("aten.scatter.reduce", "aten.scatter.value_reduce")
def _scatter_old_reduce(imp, a):
    src = a["src"] if "src" in a else a["value"]
    return _scatter(imp, a["input"], a["dim"], a["index"], src, _OLD_REDUCE[a["reduce"]])


@handles("aten.scatter_add.default")
def _scatter_add(imp, a):
    return _scatter(imp, a["input"], a["dim"], a["index"], a["src"], "sum")


@handles("aten.scatter_reduce.two")
def _scatter_reduce(imp, a):
    return _scatter(imp, a["input"], a["dim"], a["index"], a["src"], a["reduce"], bool(a.get("include_self", True)))


@handles("aten.max_unpool2d.default")
def _max_unpool2d(imp, a):
    """max_unpool2d: the values scattered to their indices (from max_pool2d) in a zero map of
    output_size; where two windows share a maximum, the later one's write wins."""
    g, x, idx = imp.g, a["input"], a["indices"]
    shape = g.shape(x)
    lead, hw = shape[:-2], shape[-2] * shape[-1]
    out = imp.out_shape()
    n = out[-2] * out[-1]
    zeros = np.zeros(lead + (n,), g.dtype(x))
    flat = _scatter(imp, zeros, len(lead), g.reshape(idx, lead + (hw,)), g.reshape(x, lead + (hw,)), "set")
    return g.reshape(flat, out)
