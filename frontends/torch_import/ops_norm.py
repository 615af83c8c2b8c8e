"""Handlers of softmax and the normalizations (layer, RMS, batch and group norm).
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc
from frontends.registry import HandlerTable
from frontends.torch_import.common import float_input, op_name

HANDLERS = HandlerTable()
handles = HANDLERS.handles


# -- softmax ----------------------------------------------------------------------------------


def _softmax(imp, x, dim):
    g = imp.g
    x = float_input(imp, x)
    if not g.shape(x):
        return np.ones((), g.dtype(x))  # softmax of one element
    axis = dim % len(g.shape(x))
    return g.emit(lambda v: aicc.SoftmaxOp(v, axis), x)


def zero_fully_masked(g, scores, p, axis: int):
    """torch's safe softmax: rows whose scores are all -inf become 0 instead of NaN."""
    m = g.reduce(aicc.ReduceMaxOp, scores, [axis], True)
    valid = g.compare("gt", m, g.scalar(-math.inf, scores))
    return g.select(valid, p, g.scalar(0.0, p))


@handles("aten.softmax.int", "aten._softmax.default", "aten._safe_softmax.default")
def _softmax_op(imp, a):
    x = a["input"]
    if a.get("dtype") is not None:
        x = imp.g.cast(x, imp.out_dtype())
    p = _softmax(imp, x, a["dim"])
    if "_safe" in op_name(imp.node.target) and imp.g.shape(x):
        p = zero_fully_masked(imp.g, x, p, a["dim"] % len(imp.g.shape(x)))
    return p


@handles("aten.log_softmax.int", "aten._log_softmax.default")
def _log_softmax(imp, a):
    g = imp.g
    x = a["input"]
    if a.get("dtype") is not None:
        x = g.cast(x, imp.out_dtype())
    x = float_input(imp, x)
    axis = a["dim"] % max(len(g.shape(x)), 1)
    m = g.reduce(aicc.ReduceMaxOp, x, [axis], True)
    s = g.sub(x, m)
    return g.sub(s, g.unary(aicc.LogOp, g.reduce(aicc.ReduceSumOp, g.unary(aicc.ExpOp, s), [axis], True)))


# -- normalization ----------------------------------------------------------------------------


def _normalize(g, x, axes, eps):
    mean = g.reduce(aicc.ReduceMeanOp, x, axes, True)
    d = g.sub(x, mean)
    var = g.reduce(aicc.ReduceMeanOp, g.mul(d, d), axes, True)
    rstd = g.unary(aicc.RsqrtOp, g.add(var, g.scalar(eps, x)))
    return g.mul(d, rstd), mean, rstd


def _affine(imp, y, weight, bias, shape):
    g = imp.g
    if weight is not None:
        y = g.mul(y, g.reshape(imp.operand(weight, g.dtype(y)), shape))
    if bias is not None:
        y = g.add(y, g.reshape(imp.operand(bias, g.dtype(y)), shape))
    return y


@handles("aten.layer_norm.default", "aten.native_layer_norm.default")
def _layer_norm(imp, a):
    g = imp.g
    x = float_input(imp, a["input"])
    shape = g.shape(x)
    k = len(a["normalized_shape"])
    axes = list(range(len(shape) - k, len(shape)))
    y, mean, rstd = _normalize(g, x, axes, float(a["eps"]))
    y = _affine(imp, y, a["weight"], a["bias"], shape[len(shape) - k:])
    return [y, mean, rstd] if "native" in op_name(imp.node.target) else y


@handles("aten.rms_norm.default")
def _rms_norm(imp, a):
    g = imp.g
    x = float_input(imp, a["input"])
    shape = g.shape(x)
    k = len(a["normalized_shape"])
    eps = a.get("eps")
    eps = float(np.finfo(g.dtype(x)).eps) if eps is None else float(eps)
    ms = g.reduce(aicc.ReduceMeanOp, g.mul(x, x), list(range(len(shape) - k, len(shape))), True)
    y = g.mul(x, g.unary(aicc.RsqrtOp, g.add(ms, g.scalar(eps, x))))
    return _affine(imp, y, a["weight"], None, shape[len(shape) - k:])


@handles("aten.batch_norm.default", "aten._native_batch_norm_legit_no_training.default",
         "aten.native_batch_norm.default", "aten._native_batch_norm_legit.default",
         "aten._native_batch_norm_legit.no_stats")
def _batch_norm(imp, a):
    g = imp.g
    name = op_name(imp.node.target)
    x = float_input(imp, a["input"])
    shape = g.shape(x)
    mean, var = a.get("running_mean"), a.get("running_var")
    cshape = (shape[1],) + (1,) * (len(shape) - 2)
    eps = float(a["eps"])
    if a.get("training") and mean is not None:
        raise imp.unsupported("batch norm in training mode")
    if mean is None:  # no running statistics: normalize with the batch's own (as eager torch does)
        y, _, _ = _normalize(g, x, [d for d in range(len(shape)) if d != 1], eps)
        y = _affine(imp, y, a["weight"], a["bias"], cshape)
    else:
        dt = g.dtype(x)
        mean, var = g.reshape(imp.operand(mean, dt), cshape), g.reshape(imp.operand(var, dt), cshape)
        inv = g.unary(aicc.RsqrtOp, g.add(var, g.scalar(eps, x)))  # folded for constant statistics
        if a["weight"] is not None:
            inv = g.mul(inv, g.reshape(imp.operand(a["weight"], dt), cshape))
        shift = g.unary(aicc.NegOp, g.mul(mean, inv))
        if a["bias"] is not None:
            shift = g.add(shift, g.reshape(imp.operand(a["bias"], dt), cshape))
        y = g.add(g.mul(x, inv), shift)
    return y if name == "aten.batch_norm.default" else [y, None, None]


@handles("aten.group_norm.default", "aten.native_group_norm.default")
def _group_norm(imp, a):
    g = imp.g
    x = float_input(imp, a["input"])
    shape = g.shape(x)
    n, c = shape[0], shape[1]
    groups = a.get("num_groups", a.get("group"))
    xg = g.reshape(x, (n, groups, c // groups * math.prod(shape[2:])))
    y, mean, rstd = _normalize(g, xg, [2], float(a["eps"]))
    y = _affine(imp, g.reshape(y, shape), a["weight"], a["bias"], (c,) + (1,) * (len(shape) - 2))
    if "native" in op_name(imp.node.target):
        return [y, g.reshape(mean, (n, groups)), g.reshape(rstd, (n, groups))]
    return y
