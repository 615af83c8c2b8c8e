"""Small IR-building helpers shared by the lowering passes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, tensor
from xdsl.dialects.linalg import attrs, ops as linalg
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    TensorType,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

PARALLEL = attrs.IteratorTypeAttr.parallel()
REDUCTION = attrs.IteratorTypeAttr.reduction()


def broadcast_map(operand_shape: Sequence[int], result_shape: Sequence[int]) -> AffineMap:
    """The indexing map that reads an operand broadcast (NumPy rules) to `result_shape`.

    Operand dims align to the right of the result; a size-1 dim that broadcasts reads index 0.
    """
    rank = len(result_shape)
    offset = rank - len(operand_shape)
    results: list[AffineExpr] = []
    for j, d in enumerate(operand_shape):
        if d == 1 and result_shape[offset + j] != 1:
            results.append(AffineConstantExpr(0))
        else:
            results.append(AffineDimExpr(offset + j))
    return AffineMap(rank, 0, tuple(results))


def scalar_constant(builder: Builder, value: float | int, type: Attribute) -> SSAValue:
    if isinstance(type, AnyFloat):
        op = arith.ConstantOp(FloatAttr(float(value), type))
    elif isinstance(type, IntegerType | IndexType):
        op = arith.ConstantOp(IntegerAttr(int(value), type))
    else:
        raise TypeError(f"no scalar constant of type {type}")
    builder.insert(op)
    return op.result


def insert_result(b: Builder, op: Operation) -> SSAValue:
    """Insert `op` and return its (single) result."""
    b.insert(op)
    return op.results[0]


def empty_tensor(rewriter: PatternRewriter, t: TensorType) -> SSAValue:
    return insert_result(rewriter, tensor.EmptyOp([], t))


def filled_tensor(rewriter: PatternRewriter, op: Operation, t: TensorType, value: float) -> SSAValue:
    """A destination of type `t` filled with `value`: tensor.empty + linalg.fill, before `op`."""
    init = empty_tensor(rewriter, t)
    cst = scalar_constant(Builder(InsertPoint.before(op)), value, t.element_type)
    return insert_result(rewriter, linalg.FillOp([cst], [init], [t]))


def build_generic(
    inputs: Sequence[SSAValue],
    outputs: Sequence[SSAValue],
    maps: Sequence[AffineMap],
    iterators: Sequence[attrs.IteratorTypeAttr],
    body: Callable[[Builder, Sequence[SSAValue]], Sequence[SSAValue]],
    result_types: Sequence[Attribute] = (),
) -> linalg.GenericOp:
    """A linalg.generic whose region is built by `body(builder, block_args) -> yielded values`."""
    arg_types = [_elem(v.type) for v in (*inputs, *outputs)]
    block = Block(arg_types=arg_types)
    b = Builder(InsertPoint.at_end(block))
    yielded = body(b, block.args)
    b.insert(linalg.YieldOp(*yielded))
    return linalg.GenericOp(
        list(inputs),
        list(outputs),
        Region(block),
        [AffineMapAttr(m) for m in maps],
        list(iterators),
        result_types,
    )


def _elem(t: Attribute) -> Attribute:
    return t.element_type if hasattr(t, "element_type") else t


def tensor_elem(value: SSAValue) -> Attribute:
    assert isinstance(value.type, TensorType)
    return value.type.element_type
