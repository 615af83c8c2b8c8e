"""Import an ONNX model into the aicc tensor dialect.

    prog = import_onnx("model.onnx", input_shapes={"x": (1, 3, 224, 224)})
    print(prog.module)

The graph is walked once in topological order (ONNX requires it). Every value is either a
NumPy array (an initializer, a Constant node, or anything computed only from those, such as the
shape arithmetic of exported models: Shape -> Gather -> Concat -> Reshape) or an SSA value of
the function being built. Ops whose operands are all arrays are evaluated right away by the
reference interpreter, so shape subgraphs and weight transposes fold away before any IR exists.

Each ONNX op maps to aicc ops by a handler `_op_<OpType>`; most are decompositions into the
existing tensor ops (Gemm = matmul * alpha + beta * C, LayerNormalization = reduce_mean,
sub, rsqrt, ...), the rest use the NN ops of `compiler.dialects.aicc_nn` (conv2d, pools,
concat, slice, gather, pad). Before any IR is built the whole graph is checked, and all
unsupported op types are reported in one UnsupportedOpError. An attribute value or dtype a
handler does not support is an UnsupportedOpError naming the node, never a wrong answer.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region

from compiler.dialects import aicc
from compiler.errors import CompileError, ShapeError, UnsupportedOpError
from compiler.symbolic import Sym
from frontends import onnx_attention, onnx_index, onnx_loss, onnx_nn, onnx_qop, onnx_quant, onnx_rnn
from frontends.graph_builder import GraphBuilder, dims, narrow_range
from frontends.onnx_common import ONNX_DTYPES, const, dtype_name, int8_value, is_uint8, set_int8_kind, unsupported
from frontends.registry import HandlerTable, merge_tables

__all__ = ["ImportedProgram", "import_onnx", "load_onnx", "make_inputs", "SUPPORTED_OPS"]

MIN_OPSET, MAX_OPSET = 13, 28
Value = "np.ndarray | SSAValue"

@dataclass
class ImportedProgram:
    module: ModuleOp
    func_name: str
    input_names: list[str]
    input_types: list[tuple[tuple[int, ...], np.dtype]]
    output_names: list[str]
    output_is_tuple: bool
    model_name: str = "model"
    locations: dict[Operation, str] = field(default_factory=dict)
    # (input index, input name, value): graph inputs compiled as constants (the example
    # input's value, for an op that needs it at compile time); the compiled model checks them
    guards: list[tuple[int, str, np.ndarray]] = field(default_factory=list)
    # the inputs and outputs that are uint8 in the model: int8 (v - 128) in the function, which
    # the compiled model converts on the way in and out (see onnx_common's int8 kinds)
    uint8_inputs: list[int] = field(default_factory=list)
    uint8_outputs: list[int] = field(default_factory=list)
    # dynamic dims: {symbol: (min, max)}, the bounds ops put on them (x[:, :seq] of a constant)
    dim_ranges: dict = field(default_factory=dict)


def load_onnx(model: Any):
    """A ModelProto from a path or a ModelProto (onnx imported lazily)."""
    try:
        import onnx
    except ImportError:  # pragma: no cover - depends on the environment
        raise CompileError("importing ONNX models needs the `onnx` package: pip install 'aicc[onnx]'") from None
    if isinstance(model, onnx.ModelProto):
        return model
    path = Path(os.fspath(model))
    if not path.exists():
        raise CompileError(f"no such file: {path}")
    try:
        return onnx.load(str(path))
    except Exception as e:
        raise CompileError(f"{path}: not a readable ONNX model ({type(e).__name__}: {e})") from None


def _tensor_to_numpy(t) -> np.ndarray:
    from onnx import numpy_helper

    if t.data_type in onnx_quant.QUANT_DTYPES:  # (u)int8 initializers, for the QDQ ops
        return np.asarray(numpy_helper.to_array(t)).astype(onnx_quant.QUANT_DTYPES[t.data_type])
    if t.data_type not in ONNX_DTYPES:
        raise UnsupportedOpError(
            "dtype", f"ONNX tensor '{t.name}' has element type {dtype_name(t.data_type)}, "
            "which aicc does not support (float32, float64, int32, int64, bool)"
        )
    return np.asarray(numpy_helper.to_array(t)).astype(ONNX_DTYPES[t.data_type])


def _attrs(node) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.type == a.TENSOR:
            v = _tensor_to_numpy(v)
        elif isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[a.name] = v
    return out


# ---------------------------------------------------------------------------------------------
# ONNX op handlers. Each takes (importer, node, inputs, attrs) and returns the output values.
# ---------------------------------------------------------------------------------------------

# The tensor ops; frontends/onnx_nn.py has the ops of the NN dialect. HANDLERS, below the
# handlers, is the two tables merged.
CORE_HANDLERS = HandlerTable()
handles = CORE_HANDLERS.handles


_BINARY = {"Add": aicc.AddOp, "Sub": aicc.SubOp, "Mul": aicc.MulOp, "Div": aicc.DivOp}


@handles("Add", "Sub", "Mul", "Div")
def _op_arith(imp, node, ins, at):
    return [imp.g.binary(_BINARY[node.op_type], ins[0], ins[1], node.op_type)]


@handles("Mod")
def _op_mod(imp, node, ins, at):
    """fmod=1: the sign of the dividend (C fmod); fmod=0: the sign of the divisor (np.mod)."""
    cls = aicc.FModOp if at.get("fmod", 0) else aicc.ModOp
    return [imp.g.binary(cls, ins[0], ins[1], "Mod")]


@handles("Pow")
def _op_pow(imp, node, ins, at):
    """Float x: y is cast to x's type; a constant exponent 2 or 3 is multiplies (x * x is
    powf's correctly rounded result; x * x * x rounds twice, as ONNX Runtime's own fast path
    for 3 does; GELU's tanh form cubes its input). Integer x: computed in float64 and
    truncated back, exact while |x^y| < 2^53."""
    g = imp.g
    x, y = ins
    g.require_numeric("Pow", x, y)
    if g.dtype(x).kind == "f":
        y = g.cast_like(y, x)
        if isinstance(y, np.ndarray) and y.size == 1 and y.ndim <= len(g.shape(x)) \
                and float(y.reshape(())) in (2.0, 3.0):
            sq = g.mul(x, x)
            return [sq if float(y.reshape(())) == 2.0 else g.mul(sq, x)]
        return [g.emit(aicc.PowOp, x, y)]
    p = g.emit(aicc.PowOp, g.cast(x, np.float64), g.cast(y, np.float64))
    return [g.cast(p, g.dtype(x))]


@handles("Max", "Min", "Sum", "Mean")
def _op_variadic(imp, node, ins, at):
    g = imp.g
    cls = {"Max": aicc.MaximumOp, "Min": aicc.MinimumOp, "Sum": aicc.AddOp, "Mean": aicc.AddOp}[node.op_type]
    acc = ins[0]
    for v in ins[1:]:
        acc = g.binary(cls, acc, v, node.op_type)
    if len(ins) == 1 and not isinstance(acc, np.ndarray):
        g.require(cls, node.op_type, acc)
    if node.op_type == "Mean":
        g.require_float(node.op_type, acc)
    if node.op_type == "Mean":
        acc = g.div(acc, g.scalar(len(ins), acc))
    return [acc]


_UNARY = {
    "Neg": aicc.NegOp, "Abs": aicc.AbsOp, "Exp": aicc.ExpOp, "Log": aicc.LogOp,
    "Tanh": aicc.TanhOp, "Sqrt": aicc.SqrtOp, "Relu": aicc.ReluOp, "Sigmoid": aicc.SigmoidOp,
    "Erf": aicc.ErfOp, "Floor": aicc.FloorOp, "Ceil": aicc.CeilOp, "Round": aicc.RoundOp,
    "Sin": aicc.SinOp, "Cos": aicc.CosOp, "Tan": aicc.TanOp, "Asin": aicc.AsinOp,
    "Acos": aicc.AcosOp, "Atan": aicc.AtanOp, "Sinh": aicc.SinhOp, "Cosh": aicc.CoshOp,
}


@handles(*_UNARY)
def _op_unary(imp, node, ins, at):
    return [imp.g.unary(_UNARY[node.op_type], ins[0], node.op_type)]


@handles("Asinh", "Acosh", "Atanh")
def _op_inverse_hyperbolic(imp, node, ins, at):
    """Compositions: asinh x = sign(x) log(|x| + sqrt(x^2 + 1)), acosh x = log(x + sqrt(x^2 - 1)),
    atanh x = log((1 + x) / (1 - x)) / 2."""
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    one = g.scalar(1.0, x)
    if node.op_type == "Atanh":
        return [g.mul(g.unary(aicc.LogOp, g.div(g.add(one, x), g.sub(one, x))), g.scalar(0.5, x))]
    if node.op_type == "Acosh":
        return [g.unary(aicc.LogOp, g.add(x, g.unary(aicc.SqrtOp, g.sub(g.mul(x, x), one))))]
    ax = g.unary(aicc.AbsOp, x)
    y = g.unary(aicc.LogOp, g.add(ax, g.unary(aicc.SqrtOp, g.add(g.mul(x, x), one))))
    return [g.select(g.compare("lt", x, g.scalar(0.0, x)), g.unary(aicc.NegOp, y), y)]


@handles("IsNaN")
def _op_isnan(imp, node, ins, at):
    imp.g.require_float(node.op_type, ins[0])
    return [imp.g.compare("ne", ins[0], ins[0])]  # only NaN differs from itself


@handles("IsInf")
def _op_isinf(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    pos, neg = at.get("detect_positive", 1), at.get("detect_negative", 1)
    if pos and neg:
        return [g.compare("eq", g.unary(aicc.AbsOp, x), g.scalar(np.inf, x))]
    if pos or neg:
        return [g.compare("eq", x, g.scalar(np.inf if pos else -np.inf, x))]
    return [np.zeros(g.shape(x), np.bool_)]


@handles("Reciprocal")
def _op_reciprocal(imp, node, ins, at):
    g = imp.g
    g.require_float("Reciprocal", ins[0])
    return [g.div(g.scalar(1.0, ins[0]), ins[0])]


@handles("Gelu")
def _op_gelu(imp, node, ins, at):
    approx = at.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise unsupported(imp, node, f"approximate='{approx}'")
    imp.g.require_float("Gelu", ins[0])
    return [imp.g.emit(lambda v: aicc.GeluOp(v, approx), ins[0])]


def _softplus(g, x):  # log(1 + exp(x)), as the ONNX reference computes it
    return g.unary(aicc.LogOp, g.add(g.unary(aicc.ExpOp, x), g.scalar(1.0, x)))


def _where_pos(g, x, pos, neg, strict: bool = True):
    c = g.compare("gt" if strict else "ge", x, g.scalar(0.0, x))
    return g.select(c, pos, neg)


@handles("LeakyRelu")
def _op_leaky(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    return [_where_pos(g, x, x, g.mul(x, g.scalar(at.get("alpha", 0.01), x)))]


@handles("Elu")
def _op_elu(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    em1 = g.sub(g.unary(aicc.ExpOp, x), g.scalar(1.0, x))
    return [_where_pos(g, x, x, g.mul(em1, g.scalar(at.get("alpha", 1.0), x)))]


@handles("Celu")
def _op_celu(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    a = g.scalar(at.get("alpha", 1.0), x)
    em1 = g.sub(g.unary(aicc.ExpOp, g.div(x, a)), g.scalar(1.0, x))
    neg = g.emit(aicc.MinimumOp, g.mul(a, em1), g.scalar(0.0, x))
    return [g.add(g.emit(aicc.MaximumOp, x, g.scalar(0.0, x)), neg)]


@handles("Selu")
def _op_selu(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    alpha = at.get("alpha", 1.67326319217681884765625)
    gamma = at.get("gamma", 1.05070102214813232421875)
    neg = g.mul(g.sub(g.unary(aicc.ExpOp, x), g.scalar(1.0, x)), g.scalar(alpha, x))
    return [g.mul(_where_pos(g, x, x, neg), g.scalar(gamma, x))]


@handles("ThresholdedRelu")
def _op_thresholded_relu(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    c = g.compare("gt", x, g.scalar(at.get("alpha", 1.0), x))
    return [g.select(c, x, g.scalar(0.0, x))]


def _hard_sigmoid(g, x, alpha, beta):
    y = g.add(g.mul(x, g.scalar(alpha, x)), g.scalar(beta, x))
    y = g.emit(aicc.MinimumOp, y, g.scalar(1.0, x))
    return g.emit(aicc.MaximumOp, y, g.scalar(0.0, x))


@handles("HardSigmoid")
def _op_hard_sigmoid(imp, node, ins, at):
    imp.g.require_float(node.op_type, ins[0])
    return [_hard_sigmoid(imp.g, ins[0], at.get("alpha", 0.2), at.get("beta", 0.5))]


@handles("HardSwish")
def _op_hard_swish(imp, node, ins, at):
    imp.g.require_float(node.op_type, ins[0])
    return [imp.g.mul(ins[0], _hard_sigmoid(imp.g, ins[0], 1 / 6, 0.5))]


@handles("Softplus")
def _op_softplus(imp, node, ins, at):
    imp.g.require_float(node.op_type, ins[0])
    return [_softplus(imp.g, ins[0])]


@handles("Softsign")
def _op_softsign(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    return [g.div(x, g.add(g.unary(aicc.AbsOp, x), g.scalar(1.0, x)))]


@handles("Mish")
def _op_mish(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    return [g.mul(x, g.unary(aicc.TanhOp, _softplus(g, x)))]


@handles("Swish")
def _op_swish(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    alpha = at.get("alpha", 1.0)
    return [g.mul(x, g.unary(aicc.SigmoidOp, g.mul(x, g.scalar(alpha, x)) if alpha != 1.0 else x))]


@handles("PRelu")
def _op_prelu(imp, node, ins, at):
    g, x, slope = imp.g, ins[0], ins[1]
    g.require_float(node.op_type, x, slope)
    c = g.compare("lt", x, g.scalar(0.0, x))
    return [g.select(c, g.mul(x, slope), x)] if g.shape(g.mul(x, slope)) == g.shape(x) else _raise(
        unsupported(imp, node, "a slope that broadcasts beyond the input's shape"))


def _raise(e):
    raise e


@handles("Shrink")
def _op_shrink(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    lambd, bias = at.get("lambd", 0.5), at.get("bias", 0.0)
    lo = g.select(g.compare("lt", x, g.scalar(-lambd, x)), g.add(x, g.scalar(bias, x)), g.scalar(0.0, x))
    return [g.select(g.compare("gt", x, g.scalar(lambd, x)), g.sub(x, g.scalar(bias, x)), lo)]


@handles("Sign")
def _op_sign(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_numeric(node.op_type, x)
    z = g.scalar(0.0, x)
    neg = g.select(g.compare("lt", x, z), g.scalar(-1.0, x), z)
    return [g.select(g.compare("gt", x, z), g.scalar(1.0, x), neg)]


@handles("Clip")
def _op_clip(imp, node, ins, at):
    g, x = imp.g, ins[0]
    lo = ins[1] if len(ins) > 1 and ins[1] is not None else None
    hi = ins[2] if len(ins) > 2 and ins[2] is not None else None
    if isinstance(x, np.ndarray) and all(v is None or isinstance(v, np.ndarray) for v in (lo, hi)):
        return [np.clip(x, lo, hi) if lo is not None or hi is not None else x]
    g.require_numeric(node.op_type, x)
    if lo is not None:
        x = g.emit(aicc.MaximumOp, x, g.cast_like(lo, x))
    if hi is not None:
        x = g.emit(aicc.MinimumOp, x, g.cast_like(hi, x))
    return [x]


@handles("Identity")
def _op_identity(imp, node, ins, at):
    return [ins[0]]


@handles("Dropout")
def _op_dropout(imp, node, ins, at):
    training = ins[2] if len(ins) > 2 else None
    if training is not None and (not isinstance(training, np.ndarray) or bool(training)):
        raise unsupported(imp, node, "training mode")
    outs = [ins[0]]
    if len(node.output) > 1 and node.output[1]:
        outs.append(np.ones(imp.g.shape(ins[0]), dtype=np.bool_))
    return outs


@handles("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual")
def _op_compare(imp, node, ins, at):
    pred = {"Equal": "eq", "Greater": "gt", "Less": "lt", "GreaterOrEqual": "ge", "LessOrEqual": "le"}
    return [imp.g.compare(pred[node.op_type], ins[0], ins[1])]


@handles("Not")
def _op_not(imp, node, ins, at):
    return [imp.g.compare("eq", ins[0], np.array(False))]


@handles("And", "Or", "Xor")
def _op_logic(imp, node, ins, at):
    g, a, b = imp.g, ins[0], ins[1]
    if node.op_type == "And":
        return [g.select(a, b, np.array(False))]
    if node.op_type == "Or":
        return [g.select(a, np.array(True), b)]
    return [g.compare("ne", a, b)]


@handles("Where")
def _op_where(imp, node, ins, at):
    return [imp.g.select(ins[0], ins[1], ins[2])]


@handles("MatMul")
def _op_matmul(imp, node, ins, at):
    return [imp.g.matmul(ins[0], ins[1])]


@handles("Gemm")
def _op_gemm(imp, node, ins, at):
    g = imp.g
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else None
    g.require_float("Gemm", a, b)
    if at.get("transA", 0):
        a = g.transpose(a, (1, 0))
    if at.get("transB", 0):
        b = g.transpose(b, (1, 0))
    alpha, beta = at.get("alpha", 1.0), at.get("beta", 1.0)
    if alpha != 1.0:  # scale the smaller operand, folded when it is a weight
        if isinstance(b, np.ndarray):
            b = b * np.float32(alpha)
        else:
            a = g.mul(a, g.scalar(alpha, a))
    y = g.emit(aicc.MatmulOp, a, b)
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = g.mul(c, g.scalar(beta, c))
        y = g.add(y, c)
    return [y]


@handles("Softmax", "LogSoftmax")
def _op_softmax(imp, node, ins, at):
    g, x = imp.g, ins[0]
    g.require_float(node.op_type, x)
    rank = len(g.shape(x))
    axis = at.get("axis", -1) % max(rank, 1)
    if rank == 0:
        raise unsupported(imp, node, "a rank-0 input")
    if node.op_type == "Softmax":
        return [g.emit(lambda v: aicc.SoftmaxOp(v, axis), x)]
    m = g.reduce(aicc.ReduceMaxOp, x, [axis], True)
    s = g.sub(x, m)
    lse = g.unary(aicc.LogOp, g.reduce(aicc.ReduceSumOp, g.unary(aicc.ExpOp, s), [axis], True))
    return [g.sub(s, lse)]


def _reduce_axes(imp, node, ins, at) -> tuple[list[int] | None, bool]:
    """(axes or None for all, keepdims); axes come from the attribute or (newer opsets) input 1."""
    axes = at.get("axes")
    if len(ins) > 1 and ins[1] is not None:
        axes = [int(a) for a in const(imp, node, ins[1], "axes input").reshape(-1)]
    keep = bool(at.get("keepdims", 1))
    if axes is not None and len(axes) == 0:
        axes = None
    if axes is None and at.get("noop_with_empty_axes", 0):
        return [], keep
    return axes, keep


@handles("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ReduceProd")
def _op_reduce(imp, node, ins, at):
    g, x = imp.g, ins[0]
    axes, keep = _reduce_axes(imp, node, ins, at)
    if axes == []:
        return [x]
    op = node.op_type
    if isinstance(x, np.ndarray):
        ax = None if axes is None else tuple(axes)
        fn = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max, "ReduceMin": np.min,
              "ReduceProd": np.prod}.get(op)
        if fn is not None and x.size:
            return [np.asarray(fn(x, axis=ax, keepdims=keep)).astype(x.dtype)]
    shape = g.shape(x)
    norm = aicc.normalize_axes(op, axes, len(shape))
    out_shape = aicc.reduce_shape(shape, norm, keep)
    if any(shape[a] == 0 for a in norm) and 0 not in out_shape:  # the reduction's identity
        if g.dtype(x).kind == "f":
            identity = {"ReduceMax": -np.inf, "ReduceMin": np.inf, "ReduceProd": 1.0, "ReduceMean": np.nan,
                        "ReduceLogSum": -np.inf, "ReduceLogSumExp": -np.inf}.get(op, 0.0)
        else:
            info = np.iinfo(g.dtype(x)) if g.dtype(x).kind == "i" else None
            identity = {"ReduceMax": info.min if info else False, "ReduceMin": info.max if info else True,
                        "ReduceProd": 1}.get(op, 0)
        return [np.full(out_shape, identity, dtype=g.dtype(x))]
    if 0 in out_shape:  # nothing to compute
        return [np.zeros(out_shape, dtype=g.dtype(x))]
    simple = {"ReduceSum": aicc.ReduceSumOp, "ReduceMean": aicc.ReduceMeanOp, "ReduceProd": aicc.ReduceProdOp,
              "ReduceMax": aicc.ReduceMaxOp, "ReduceMin": aicc.ReduceMinOp}
    if g.dtype(x) == np.bool_ and op in ("ReduceMax", "ReduceMin"):  # any / all
        y = g.reduce(simple[op], g.cast(x, np.int32), axes, keep)
        return [g.cast(y, np.bool_)]
    if op in simple:
        return [g.reduce(simple[op], x, axes, keep)]
    g.require_float(op, x)
    if op == "ReduceL1":
        return [g.reduce(aicc.ReduceSumOp, g.unary(aicc.AbsOp, x), axes, keep)]
    if op in ("ReduceL2", "ReduceSumSquare"):
        s = g.reduce(aicc.ReduceSumOp, g.mul(x, x), axes, keep)
        return [g.unary(aicc.SqrtOp, s) if op == "ReduceL2" else s]
    if op == "ReduceLogSum":
        return [g.unary(aicc.LogOp, g.reduce(aicc.ReduceSumOp, x, axes, keep))]
    # ReduceLogSumExp, shifted by the max for range: m + log(sum(exp(x - m)))
    m = g.reduce(aicc.ReduceMaxOp, x, axes, True)
    s = g.reduce(aicc.ReduceSumOp, g.unary(aicc.ExpOp, g.sub(x, m)), axes, keep)
    m_out = m if keep else g.reshape(m, g.shape(s))
    return [g.add(g.unary(aicc.LogOp, s), m_out)]


@handles("GlobalAveragePool", "GlobalMaxPool")
def _op_global_pool(imp, node, ins, at):
    g, x = imp.g, ins[0]
    cls = aicc.ReduceMeanOp if node.op_type == "GlobalAveragePool" else aicc.ReduceMaxOp
    return [g.reduce(cls, x, list(range(2, len(g.shape(x)))), True)]


@handles("BatchNormalization")
def _op_batchnorm(imp, node, ins, at):
    g = imp.g
    x, scale, bias, mean, var = ins[:5]
    if at.get("training_mode", 0) or len([o for o in node.output if o]) > 1:
        return _batchnorm_training(imp, node, ins, at)
    g.require_float(node.op_type, x)
    eps = at.get("epsilon", 1e-5)
    rank = len(g.shape(x))
    p = [g.reshape(g.cast_like(v, x), (g.shape(v)[0],) + (1,) * (rank - 2)) for v in (scale, bias, mean, var)]
    scale, bias, mean, var = p
    inv = g.div(scale, g.unary(aicc.SqrtOp, g.add(var, g.scalar(eps, x))))  # folded for weights
    shift = g.sub(bias, g.mul(mean, inv))
    return [g.add(g.mul(x, inv), shift)]


def _batchnorm_training(imp, node, ins, at):
    """Training mode: normalized by the batch's statistics (over every axis but 1, population
    variance); the running mean and variance move towards them by 1 - momentum."""
    g, x = imp.g, ins[0]
    scale, bias, mean, var = ins[1:5]
    g.require_float(node.op_type, x)
    rank = len(g.shape(x))
    if rank < 2:
        raise unsupported(imp, node, f"a rank-{rank} input")
    axes = [0] + list(range(2, rank))
    c = g.shape(x)[1]
    cs = (c,) + (1,) * (rank - 2)
    y, bmean, inv = _normalize(g, x, axes, at.get("epsilon", 1e-5))
    y = g.add(g.mul(y, g.reshape(g.cast_like(scale, x), cs)), g.reshape(g.cast_like(bias, x), cs))
    d = g.sub(x, bmean)
    bvar = g.reshape(g.reduce(aicc.ReduceMeanOp, g.mul(d, d), axes, True), (c,))
    bmean = g.reshape(bmean, (c,))
    m = at.get("momentum", 0.9)
    run_mean = g.add(g.mul(g.cast_like(mean, x), g.scalar(m, x)), g.mul(bmean, g.scalar(1 - m, x)))
    run_var = g.add(g.mul(g.cast_like(var, x), g.scalar(m, x)), g.mul(bvar, g.scalar(1 - m, x)))
    return [y, run_mean, run_var][: len(node.output)]


def _normalize(g, x, axes, eps):
    mean = g.reduce(aicc.ReduceMeanOp, x, axes, True)
    d = g.sub(x, mean)
    var = g.reduce(aicc.ReduceMeanOp, g.mul(d, d), axes, True)
    inv = g.unary(aicc.RsqrtOp, g.add(var, g.scalar(eps, x)))
    return g.mul(d, inv), mean, inv


@handles("LayerNormalization")
def _op_layernorm(imp, node, ins, at):
    g, x, scale = imp.g, ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else None
    g.require_float(node.op_type, x)
    if at.get("stash_type", 1) != 1:
        raise unsupported(imp, node, "stash_type other than float32")
    rank = len(g.shape(x))
    axis = at.get("axis", -1) % rank
    y, mean, inv = _normalize(g, x, list(range(axis, rank)), at.get("epsilon", 1e-5))
    y = g.mul(y, g.cast_like(scale, x))
    if bias is not None:
        y = g.add(y, g.cast_like(bias, x))
    return [y, mean, inv][: len(node.output)]


@handles("InstanceNormalization")
def _op_instancenorm(imp, node, ins, at):
    g, x, scale, bias = imp.g, ins[0], ins[1], ins[2]
    g.require_float(node.op_type, x)
    rank = len(g.shape(x))
    y, _, _ = _normalize(g, x, list(range(2, rank)), at.get("epsilon", 1e-5))
    c = (g.shape(scale)[0],) + (1,) * (rank - 2)
    return [g.add(g.mul(y, g.reshape(scale, c)), g.reshape(bias, c))]


@handles("GroupNormalization")
def _op_groupnorm(imp, node, ins, at):
    g, x, scale, bias = imp.g, ins[0], ins[1], ins[2]
    g.require_float(node.op_type, x)
    if at.get("stash_type", 1) != 1:
        raise unsupported(imp, node, "stash_type other than float32")
    shape = g.shape(x)
    n, c = shape[0], shape[1]
    groups = at["num_groups"]
    xg = g.reshape(x, (n, groups, c // groups * math.prod(shape[2:])))
    y, _, _ = _normalize(g, xg, [2], at.get("epsilon", 1e-5))
    y = g.reshape(y, shape)
    cs = (c,) + (1,) * (len(shape) - 2)
    return [g.add(g.mul(y, g.reshape(scale, cs)), g.reshape(bias, cs))]


# -- shape ops ----------------------------------------------------------------------------------


@handles("Transpose")
def _op_transpose(imp, node, ins, at):
    rank = len(imp.g.shape(ins[0]))
    perm = at.get("perm", list(range(rank))[::-1])
    return [imp.g.transpose(ins[0], perm)]


@handles("Reshape")
def _op_reshape(imp, node, ins, at):
    g, x = imp.g, ins[0]
    target = list(dims(const(imp, node, ins[1], "shape input").reshape(-1)))
    shape = g.shape(x)
    if not at.get("allowzero", 0):
        target = [shape[i] if isinstance(d, int) and d == 0 else d for i, d in enumerate(target)]
    try:
        new = aicc.reshape_shape("Reshape", shape, target)
    except ValueError as e:
        raise ShapeError(f"{g.where}: {e}") from None
    return [g.reshape(x, new)]


@handles("Flatten")
def _op_flatten(imp, node, ins, at):
    g, x = imp.g, ins[0]
    shape = g.shape(x)
    axis = at.get("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    return [g.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))]


@handles("Squeeze")
def _op_squeeze(imp, node, ins, at):
    g, x = imp.g, ins[0]
    shape = g.shape(x)
    axes = at.get("axes")
    if len(ins) > 1 and ins[1] is not None:
        axes = [int(a) for a in const(imp, node, ins[1], "axes input").reshape(-1)]
    axes = [i for i, d in enumerate(shape) if d == 1] if axes is None else [a % len(shape) for a in axes]
    return [g.reshape(x, [d for i, d in enumerate(shape) if i not in axes])]


@handles("Unsqueeze")
def _op_unsqueeze(imp, node, ins, at):
    g, x = imp.g, ins[0]
    axes = at.get("axes")
    if len(ins) > 1:
        axes = [int(a) for a in const(imp, node, ins[1], "axes input").reshape(-1)]
    out = list(g.shape(x))
    rank = len(out) + len(axes)
    for a in sorted(a % rank for a in axes):
        out.insert(a, 1)
    return [g.reshape(x, out)]


@handles("Expand")
def _op_expand(imp, node, ins, at):
    g, x = imp.g, ins[0]
    target = list(dims(const(imp, node, ins[1], "shape input").reshape(-1)))
    try:
        out = aicc.broadcast_shapes("Expand", g.shape(x), target)
    except ValueError as e:
        raise ShapeError(f"{g.where}: {e}") from None
    return [g.broadcast_to(x, out)]


@handles("Shape")
def _op_shape(imp, node, ins, at):
    dims = imp.g.shape(ins[0])
    # a symbolic dim makes an object array of ints and Syms: the shape arithmetic after it
    # (SYMBOLIC_SHAPE_OPS) folds with it like with any constant
    shape = np.array(dims, dtype=object if any(isinstance(d, Sym) for d in dims) else np.int64)
    start, end = at.get("start", 0), at.get("end")
    return [shape[start:end]]


def _symbolic(x) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == object


def _settle(a) -> np.ndarray:
    """An object array of dims back to int64 once no Sym is left in it."""
    a = np.asarray(a, dtype=object)
    if any(isinstance(d, Sym) for d in a.reshape(-1)):
        return a
    return a.astype(np.int64)


def _sym_slice(ins, at):
    x = ins[0]
    starts, ends = (np.asarray(v).reshape(-1).tolist() for v in ins[1:3])
    axes = np.asarray(ins[3]).reshape(-1).tolist() if len(ins) > 3 and ins[3] is not None \
        else list(range(len(starts)))
    steps = np.asarray(ins[4]).reshape(-1).tolist() if len(ins) > 4 and ins[4] is not None \
        else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for a, b, e, st in zip(axes, starts, ends, steps):
        index[a] = slice(int(b), int(e), int(st))
    return x[tuple(index)]


def _ints(v) -> list[int]:
    return [int(d) for d in np.asarray(v).reshape(-1)]


# Shape arithmetic on symbolic dims: what an exported graph does between a Shape op and the
# Reshape / Expand that uses it, evaluated with NumPy on object arrays of ints and Syms.
SYMBOLIC_SHAPE_OPS = {
    "Gather": lambda ins, at: np.take(ins[0], np.asarray(ins[1], dtype=np.int64), axis=at.get("axis", 0)),
    "Slice": _sym_slice,
    "Concat": lambda ins, at: np.concatenate([np.asarray(v, dtype=object).reshape(np.shape(v))
                                              for v in ins], axis=at["axis"]),
    "Unsqueeze": lambda ins, at: np.expand_dims(ins[0], tuple(_ints(ins[1]))),
    "Squeeze": lambda ins, at: np.squeeze(ins[0], tuple(_ints(ins[1]))) if len(ins) > 1
    else np.squeeze(ins[0]),
    "Identity": lambda ins, at: ins[0],
    "Cast": lambda ins, at: ins[0],  # dims stay integers whatever integer type they are cast to
    "Mul": lambda ins, at: np.multiply(ins[0], ins[1]),
    "Add": lambda ins, at: np.add(ins[0], ins[1]),
    "Sub": lambda ins, at: np.subtract(ins[0], ins[1]),
    "Div": lambda ins, at: np.floor_divide(ins[0], ins[1]),  # exact, or a SymbolicError
    "Mod": lambda ins, at: np.mod(ins[0], ins[1]),
    # Expand's shape from Where(Equal(shape, -1), 1, shape): equality with an int is decided
    # (a symbol is >= 1, never -1)
    "Equal": lambda ins, at: np.array([a == b for a, b in zip(*(np.broadcast_arrays(
        np.asarray(ins[0], dtype=object), np.asarray(ins[1], dtype=object))))]).reshape(
            np.broadcast_shapes(np.shape(ins[0]), np.shape(ins[1]))),
    "Where": lambda ins, at: np.where(ins[0], ins[1], ins[2]),
}


@handles("Size")
def _op_size(imp, node, ins, at):
    return [np.array(math.prod(imp.g.shape(ins[0])), dtype=np.int64)]


@handles("Constant")
def _op_constant(imp, node, ins, at):
    if "value" in at:
        return [at["value"]]
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32),
                    ("value_int", np.int64), ("value_ints", np.int64)):
        if key in at:
            return [np.array(at[key], dtype=dt)]
    raise unsupported(imp, node, f"attribute {next(iter(at), '?')}")


@handles("ConstantOfShape")
def _op_constant_of_shape(imp, node, ins, at):
    shape = list(dims(const(imp, node, ins[0], "shape input").reshape(-1)))
    value = at.get("value", np.zeros(1, np.float32)).reshape(-1)[0]
    if any(isinstance(d, Sym) for d in shape):  # a tensor of symbolic size: a broadcast
        return [imp.g.broadcast_to(np.asarray(value).reshape((1,) * len(shape)), shape)]
    return [np.full(shape, value, dtype=np.asarray(value).dtype)]


@handles("Range")
def _op_range(imp, node, ins, at):
    s, l_, d = (const(imp, node, v, "Range input") for v in ins)
    if any(x.dtype == object for x in (s, l_, d)):  # a length that depends on a dynamic dim
        raise unsupported(imp, node, f"a Range of dynamic length ({s.item()} to {l_.item()}, step "
                          f"{d.item()}; compile with static input shapes for it)")
    return [np.arange(s, l_, d).astype(s.dtype)]


@handles("Cast", "CastLike")
def _op_cast(imp, node, ins, at):
    g = imp.g
    if node.op_type == "CastLike":
        dt = g.dtype(ins[1])
    else:
        to = at["to"]
        if to not in ONNX_DTYPES:
            raise unsupported(imp, node, f"a cast to {dtype_name(to)}")
        dt = np.dtype(ONNX_DTYPES[to])
    x = ins[0]
    if isinstance(x, np.ndarray) or g.dtype(x) != np.int8:
        return [g.cast(x, dt)]
    if not is_uint8(imp, node, x):
        return [g.cast(x, dt)]
    # a uint8 tensor v is held as v - 128
    if dt == np.bool_:
        return [g.compare("ne", x, np.array(-128, np.int8))]
    wide = np.int32 if dt.kind != "f" else dt
    return [g.cast(g.add(g.cast(x, wide), np.array(128, wide)), dt)]


# The tensor ops above and the ops of the NN dialect (conv, pools, concat, slice, gather, pad,
# ...) from frontends/onnx_nn.py: the table the importer dispatches on.
HANDLERS = merge_tables(CORE_HANDLERS, onnx_nn.HANDLERS, onnx_attention.HANDLERS, onnx_loss.HANDLERS,
                       onnx_index.HANDLERS, onnx_rnn.HANDLERS, onnx_quant.HANDLERS, onnx_qop.HANDLERS)
# ops of other domains, by domain: onnxruntime's contrib ops that its quantizer writes
DOMAIN_HANDLERS = {"com.microsoft": onnx_qop.MS_HANDLERS}
SUPPORTED_OPS = HandlerTable({**HANDLERS, **{f"{d}.{op}": fn for d, table in DOMAIN_HANDLERS.items()
                                             for op, fn in table.items()}})

# The ops that take (u)int8 tensors (held as int8, see onnx_common): the quantization ops, which
# read the kind, and the ops that only move values (and MaxPool, Pad and Cast, which handle the
# uint8 shift), whose (u)int8 results have the kind of their (u)int8 data input. Any other op
# given one is refused: its arithmetic would see v - 128, or wrap in 8 bits.
INT8_OPS = {"QuantizeLinear", "DequantizeLinear", *onnx_qop.HANDLERS}
INT8_LAYOUT_OPS = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand",
                   "Concat", "Slice", "Split", "Gather", "Tile", "DepthToSpace", "SpaceToDepth",
                   "MaxPool", "Pad", "Shape", "Size", "Cast"}


# ---------------------------------------------------------------------------------------------
# The importer
# ---------------------------------------------------------------------------------------------


class _Respecialize(Exception):
    """Raised inside the import: graph inputs `names` are needed at compile time."""

    def __init__(self, names: set[str]):
        self.names = names


class OnnxImporter:
    def __init__(self, model, input_shapes: dict[str, Sequence[int]] | None = None,
                 example_values: dict[str, np.ndarray] | None = None):
        self.model = model
        self.input_shapes = {k: tuple(v) for k, v in (input_shapes or {}).items()}
        self.example_values = dict(example_values or {})
        self.opset = 0
        self.guards: list[tuple[int, str, np.ndarray]] = []
        self.dim_ranges: dict[str, tuple[int, int | None]] = {}
        self._args: dict = {}  # block argument -> (input index, input name)

    def specialize(self, v) -> np.ndarray | None:
        """The example value of graph input `v` (recording a guard for it), or None when `v`
        has no example value. A value computed from graph inputs that all have example values
        restarts the import with those inputs specialized (_Respecialize)."""
        key = self._args.get(v)
        if key is None:
            deps = self._input_deps(v)
            if deps and all(name in self.example_values for _, name in deps):
                raise _Respecialize({name for _, name in deps})
            return None
        index, name = key
        if name not in self.example_values:
            return None
        value = np.asarray(self.example_values[name])
        if not any(i == index for i, _, _ in self.guards):
            self.guards.append((index, name, value.copy()))
        return value

    def _input_deps(self, v) -> set[tuple[int, str]]:
        """The graph inputs an SSA value is computed from."""
        seen, todo, out = set(), [v], set()
        while todo:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            if x in self._args:
                out.add(self._args[x])
            elif isinstance(getattr(x, "owner", None), Operation):
                todo.extend(x.owner.operands)
        return out

    def run(self) -> ImportedProgram:
        """Import the graph; an input needed at compile time through other ops is specialized
        on its example value and the import starts again."""
        frozen: set[str] = set()
        while True:
            try:
                return self._run(frozen)
            except _Respecialize as r:
                if r.names <= frozen:  # pragma: no cover - cannot happen: a frozen input is an array
                    raise
                frozen |= r.names
                self.guards = []
                self._args = {}

    def check(self) -> None:
        model = self.model
        for o in model.opset_import:
            if o.domain in ("", "ai.onnx"):
                self.opset = o.version
        if self.opset and not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise UnsupportedOpError(
                f"opset {self.opset}",
                f"ONNX opset {self.opset} is not supported (aicc imports opsets {MIN_OPSET}-{MAX_OPSET}; "
                "older models are upgraded to opset 13 with onnx.version_converter)",
            )
        counts: Counter[str] = Counter()
        first: dict[str, str] = {}
        for i, node in enumerate(model.graph.node):
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            if _handler(node) is None:
                counts[key] += 1
                first.setdefault(key, node.name or f"#{i}")
        if counts:
            parts = [f"{op} ({n} node{'s' if n > 1 else ''}, first '{first[op]}')" for op, n in counts.items()]
            e = UnsupportedOpError(
                next(iter(counts)),
                f"{len(counts)} unsupported ONNX operator type{'s' if len(counts) > 1 else ''}: "
                + ", ".join(parts),
            )
            e.ops = dict(counts)
            raise e

    def _input_type(self, vi) -> tuple[tuple[int, ...], np.dtype]:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise UnsupportedOpError("input", f"ONNX input '{vi.name}' is not a tensor")
        if tt.elem_type not in ONNX_DTYPES and tt.elem_type not in onnx_quant.QUANT_DTYPES:
            raise UnsupportedOpError(
                "dtype", f"ONNX input '{vi.name}' has element type {dtype_name(tt.elem_type)}, "
                "which aicc does not support (float32, float64, int32, int64, bool, int8, uint8)"
            )
        dtype = np.dtype({**ONNX_DTYPES, **onnx_quant.QUANT_DTYPES}[tt.elem_type])
        if vi.name in self.input_shapes:
            shape = self.input_shapes[vi.name]
            if tt.HasField("shape") and len(tt.shape.dim) != len(shape):
                raise CompileError(
                    f"--input-shape {vi.name}={'x'.join(map(str, shape))} has rank {len(shape)}, "
                    f"but the model's input '{vi.name}' has rank {len(tt.shape.dim)}"
                )
            return tuple(int(d) for d in shape), dtype
        if not tt.HasField("shape"):
            raise CompileError(
                f"ONNX input '{vi.name}' has no shape; give one with --input-shape {vi.name}=D0xD1x..."
            )
        shape = []
        for k, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:
                shape.append(int(d.dim_value))
            else:
                # a symbolic dim stays symbolic: one model for every size of it; dims with
                # the same dim_param are one symbol, an unnamed one is a symbol of its own
                name = re.sub(r"\W", "_", d.dim_param) if d.dim_param else f"{vi.name}_{k}"
                if not re.match(r"[A-Za-z_]", name):
                    name = "d_" + name
                shape.append(Sym.var(re.sub(r"\W", "_", name)))
        return tuple(shape), dtype

    def bound_symbol(self, node, e, size: int) -> None:
        """An op needs `e <= size`: the symbol's range, checked on every call."""
        if not narrow_range(self.dim_ranges, e, size):
            raise unsupported(self, node, f"a bound on {e} (only a plain symbol can be bounded)")

    def _run(self, frozen: set[str]) -> ImportedProgram:
        self.check()
        graph = self.model.graph
        init_names = {t.name for t in graph.initializer}
        env: dict[str, Any] = {}
        self.env = env
        for t in graph.initializer:
            env[t.name] = _tensor_to_numpy(t)
        inputs = [vi for vi in graph.input if vi.name not in init_names]
        types = [self._input_type(vi) for vi in inputs]
        # a uint8 input is held as int8 (v - 128): the compiled model converts it
        arg_types = [aicc.tensor_type(aicc.mlir_element_type(np.int8 if dt == np.uint8 else dt), shape)
                     for shape, dt in types]
        block = Block(arg_types=arg_types)
        g = GraphBuilder(block)
        self.g = g
        self.int8_kinds = {}
        for i, (vi, arg) in enumerate(zip(inputs, block.args)):
            env[vi.name] = arg
            self._args[arg] = (i, vi.name)
            if types[i][1] in (np.int8, np.uint8):
                set_int8_kind(self, arg, types[i][1] == np.uint8)
            if vi.name in frozen:  # needed at compile time: the example value, guarded
                env[vi.name] = self.specialize(arg).astype(types[i][1])
        locations: dict[Operation, str] = {}
        for i, node in enumerate(graph.node):
            name = node.name or f"#{i}"
            g.where = f"ONNX {node.op_type} node '{name}'"
            ins = []
            for n in node.input:
                if n == "":
                    ins.append(None)
                elif n not in env:
                    raise CompileError(f"{g.where}: input '{n}' is not defined before the node")
                else:
                    ins.append(env[n])
            while ins and ins[-1] is None:
                ins.pop()
            at = _attrs(node)
            for a in node.attribute:
                if a.ref_attr_name:
                    raise UnsupportedOpError(node.op_type, f"{g.where}: attribute references")
            last = block.last_op
            int8_in = [v for v in ins if v is not None and not isinstance(v, np.ndarray) and g.dtype(v) == np.int8]
            if int8_in and node.domain in ("", "ai.onnx") and node.op_type not in INT8_OPS | INT8_LAYOUT_OPS:
                kind = "a uint8" if is_uint8(self, node, int8_in[0]) else "an int8"
                raise unsupported(self, node, f"{kind} input (aicc computes on (u)int8 tensors in the "
                                  "quantization ops and in ops that only move values)")
            try:
                # shape arithmetic: symbolic dims in the data (any operand of an arithmetic op)
                data_ops = ("Gather", "Slice", "Unsqueeze", "Squeeze", "Identity", "Cast")
                if node.op_type in SYMBOLIC_SHAPE_OPS and all(
                        isinstance(v, np.ndarray) for v in ins if v is not None) and (
                        _symbolic(ins[0]) if node.op_type in data_ops else any(_symbolic(v) for v in ins)):
                    outs = [_settle(SYMBOLIC_SHAPE_OPS[node.op_type](ins, at))]
                else:
                    outs = _handler(node)(self, node, ins, at)
            except (KeyError, IndexError, TypeError) as e:  # a malformed node, not an aicc bug
                raise CompileError(f"{g.where}: malformed node ({type(e).__name__}: {e})") from None
            except ValueError as e:
                raise ShapeError(f"{g.where}: {e}") from None
            if int8_in and node.op_type in INT8_LAYOUT_OPS:  # results have the data input's kind
                unsigned = is_uint8(self, node, int8_in[0])
                for v in outs:
                    if not isinstance(v, np.ndarray) and not isinstance(v, list) and g.dtype(v) == np.int8:
                        set_int8_kind(self, v, unsigned)
            op = last.next_op if last is not None else block.first_op
            while op is not None:  # the ops this node became
                locations[op] = g.where
                op = op.next_op
            for n, v in zip(node.output, outs):
                if isinstance(v, np.generic):  # NumPy scalars from folding
                    v = np.asarray(v)
                if n:
                    env[n] = v
        outputs, uint8_outputs = [], []
        for i, vi in enumerate(graph.output):
            if vi.name not in env:
                raise CompileError(f"ONNX graph output '{vi.name}' is never computed")
            v = env[vi.name]
            if (isinstance(v, np.ndarray) and v.dtype == np.uint8) or (
                    not isinstance(v, np.ndarray) and g.dtype(v) == np.int8 and self.int8_kinds.get(v)):
                v, _ = int8_value(self, None, v)  # returned as uint8 by the compiled model
                uint8_outputs.append(i)
            outputs.append(v)
        ret = g.finish(outputs)
        fop = func.FuncOp("main", (arg_types, [v.type for v in ret]), Region(block))
        module = ModuleOp([fop])
        module.verify()
        return ImportedProgram(
            module=module,
            func_name="main",
            input_names=[vi.name for vi in inputs],
            input_types=types,
            output_names=[vi.name for vi in graph.output],
            output_is_tuple=len(graph.output) != 1,
            model_name=graph.name or "model",
            locations=locations,
            guards=list(self.guards),
            uint8_inputs=[i for i, (_, dt) in enumerate(types) if dt == np.uint8],
            uint8_outputs=uint8_outputs,
            dim_ranges=dict(self.dim_ranges),
        )


