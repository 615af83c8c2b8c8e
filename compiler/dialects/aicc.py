"""The `aicc` dialect: aicc's graph-level tensor dialect.

Ops take and return builtin ranked tensors with static shapes. Elementwise ops follow NumPy
broadcasting (the result type is the broadcast of the operand shapes), so frontends never
materialize broadcasts themselves. Every op infers its result type in its builder and checks it
in its verifier; the `infer_*` helpers below are shared by both and by the frontends, which turn
their ValueError into a CompileError that names the user's line.

    %0 = aicc.add %x, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %1 = aicc.relu %0 : tensor<4x8xf32>
    %2 = aicc.reduce_sum %1 {axes = array<i64: 1>, keepdims = true} : tensor<4x8xf32> -> tensor<4x1xf32>
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from xdsl.dialects.builtin import (
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float32Type,
    Float64Type,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    UnitAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    attr_def,
    base,
    irdl_op_definition,
    operand_def,
    opt_attr_def,
    opt_operand_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

from compiler.dialects.aicc_index import INDEX_OPS, TensorOp
from compiler.dialects.aicc_quant import QUANT_OPS
from compiler.dialects.aicc_nn import NN_OPS
from compiler.dialects.shapes import (  # shape_of & co. are used as aicc.shape_of too
    tensor_type,
    broadcast_shapes,
    normalize_axes,
    reduce_shape,
    gemm_shape,
    transpose_shape,
    reshape_shape,
    broadcast_to_shape,
    shape_of,
    element_type_of,
    check_shape,
    require_float,
    require_numeric,
    require_result,
)

# On a linalg.generic, and on the scf.parallel that linalg-to-loops makes of it: LLVM
# vectorizes the innermost loop this many lanes wide whatever its cost model says. For loops
# of strided reads (Winograd's input transform): with gathers off (NO_GATHER), the cost model
# leaves them scalar, where deinterleaving shuffles run them 1.5-2x faster.
VECTORIZE_ATTR = "aicc.vectorize"

# A unit attribute of aicc.exp and math.exp: the argument is never above 0 (NaN may reach it,
# +inf not), as x - max(x) in a softmax and s - m in the CPU attention kernel's online
# softmax; the LLVM backend's exp then leaves out the clamp that keeps larger arguments from
# overflowing 2^n (mathlib.emit_exp's `nonpositive`).
NONPOSITIVE_ARG = "aicc.nonpositive_arg"

# ---------------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A dense tensor constant: `%c = aicc.constant dense<1.0> : tensor<4xf32>`."""

    name = "aicc.constant"
    value = attr_def(DenseIntOrFPElementsAttr)
    result = result_def(TensorType)
    traits = traits_def(Pure(), ConstantLike())

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(attributes={"value": value}, result_types=[value.type])

    @staticmethod
    def from_array(array: np.ndarray) -> ConstantOp:
        return ConstantOp(dense_from_numpy(array))

    def verify_(self) -> None:
        if self.value.type != self.result.type:
            raise VerifyException(
                f"aicc.constant: value type {self.value.type} differs from result {self.result.type}"
            )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.value)
        printer.print_op_attributes(self.attributes, reserved_attr_names=("value",))

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        value = parser.parse_attribute()
        if not isinstance(value, DenseIntOrFPElementsAttr):
            parser.raise_error("aicc.constant expects a dense elements attribute")
        attrs = parser.parse_optional_attr_dict()
        op = cls(value)
        op.attributes |= attrs
        return op


_NP_TO_ELEM = {
    np.dtype(np.float32): Float32Type(),
    np.dtype(np.float64): Float64Type(),
    np.dtype(np.bool_): i1,
    np.dtype(np.int64): i64,
    np.dtype(np.int32): IntegerType(32),
    np.dtype(np.int8): IntegerType(8),
}


def mlir_element_type(dtype: np.dtype) -> Attribute:
    try:
        return _NP_TO_ELEM[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"unsupported dtype {np.dtype(dtype)}") from None


def numpy_dtype(elem: Attribute) -> np.dtype:
    for dt, e in _NP_TO_ELEM.items():
        if e == elem:
            return dt
    raise ValueError(f"no NumPy dtype for {elem}")


