"""A NumPy interpreter of the aicc dialect: the semantic ground truth.

Every compiled pipeline is tested against `run_reference`, and the constant folder evaluates
ops through `evaluate_op`. Float results are float32 (the element type of the op's result);
transcendental NN ops (gelu, erf, sigmoid, softmax, rsqrt) are computed in float64 by
compiler.ops and rounded once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue

from compiler import ops as nn
from compiler.dialects import aicc, aicc_index, aicc_nn, aicc_quant, index_notation
from compiler.errors import CompileError, UnsupportedOpError

__all__ = ["run_reference", "evaluate_op", "REFERENCE_KERNELS"]

Kernel = Callable[[Operation, list[np.ndarray]], np.ndarray]


def _reduce(fn: Callable[..., np.ndarray]) -> Kernel:
    def kernel(op: Operation, args: list[np.ndarray]) -> np.ndarray:
        assert isinstance(op, aicc.ReduceOp)
        return fn(args[0], axis=op.axes_tuple, keepdims=op.keep)

    return kernel


_COMPARE = {
    "gt": np.greater,
    "ge": np.greater_equal,
    "lt": np.less,
    "le": np.less_equal,
    "eq": np.equal,
    "ne": np.not_equal,
}


def divide(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Float division, or integer division truncating toward zero with x / 0 = 0."""
    if x.dtype.kind not in "iu":
        return np.divide(x, d)
    safe = np.where((d == 0) | (d == -1), 1, d).astype(d.dtype)
    q = x // safe
    r = x - q * safe
    q = q + ((r != 0) & ((x < 0) != (safe < 0)))  # floor -> toward zero
    q = np.where(d == -1, np.negative(x), q)
    return np.where(d == 0, 0, q).astype(x.dtype)


def _result_shape(op: Operation) -> tuple[int, ...]:
    return aicc.shape_of(op.results[0])


def _matmul(op: aicc.MatmulOp, a: np.ndarray, b: np.ndarray, bias: np.ndarray | None = None):
    a = np.swapaxes(a, -1, -2) if op.trans_lhs else a
    b = np.swapaxes(b, -1, -2) if op.trans_rhs else b
    return np.matmul(a, b) if bias is None else np.matmul(a, b) + bias


REFERENCE_KERNELS: dict[type[Operation], Kernel] = {
    aicc.ConstantOp: lambda op, a: aicc.numpy_from_dense(op.value),
    aicc.NegOp: lambda op, a: np.negative(a[0]),
    aicc.AbsOp: lambda op, a: np.abs(a[0]),
    aicc.ExpOp: lambda op, a: np.exp(a[0]),
    aicc.LogOp: lambda op, a: np.log(a[0]),
    aicc.TanhOp: lambda op, a: np.tanh(a[0]),
    aicc.SqrtOp: lambda op, a: np.sqrt(a[0]),
    aicc.ErfOp: lambda op, a: nn.erf(a[0]),
    aicc.RsqrtOp: lambda op, a: nn.rsqrt(a[0]),
    aicc.ReluOp: lambda op, a: nn.relu(a[0]),
    aicc.SigmoidOp: lambda op, a: nn.sigmoid(a[0]),
    aicc.GeluOp: lambda op, a: nn.gelu(a[0], approximate="tanh" if op.is_tanh else "none"),
    aicc.AddOp: lambda op, a: np.add(a[0], a[1]),
    aicc.SubOp: lambda op, a: np.subtract(a[0], a[1]),
    aicc.MulOp: lambda op, a: np.multiply(a[0], a[1]),
    aicc.DivOp: lambda op, a: divide(a[0], a[1]),
    aicc.MaximumOp: lambda op, a: np.maximum(a[0], a[1]),
    aicc.MinimumOp: lambda op, a: np.minimum(a[0], a[1]),
    aicc.PowOp: lambda op, a: np.power(a[0], a[1]),
    aicc.ModOp: lambda op, a: np.mod(a[0], a[1]),  # x mod 0: 0 for integers, NaN for floats
    aicc.FModOp: lambda op, a: np.fmod(a[0], a[1]),
    aicc.FloorOp: lambda op, a: np.floor(a[0]),
    aicc.CeilOp: lambda op, a: np.ceil(a[0]),
    aicc.RoundOp: lambda op, a: np.round(a[0]),  # half to even
    aicc.SinOp: lambda op, a: np.sin(a[0]),
    aicc.CosOp: lambda op, a: np.cos(a[0]),
    aicc.TanOp: lambda op, a: np.tan(a[0]),
    aicc.AsinOp: lambda op, a: np.arcsin(a[0]),
    aicc.AcosOp: lambda op, a: np.arccos(a[0]),
    aicc.AtanOp: lambda op, a: np.arctan(a[0]),
    aicc.SinhOp: lambda op, a: np.sinh(a[0]),
    aicc.CoshOp: lambda op, a: np.cosh(a[0]),
    aicc.CompareOp: lambda op, a: _COMPARE[op.predicate.data](a[0], a[1]),
    aicc.SelectOp: lambda op, a: np.where(a[0], a[1], a[2]),
    aicc.CastOp: lambda op, a: a[0],  # the dtype conversion happens for every op below
    aicc.MatmulOp: lambda op, a: _matmul(op, *a),
    aicc.ReduceSumOp: _reduce(np.sum),
    aicc.ReduceMeanOp: _reduce(np.mean),
    aicc.ReduceMaxOp: _reduce(np.max),
    aicc.ReduceMinOp: _reduce(np.min),
    aicc.ReduceProdOp: _reduce(np.prod),
    aicc.SoftmaxOp: lambda op, a: nn.softmax(a[0], axis=op.axis.value.data),
    aicc.TransposeOp: lambda op, a: np.transpose(a[0], op.perm),
    aicc.ReshapeOp: lambda op, a: np.reshape(a[0], _result_shape(op)),
    aicc.BroadcastToOp: lambda op, a: np.broadcast_to(a[0], _result_shape(op)),
}


