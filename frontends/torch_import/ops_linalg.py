"""Handlers of the matrix products: mm, bmm, matmul, linear, addmm and their kin.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc
from frontends.registry import HandlerTable

HANDLERS = HandlerTable()
handles = HANDLERS.handles


def matmul(imp, x, y):
    g = imp.g
    dt = imp.out_dtype()
    x, y = imp.operand(x, dt), imp.operand(y, dt)
    imp.require_float(x, y)
    sx, sy = g.shape(x), g.shape(y)
    if len(sx) > 2 and len(sy) == 2:  # fold the batch into rows: a 2-D matmul (linalg.matmul)
        rows = g.reshape(x, (math.prod(sx[:-1]), sx[-1]))
        return g.reshape(g.emit(aicc.MatmulOp, rows, y), (*sx[:-1], sy[-1]))
    return g.matmul(x, y)


@handles("aten.mm.default", "aten.bmm.default", "aten.matmul.default", "aten.dot.default",
         "aten.mv.default")
def _mm(imp, a):
    other = a.get("mat2", a.get("other", a.get("vec", a.get("tensor"))))
    return matmul(imp, a["input"], other)


@handles("aten.linear.default")
def _linear(imp, a):
    g, w = imp.g, a["weight"]
    wt = g.transpose(w, (1, 0)) if len(g.shape(w)) == 2 else w
    y = matmul(imp, a["input"], wt)
    if a.get("bias") is not None:
        y = g.add(y, imp.operand(a["bias"], g.dtype(y)))
    return y


def _scaled(imp, v, factor):
    return v if factor == 1 else imp.g.mul(v, imp.g.scalar(factor, v))


@handles("aten.addmm.default", "aten.baddbmm.default", "aten.addmv.default")
def _addmm(imp, a):
    g = imp.g
    m1 = a.get("mat1", a.get("batch1", a.get("mat")))
    m2 = a.get("mat2", a.get("batch2", a.get("vec")))
    y = _scaled(imp, matmul(imp, m1, m2), a["alpha"])
    if a["beta"] == 0:
        return y
    return g.add(y, _scaled(imp, imp.operand(a["input"], g.dtype(y)), a["beta"]))


@handles("aten._cdist_forward.default")
def _cdist(imp, a):
    """torch.cdist: the p-norm of every difference x1[.., i, :] - x2[.., j, :] (computed
    directly, not by torch's matmul expansion for p = 2)."""
    g = imp.g
    x1, x2, p = a["x1"], a["x2"], float(a["p"])
    s1, s2 = g.shape(x1), g.shape(x2)
    d = g.sub(g.reshape(x1, s1[:-1] + (1, s1[-1])), g.reshape(x2, s2[:-2] + (1,) + s2[-2:]))
    ax = [len(g.shape(d)) - 1]
    dt = g.dtype(d)
    if p == 2.0:
        return g.unary(aicc.SqrtOp, g.reduce(aicc.ReduceSumOp, g.mul(d, d), ax, False))
    ad = g.unary(aicc.AbsOp, d)
    if p == 1.0:
        return g.reduce(aicc.ReduceSumOp, ad, ax, False)
    if p == float("inf"):
        return g.reduce(aicc.ReduceMaxOp, ad, ax, False)
    if p == 0.0:
        return g.reduce(aicc.ReduceSumOp, g.cast(g.compare("ne", ad, np.zeros((), dt)), dt), ax, False)
    s = g.reduce(aicc.ReduceSumOp, g.binary(aicc.PowOp, ad, np.array(p, dt)), ax, False)
    return g.binary(aicc.PowOp, s, np.array(1.0 / p, dt))
