"""Handlers of the shape ops: views and reshapes, expand, permute and transpose, repeat, cat and
stack, slices, splits and slice assignment, flip, roll, tril / triu.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.symbolic import Sym
from compiler.dialects import aicc_nn
from frontends.registry import HandlerTable
from frontends.torch_import.common import op_name

HANDLERS = HandlerTable()
handles = HANDLERS.handles


# -- slicing and concatenating values (slice_tensor also serves the NN handlers) -------------


def slice_tensor(g, x, starts, steps, counts):
    """x[starts + i * steps] for i < counts, per dim (aicc.slice, or folded for arrays)."""
    if list(counts) == list(g.shape(x)) and not any(starts) and all(s == 1 for s in steps):
        return x
    if isinstance(x, np.ndarray) and any(isinstance(n, Sym) for n in counts):
        x = g.ssa(x)  # a symbolic-length prefix of a constant (position ids[:, :seq]): an op
    if isinstance(x, np.ndarray):
        idx = tuple(s + np.arange(n) * st for s, st, n in zip(starts, steps, counts))
        return np.ascontiguousarray(x[np.ix_(*idx)]) if idx else x
    return g.emit(lambda v: aicc_nn.SliceOp(v, list(starts), list(steps), list(counts)), x)


def slice_dim(g, x, dim, start, step, count):
    """slice_tensor along one dim, the others whole."""
    shape = g.shape(x)
    starts, steps, counts = [0] * len(shape), [1] * len(shape), list(shape)
    starts[dim], steps[dim], counts[dim] = start, step, count
    return slice_tensor(g, x, starts, steps, counts)


def _concat(imp, vals, axis):
    """`vals` in the node's result dtype, concatenated along `axis` (empty ones dropped)."""
    g = imp.g
    dt = imp.out_dtype()
    vals = [imp.operand(v, dt) for v in vals if math.prod(g.shape(v)) or len(g.shape(v)) != 1]
    vals = [v for v in vals if g.shape(v)[axis]] or vals[:1]
    if all(isinstance(v, np.ndarray) for v in vals):
        return np.concatenate(vals, axis=axis)
    if len(vals) == 1:
        return vals[0]
    return g.emit(lambda *vs: aicc_nn.ConcatOp(list(vs), axis), *vals)


# -- views and layout -------------------------------------------------------------------------


@handles("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
         "aten.flatten.using_ints", "aten.unflatten.int", "aten.unsqueeze.default",
         "aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.view_as.default",
         "aten.reshape_as.default")
def _reshape(imp, a):
    return imp.g.reshape(a["input"], imp.out_shape())


