"""fuse-linear-bias: a matmul followed by the add of a bias becomes one matmul with a bias operand.

    %y = aicc.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
    %z = aicc.add %y, %b : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  ==>
    %z = aicc.matmul %x, %w bias %b : tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32> -> tensor<4x16xf32>

tensor-to-linalg then initializes the accumulator with the broadcast bias instead of zeros, so
the separate elementwise add (a pass over the whole output) disappears. The bias may be any
tensor that broadcasts to the matmul's result without enlarging it: a vector along the last
dim (a linear layer), a per-row column, or a full residual (GEMM's C). The matmul must have no
other use and no bias yet. The sum is formed in another order (bias first, then the products),
so results differ from the unfused graph by rounding only.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from compiler.dialects import aicc


class MatmulPlusBias(RewritePattern):
    """matmul(a, b) + c (either operand order) -> matmul(a, b) bias c."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.AddOp, rewriter: PatternRewriter) -> None:
        for mm, bias in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            m = mm.owner
            if (
                isinstance(m, aicc.MatmulOp)
                and m.bias is None
                and mm.has_one_use()
                and op.result.type == mm.type
                and bias is not mm
            ):
                rewriter.replace(op, aicc.MatmulOp(m.lhs, m.rhs, bias, m.trans_lhs, m.trans_rhs))
                return


@dataclass(frozen=True)
class FuseLinearBias(ModulePass):
    """Fold the add of a bias that follows a matmul into the matmul's `bias` operand."""

    name = "fuse-linear-bias"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([MatmulPlusBias()])).rewrite_module(op)
