"""Small helpers for passes that emit loop IR themselves (fuse-rows, lower-attention).

    IndexBuilder   affine expressions of loop ivs as index arithmetic; index constants cached
                   at one insertion point that dominates every use
    for_loop       an scf.for with iter_args whose body a callback builds
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from math import prod

from xdsl.builder import Builder
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
)

from compiler.errors import CompileError

_INDEX_OPS = {
    AffineBinaryOpKind.Add: arith.AddiOp,
    AffineBinaryOpKind.Mul: arith.MuliOp,
    AffineBinaryOpKind.FloorDiv: arith.FloorDivSIOp,
    AffineBinaryOpKind.Mod: arith.RemSIOp,
}


class IndexBuilder:
    """Index constants go to `const_at` (a builder whose insertion point dominates all uses);
    index arithmetic goes to the builder passed to each call."""

    def __init__(self, const_at: Builder):
        self.const_at = const_at
        self.consts: dict[int, SSAValue] = {}

    def const(self, v: int) -> SSAValue:
        if v not in self.consts:
            self.consts[v] = self.const_at.insert(arith.ConstantOp(IntegerAttr(v, IndexType()))).result
        return self.consts[v]

    def expr(self, b: Builder, e: AffineExpr, dims: Mapping[int, SSAValue]) -> SSAValue:
        if isinstance(e, AffineDimExpr):
            return dims[e.position]
        if isinstance(e, AffineConstantExpr):
            return self.const(e.value)
        if isinstance(e, AffineBinaryOpExpr) and e.kind in _INDEX_OPS:
            lhs, rhs = self.expr(b, e.lhs, dims), self.expr(b, e.rhs, dims)
            return b.insert(_INDEX_OPS[e.kind](lhs, rhs)).result
        raise CompileError(f"unsupported affine expression {e} in a fused loop nest")

    def indices(self, b: Builder, m: AffineMap, dims: Mapping[int, SSAValue]) -> list[SSAValue]:
        return [self.expr(b, e, dims) for e in m.results]


def index_product(b: Builder, factors) -> SSAValue:
    """The product of ints and index values as one index value inserted at `b`, the ints
    folded into one constant (a loop count over static and dynamic dims)."""
    out = b.insert(arith.ConstantOp(IntegerAttr(
        prod(f for f in factors if isinstance(f, int)), IndexType()))).result
    for f in factors:
        if not isinstance(f, int):
            out = b.insert(arith.MuliOp(out, f)).result
    return out


def for_loop(
    b: Builder,
    lb: SSAValue,
    ub: SSAValue,
    step: SSAValue,
    inits: Sequence[SSAValue],
    body: Callable[[Builder, SSAValue, Sequence[SSAValue]], Sequence[SSAValue]],
) -> Sequence[SSAValue]:
    """scf.for lb..ub step with `inits` carried; `body(builder, iv, carried)` returns the next
    carried values. Returns the loop's results."""
    block = Block(arg_types=[IndexType(), *(v.type for v in inits)])
    loop = b.insert(scf.ForOp(lb, ub, step, list(inits), Region(block)))
    inner = Builder(InsertPoint.at_end(block))
    nexts = body(inner, block.args[0], block.args[1:])
    inner.insert(scf.YieldOp(*nexts))
    return loop.results


__all__ = ["IndexBuilder", "for_loop"]
