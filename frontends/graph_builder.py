"""What the frontends share: the program a frontend produces, and the builder of aicc ops.

`TracedProgram` is the result of the NumPy tracer and the PyTorch importer. `GraphBuilder`
builds one func.func of aicc ops for the ONNX and PyTorch importers, folding every op whose
operands are all known arrays; `pad_by_index` is the padding modes (reflect, edge, wrap) both
importers build from aicc.resample.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import func
from xdsl.dialects.builtin import BytesAttr, DenseIntOrFPElementsAttr, ModuleOp, TensorType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint

from compiler.dialects import aicc, aicc_nn
from compiler.errors import ShapeError, UnsupportedOpError
from compiler.symbolic import Sym

__all__ = ["GraphBuilder", "TracedProgram", "dims", "narrow_range", "pad_by_index", "pad_indices"]


@dataclass
class TracedProgram:
    module: ModuleOp
    func_name: str
    input_types: list[tuple[tuple[int, ...], np.dtype]]
    output_is_tuple: bool
    locations: dict[Operation, str] = field(default_factory=dict)

    @property
    def func(self) -> func.FuncOp:
        for op in self.module.ops:
            if isinstance(op, func.FuncOp) and op.sym_name.data == self.func_name:
                return op
        raise KeyError(self.func_name)


# ---------------------------------------------------------------------------------------------
# The graph builder: emits aicc ops, folding those whose operands are all known arrays.
# ---------------------------------------------------------------------------------------------


def dims(shape: Sequence) -> tuple:
    """A shape's dims as ints, a symbolic dim (Sym) kept as it is."""
    return tuple(d if isinstance(d, Sym) else int(d) for d in shape)


def narrow_range(ranges: dict, e, size: int) -> bool:
    """Record that the symbolic dim `e` is at most `size` in `ranges` ({symbol: (min, max)}):
    an op needs it (x[:, :seq] of a constant of `size` rows). False when `e` is not a plain
    symbol, which no range can bound."""
    if e.name is None:
        return False
    lo, hi = ranges.get(e.name, (1, None))
    ranges[e.name] = (lo, size if hi is None else min(hi, size))
    return True


def _constant_op(array: np.ndarray) -> aicc.ConstantOp:
    array = np.asarray(array)
    elem = aicc.mlir_element_type(array.dtype)
    data = array.astype(np.int8) if array.dtype == np.bool_ else np.ascontiguousarray(array)
    return aicc.ConstantOp(
        DenseIntOrFPElementsAttr(TensorType(elem, array.shape), BytesAttr(data.tobytes()))
    )