def _handler(node):
    """The handler of `node` by its domain and op type, or None."""
    if node.domain in ("", "ai.onnx"):
        return HANDLERS.get(node.op_type)
    table = DOMAIN_HANDLERS.get(node.domain)
    return table.get(node.op_type) if table is not None else None


def import_onnx(
    model: Any,
    input_shapes: dict[str, Sequence[int]] | None = None,
    example_inputs: Sequence[Any] | None = None,
) -> ImportedProgram:
    """Import `model` (a path or an onnx.ModelProto). Symbolic dims take their size from
    `input_shapes` (by input name) or from the shapes of `example_inputs` (in input order).
    An op that needs a graph input's value at compile time (a Reshape's shape, TopK's k, ...)
    takes it from the example input; the program's `guards` list those inputs, and the compiled
    model raises SpecializationError when a call gives another value."""
    proto = _upgrade_opset(load_onnx(model))
    shapes = dict(input_shapes or {})
    values = {}
    if example_inputs is not None:
        init = {t.name for t in proto.graph.initializer}
        names = [vi.name for vi in proto.graph.input if vi.name not in init]
        if len(example_inputs) != len(names):
            raise CompileError(f"the ONNX model takes {len(names)} inputs ({', '.join(names)}), "
                               f"got {len(example_inputs)} example inputs")
        for n, x in zip(names, example_inputs):
            shapes.setdefault(n, np.shape(x))
            if isinstance(x, np.ndarray | np.generic | list | tuple | int | float):
                values[n] = np.asarray(x)
    return OnnxImporter(proto, shapes, values).run()


