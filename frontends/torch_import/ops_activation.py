"""Handlers of the activation functions: gelu, silu, the clamps (hardtanh, relu6), hard sigmoid
and swish, leaky relu, elu, softplus, mish and log-sigmoid, as compositions of aicc ops.
"""

from __future__ import annotations

from compiler.dialects import aicc
from frontends.registry import HandlerTable
from frontends.torch_import.common import float_input, require_arith

HANDLERS = HandlerTable()
handles = HANDLERS.handles


@handles("aten.gelu.default")
def _gelu(imp, a):
    approx = a.get("approximate") or "none"
    if approx not in ("none", "tanh"):
        raise imp.unsupported(f"gelu approximate='{approx}'")
    return imp.g.emit(lambda v: aicc.GeluOp(v, approx), float_input(imp, a["input"]))


@handles("aten.silu.default")
def _silu(imp, a):
    x = float_input(imp, a["input"])
    return imp.g.mul(x, imp.g.unary(aicc.SigmoidOp, x))


def _clamp(imp, x, lo, hi):
    g = imp.g
    dt = imp.out_dtype()
    x = imp.operand(x, dt)
    require_arith(imp, aicc.MaximumOp, x)
    if lo is not None:
        x = g.emit(aicc.MaximumOp, x, imp.operand(lo, dt))
    if hi is not None:
        x = g.emit(aicc.MinimumOp, x, imp.operand(hi, dt))
    return x


@handles("aten.clamp.default", "aten.clamp.Tensor")
def _clamp_op(imp, a):
    return _clamp(imp, a["input"], a.get("min"), a.get("max"))


@handles("aten.clamp_min.default", "aten.clamp_min.Tensor")
def _clamp_min(imp, a):
    return _clamp(imp, a["input"], a["min"], None)


@handles("aten.clamp_max.default", "aten.clamp_max.Tensor")
def _clamp_max(imp, a):
    return _clamp(imp, a["input"], None, a["max"])


@handles("aten.hardtanh.default")
def _hardtanh(imp, a):
    return _clamp(imp, a["input"], a["min_val"], a["max_val"])


@handles("aten.relu6.default")
def _relu6(imp, a):
    return _clamp(imp, a["input"], 0.0, 6.0)


def _hardsigmoid(imp, x):  # relu6(x + 3) / 6, as torch computes it
    g = imp.g
    y = _clamp(imp, g.add(x, g.scalar(3.0, x)), 0.0, 6.0)
    return g.div(y, g.scalar(6.0, x))


@handles("aten.hardsigmoid.default")
def _hardsigmoid_op(imp, a):
    return _hardsigmoid(imp, float_input(imp, a["input"]))


@handles("aten.hardswish.default")
def _hardswish(imp, a):
    x = float_input(imp, a["input"])
    return imp.g.mul(x, _hardsigmoid(imp, x))


@handles("aten.leaky_relu.default")
def _leaky_relu(imp, a):
    g, x = imp.g, float_input(imp, a["input"])
    return g.select(g.compare("gt", x, g.scalar(0.0, x)), x, g.mul(x, g.scalar(a["negative_slope"], x)))


@handles("aten.elu.default")
def _elu(imp, a):
    g, x = imp.g, float_input(imp, a["input"])
    alpha, scale, input_scale = float(a["alpha"]), float(a["scale"]), float(a["input_scale"])
    xs = g.mul(x, g.scalar(input_scale, x)) if input_scale != 1.0 else x
    neg = g.mul(g.sub(g.unary(aicc.ExpOp, xs), g.scalar(1.0, x)), g.scalar(alpha * scale, x))
    pos = g.mul(x, g.scalar(scale, x)) if scale != 1.0 else x
    return g.select(g.compare("gt", x, g.scalar(0.0, x)), pos, neg)


def _softplus(g, x):  # log(1 + exp(x))
    return g.unary(aicc.LogOp, g.add(g.unary(aicc.ExpOp, x), g.scalar(1.0, x)))


@handles("aten.softplus.default")
def _softplus_op(imp, a):
    g, x = imp.g, float_input(imp, a["input"])
    beta, threshold = float(a["beta"]), float(a["threshold"])
    bx = g.mul(x, g.scalar(beta, x)) if beta != 1.0 else x
    sp = _softplus(g, bx)
    if beta != 1.0:
        sp = g.div(sp, g.scalar(beta, x))
    return g.select(g.compare("gt", bx, g.scalar(threshold, x)), x, sp)


@handles("aten.mish.default")
def _mish(imp, a):
    g, x = imp.g, float_input(imp, a["input"])
    return g.mul(x, g.unary(aicc.TanhOp, _softplus(g, x)))


@handles("aten.log_sigmoid_forward.default")
def _log_sigmoid(imp, a):
    g, x = imp.g, float_input(imp, a["input"])  # min(x, 0) - log(1 + exp(-|x|))
    m = g.emit(aicc.MinimumOp, x, g.scalar(0.0, x))
    y = g.sub(m, _softplus(g, g.unary(aicc.NegOp, g.unary(aicc.AbsOp, x))))
    return [y, None]
