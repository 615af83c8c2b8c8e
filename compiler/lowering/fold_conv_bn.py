"""fold-conv-bn: fold per-channel affine ops that follow a convolution into its weights and bias.

Inference batch norm is a per-channel affine map, y * s + t; the ONNX importer emits it as
exactly that (aicc.mul by s, aicc.add of t, with s = scale / sqrt(var + eps) and t = bias -
mean * s already folded from the initializers). A conv2d with constant weights W, optionally
followed by the add of a per-channel bias b, is itself per-channel affine, so

    (conv(x, W) + b) * s  = conv(x, W * s) + b * s
    (conv(x, W) + b) / s  = conv(x, W / s) + b / s
    (conv(x, W) + b) + t  = conv(x, W) + (b + t)
    (conv(x, W) + b) - t  = conv(x, W) + (b - t)

and a chain conv -> add bias -> mul -> add (Conv with bias, then BatchNormalization) becomes
one conv2d with new constant weights and one add of a constant bias. A constant is
per-channel when it broadcasts along the conv's output channel dim only (shape (C, 1, 1),
(1, C, 1, 1), (1,) or a scalar). The rewrite needs the weights to be a constant and the conv
(and its bias add) to have no other use, so no other consumer sees the changed values.
Scaling the weights changes roundings: the result matches the unfolded graph to about 1e-6
relative, not bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, TensorType
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from compiler.dialects import aicc, aicc_nn
from compiler.lowering.constants import array_constant, constant_value

def per_channel(value: SSAValue, out_shape: tuple[int, ...]) -> np.ndarray | None:
    """The constant `value` as one number per output channel (shape (C,)), if it broadcasts to
    the NCHW `out_shape` along the channel dim only."""
    c = constant_value(value)
    if c is None or c.ndim > 4:
        return None
    shape = (1,) * (4 - c.ndim) + c.shape
    if any(d != 1 for i, d in enumerate(shape) if i != 1) or shape[1] not in (1, out_shape[1]):
        return None
    return np.broadcast_to(c.reshape(-1), (out_shape[1],))


@dataclass
class ConvAffine:
    """conv2d(x, W) [+ b]: the per-channel affine value that the next op may fold into."""

    conv: aicc_nn.Conv2dOp
    weight: np.ndarray
    bias: np.ndarray | None
    bias_add: aicc.AddOp | None


def conv_affine(value: SSAValue) -> ConvAffine | None:
    """`value` as conv2d(x, W) or conv2d(x, W) + b, with W constant and b per channel, each
    op with this one use."""
    if not value.has_one_use():
        return None
    op = value.owner
    bias, add = None, None
    if isinstance(op, aicc.AddOp):
        conv_side = next((v for v in (op.lhs, op.rhs) if isinstance(v.owner, aicc_nn.Conv2dOp)), None)
        if conv_side is None:
            return None
        other = op.rhs if conv_side is op.lhs else op.lhs
        bias = per_channel(other, aicc.shape_of(conv_side))
        if bias is None or not conv_side.has_one_use() or op.result.type != conv_side.type:
            return None
        add, op = op, conv_side.owner
    if not isinstance(op, aicc_nn.Conv2dOp):
        return None
    weight = constant_value(op.weight)
    return None if weight is None else ConvAffine(op, weight, bias, add)


class FoldAffineIntoConv(RewritePattern):
    """(conv(x, W) [+ b]) op c, for op in + - * / and a per-channel constant c."""

    @op_type_rewrite_pattern
    def match_and_rewrite(
        self, op: aicc.AddOp | aicc.SubOp | aicc.MulOp | aicc.DivOp, rewriter: PatternRewriter
    ) -> None:
        for y, c in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            if isinstance(op, aicc.SubOp | aicc.DivOp) and y is op.rhs:
                break  # c - y and c / y: not of the forms above
            src = conv_affine(y)
            if isinstance(op, aicc.AddOp) and src is not None and src.bias is None:
                continue  # conv + b is already the folded form
            out_shape = aicc.shape_of(y)
            k = per_channel(c, out_shape) if src is not None else None
            if k is not None and op.result.type == y.type:
                self.fold(op, src, k.astype(np.float64), rewriter)
                return

    @staticmethod
    def fold(op: Operation, src: ConvAffine, k: np.ndarray, rewriter: PatternRewriter) -> None:
        w, b = src.weight.astype(np.float64), src.bias
        b = None if b is None else b.astype(np.float64)
        per_oc = k.reshape(-1, 1, 1, 1)
        if isinstance(op, aicc.MulOp):
            w, b = w * per_oc, None if b is None else b * k
        elif isinstance(op, aicc.DivOp):
            w, b = w / per_oc, None if b is None else b / k
        elif isinstance(op, aicc.AddOp):
            b = k if b is None else b + k
        else:
            b = -k if b is None else b - k
        conv = src.conv
        weight = array_constant(w, conv.weight.type)
        new_conv = aicc_nn.Conv2dOp(
            conv.input, weight.result, conv.strides.get_values(), conv.dilations.get_values(),
            conv.groups.value.data,
        )
        new_ops: list[Operation] = [weight, new_conv]
        if b is not None:
            out_t = new_conv.result.type
            assert isinstance(out_t, TensorType)
            bias = array_constant(b.reshape(-1, 1, 1), TensorType(out_t.element_type, (out_t.get_shape()[1], 1, 1)))
            new_ops += [bias, aicc.AddOp(new_conv.result, bias.result)]
        rewriter.replace(op, new_ops)
        # The old conv (and bias add) are dead now; the walker's DCE erases them.


@dataclass(frozen=True)
class FoldConvBatchNorm(ModulePass):
    """Fold per-channel mul / div / add / sub by constants after a conv2d into its weights and
    a bias add."""

    name = "fold-conv-bn"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([FoldAffineIntoConv()])).rewrite_module(op)
