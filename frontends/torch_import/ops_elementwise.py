"""Handlers of the elementwise ops: pass-through and casts, arithmetic (torch's type promotion,
its integer and floor division, rounding, powers) and the unary math functions.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.dialects import aicc
from frontends.registry import HandlerTable
from frontends.torch_import.common import float_input, op_name, require_arith

HANDLERS = HandlerTable()
handles = HANDLERS.handles


# -- pass-through and casts -------------------------------------------------------------------


@handles("aten.clone.default", "aten.contiguous.default", "aten.alias.default", "aten.detach.default",
         "aten.lift_fresh_copy.default", "aten.dropout.default", "aten.feature_dropout.default",
         "aten.alpha_dropout.default", "aten.native_dropout.default")
def _identity(imp, a):
    if a.get("train") and a.get("p", 0) > 0:
        raise imp.unsupported("dropout in training mode")
    if op_name(imp.node.target) == "aten.native_dropout.default":
        return [a["input"], None]
    return a["input"]


@handles("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout", "aten.to.device",
         "aten.to.other", "aten.type_as.default")
def _to(imp, a):
    return imp.g.cast(a["input"], imp.out_dtype())


# -- arithmetic -------------------------------------------------------------------------------


# bool arithmetic, as torch computes it: in integers, then != 0 (add and max are `or`, mul and
# min are `and`)
_BOOL_ARITH = (aicc.AddOp, aicc.MulOp, aicc.MaximumOp, aicc.MinimumOp)


def _arith(imp, cls, x, y):
    """`cls` on x and y cast to the node's result dtype (torch's promotion)."""
    g, dt = imp.g, imp.out_dtype()
    if dt == np.bool_ and cls in _BOOL_ARITH:
        r = g.binary(cls, imp.operand(x, np.int32), imp.operand(y, np.int32))
        return g.compare("ne", r, np.array(0, np.int32))
    x, y = imp.operand(x, dt), imp.operand(y, dt)
    require_arith(imp, cls, x, y)
    return g.binary(cls, x, y)


@handles("aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor", "aten.sub.Scalar")
def _add(imp, a):
    y = a["other"]
    if a.get("alpha", 1) != 1:
        y = _arith(imp, aicc.MulOp, y, a["alpha"])
    cls = aicc.AddOp if ".add." in op_name(imp.node.target) else aicc.SubOp
    return _arith(imp, cls, a["input"], y)


@handles("aten.rsub.Scalar", "aten.rsub.Tensor")
def _rsub(imp, a):
    x = a["input"]
    if a.get("alpha", 1) != 1:
        x = _arith(imp, aicc.MulOp, x, a["alpha"])
    return _arith(imp, aicc.SubOp, a["other"], x)


@handles("aten.mul.Tensor", "aten.mul.Scalar")
def _mul(imp, a):
    return _arith(imp, aicc.MulOp, a["input"], a["other"])


# -- division and rounding --------------------------------------------------------------------


def _trunc(g, x):
    """Round toward zero: ceil below 0, floor elsewhere (NaN and inf stay)."""
    return g.select(g.compare("lt", x, g.scalar(0.0, x)), g.unary(aicc.CeilOp, x), g.unary(aicc.FloorOp, x))


def _and(g, p, q):
    return g.select(p, q, np.array(False))


def _int_floor_div(g, x, y):
    """Floored division of integers as torch computes it (div_floor_integer): the truncated
    quotient, less one where the remainder is not 0 and the signs of remainder and divisor
    differ. A zero divisor gives 0 (torch raises ZeroDivisionError)."""
    q = g.div(x, y)
    r = g.binary(aicc.FModOp, x, y)
    zero = np.array(0, g.dtype(x))
    fix = _and(g, g.compare("ne", r, zero), g.compare("ne", g.compare("lt", r, zero), g.compare("lt", y, zero)))
    return g.sub(q, g.cast(fix, g.dtype(q)))


def _float_floor_div(g, x, y):
    """Floored division of floats as torch computes it (div_floor_floating, the same as Python's
    //): from the exact remainder, so that 1 // 0.1 is 9 where floor(1 / 0.1) is 10."""
    q = g.div(x, y)
    s = lambda v: g.scalar(v, q)  # noqa: E731
    mod = g.binary(aicc.FModOp, x, y)
    div = g.div(g.sub(x, mod), y)
    neg = g.compare("ne", g.compare("lt", y, s(0.0)), g.compare("lt", mod, s(0.0)))
    div = g.sub(div, g.cast(_and(g, g.compare("ne", mod, s(0.0)), neg), g.dtype(q)))
    fl = g.unary(aicc.FloorOp, div)
    fl = g.add(fl, g.cast(g.compare("gt", g.sub(div, fl), s(0.5)), g.dtype(q)))
    fl = g.select(g.compare("eq", div, s(0.0)), g.mul(q, s(0.0)), fl)  # a zero keeps the sign of x / y
    return g.select(g.compare("eq", y, s(0.0)), q, fl)  # x / 0: inf or NaN, as IEEE division


def _rounded_div(imp, x, y, mode):
    g, dt = imp.g, imp.out_dtype()
    if mode is None:
        return _arith(imp, aicc.DivOp, x, y)
    if mode not in ("trunc", "floor"):
        raise imp.unsupported(f"rounding_mode='{mode}'")
    x, y = imp.operand(x, dt), imp.operand(y, dt)
    require_arith(imp, aicc.DivOp, x, y)
    if dt.kind in "iu":
        return g.div(x, y) if mode == "trunc" else _int_floor_div(g, x, y)
    return _trunc(g, g.div(x, y)) if mode == "trunc" else _float_floor_div(g, x, y)


@handles("aten.div.Tensor", "aten.div.Scalar", "aten.div.Tensor_mode", "aten.div.Scalar_mode")
def _div(imp, a):
    return _rounded_div(imp, a["input"], a["other"], a.get("rounding_mode"))


@handles("aten.floor_divide.default", "aten.floor_divide.Scalar")
def _floor_divide(imp, a):
    return _rounded_div(imp, a["input"], a["other"], "floor")


@handles("aten.remainder.Tensor", "aten.remainder.Scalar", "aten.remainder.Scalar_Tensor")
def _remainder(imp, a):  # Python's %: the sign of the divisor
    return _arith(imp, aicc.ModOp, a["input"], a["other"])


@handles("aten.fmod.Tensor", "aten.fmod.Scalar")
def _fmod(imp, a):  # C's fmod: the sign of the dividend
    return _arith(imp, aicc.FModOp, a["input"], a["other"])


@handles("aten.floor.default", "aten.trunc.default", "aten.ceil.default", "aten.round.default",
         "aten.frac.default", "aten.fix.default")
def _rounding(imp, a):
    g, x = imp.g, a["input"]
    name = op_name(imp.node.target).split(".")[1]
    if g.dtype(x).kind != "f":
        if name == "frac":
            raise imp.unsupported("frac of an integer tensor")
        return x  # torch rounds integers to themselves
    if name in ("trunc", "fix"):
        return _trunc(g, x)
    if name == "frac":  # x - trunc(x), as torch
        return g.sub(x, _trunc(g, x))
    return g.unary({"floor": aicc.FloorOp, "ceil": aicc.CeilOp, "round": aicc.RoundOp}[name], x)


@handles("aten.round.decimals")
def _round_decimals(imp, a):
    """torch's rounding to `decimals` places: round(x * 10^d) / 10^d (for d < 0,
    round(x / 10^-d) * 10^-d), half to even."""
    g, x, d = imp.g, a["input"], int(a["decimals"])
    if g.dtype(x).kind != "f":
        raise imp.unsupported("round(decimals=...) of an integer tensor")
    if d == 0:
        return g.unary(aicc.RoundOp, x)
    p = g.scalar(10.0 ** abs(d), x)
    if d > 0:
        return g.div(g.unary(aicc.RoundOp, g.mul(x, p)), p)
    return g.mul(g.unary(aicc.RoundOp, g.div(x, p)), p)


@handles("aten.maximum.default", "aten.minimum.default")
def _max_min(imp, a):
    cls = aicc.MaximumOp if "max" in op_name(imp.node.target) else aicc.MinimumOp
    return _arith(imp, cls, a["input"], a["other"])


# -- powers and unary functions ---------------------------------------------------------------


def _int_power(g, x, e: int):
    """x ** e for an integer e >= 0 by repeated squaring (at most 2 log2(e) multiplies)."""
    result, base = None, x
    while True:
        if e & 1:
            result = base if result is None else g.mul(result, base)
        e >>= 1
        if not e:
            break
        base = g.mul(base, base)
    return np.ones((), g.dtype(x)) if result is None else result


@handles("aten.pow.Tensor_Scalar", "aten.pow.Tensor_Tensor", "aten.pow.Scalar")
def _pow(imp, a):
    g, dt = imp.g, imp.out_dtype()
    x, e = a["input"], a["exponent"]
    if isinstance(e, int | float) and not isinstance(e, bool):
        x = imp.operand(x, dt)
        if dt.kind in "iu":
            if not float(e).is_integer() or e < 0:
                raise imp.unsupported(f"an integer tensor to the power {e}")
            return g.broadcast_to(_int_power(g, x, int(e)), g.shape(x))
        imp.require_float(x)
        special = {1.0: lambda: x, 2.0: lambda: g.mul(x, x), 3.0: lambda: g.mul(g.mul(x, x), x),
                   0.5: lambda: g.unary(aicc.SqrtOp, x), -0.5: lambda: g.unary(aicc.RsqrtOp, x),
                   -1.0: lambda: g.div(g.scalar(1.0, x), x)}
        if float(e) in special:
            return special[float(e)]()
    return _arith(imp, aicc.PowOp, x, e)


_UNARY = {
    "aten.neg.default": aicc.NegOp, "aten.abs.default": aicc.AbsOp, "aten.exp.default": aicc.ExpOp,
    "aten.log.default": aicc.LogOp, "aten.tanh.default": aicc.TanhOp, "aten.erf.default": aicc.ErfOp,
    "aten.sqrt.default": aicc.SqrtOp, "aten.rsqrt.default": aicc.RsqrtOp, "aten.relu.default": aicc.ReluOp,
    "aten.sigmoid.default": aicc.SigmoidOp, "aten.sin.default": aicc.SinOp, "aten.cos.default": aicc.CosOp,
    "aten.tan.default": aicc.TanOp, "aten.asin.default": aicc.AsinOp, "aten.acos.default": aicc.AcosOp,
    "aten.atan.default": aicc.AtanOp, "aten.sinh.default": aicc.SinhOp, "aten.cosh.default": aicc.CoshOp,
}


@handles(*_UNARY)
def _unary(imp, a):
    cls = _UNARY[op_name(imp.node.target)]
    x = a["input"]
    if cls.INTEGER_OK and imp.out_dtype().kind in "iu":  # neg, abs of integers
        return imp.g.unary(cls, x)
    if cls is aicc.ReluOp and imp.out_dtype().kind in "iu":
        return imp.g.emit(aicc.MaximumOp, x, np.zeros((), imp.g.dtype(x)))
    return imp.g.unary(cls, float_input(imp, x))


def _sign(g, x, s):
    neg = g.select(g.compare("lt", x, s(0.0)), s(-1.0), s(0.0))
    return g.select(g.compare("gt", x, s(0.0)), s(1.0), neg)


# Unary functions that are compositions: name -> f(g, x, s), s(v) the scalar v in x's dtype.
_COMPOSITES = {
    "reciprocal": lambda g, x, s: g.div(s(1.0), x),
    "square": lambda g, x, s: g.mul(x, x),
    "log2": lambda g, x, s: g.mul(g.unary(aicc.LogOp, x), s(1.0 / math.log(2.0))),
    "log10": lambda g, x, s: g.mul(g.unary(aicc.LogOp, x), s(1.0 / math.log(10.0))),
    "log1p": lambda g, x, s: g.unary(aicc.LogOp, g.add(x, s(1.0))),
    "expm1": lambda g, x, s: g.sub(g.unary(aicc.ExpOp, x), s(1.0)),
    "exp2": lambda g, x, s: g.unary(aicc.ExpOp, g.mul(x, s(math.log(2.0)))),
    "sign": _sign,
}


@handles(*(f"aten.{name}.default" for name in _COMPOSITES))
def _unary_composite(imp, a):
    g = imp.g
    name = op_name(imp.node.target).split(".")[1]
    integer = name in ("square", "sign") and imp.out_dtype().kind in "iu"
    x = imp.operand(a["input"], imp.out_dtype()) if integer else float_input(imp, a["input"])
    return _COMPOSITES[name](g, x, lambda v: g.scalar(v, x))


@handles("aten.atan2.default")
def _atan2(imp, a):
    """atan2(y, x): atan(y / x) moved to the quadrant of (x, y); x == 0 gives +-pi/2 (0 at the
    origin), as torch."""
    g = imp.g
    y, x = float_input(imp, a["input"]), float_input(imp, a["other"])
    s = lambda v: np.array(v, imp.out_dtype())  # noqa: E731
    zero_x = g.compare("eq", x, s(0.0))
    base = g.unary(aicc.AtanOp, g.div(y, g.select(zero_x, s(1.0), x)))
    shift = g.select(g.compare("lt", x, s(0.0)), g.select(g.compare("lt", y, s(0.0)), s(-math.pi), s(math.pi)), s(0.0))
    axis = g.mul(_sign(g, y, s), s(math.pi / 2))
    return g.select(zero_x, axis, g.add(base, shift))


@handles("aten.isnan.default", "aten.isinf.default", "aten.isfinite.default", "aten.isposinf.default",
         "aten.isneginf.default")
def _isnan(imp, a):
    g, x = imp.g, a["input"]
    name = op_name(imp.node.target).split(".")[1]
    if g.dtype(x).kind != "f":
        return np.full(g.shape(x), name == "isfinite")
    inf = np.array(np.inf, g.dtype(x))
    if name == "isnan":
        return g.compare("ne", x, x)
    if name == "isinf":
        return g.compare("eq", g.unary(aicc.AbsOp, x), inf)
    if name == "isfinite":
        return g.compare("lt", g.unary(aicc.AbsOp, x), inf)
    return g.compare("eq", x, inf if name == "isposinf" else -inf)


@handles("aten.nan_to_num.default")
def _nan_to_num(imp, a):
    g, x = imp.g, a["input"]
    if g.dtype(x).kind != "f":
        return x
    dt = g.dtype(x)
    fin = np.finfo(dt)
    nan = np.array(0.0 if a.get("nan") is None else a["nan"], dt)
    pos = np.array(fin.max if a.get("posinf") is None else a["posinf"], dt)
    neg = np.array(fin.min if a.get("neginf") is None else a["neginf"], dt)
    y = g.select(g.compare("eq", x, np.array(np.inf, dt)), pos, x)
    y = g.select(g.compare("eq", x, np.array(-np.inf, dt)), neg, y)
    return g.select(g.compare("ne", x, x), nan, y)
