"""fold-conv-input-scale: a per-input-channel scale in front of a 1x1 conv moves into its weight.

A squeeze-and-excitation block (MobileNetV3, EfficientNet, RegNet-Y) ends in a gate: the
activations x (N, C, H, W) times s (N, C, 1, 1), a sigmoid of two small layers run on x's
mean, and its result feeds the block's 1x1 projection conv. Since a 1x1 conv sums over the
input channels only,

    conv1x1(x * s, W) = conv1x1(x, W * s')        s' = s as (1, C, 1, 1), one image

and W * s' costs OC * C multiplies where x * s costs C * H * W, and a pass over x in memory.
The rewrite takes that form when it is cheaper, OC < H * W (the early and middle stages of
those networks; not the last, 7x7 ones with hundreds of output channels):

    %g = aicc.mul %x, %s : tensor<1x96x56x56xf32>, tensor<1x96x1x1xf32> -> tensor<1x96x56x56xf32>
    %y = aicc.conv2d %g, %w : tensor<1x96x56x56xf32>, tensor<24x96x1x1xf32> -> ...
  becomes
    %ws = aicc.mul %w, %s : tensor<24x96x1x1xf32>, tensor<1x96x1x1xf32> -> tensor<24x96x1x1xf32>
    %y = aicc.conv2d %x, %ws : tensor<1x96x56x56xf32>, tensor<24x96x1x1xf32> -> ...

Conditions: one image (s differs per image otherwise), an ungrouped 1x1 conv (any stride:
the scale commutes with picking pixels), s broadcasting along H and W only, and the mul with
no other use. The weight then is computed at run time: a 1x1 conv is a matmul whatever its
weight is (conv_lowering "matmul"), which packs it per call. Multiplying the weight instead
of the activations changes roundings: the result matches to about 1e-6 relative.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc import shape_of


def _channel_scale(s: SSAValue, x_shape: tuple) -> bool:
    """Does `s` broadcast against the NCHW `x_shape` (one image) along H and W only, with one
    value per channel?"""
    shape = tuple(shape_of(s))
    if len(shape) > 4 or any(d < 0 for d in shape):
        return False
    shape = (1,) * (4 - len(shape)) + shape
    return shape[0] == 1 and shape[1] == x_shape[1] and shape[2:] == (1, 1)


class InputScaleIntoWeight(RewritePattern):
    """conv1x1(x * s, W) -> conv1x1(x, W * s), s per input channel, where OC < H * W."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc_nn.Conv2dOp, rewriter: PatternRewriter) -> None:
        mul = op.input.owner
        w_shape = tuple(shape_of(op.weight))
        x_shape = tuple(shape_of(op.input))
        if not (isinstance(mul, aicc.MulOp) and op.input.has_one_use()
                and op.groups.value.data == 1 and w_shape[2:] == (1, 1)
                and len(x_shape) == 4 and x_shape[0] == 1 and all(d > 0 for d in x_shape)
                and w_shape[0] < x_shape[2] * x_shape[3]):
            return
        for x, s in ((mul.lhs, mul.rhs), (mul.rhs, mul.lhs)):
            if tuple(shape_of(x)) == x_shape and _channel_scale(s, x_shape):
                break
        else:
            return
        ops = []
        if len(shape_of(s)) != 4:
            ops.append(aicc.ReshapeOp(s, (1, x_shape[1], 1, 1)))
            s = ops[-1].result
        ops.append(aicc.MulOp(op.weight, s))
        ops.append(aicc_nn.Conv2dOp(x, ops[-1].result, op.strides.get_values(),
                                    op.dilations.get_values(), 1))
        rewriter.replace(op, ops)
        if not mul.result.uses:  # x * s had this one use
            rewriter.erase_op(mul)


@dataclass(frozen=True)
class FoldConvInputScale(ModulePass):
    """Move a per-input-channel scale (an SE block's gate) into the weight of the 1x1 conv it
    feeds, where that is fewer multiplies."""

    name = "fold-conv-input-scale"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(InputScaleIntoWeight()).rewrite_module(op)