def dense_from_numpy(array: np.ndarray) -> DenseIntOrFPElementsAttr:
    from xdsl.dialects.builtin import BytesAttr

    array = np.asarray(array, order="C")  # ascontiguousarray would make a 0-d array 1-d
    ttype = TensorType(mlir_element_type(array.dtype), array.shape)
    if array.dtype == np.bool_:
        array = array.astype(np.int8)
    return DenseIntOrFPElementsAttr(ttype, BytesAttr(array.tobytes()))


def numpy_from_dense(attr: DenseIntOrFPElementsAttr) -> np.ndarray:
    t = attr.get_type()
    dtype = numpy_dtype(t.element_type)
    raw = np.frombuffer(attr.data.data, dtype=np.int8 if dtype == np.bool_ else dtype)
    shape = tuple(t.get_shape())
    if raw.size == 1 and int(np.prod(shape)) != 1:  # splat
        raw = np.broadcast_to(raw, shape)
    return raw.reshape(shape).astype(dtype)


class UnaryOp(IRDLOperation):
    """Elementwise op on one float tensor (also integer where `INTEGER_OK`); the result has the
    operand's type."""

    INTEGER_OK: ClassVar[bool] = False

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, attributes: dict[str, Attribute] | None = None):
        super().__init__(operands=[input], result_types=[input.type], attributes=attributes or {})

    def verify_(self) -> None:
        (require_numeric if self.INTEGER_OK else require_float)(self, self.input)


@irdl_op_definition
class NegOp(UnaryOp):
    name = "aicc.neg"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "aicc.abs"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "aicc.exp"


@irdl_op_definition
class LogOp(UnaryOp):
    name = "aicc.log"


@irdl_op_definition
class TanhOp(UnaryOp):
    name = "aicc.tanh"


@irdl_op_definition
class ErfOp(UnaryOp):
    name = "aicc.erf"


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "aicc.sqrt"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    name = "aicc.rsqrt"


@irdl_op_definition
class ReluOp(UnaryOp):
    name = "aicc.relu"


@irdl_op_definition
class SigmoidOp(UnaryOp):
    name = "aicc.sigmoid"


@irdl_op_definition
class GeluOp(UnaryOp):
    """GELU; `approximate = "tanh"` selects the tanh form, the default is the exact erf form."""

    name = "aicc.gelu"
    approximate = opt_attr_def(StringAttr)

    def __init__(self, input: SSAValue, approximate: str = "none"):
        super().__init__(
            input, {"approximate": StringAttr(approximate)} if approximate != "none" else None
        )

    @property
    def is_tanh(self) -> bool:
        return self.approximate is not None and self.approximate.data == "tanh"

    def verify_(self) -> None:
        super().verify_()
        if self.approximate is not None and self.approximate.data not in ("none", "tanh"):
            raise VerifyException(
                f"aicc.gelu: approximate must be \"none\" or \"tanh\", got {self.approximate}"
            )


@irdl_op_definition
class FloorOp(UnaryOp):
    name = "aicc.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    name = "aicc.ceil"


@irdl_op_definition
class RoundOp(UnaryOp):
    """Round half to even (np.round, ONNX Round)."""

    name = "aicc.round"


@irdl_op_definition
class SinOp(UnaryOp):
    name = "aicc.sin"


@irdl_op_definition
class CosOp(UnaryOp):
    name = "aicc.cos"


@irdl_op_definition
class TanOp(UnaryOp):
    name = "aicc.tan"


@irdl_op_definition
class AsinOp(UnaryOp):
    name = "aicc.asin"


@irdl_op_definition
class AcosOp(UnaryOp):
    name = "aicc.acos"


@irdl_op_definition
class AtanOp(UnaryOp):
    name = "aicc.atan"


@irdl_op_definition
class SinhOp(UnaryOp):
    name = "aicc.sinh"


@irdl_op_definition
class CoshOp(UnaryOp):
    name = "aicc.cosh"


