"""Handlers of the reductions: sum, mean, max / min (with their indices), argmax, cumsum,
variance and standard deviation, logsumexp, vector norms, any / all.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc, aicc_nn
from frontends.registry import HandlerTable
from frontends.torch_import.common import as_bool, float_input, op_name, require_arith

HANDLERS = HandlerTable()
handles = HANDLERS.handles


def _dims(dim, rank: int) -> list[int]:
    """A reduction's dims: None or [] means all."""
    if dim is None or (isinstance(dim, list | tuple) and len(dim) == 0):
        return list(range(rank))
    if isinstance(dim, int):
        dim = [dim]
    return [d % max(rank, 1) for d in dim]


def _reduce(imp, cls, x, dim, keepdim: bool):
    g, dt = imp.g, imp.out_dtype()
    axes = _dims(dim, len(g.shape(x)))
    if dt == np.bool_ and cls in (aicc.ReduceMaxOp, aicc.ReduceMinOp):  # max / min of bools
        r = g.reduce(cls, imp.operand(x, np.int32), axes, bool(keepdim))
        return g.compare("ne", r, np.array(0, np.int32))
    if cls.INTEGER_OK and dt.kind in "iu":
        x = imp.operand(x, dt)  # torch sums and multiplies integers and bools in int64
    else:
        x = float_input(imp, x)
    return g.reduce(cls, x, axes, bool(keepdim))


@handles("aten.sum.dim_IntList", "aten.sum.default")
def _sum(imp, a):
    return _reduce(imp, aicc.ReduceSumOp, a["input"], a.get("dim"), a.get("keepdim", False))


@handles("aten.prod.dim_int", "aten.prod.default")
def _prod(imp, a):
    return _reduce(imp, aicc.ReduceProdOp, a["input"], a.get("dim"), a.get("keepdim", False))


@handles("aten.mean.dim", "aten.mean.default")
def _mean(imp, a):
    return _reduce(imp, aicc.ReduceMeanOp, a["input"], a.get("dim"), a.get("keepdim", False))


@handles("aten.amax.default", "aten.amin.default", "aten.max.default", "aten.min.default")
def _amax(imp, a):
    cls = aicc.ReduceMaxOp if "max" in op_name(imp.node.target) else aicc.ReduceMinOp
    return _reduce(imp, cls, a["input"], a.get("dim"), a.get("keepdim", False))


def _arg_reduce(imp, cls, x, axis: int, keepdim: bool):
    """aicc.argmax / argmin of x along `axis` (the first extreme element; NaN counts as the
    extreme, as torch)."""
    g = imp.g
    if not g.shape(x):
        return np.zeros((), np.int64)
    if g.dtype(x) == np.bool_:
        x = g.cast(x, np.int32)
    require_arith(imp, aicc.MaximumOp, x)
    if 0 in g.shape(x):
        raise imp.unsupported("the index of the extreme element of an empty tensor")
    return g.emit(lambda v: cls(v, axis, keepdim, False), x)


@handles("aten.max.dim", "aten.min.dim")
def _max_dim(imp, a):
    """(values, indices): a reduction and an argmax / argmin; unused indices are dead code."""
    g, x = imp.g, a["input"]
    is_max = ".max." in op_name(imp.node.target)
    values = _reduce(imp, aicc.ReduceMaxOp if is_max else aicc.ReduceMinOp, x, a["dim"], a["keepdim"])
    axis = a["dim"] % max(len(g.shape(x)), 1)
    cls = aicc_nn.ArgMaxOp if is_max else aicc_nn.ArgMinOp
    return [values, g.reshape(_arg_reduce(imp, cls, x, axis, bool(a["keepdim"])), imp.out_shape(1))]


@handles("aten.argmax.default", "aten.argmin.default")
def _argmax(imp, a):
    """The index along `dim`, or (dim=None) into the flattened tensor."""
    g, x = imp.g, a["input"]
    cls = aicc_nn.ArgMaxOp if "argmax" in op_name(imp.node.target) else aicc_nn.ArgMinOp
    if a.get("dim") is None:
        y = _arg_reduce(imp, cls, g.reshape(x, (math.prod(g.shape(x)),)), 0, False)
    else:
        y = _arg_reduce(imp, cls, x, a["dim"] % max(len(g.shape(x)), 1), bool(a.get("keepdim")))
    return g.reshape(y, imp.out_shape())


