"""fold-constants: evaluate at compile time every aicc op whose operands are all constants.

    %a = aicc.constant dense<[1.0, 4.0]> : tensor<2xf32>
    %b = aicc.sqrt %a : tensor<2xf32>                    ==>   %b = aicc.constant dense<[1.0, 2.0]> : tensor<2xf32>

The op is evaluated by the reference interpreter (`compiler.reference`), so a folded constant
has exactly the value the op means; the walk repeats until no op has only constant operands.

Size: folding never turns a little constant data into a lot.
  * Elementwise and data-movement ops (unary, binary, compare, select, cast, broadcast_to,
    reshape, transpose) on splats give a splat, computed on one element: broadcasting a
    scalar to 4096x4096 stays one stored element.
  * Any other fold happens only when its result stores at most `growth-limit` elements more
    than its operands together (4096 by default). An op that would grow the constant data
    further (an outer product of two constant vectors, a broadcast of a constant vector to a
    matrix) stays in the graph, where it is computed (and usually fused) at run time.
An op the reference interpreter does not know is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from compiler.dialects import aicc
from compiler.errors import CompileError
from compiler.lowering.constants import (
    array_constant,
    constant_attr,
    splat_constant,
    stored_elements,
)
from compiler.dialects.shapes import is_dynamic
from compiler.reference import REFERENCE_KERNELS, evaluate_op

# Ops whose result on splat operands is a splat, computed from one element of each operand.
ELEMENTWISE = (aicc.UnaryOp, aicc.BinaryOp, aicc.CompareOp, aicc.SelectOp, aicc.CastOp)
MOVES_DATA = (aicc.BroadcastToOp, aicc.ReshapeOp, aicc.TransposeOp)


def _on_splats(op: Operation, scalars: list[np.ndarray]) -> np.ndarray:
    """The one element of an elementwise or data-movement op's result on splat operands."""
    if isinstance(op, MOVES_DATA):
        return scalars[0]
    with np.errstate(all="ignore"):
        return np.asarray(REFERENCE_KERNELS[type(op)](op, scalars))


@dataclass(frozen=True)
class FoldConstantOp(RewritePattern):
    growth_limit: int

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, aicc.ConstantOp) or op.dialect_name() != "aicc" or not op.operands:
            return
        attrs = [constant_attr(v) for v in op.operands]
        if any(a is None for a in attrs) or len(op.results) != 1:
            return
        res_t = op.results[0].type
        assert isinstance(res_t, TensorType)
        if is_dynamic(res_t):  # a result of symbolic size (a prefix of a constant): no constant
            return
        if isinstance(op, ELEMENTWISE + MOVES_DATA) and all(a.is_splat() for a in attrs):
            scalars = [aicc.numpy_from_dense(a).reshape(-1)[:1].reshape(()) for a in attrs]
            rewriter.replace(op, splat_constant(_on_splats(op, scalars), res_t))
            return
        size = int(np.prod(res_t.get_shape()))
        if size > sum(stored_elements(a) for a in attrs) + self.growth_limit:
            return
        try:
            (value,) = evaluate_op(op, [aicc.numpy_from_dense(a) for a in attrs])
        except CompileError:  # an op the reference interpreter does not know
            return
        rewriter.replace(op, array_constant(value, res_t))


@dataclass(frozen=True)
class FoldConstants(ModulePass):
    """Evaluate ops whose operands are all constants, to a fixed point; dead constants go."""

    name = "fold-constants"

    growth_limit: int = 4096

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([FoldConstantOp(self.growth_limit)])
        ).rewrite_module(op)