class BinaryOp(IRDLOperation):
    """Elementwise op on two float tensors (also integer where `INTEGER_OK`) with NumPy
    broadcasting."""

    INTEGER_OK: ClassVar[bool] = False

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        shape = broadcast_shapes(self.name, shape_of(lhs), shape_of(rhs))
        super().__init__(
            operands=[lhs, rhs], result_types=[tensor_type(element_type_of(lhs), shape)]
        )

    def verify_(self) -> None:
        (require_numeric if self.INTEGER_OK else require_float)(self, self.lhs, self.rhs)
        if element_type_of(self.lhs) != element_type_of(self.rhs):
            raise VerifyException(
                f"{self.name}: operand element types differ: {self.lhs.type} and {self.rhs.type}"
            )
        shape = check_shape(broadcast_shapes, self.name, shape_of(self.lhs), shape_of(self.rhs))
        require_result(self, shape, element_type_of(self.lhs))


@irdl_op_definition
class AddOp(BinaryOp):
    name = "aicc.add"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class SubOp(BinaryOp):
    name = "aicc.sub"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class MulOp(BinaryOp):
    name = "aicc.mul"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class DivOp(BinaryOp):
    """a / b; on integers it truncates toward zero (C, ONNX), and x / 0 is 0."""

    name = "aicc.div"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class MaximumOp(BinaryOp):
    name = "aicc.maximum"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class MinimumOp(BinaryOp):
    name = "aicc.minimum"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class PowOp(BinaryOp):
    name = "aicc.pow"


@irdl_op_definition
class ModOp(BinaryOp):
    """np.mod: the remainder of floored division, with the sign of the divisor (x mod 0 is 0
    for integers, NaN for floats)."""

    name = "aicc.mod"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class FModOp(BinaryOp):
    """np.fmod: the remainder of truncated division, with the sign of the dividend (x fmod 0 is
    0 for integers, NaN for floats)."""

    name = "aicc.fmod"
    INTEGER_OK: ClassVar[bool] = True


COMPARE_PREDICATES = ("gt", "ge", "lt", "le", "eq", "ne")


@irdl_op_definition
class CompareOp(IRDLOperation):
    """`%m = aicc.compare "gt", %a, %b : tensor<4xf32>, tensor<f32> -> tensor<4xi1>`"""

    name = "aicc.compare"
    predicate = attr_def(StringAttr)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"
    )

    def __init__(self, predicate: str, lhs: SSAValue, rhs: SSAValue):
        shape = broadcast_shapes(self.name, shape_of(lhs), shape_of(rhs))
        super().__init__(
            operands=[lhs, rhs],
            result_types=[tensor_type(i1, shape)],
            attributes={"predicate": StringAttr(predicate)},
        )

    def verify_(self) -> None:
        if self.predicate.data not in COMPARE_PREDICATES:
            raise VerifyException(
                f"aicc.compare: unknown predicate \"{self.predicate.data}\", "
                f"expected one of {', '.join(COMPARE_PREDICATES)}"
            )
        if element_type_of(self.lhs) != element_type_of(self.rhs):
            raise VerifyException(
                f"aicc.compare: operand element types differ: {self.lhs.type} and {self.rhs.type}"
            )
        shape = check_shape(broadcast_shapes, self.name, shape_of(self.lhs), shape_of(self.rhs))
        require_result(self, shape, i1)


@irdl_op_definition
class SelectOp(IRDLOperation):
    """np.where: `aicc.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>`"""

    name = "aicc.select"
    cond = operand_def(TensorType)
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = (
        "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($lhs) `,` type($rhs) "
        "`->` type($result)"
    )

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue):
        shape = broadcast_shapes(self.name, shape_of(cond), shape_of(lhs), shape_of(rhs))
        super().__init__(
            operands=[cond, lhs, rhs], result_types=[tensor_type(element_type_of(lhs), shape)]
        )

    def verify_(self) -> None:
        if element_type_of(self.cond) != i1:
            raise VerifyException(f"aicc.select: condition must be a tensor of i1, got {self.cond.type}")
        if element_type_of(self.lhs) != element_type_of(self.rhs):
            raise VerifyException(
                f"aicc.select: operand element types differ: {self.lhs.type} and {self.rhs.type}"
            )
        shape = check_shape(
            broadcast_shapes, self.name, shape_of(self.cond), shape_of(self.lhs), shape_of(self.rhs)
        )
        require_result(self, shape, element_type_of(self.lhs))


