"""Small IR-building helpers shared by the lowering passes."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from xdsl.builder import Builder
from xdsl.dialects import arith, math as xmath, memref, tensor
from xdsl.dialects.linalg import attrs, ops as linalg
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DenseArrayBase,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    TensorType,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, OpResult, Region, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from compiler.dialects import aicc

PARALLEL = attrs.IteratorTypeAttr.parallel()
REDUCTION = attrs.IteratorTypeAttr.reduction()
# math.exp whose results below 2^-126 may flush to 0 (mathlib.emit_exp's `flush`): the exps
# of softmax and of the CPU attention kernel's online softmax, whose arguments are never above 0
AFN = arith.FastMathFlagsAttr([arith.FastMathFlag.APPROX_FUNC])
# The fast-math flags of a softmax's row max: nnan, a NaN of the row need not propagate through
# the max, as it reaches every output of the row anyway (exp(NaN - max) is NaN, so is the row's
# sum, and every entry is divided by it), and nsz; with them LLVM's max is one vmaxps a vector,
# not a max, a NaN test and a blend. The CPU attention kernel's max of the scores is so too.
SOFTMAX_MAX = arith.FastMathFlagsAttr([arith.FastMathFlag.NO_NANS,
                                       arith.FastMathFlag.NO_SIGNED_ZEROS])


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


def plus(e: AffineExpr, c: int) -> AffineExpr:
    """e + c, kept as an addition even for c == 0: the linalg verifier then takes the loop
    range from another operand instead of requiring this operand's dim to equal it."""
    return AffineBinaryOpExpr(AffineBinaryOpKind.Add, e, AffineConstantExpr(c))


def reshape(rewriter: PatternRewriter, v: SSAValue, shape) -> SSAValue:
    """`v` as an aicc.reshape to `shape` inserted at the rewriter's point (`v` if it has it)."""
    if aicc.shape_of(v) == tuple(shape):
        return v
    return insert_result(rewriter, aicc.ReshapeOp(v, tuple(shape)))


def constant_source(v: SSAValue) -> Operation | None:
    """The aicc.constant or arith.constant that `v` is, through reshapes, or None."""
    while isinstance(v, OpResult) and v.op.name in ("aicc.reshape", "tensor.collapse_shape",
                                                    "tensor.expand_shape"):
        v = v.op.operands[0]
    if isinstance(v, OpResult) and v.op.name in ("aicc.constant", "arith.constant"):
        return v.op
    return None


def insert_result(b: Builder, op: Operation) -> SSAValue:
    """Insert `op` and return its (single) result."""
    b.insert(op)
    return op.results[0]


def sigmoid_body(b: Builder, x: SSAValue, one: SSAValue) -> SSAValue:
    """1 / (1 + exp(-x)), `one` the constant 1 of x's type. The exp is marked `afn`
    (mathlib.emit_exp's `flush`): that changes only x in [-88.72, -88.38], whose sigmoid
    (below 4e-39, a denormal) becomes 0; for x < -88.72 exp(-x) overflows and the sigmoid is 0
    either way, and exp(-x) below 2^-126 is lost against the 1. Without AVX-512 the exp is
    then 4 ops shorter: SiLU after a 1x1 conv (16 -> 96 channels at 112x112, Zen 3, AVX2)
    cost 1.32 ms instead of 1.03 ms, against 0.55 ms with ReLU."""
    e = insert_result(b, xmath.ExpOp(insert_result(b, arith.NegfOp(x)), AFN))
    return insert_result(b, arith.DivfOp(one, insert_result(b, arith.AddfOp(e, one))))


def is_before(a: Operation, b: Operation) -> bool:
    """Does `a` come before `b`, two ops of one block? A walk out from `a` both ways, which
    stops at `b`: as long as the distance between them, where Operation.is_before_in_block
    walks to `b` or to the block's end (the whole rest of a model's main function when `b`
    comes first: quadratic in passes that ask it per op)."""
    if a is b or a.parent is not b.parent or a.parent is None:
        return False
    fwd, bwd = a.next_op, a.prev_op
    while fwd is not None or bwd is not None:
        if fwd is b:
            return True
        if bwd is b:
            return False
        fwd = fwd.next_op if fwd is not None else None
        bwd = bwd.prev_op if bwd is not None else None
    return False


# ops whose result is a view of their operand's memory (they read and write nothing)
VIEW_OPS = (memref.CollapseShapeOp, memref.ExpandShapeOp, memref.ViewOp, memref.SubviewOp,
            memref.CastOp)


def aliases(v: SSAValue) -> set[SSAValue]:
    """`v` and every view of it, through chains of views."""
    out, todo = {v}, [v]
    while todo:
        for use in todo.pop().uses:
            o = use.operation
            if isinstance(o, VIEW_OPS):
                for r in o.results:
                    if r not in out:
                        out.add(r)
                        todo.append(r)
    return out


def view_root(v: SSAValue) -> SSAValue:
    """The memref that `v` is a view of, through collapse_shape / expand_shape (else `v`)."""
    while isinstance(v.owner, memref.CollapseShapeOp | memref.ExpandShapeOp):
        v = v.owner.operands[0]
    return v


def flat_view(b: Builder, v: SSAValue) -> SSAValue:
    """A 1-D view of a contiguous memref (the LLVM emitter uses the same pointer)."""
    t = v.type
    shape = t.get_shape()
    if len(shape) == 1:
        return v
    flat_t = MemRefType(t.element_type, [DYNAMIC_INDEX if DYNAMIC_INDEX in shape else math.prod(shape)])
    groups = ArrayAttr([ArrayAttr([IntegerAttr(i, i64) for i in range(len(shape))])]) if shape \
        else ArrayAttr([])
    op = memref.CollapseShapeOp.create(operands=[v], result_types=[flat_t],
                                       properties={"reassociation": groups})
    return b.insert(op).results[0]


def reshaped_view(b: Builder, v: SSAValue, t: MemRefType, sizes: Sequence[SSAValue] = ()) -> SSAValue:
    """A row-major view of contiguous `v` as type `t` (same element count): flat, expanded;
    `sizes`: the values of `t`'s dynamic dims, in order."""
    flat = flat_view(b, v)
    if len(t.get_shape()) == 1:
        return flat
    op = memref.ExpandShapeOp.create(
        operands=[flat, *sizes], result_types=[t],
        properties={"reassociation": ArrayAttr([ArrayAttr([IntegerAttr(i, i64) for i in range(
            len(t.get_shape()))])]), "static_output_shape": DenseArrayBase.from_list(
                i64, list(t.get_shape()))})
    return b.insert(op).results[0]


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
