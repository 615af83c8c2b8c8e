"""ONNX handlers for the losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both pick x[n, target[n, d...], d...] with a one-hot compare of the targets against the class
positions (a select and a sum over the class axis, no data-dependent indexing), weighted by
weight[target] picked the same way; a target equal to ignore_index weighs 0. reduction='mean'
divides by the sum of the weights, as the ONNX reference.
"""

from __future__ import annotations

import numpy as np

from compiler.dialects import aicc
from frontends.onnx_common import unsupported
from frontends.registry import HandlerTable

__all__ = ["HANDLERS"]

HANDLERS = HandlerTable()
handles = HANDLERS.handles


def _log_softmax(g, x, axis):
    m = g.reduce(aicc.ReduceMaxOp, x, [axis], True)
    s = g.sub(x, m)
    return g.sub(s, g.unary(aicc.LogOp, g.reduce(aicc.ReduceSumOp, g.unary(aicc.ExpOp, s), [axis], True)))


def _nll(imp, node, logp, target, weight, at):
    """The loss of the log-probabilities `logp` (N, C, d...) at `target` (N, d...)."""
    g = imp.g
    shape = g.shape(logp)
    if len(shape) < 2:
        raise unsupported(imp, node, f"a rank-{len(shape)} input")
    g.require_float(node.op_type, logp)
    if g.dtype(target).kind not in "iu":
        raise unsupported(imp, node, f"{g.dtype(target)} targets")
    reduction = at.get("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise unsupported(imp, node, f"reduction='{reduction}'")
    c = shape[1]
    rest = len(shape) - 2
    t = g.cast(target, np.int64)
    t1 = g.reshape(t, (shape[0], 1, *shape[2:]))
    classes = np.arange(c, dtype=np.int64).reshape((1, c) + (1,) * rest)
    onehot = g.compare("eq", t1, classes)
    zero = np.array(0.0, g.dtype(logp))
    picked = g.reduce(aicc.ReduceSumOp, g.select(onehot, logp, zero), [1], False)
    loss = g.unary(aicc.NegOp, picked)
    ignore = at.get("ignore_index")
    w = None
    if weight is not None:
        wb = g.reshape(g.cast_like(weight, logp), (1, c) + (1,) * rest)
        w = g.reduce(aicc.ReduceSumOp, g.select(onehot, g.broadcast_to(wb, g.shape(onehot)), zero), [1], False)
    if ignore is not None:
        keep = g.compare("ne", t, np.array(ignore, np.int64))
        w = g.select(keep, w if w is not None else np.array(1.0, g.dtype(logp)), zero)
        if g.shape(w) != g.shape(loss):
            w = g.broadcast_to(w, g.shape(loss))
    if w is not None:
        loss = g.mul(loss, w)
    if reduction == "none":
        return loss
    total = g.reduce(aicc.ReduceSumOp, loss, None, False)
    if reduction == "sum":
        return total
    if w is not None:
        return g.div(total, g.reduce(aicc.ReduceSumOp, w, None, False))
    n = int(np.prod(g.shape(loss)))
    return g.div(total, np.array(n, g.dtype(logp)))


@handles("NegativeLogLikelihoodLoss")
def _op_nll_loss(imp, node, ins, at):
    weight = ins[2] if len(ins) > 2 else None
    return [_nll(imp, node, ins[0], ins[1], weight, at)]


@handles("SoftmaxCrossEntropyLoss")
def _op_softmax_cross_entropy(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    if len(g.shape(x)) < 2:
        raise unsupported(imp, node, f"a rank-{len(g.shape(x))} input")
    weight = ins[2] if len(ins) > 2 else None
    logp = _log_softmax(g, x, 1)
    loss = _nll(imp, node, logp, ins[1], weight, at)
    return [loss, logp][: len(node.output)]