@irdl_op_definition
class CastOp(IRDLOperation):
    """Elementwise conversion between element types (bool -> float is 0.0 / 1.0)."""

    name = "aicc.cast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, element_type: Attribute):
        super().__init__(
            operands=[input], result_types=[tensor_type(element_type, shape_of(input))]
        )

    def verify_(self) -> None:
        if shape_of(self.input) != shape_of(self.result):
            raise VerifyException(
                f"aicc.cast: shape changes from {self.input.type} to {self.result.type}"
            )


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """np.matmul on operands of rank >= 2, batch dimensions broadcast; a GEMM when extended.

    `transpose_lhs` / `transpose_rhs` read that operand with its last two dims swapped, and the
    optional `bias` (which broadcasts to the result) initializes the accumulator:

        %y = aicc.matmul %x, %w bias %b {transpose_rhs} : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32> -> tensor<4x16xf32>

    computes x @ w^T + b. Frontends emit plain matmuls; `simplify` folds transposes into the
    flags and `fuse-linear-bias` folds a following add into `bias`.
    """

    name = "aicc.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)
    transpose_lhs = opt_attr_def(UnitAttr)
    transpose_rhs = opt_attr_def(UnitAttr)
    traits = traits_def(Pure())
    assembly_format = (
        "$lhs `,` $rhs (`bias` $bias^)? attr-dict `:` type($lhs) `,` type($rhs) "
        "(`,` type($bias)^)? `->` type($result)"
    )

    def __init__(
        self,
        lhs: SSAValue,
        rhs: SSAValue,
        bias: SSAValue | None = None,
        transpose_lhs: bool = False,
        transpose_rhs: bool = False,
    ):
        flags = {"transpose_lhs": transpose_lhs, "transpose_rhs": transpose_rhs}
        shape = gemm_shape(self.name, shape_of(lhs), shape_of(rhs),
                           shape_of(bias) if bias is not None else None, transpose_lhs, transpose_rhs)
        super().__init__(
            operands=[lhs, rhs, [bias] if bias is not None else []],
            result_types=[tensor_type(element_type_of(lhs), shape)],
            attributes={k: UnitAttr() for k, v in flags.items() if v},
        )

    @property
    def trans_lhs(self) -> bool:
        return self.transpose_lhs is not None

    @property
    def trans_rhs(self) -> bool:
        return self.transpose_rhs is not None

    def verify_(self) -> None:
        require_float(self, self.lhs, self.rhs, *([self.bias] if self.bias is not None else []))
        elems = {element_type_of(v) for v in (self.lhs, self.rhs, *([self.bias] if self.bias is not None else []))}
        if len(elems) != 1:
            raise VerifyException(
                f"aicc.matmul: operand element types differ: {self.lhs.type} and {self.rhs.type}"
                + (f" and {self.bias.type}" if self.bias is not None else "")
            )
        shape = check_shape(gemm_shape, self.name, shape_of(self.lhs), shape_of(self.rhs),
                       shape_of(self.bias) if self.bias is not None else None,
                       self.trans_lhs, self.trans_rhs)
        require_result(self, shape, element_type_of(self.lhs))


class ReduceOp(IRDLOperation):
    """Reduction over `axes` (sorted, non-negative), keeping them as size 1 when `keepdims`.
    Float tensors, and integer ones where `INTEGER_OK`."""

    INTEGER_OK: ClassVar[bool] = False

    input = operand_def(TensorType)
    result = result_def(TensorType)
    axes = attr_def(DenseArrayBase)
    keepdims = attr_def(BoolAttr)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, axes: Sequence[int] | None, keepdims: bool = False):
        shape = shape_of(input)
        axes = normalize_axes(self.name, axes, len(shape))
        super().__init__(
            operands=[input],
            result_types=[tensor_type(element_type_of(input), reduce_shape(shape, axes, keepdims))],
            attributes={
                "axes": DenseArrayBase.from_list(i64, axes),
                "keepdims": BoolAttr.from_bool(keepdims),
            },
        )

    @property
    def axes_tuple(self) -> tuple[int, ...]:
        return tuple(self.axes.get_values())

    @property
    def keep(self) -> bool:
        return bool(self.keepdims.value.data)

    def verify_(self) -> None:
        (require_numeric if self.INTEGER_OK else require_float)(self, self.input)
        shape = shape_of(self.input)
        axes = self.axes_tuple
        if tuple(sorted(set(axes))) != axes or any(not 0 <= a < len(shape) for a in axes):
            raise VerifyException(
                f"{self.name}: axes {axes} must be sorted, unique and within rank {len(shape)}"
            )
        require_result(self, reduce_shape(shape, axes, self.keep), element_type_of(self.input))


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "aicc.reduce_sum"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    name = "aicc.reduce_mean"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "aicc.reduce_max"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "aicc.reduce_min"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    name = "aicc.reduce_prod"
    INTEGER_OK: ClassVar[bool] = True