@handles("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(imp, a):
    g, x = imp.g, a["input"]
    out = imp.out_shape()
    if isinstance(x, np.ndarray):
        return np.ascontiguousarray(np.broadcast_to(x, out))
    return g.broadcast_to(x, out)


@handles("aten.permute.default")
def _permute(imp, a):
    rank = len(imp.g.shape(a["input"]))
    return imp.g.transpose(a["input"], [d % rank for d in a["dims"]])


@handles("aten.transpose.int", "aten.t.default", "aten.numpy_T.default")
def _transpose(imp, a):
    g, x = imp.g, a["input"]
    rank = len(g.shape(x))
    if rank < 2:
        return x
    name = op_name(imp.node.target)
    if name == "aten.numpy_T.default":
        return g.transpose(x, list(range(rank))[::-1])
    d0, d1 = (a["dim0"] % rank, a["dim1"] % rank) if name == "aten.transpose.int" else (0, 1)
    perm = list(range(rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return g.transpose(x, perm)


@handles("aten.repeat.default")
def _repeat(imp, a):
    g = imp.g
    reps = list(a["repeats"])
    x = a["input"]
    shape = (1,) * (len(reps) - len(g.shape(x))) + g.shape(x)
    x = g.reshape(x, shape)
    if isinstance(x, np.ndarray):
        return np.tile(x, reps)
    inter = [v for d in shape for v in (1, d)]  # x as (1, d0, 1, d1, ...) broadcast to (r0, d0, ...)
    target = [v for r, d in zip(reps, shape) for v in (r, d)]
    return g.reshape(g.broadcast_to(g.reshape(x, inter), target), imp.out_shape())


# -- concatenation ----------------------------------------------------------------------------


@handles("aten.cat.default", "aten.concat.default", "aten.concatenate.default")
def _cat(imp, a):
    rank = len(imp.out_shape())
    return _concat(imp, a["tensors"], a["dim"] % rank)


@handles("aten.stack.default")
def _stack(imp, a):
    g = imp.g
    rank = len(imp.out_shape())
    axis = a["dim"] % rank
    vals = []
    for v in a["tensors"]:
        s = list(g.shape(v))
        s.insert(axis, 1)
        vals.append(g.reshape(v, s))
    return _concat(imp, vals, axis)


# -- slices -----------------------------------------------------------------------------------


@handles("aten.slice.Tensor")
def _slice_op(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a["dim"] % len(shape)
    start, end = a["start"], a["end"]
    if any(isinstance(v, Sym) for v in (start, end, shape[dim])):
        # symbolic bounds (x[:, :seq] of a constant, or of a dynamic dim): torch gives the count
        n, s0 = imp.out_shape()[dim], 0 if start is None else start
        if a["step"] != 1 or not isinstance(s0, int) or s0 < 0:
            raise imp.unsupported(f"a slice {start}:{end}:{a['step']} with symbolic bounds")
        if n == shape[dim] and s0 == 0:
            return x
        if isinstance(n, Sym) and isinstance(shape[dim], int):
            imp.bound_symbol(n + s0, shape[dim])
        return slice_dim(g, x, dim, s0, 1, n)
    r = range(*slice(start, end, a["step"]).indices(shape[dim]))
    if len(r) == 0:
        raise imp.unsupported("a slice with no elements")
    return slice_dim(g, x, dim, r.start, r.step, len(r))


@handles("aten.narrow.default")
def _narrow(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a["dim"] % len(shape)
    return slice_dim(g, x, dim, int(a["start"]) % shape[dim], 1, int(a["length"]))


@handles("aten.select.int")
def _select(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a["dim"] % len(shape)
    return g.reshape(slice_dim(g, x, dim, a["index"] % shape[dim], 1, 1), imp.out_shape())


@handles("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
         "aten.unbind.int", "aten.tensor_split.sections", "aten.split.sizes")
def _split(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a.get("dim", 0) % len(shape)
    outs, offset = [], 0
    for fake in imp.node.meta["val"]:
        n = imp.dim(fake.shape[dim]) if len(fake.shape) == len(shape) else 1
        if not isinstance(n, int):
            raise imp.unsupported("a split along a dynamic dim")
        part = slice_dim(g, x, dim, offset, 1, n) if n else None
        if part is None:
            raise imp.unsupported("a split with an empty part")
        outs.append(g.reshape(part, tuple(imp.dim(d) for d in fake.shape)))
        offset += n
    return outs


@handles("aten.copy.default")
def _copy(imp, a):  # the functional copy_: src cast and broadcast to the destination's type
    src = imp.operand(a["src"], imp.out_dtype())
    if isinstance(src, np.ndarray):
        return np.ascontiguousarray(np.broadcast_to(src, imp.out_shape()))
    return imp.g.broadcast_to(src, imp.out_shape())


@handles("aten.slice_scatter.default", "aten.select_scatter.default")
def _slice_scatter(imp, a):
    """`input` with a slice along `dim` replaced by `src`: the pieces around it, concatenated."""
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dim = a["dim"] % len(shape)
    src = imp.operand(a["src"], imp.out_dtype())
    if "select" in op_name(imp.node.target):
        start = a["index"] % shape[dim]
        end = start + 1
        src = g.reshape(src, shape[:dim] + (1,) + shape[dim + 1:])
    else:
        r = range(*slice(a["start"], a["end"], a["step"]).indices(shape[dim]))
        if len(r) == 0:
            return x
        if r.step != 1:
            raise imp.unsupported("a strided slice assignment")
        start, end = r.start, r.stop
    parts = [slice_dim(g, x, dim, 0, 1, start) if start else None, src,
             slice_dim(g, x, dim, end, 1, shape[dim] - end) if end < shape[dim] else None]
    return _concat(imp, [p for p in parts if p is not None], dim)


# -- rearrangements and masks -----------------------------------------------------------------


@handles("aten.flip.default")
def _flip(imp, a):
    g, x = imp.g, a["input"]
    shape = g.shape(x)
    dims = {d % len(shape) for d in a["dims"]}
    starts = [shape[i] - 1 if i in dims else 0 for i in range(len(shape))]
    steps = [-1 if i in dims else 1 for i in range(len(shape))]
    return slice_tensor(g, x, starts, steps, list(shape))


@handles("aten.roll.default")
def _roll(imp, a):
    g, x = imp.g, a["input"]
    shifts, dims = list(a["shifts"]), list(a["dims"])
    if not dims:  # roll of the flattened tensor
        flat = g.reshape(x, (math.prod(g.shape(x)),))
        return g.reshape(_roll_dim(imp, flat, 0, shifts[0]), imp.out_shape())
    for s, d in zip(shifts, dims):
        x = _roll_dim(imp, x, d % len(g.shape(x)), s)
    return x


def _roll_dim(imp, x, dim, shift):
    g = imp.g
    n = g.shape(x)[dim]
    s = shift % n
    if s == 0:
        return x
    return _concat(imp, [slice_dim(g, x, dim, n - s, 1, s), slice_dim(g, x, dim, 0, 1, n - s)], dim)


@handles("aten.tril.default", "aten.triu.default")
def _tri(imp, a):
    g, x = imp.g, a["input"]
    rows, cols = g.shape(x)[-2:]
    fn = np.tril if "tril" in op_name(imp.node.target) else np.triu
    keep = fn(np.ones((rows, cols), np.bool_), a["diagonal"])
    return g.select(keep, x, np.zeros((), g.dtype(x)))