class GraphBuilder:
    """Builds one func.func of aicc ops; shared by the ONNX and PyTorch importers."""

    def __init__(self, block: Block):
        self.block = block
        self.builder = Builder(InsertPoint.at_end(block))
        self.consts: dict[tuple, SSAValue] = {}
        self.where = ""  # the node being imported, for error messages

    # -- values -------------------------------------------------------------------------------
    @staticmethod
    def is_const(v) -> bool:
        return isinstance(v, np.ndarray)

    @staticmethod
    def shape(v) -> tuple[int, ...]:
        return tuple(v.shape) if isinstance(v, np.ndarray) else aicc.shape_of(v)

    @staticmethod
    def dtype(v) -> np.dtype:
        if isinstance(v, np.ndarray):
            return v.dtype
        return aicc.numpy_dtype(aicc.element_type_of(v))

    def ssa(self, v) -> SSAValue:
        if isinstance(v, SSAValue):
            return v
        a = np.asarray(v)
        if a.dtype not in (np.float32, np.float64, np.int64, np.int32, np.int8, np.bool_):
            a = a.astype(np.float32)
        key = (a.dtype.str, a.shape, a.tobytes()) if a.size <= 64 else (id(v),)
        if key not in self.consts:
            op = _constant_op(a)
            self.builder.insert(op)
            self.consts[key] = op.result
            if len(key) == 1:  # keep the array alive so its id is not reused
                self._keep = getattr(self, "_keep", []) + [v]
        return self.consts[key]

    def emit(self, make: Callable[..., Operation], *vals, fold: bool = True):
        """Build `make(*ssa_operands)`; evaluate it now when every operand is a known array."""
        from compiler.reference import evaluate_op

        if fold and vals and all(isinstance(v, np.ndarray) for v in vals):
            tmp = [_constant_op(np.asarray(v)) for v in vals]
            try:
                op = make(*(t.result for t in tmp))
            except ValueError as e:
                raise ShapeError(f"{self.where}: {e}") from None
            (res,) = evaluate_op(op, [np.asarray(v) for v in vals])
            op.drop_all_references()
            return res
        try:
            op = make(*(self.ssa(v) for v in vals))
        except ValueError as e:
            raise ShapeError(f"{self.where}: {e}") from None
        if len(op.results) == 1 and 0 in aicc.shape_of(op.results[0]):
            # an empty result has no values to compute: a constant, never an empty loop nest
            t = op.results[0].type
            op.drop_all_references()
            return np.zeros(tuple(t.get_shape()), dtype=aicc.numpy_dtype(t.element_type))
        self.builder.insert(op)
        return op.results[0] if len(op.results) == 1 else list(op.results)

    def require_float(self, op: str, *vals) -> None:
        for v in vals:
            if not isinstance(v, np.ndarray) and self.dtype(v).kind != "f":
                raise UnsupportedOpError(
                    op, f"{self.where}: {op} on {self.dtype(v)} tensors is not supported "
                    "(aicc computes arithmetic in floating point)"
                )

    def require_numeric(self, op: str, *vals) -> None:
        """Float or integer tensors (the ops whose aicc form also computes on i32 / i64)."""
        for v in vals:
            if not isinstance(v, np.ndarray) and self.dtype(v).kind not in "fi":
                raise UnsupportedOpError(
                    op, f"{self.where}: {op} on {self.dtype(v)} tensors is not supported"
                )

    def require(self, cls, op: str, *vals) -> None:
        """The operand kinds `cls` computes on: numeric where cls.INTEGER_OK, else float."""
        if getattr(cls, "INTEGER_OK", False):
            self.require_numeric(op, *vals)
        else:
            self.require_float(op, *vals)

    def cast_like(self, v, like):
        dt = self.dtype(like)
        if self.dtype(v) == dt:
            return v
        if isinstance(v, np.ndarray):
            return v.astype(dt)
        return self.cast(v, dt)

    def cast(self, v, dtype):
        dtype = np.dtype(dtype)
        if self.dtype(v) == dtype:
            return v
        if isinstance(v, np.ndarray):
            return v.astype(dtype)
        return self.emit(lambda x: aicc.CastOp(x, aicc.mlir_element_type(dtype)), v)

    # -- elementwise ---------------------------------------------------------------------------
    def binary(self, cls, a, b, op_name: str = ""):
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            fn = {aicc.AddOp: np.add, aicc.SubOp: np.subtract, aicc.MulOp: np.multiply,
                  aicc.MaximumOp: np.maximum, aicc.MinimumOp: np.minimum}.get(cls)
            if fn is not None and a.dtype == b.dtype:
                return fn(a, b)
            if cls is aicc.DivOp and a.dtype.kind in "iu" and b.dtype.kind in "iu":
                from compiler.reference import divide

                with np.errstate(all="ignore"):
                    return divide(a, b.astype(a.dtype))
        self.require(cls, op_name or cls.name, a, b)
        # A Python-side scalar operand takes the dtype of the tensor operand.
        if isinstance(b, np.ndarray) and not isinstance(a, np.ndarray):
            b = b.astype(self.dtype(a))
        elif isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
            a = a.astype(self.dtype(b))
        return self.emit(cls, a, b)

    def add(self, a, b):
        return self.binary(aicc.AddOp, a, b)

    def sub(self, a, b):
        return self.binary(aicc.SubOp, a, b)

    def mul(self, a, b):
        return self.binary(aicc.MulOp, a, b)

    def div(self, a, b):
        return self.binary(aicc.DivOp, a, b)

    def scalar(self, value: float, like) -> np.ndarray:
        return np.array(value, dtype=self.dtype(like))

    def unary(self, cls, x, op_name: str = ""):
        self.require(cls, op_name or cls.name, x)
        return self.emit(cls, x)

    def compare(self, pred: str, a, b):
        if self.dtype(a) != self.dtype(b):
            if isinstance(b, np.ndarray):
                b = b.astype(self.dtype(a))
            elif isinstance(a, np.ndarray):
                a = a.astype(self.dtype(b))
        return self.emit(lambda x, y: aicc.CompareOp(pred, x, y), a, b)

    def select(self, c, a, b):
        if self.dtype(a) != self.dtype(b):
            if isinstance(b, np.ndarray):
                b = b.astype(self.dtype(a))
            elif isinstance(a, np.ndarray):
                a = a.astype(self.dtype(b))
        return self.emit(aicc.SelectOp, self.cast(c, np.bool_), a, b)

    # -- shapes --------------------------------------------------------------------------------
    def reshape(self, x, shape: Sequence[int]):
        shape = dims(shape)
        if self.shape(x) == shape:
            return x
        if isinstance(x, np.ndarray):
            return x.reshape(shape)
        return self.emit(lambda v: aicc.ReshapeOp(v, shape), x)

    def transpose(self, x, perm: Sequence[int]):
        perm = tuple(int(p) for p in perm)
        if perm == tuple(range(len(perm))):
            return x
        if isinstance(x, np.ndarray):
            return np.ascontiguousarray(np.transpose(x, perm))
        return self.emit(lambda v: aicc.TransposeOp(v, perm), x)

    def broadcast_to(self, x, shape: Sequence[int]):
        shape = dims(shape)
        if self.shape(x) == shape:
            return x
        if isinstance(x, np.ndarray):
            return np.ascontiguousarray(np.broadcast_to(x, shape))
        return self.emit(lambda v: aicc.BroadcastToOp(v, shape), x)

    def reduce(self, cls, x, axes: Sequence[int] | None, keepdims: bool):
        self.require(cls, cls.name, x)
        axes = aicc.normalize_axes(cls.name, axes, len(self.shape(x)))
        if not axes:
            return x
        return self.emit(lambda v: cls(v, axes, keepdims), x)

    def matmul(self, a, b):
        self.require_float("MatMul", a, b)
        sa, sb = self.shape(a), self.shape(b)
        if len(sa) == 1:
            a = self.reshape(a, (1, sa[0]))
        if len(sb) == 1:
            b = self.reshape(b, (sb[0], 1))
        y = self.emit(aicc.MatmulOp, a, b)
        out = list(self.shape(y))
        if len(sb) == 1:
            out.pop(-1)
        if len(sa) == 1:
            out.pop(-2 if len(sb) != 1 else -1)
        return self.reshape(y, out)

    def finish(self, outputs: Sequence, name: str = "main") -> func.FuncOp:
        ssa = [self.ssa(v) for v in outputs]
        self.builder.insert(func.ReturnOp(*ssa))
        return ssa


# ---------------------------------------------------------------------------------------------
# Padding modes as gathers
# ---------------------------------------------------------------------------------------------


def pad_indices(n: int, low: int, high: int, mode: str) -> np.ndarray:
    """The input index each position of a dim of size n padded by (low, high) reads, as np.pad."""
    j = np.arange(-low, n + high)
    if mode == "edge":
        return np.clip(j, 0, n - 1)
    if mode == "wrap":
        return j % n
    if n == 1:  # reflect
        return np.zeros_like(j)
    m = np.abs(j) % (2 * (n - 1))  # reflection about both ends repeats with period 2(n - 1)
    return np.where(m >= n, 2 * (n - 1) - m, m)


def pad_by_index(g, x, low, high, mode: str):
    """Pad modes reflect / edge / wrap: one aicc.resample (a constant gather) per padded dim."""
    for axis, (lo, hi) in enumerate(zip(low, high)):
        if lo or hi:
            idx = pad_indices(g.shape(x)[axis], lo, hi, mode)
            x = g.emit(lambda v, axis=axis, idx=idx: aicc_nn.ResampleOp(v, axis, idx), x)
    return x