@irdl_op_definition
class SoftmaxOp(IRDLOperation):
    """Softmax along one (non-negative) axis."""

    name = "aicc.softmax"
    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    axis = attr_def(IntegerAttr)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input)"

    def __init__(self, input: SSAValue, axis: int = -1):
        (axis,) = normalize_axes(self.name, axis, len(shape_of(input)))
        super().__init__(
            operands=[input],
            result_types=[input.type],
            attributes={"axis": IntegerAttr(axis, i64)},
        )

    def verify_(self) -> None:
        require_float(self, self.input)
        rank = len(shape_of(self.input))
        if not 0 <= self.axis.value.data < max(rank, 1):
            raise VerifyException(f"aicc.softmax: axis {self.axis.value.data} out of range for rank {rank}")


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """Result dim i is input dim permutation[i]."""

    name = "aicc.transpose"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    permutation = attr_def(DenseArrayBase)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue, permutation: Sequence[int]):
        shape = transpose_shape(self.name, shape_of(input), permutation)
        super().__init__(
            operands=[input],
            result_types=[tensor_type(element_type_of(input), shape)],
            attributes={"permutation": DenseArrayBase.from_list(i64, list(permutation))},
        )

    @property
    def perm(self) -> tuple[int, ...]:
        return tuple(self.permutation.get_values())

    def verify_(self) -> None:
        shape = check_shape(transpose_shape, self.name, shape_of(self.input), self.perm)
        require_result(self, shape, element_type_of(self.input))


class _ShapeOp(IRDLOperation):
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    infer = staticmethod(reshape_shape)

    def __init__(self, input: SSAValue, shape: Sequence[int]):
        shape = self.infer(self.name, shape_of(input), shape)
        super().__init__(
            operands=[input], result_types=[tensor_type(element_type_of(input), shape)]
        )

    def verify_(self) -> None:
        shape = check_shape(self.infer, self.name, shape_of(self.input), shape_of(self.result))
        require_result(self, shape, element_type_of(self.input))


@irdl_op_definition
class ReshapeOp(_ShapeOp):
    """Row-major reshape to the result type's shape (same element count)."""

    name = "aicc.reshape"


@irdl_op_definition
class BroadcastToOp(_ShapeOp):
    """np.broadcast_to the result type's shape."""

    name = "aicc.broadcast_to"
    infer = staticmethod(broadcast_to_shape)



AICC = Dialect(
    "aicc",
    [
        ConstantOp,
        NegOp,
        AbsOp,
        ExpOp,
        LogOp,
        TanhOp,
        ErfOp,
        SqrtOp,
        RsqrtOp,
        ReluOp,
        SigmoidOp,
        GeluOp,
        FloorOp,
        CeilOp,
        RoundOp,
        SinOp,
        CosOp,
        TanOp,
        AsinOp,
        AcosOp,
        AtanOp,
        SinhOp,
        CoshOp,
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        MaximumOp,
        MinimumOp,
        PowOp,
        ModOp,
        FModOp,
        CompareOp,
        SelectOp,
        CastOp,
        MatmulOp,
        ReduceSumOp,
        ReduceMeanOp,
        ReduceMaxOp,
        ReduceMinOp,
        ReduceProdOp,
        SoftmaxOp,
        TransposeOp,
        ReshapeOp,
        BroadcastToOp,
        *NN_OPS,
        *INDEX_OPS,
        *QUANT_OPS,
    ],
    [],
)