@handles("aten.cumsum.default")
def _cumsum(imp, a):
    """aicc.cumsum in the result dtype (integers and bools sum in int64, as torch)."""
    g = imp.g
    x = imp.operand(a["input"], imp.out_dtype())
    require_arith(imp, aicc.AddOp, x)
    shape = g.shape(x)
    if not shape:
        return x
    if 0 in shape:
        return np.zeros(shape, g.dtype(x))
    axis = a["dim"] % len(shape)
    return g.emit(lambda v: aicc_nn.CumSumOp(v, axis), x)


def _var(imp, x, dim, correction, keepdim):
    g = imp.g
    x = float_input(imp, x)
    axes = _dims(dim, len(g.shape(x)))
    n = math.prod(g.shape(x)[d] for d in axes)
    mean = g.reduce(aicc.ReduceMeanOp, x, axes, True)
    d = g.sub(x, mean)
    s = g.reduce(aicc.ReduceSumOp, g.mul(d, d), axes, bool(keepdim))
    var = g.div(s, g.scalar(max(n - correction, 0), x))
    return var, mean if keepdim else g.reshape(mean, g.shape(var))


def _correction(a) -> float:
    if "unbiased" in a:
        return 1.0 if a["unbiased"] else 0.0
    c = a.get("correction")
    return 1.0 if c is None else float(c)


@handles("aten.var.correction", "aten.var.dim", "aten.std.correction", "aten.std.dim",
         "aten.var_mean.correction", "aten.std_mean.correction")
def _var_op(imp, a):
    var, mean = _var(imp, a["input"], a.get("dim"), _correction(a), a.get("keepdim", False))
    name = op_name(imp.node.target)
    out = imp.g.unary(aicc.SqrtOp, var) if ".std" in name else var
    return [out, mean] if "_mean" in name else out


@handles("aten.logsumexp.default")
def _logsumexp(imp, a):
    g = imp.g
    x = float_input(imp, a["input"])
    axes, keep = _dims(a["dim"], len(g.shape(x))), bool(a["keepdim"])
    m = g.reduce(aicc.ReduceMaxOp, x, axes, True)
    s = g.reduce(aicc.ReduceSumOp, g.unary(aicc.ExpOp, g.sub(x, m)), axes, keep)
    return g.add(g.unary(aicc.LogOp, s), m if keep else g.reshape(m, g.shape(s)))


@handles("aten.linalg_vector_norm.default")
def _vector_norm(imp, a):
    g = imp.g
    x = float_input(imp, a["input"])
    if a.get("dtype") is not None:
        x = g.cast(x, imp.out_dtype())
    ord_, dim, keep = float(a["ord"]), a.get("dim"), bool(a["keepdim"])
    ax = g.unary(aicc.AbsOp, x)
    if ord_ == math.inf:
        return _reduce(imp, aicc.ReduceMaxOp, ax, dim, keep)
    if ord_ == -math.inf:
        return _reduce(imp, aicc.ReduceMinOp, ax, dim, keep)
    if ord_ == 1.0:
        return _reduce(imp, aicc.ReduceSumOp, ax, dim, keep)
    if ord_ == 2.0:
        return g.unary(aicc.SqrtOp, _reduce(imp, aicc.ReduceSumOp, g.mul(x, x), dim, keep))
    if ord_ <= 0:
        raise imp.unsupported(f"a vector norm of order {ord_}")
    s = _reduce(imp, aicc.ReduceSumOp, g.emit(aicc.PowOp, ax, g.scalar(ord_, x)), dim, keep)
    return g.emit(aicc.PowOp, s, g.scalar(1.0 / ord_, x))


@handles("aten.any.default", "aten.any.dim", "aten.any.dims", "aten.all.default", "aten.all.dim",
         "aten.all.dims")
def _any_all(imp, a):
    g = imp.g
    x = a["input"]
    f = g.cast(as_bool(imp, x), np.float32)
    cls = aicc.ReduceMaxOp if ".any." in op_name(imp.node.target) else aicc.ReduceMinOp
    r = g.reduce(cls, f, _dims(a.get("dim"), len(g.shape(f))), bool(a.get("keepdim", False)))
    return g.compare("gt", r, np.array(0.0, np.float32))