def _ints(attr) -> tuple[int, ...]:
    return tuple(int(v) for v in attr.get_values())


def _pad(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    widths = list(zip(_ints(op.low), _ints(op.high)))
    return np.pad(a[0], widths, constant_values=op.value.value.data)


def _windows(x: np.ndarray, kernel, strides, dilations, out_hw) -> np.ndarray:
    """(N, C, OH, OW, KH, KW) view of the windows of an NCHW array."""
    n, c = x.shape[:2]
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, strides, dilations, out_hw
    rows = (np.arange(oh) * sh)[:, None] + (np.arange(kh) * dh)[None, :]  # (OH, KH)
    cols = (np.arange(ow) * sw)[:, None] + (np.arange(kw) * dw)[None, :]  # (OW, KW)
    return x[:, :, rows[:, None, :, None], cols[None, :, None, :]]  # (N, C, OH, OW, KH, KW)


def _conv2d(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    x, w = a
    n, c = x.shape[:2]
    oc, icg, kh, kw = w.shape
    g = op.groups.value.data
    oh, ow = _result_shape(op)[2:]
    win = _windows(x, (kh, kw), _ints(op.strides), _ints(op.dilations), (oh, ow))
    win = win.reshape(n, g, icg, oh, ow, kh, kw).astype(np.float64)
    wg = w.reshape(g, oc // g, icg, kh, kw).astype(np.float64)
    return np.einsum("ngchwij,gocij->ngohw", win, wg).reshape(n, oc, oh, ow)


def _pool2d(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    oh, ow = _result_shape(op)[2:]
    win = _windows(a[0], _ints(op.kernel), _ints(op.strides), _ints(op.dilations), (oh, ow))
    return win.max(axis=(4, 5)) if op.kind.data == "max" else win.sum(axis=(4, 5), dtype=np.float64)


def _slice(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    idx = tuple(
        s + np.arange(n) * st for s, st, n in zip(_ints(op.starts), _ints(op.steps), _result_shape(op))
    )
    return a[0][np.ix_(*idx)] if idx else a[0]


def _gather(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    data, idx = a
    axis = op.axis.value.data
    size = data.shape[axis]
    idx = np.where(idx < 0, idx + size, idx)
    return np.take(data, idx, axis=axis)


def _gather_elements(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    data, idx = a
    axis = op.axis.value.data
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    # Off the axis the indices may be smaller than the data: read the data's leading block.
    data = data[tuple(slice(0, n) if i != axis else slice(None) for i, n in enumerate(idx.shape))]
    return np.take_along_axis(data, idx, axis=axis)


def _arg_reduce(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    x, axis = a[0], op.axis.value.data
    fn = np.argmax if isinstance(op, aicc_nn.ArgMaxOp) else np.argmin
    if op.last:  # the last extreme: the first one of the flipped array
        idx = x.shape[axis] - 1 - fn(np.flip(x, axis), axis=axis)
    else:
        idx = fn(x, axis=axis)
    return np.expand_dims(idx, axis) if op.keep else idx


def _cumsum(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    x, axis = a[0], op.axis.value.data
    if op.reverse.value.data:
        x = np.flip(x, axis)
    y = np.cumsum(x, axis=axis, dtype=np.float64 if x.dtype.kind == "f" else x.dtype)
    if op.exclusive.value.data:  # shifted by one: y[i] = sum of x[j] for j < i
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis)), np.take(y, range(x.shape[axis] - 1), axis)], axis)
    return np.flip(y, axis) if op.reverse.value.data else y


def _resample(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    x, axis = a[0], op.axis.value.data
    idx, w = op.tables()
    if w is None:
        return np.take(x, idx[:, 0], axis=axis)
    along = (-1,) + (1,) * (x.ndim - 1 - axis)
    out = np.zeros(_result_shape(op), dtype=np.float64)
    for t in range(idx.shape[1]):
        wt = w[:, t].reshape(along)
        out += np.where(wt != 0, wt * np.take(x.astype(np.float64), idx[:, t], axis=axis), 0.0)
    return out


def _conv_transpose2d(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    """Scatter-add of every input pixel times the kernel, then the result's window of it."""
    x, w = a
    g = op.groups.value.data
    (ph, pw) = _ints(op.pads)
    full = nn.conv_transpose_full(x, w, g, _ints(op.strides), _ints(op.dilations))
    n, oc, fh, fw = full.shape
    oh, ow = _result_shape(op)[2:]
    out = np.zeros((n, oc, oh, ow))
    rows = np.arange(oh) + ph
    cols = np.arange(ow) + pw
    rk, ck = (rows >= 0) & (rows < fh), (cols >= 0) & (cols < fw)
    out[:, :, np.ix_(rk, ck)[0], np.ix_(rk, ck)[1]] = full[:, :, rows[rk]][:, :, :, cols[ck]]
    return out


REFERENCE_KERNELS.update({
    aicc_nn.ConvTranspose2dOp: _conv_transpose2d,
    aicc_nn.ResampleOp: _resample,
    aicc_nn.GatherElementsOp: _gather_elements,
    aicc_nn.ArgMaxOp: _arg_reduce,
    aicc_nn.ArgMinOp: _arg_reduce,
    aicc_nn.CumSumOp: _cumsum,
    aicc_nn.PadOp: _pad,
    aicc_nn.Conv2dOp: _conv2d,
    aicc_nn.Pool2dOp: _pool2d,
    aicc_nn.ConcatOp: lambda op, a: np.concatenate(a, axis=op.axis.value.data),
    aicc_nn.SliceOp: _slice,
    aicc_nn.GatherOp: _gather,
})


def _tensor_op(op: Operation, args: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, aicc_index.TensorOp)
    arrays = {f"in{i}": a for i, a in enumerate(args)}
    return index_notation.evaluate(op.statement, arrays, op.range_map, aicc.shape_of(op.result))


REFERENCE_KERNELS[aicc_index.TensorOp] = _tensor_op


def _quantize(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    scale, zp, _ = op.params()
    q = np.rint(a[0].astype(np.float32) / scale.astype(np.float32)) + zp
    return np.clip(q, aicc_quant.QMIN, aicc_quant.QMAX).astype(np.int8)


def _dequantize(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    scale, zp, _ = op.params()
    return (a[0].astype(np.float32) - zp.astype(np.float32)) * scale.astype(np.float32)


def _matmul_integer(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    lhs = a[0].astype(np.int64) - op.lhs_zero_point.value.data
    rhs = a[1].astype(np.int64)
    return np.matmul(lhs, rhs.T if op.trans_rhs else rhs).astype(np.int32)


def dynamic_quant_params(x: np.ndarray) -> np.ndarray:
    """[scale, zero point as held in int8] of DynamicQuantizeLinear, in float32 as ONNX Runtime."""
    f = np.float32
    lo, hi = min(f(x.min()), f(0)), max(f(x.max()), f(0))
    scale = f(1) if hi == lo else f(hi - lo) / f(255)
    zp = np.round(np.clip(f(0) - lo / scale, f(0), f(255))) - f(128)  # np.round: half to even
    return np.array([scale, zp], np.float32)


def _dynamic_matmul_integer(op: Operation, a: list[np.ndarray]) -> np.ndarray:
    x, w, (scale, zp) = a[0].astype(np.float32), a[1].astype(np.int64), a[2].astype(np.float32)
    q = np.clip(np.rint(x / scale) + zp, aicc_quant.QMIN, aicc_quant.QMAX)
    return np.matmul(q.astype(np.int64) - int(zp), w.T).astype(np.int32)


REFERENCE_KERNELS.update({
    aicc_quant.DynamicQuantParamsOp: lambda op, a: dynamic_quant_params(a[0].astype(np.float32)),
    aicc_quant.DynamicMatmulIntegerOp: _dynamic_matmul_integer,
    aicc_quant.QuantizeOp: _quantize,
    aicc_quant.DequantizeOp: _dequantize,
    aicc_quant.MatmulIntegerOp: _matmul_integer,
})


def evaluate_op(op: Operation, operands: Sequence[np.ndarray], float64: bool = False) -> list[np.ndarray]:
    """The results of one aicc op on concrete operand values (float results in float64 rather
    than their own type when `float64`)."""
    kernel = REFERENCE_KERNELS.get(type(op))
    if kernel is None:
        raise UnsupportedOpError(op.name, f"the reference interpreter does not know '{op.name}'")
    with np.errstate(all="ignore"):  # inf/nan are values here, not mistakes
        value = kernel(op, [np.asarray(v) for v in operands])
    rtype = op.results[0].type
    assert isinstance(rtype, TensorType)
    dtype = aicc.numpy_dtype(rtype.element_type)
    value = np.asarray(value, dtype=np.float64 if float64 and dtype.kind == "f" else dtype)
    assert value.shape == tuple(rtype.get_shape()), (op.name, value.shape, rtype)
    return [value]


def _find_func(module: ModuleOp, func_name: str) -> func.FuncOp:
    for op in module.walk():
        if isinstance(op, func.FuncOp) and op.sym_name.data == func_name:
            return op
    raise CompileError(f"no function @{func_name} in the module")


def run_reference(
    module: ModuleOp, inputs: Sequence[np.ndarray], func_name: str = "main", *, float64: bool = False
) -> list[np.ndarray]:
    """Evaluate `func_name` of `module` on `inputs` with NumPy; one array per result. With
    `float64`, float values are kept in float64 throughout (finite differences need it)."""
    f = _find_func(module, func_name)
    block = f.body.blocks.first
    assert block is not None
    if len(inputs) != len(block.args):
        raise CompileError(f"@{func_name} takes {len(block.args)} inputs, got {len(inputs)}")
    env: dict[SSAValue, np.ndarray] = {}
    for i, (arg, x) in enumerate(zip(block.args, inputs)):
        t = arg.type
        assert isinstance(t, TensorType)
        dtype = aicc.numpy_dtype(t.element_type)
        x = np.asarray(x, dtype=np.float64 if float64 and dtype.kind == "f" else dtype)
        if x.shape != tuple(t.get_shape()):
            raise CompileError(
                f"@{func_name}: input {i} has shape {x.shape}, expected {tuple(t.get_shape())}"
            )
        env[arg] = x
    for op in block.ops:
        if isinstance(op, func.ReturnOp):
            return [np.array(env[v], order="C", copy=True) for v in op.operands]
        for res, value in zip(op.results, evaluate_op(op, [env[v] for v in op.operands], float64)):
            env[res] = value
    raise CompileError(f"@{func_name} has no func.return")
