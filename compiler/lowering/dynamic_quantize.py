"""dynamic-quantize-matmul: float matmuls with a constant 2-D weight compute in int8, their
activations quantized at run time (`compiler.quantize_dynamic`).

    %y = aicc.matmul %x, %w [bias %b] {transpose_rhs} : tensor<MxKxf32>, tensor<NxKxf32> -> tensor<MxNxf32>
  ==>
    %p = aicc.dynamic_quant_params %x : tensor<MxKxf32> -> tensor<2xf32>      // [scale, zp] of x
    %i = aicc.dynamic_matmul_integer %x, dense<int8 (N, K)>, %p -> tensor<MxNxi32>
    %f = aicc.cast %i : tensor<MxNxi32> -> tensor<MxNxf32>
    %s = aicc.slice %p {starts = [0]} : tensor<2xf32> -> tensor<1xf32>          // x's scale
    %y = aicc.mul %f, aicc.mul(%s, dense<[ws_0, ws_1, ...]>) [+ %b]

The weight is quantized at compile time, symmetrically (zero point 0), per output column
(`per_channel`) or per tensor, within [-127, 127] or with `reduce_range` [-63, 63] (7 bits,
as onnxruntime's reduce_range: the CPU's int8 kernel then multiplies it with vpmaddubsw, 32
products per instruction, exactly), and stored as (N, K) int8 rows; x is quantized per
tensor, as ONNX Runtime's quantize_dynamic (DynamicQuantizeLinear) and torch's dynamic quantization do,
with the scale and zero point of its range in this call. The matmuls that read the same x
share one dynamic_quant_params once CSE has run. The float ops are those ONNX Runtime runs
(scale times weight scale, times the accumulator, plus the bias).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc_quant import QMAX, DynamicMatmulIntegerOp, DynamicQuantParamsOp
from compiler.lowering.quantize_matmul import QUANTIZED_ATTR


def symmetric_weights(w: np.ndarray, per_channel: bool, n_axis: int, qmax: int = QMAX) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 weights of a 2-D w within [-qmax, qmax] and their scales (one per output
    column along `n_axis`, or one)."""
    w = w.astype(np.float64)
    if per_channel:
        amax = np.abs(w).max(axis=1 - n_axis)
    else:
        amax = np.full(w.shape[n_axis], np.abs(w).max())
    scale = np.where(amax > 0, amax / qmax, 1.0)
    along = (-1, 1) if n_axis == 0 else (1, -1)
    q = np.clip(np.rint(w / scale.reshape(along)), -qmax, qmax).astype(np.int8)
    return q, (scale if per_channel else scale[:1])


def linear_layer(op: aicc.MatmulOp) -> bool:
    """A float32 matmul of a 2-D constant weight, its lhs not transposed."""
    w = op.rhs
    if op.trans_lhs or not isinstance(w.owner, aicc.ConstantOp) or len(aicc.shape_of(w)) != 2:
        return False
    return all(aicc.element_type_of(v) == f32 for v in (op.lhs, w, op.result))


def candidate(op: aicc.MatmulOp) -> bool:
    """A linear layer of static, non-empty shapes: what the pass quantizes."""
    return linear_layer(op) and all(isinstance(d, int) and d > 0 for v in (op.lhs, op.rhs) for d in aicc.shape_of(v))


REDUCED_QMAX = 63  # reduce_range: 7-bit weights, which the CPU's vpmaddubsw kernel multiplies exactly


class DynamicInt8Matmul(RewritePattern):
    def __init__(self, per_channel: bool, reduce_range: bool = False):
        self.per_channel = per_channel
        self.qmax = REDUCED_QMAX if reduce_range else QMAX

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.MatmulOp, rewriter: PatternRewriter) -> None:
        if not candidate(op):
            return
        n_axis = 0 if op.trans_rhs else 1
        w = aicc.numpy_from_dense(op.rhs.owner.value)
        qw, w_scale = symmetric_weights(w, self.per_channel, n_axis, self.qmax)
        rows = np.ascontiguousarray(qw if op.trans_rhs else qw.T)  # (N, K): K contiguous
        params = DynamicQuantParamsOp(op.lhs)
        cw = aicc.ConstantOp.from_array(rows)
        mm = DynamicMatmulIntegerOp(op.lhs, cw.result, params.result)
        mm.attributes[QUANTIZED_ATTR] = aicc.StringAttr("matmul")
        f = aicc.CastOp(mm.result, f32)
        scale = aicc_nn.SliceOp(params.result, [0], [1], [1])
        ws = aicc.ConstantOp.from_array(w_scale.astype(np.float32))
        mult = aicc.MulOp(scale.result, ws.result)
        y = aicc.MulOp(f.result, mult.result)
        new = [params, cw, mm, f, scale, ws, mult, y]
        if op.bias is not None:
            new.append(aicc.AddOp(y.result, op.bias))
        rewriter.insert(new[:-1])
        rewriter.replace(op, new[-1])


@dataclass(frozen=True)
class DynamicQuantizeMatmul(ModulePass):
    """Rewrite float matmuls of constant 2-D weights into int8 matmuls whose activations are
    quantized at run time."""

    name = "dynamic-quantize-matmul"

    per_channel: bool = True
    reduce_range: bool = False  # weights within [-63, 63]

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([DynamicInt8Matmul(self.per_channel, self.reduce_range)]),
                             apply_recursively=False).rewrite_module(op)