def _upgrade_opset(proto):
    """Models older than opset 13 (the model zoo's are opset 9) are upgraded with ONNX's own
    version converter, which rewrites the ops whose meaning changed (Softmax's 2-D coercion,
    Unsqueeze's attribute axes, ...), so the importer handles one set of semantics."""
    version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if not version or version >= MIN_OPSET:
        return proto
    from onnx import version_converter

    try:
        return version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:  # the converter raises plain RuntimeErrors from C++
        raise UnsupportedOpError(
            f"opset {version}",
            f"ONNX opset {version} could not be upgraded to opset {MIN_OPSET} by "
            f"onnx.version_converter: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
        ) from None


def make_inputs(types: Sequence[tuple[tuple[int, ...], np.dtype]], seed: int = 0,
                symbol_size: int = 1) -> tuple:
    """Random inputs for the given (shape, dtype)s: float in [-1, 1), small ints, random bools;
    a symbolic dim takes the size its expression has with every symbol `symbol_size`."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dt in types:
        shape = tuple(d.evaluate({s: symbol_size for s in d.symbols}) if isinstance(d, Sym) else d
                      for d in shape)
        dt = np.dtype(dt)
        if dt.kind == "f":
            out.append(rng.uniform(-1, 1, size=shape).astype(dt))
        elif dt.kind == "b":
            out.append(rng.integers(0, 2, size=shape).astype(np.bool_))
        else:
            out.append(rng.integers(0, 4, size=shape).astype(dt))
    return tuple(out)


def parse_input_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """`name=1x3x224x224` strings (the CLI's --input-shape) as a dict."""
    out = {}
    for s in specs:
        name, sep, dims = s.rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x")) if dims else ()
        except ValueError:
            shape = None
        if not sep or not name or shape is None or any(d < 0 for d in shape):
            raise CompileError(f"--input-shape expects NAME=D0xD1x..., got '{s}'")
        out[name] = shape
    return out
