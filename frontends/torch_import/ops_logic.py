"""Handlers of comparisons, logical ops and selects (where, masked_fill).
"""

from __future__ import annotations

import numpy as np

from frontends.registry import HandlerTable
from frontends.torch_import.common import as_bool, op_name

HANDLERS = HandlerTable()
handles = HANDLERS.handles


_COMPARE = {"eq": "eq", "ne": "ne", "gt": "gt", "ge": "ge", "lt": "lt", "le": "le"}


@handles(*(f"aten.{p}.{o}" for p in _COMPARE for o in ("Tensor", "Scalar")))
def _compare(imp, a):
    x, y = a["input"], a["other"]
    dt = imp.compute_dtype(x, y)
    pred = _COMPARE[op_name(imp.node.target).split(".")[1]]
    return imp.g.compare(pred, imp.operand(x, dt), imp.operand(y, dt))


@handles("aten.logical_not.default", "aten.bitwise_not.default")
def _logical_not(imp, a):
    x = a["input"]
    if op_name(imp.node.target).startswith("aten.bitwise") and imp.g.dtype(x) != np.bool_:
        raise imp.unsupported("bitwise not of an integer tensor")
    return imp.g.compare("eq", as_bool(imp, x), np.array(False))


@handles("aten.logical_and.default", "aten.logical_or.default", "aten.logical_xor.default",
         "aten.bitwise_and.Tensor", "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor")
def _logical(imp, a):
    name = op_name(imp.node.target)
    if name.startswith("aten.bitwise") and imp.out_dtype() != np.bool_:
        raise imp.unsupported("bitwise logic on integer tensors")
    g = imp.g
    x, y = as_bool(imp, a["input"]), as_bool(imp, a["other"])
    kind = name.split(".")[1].split("_")[1]  # logical_and -> and
    if kind == "and":
        return g.select(x, y, np.array(False))
    if kind == "or":
        return g.select(x, np.array(True), y)
    return g.compare("ne", x, y)


@handles("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther", "aten.where.Scalar")
def _where(imp, a):
    dt = imp.out_dtype()
    return imp.g.select(as_bool(imp, a["condition"]), imp.operand(a["input"], dt), imp.operand(a["other"], dt))


@handles("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def _masked_fill(imp, a):
    dt = imp.out_dtype()
    return imp.g.select(as_bool(imp, a["mask"]), imp.operand(a["value"], dt), imp.operand(a["input"], dt))
