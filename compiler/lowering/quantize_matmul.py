"""quantize-matmul: a matmul of dequantized int8 operands computes in integers.

    %a = aicc.dequantize %qa {scale = array<f64: sa>, zero_point = array<i64: za>, axis = -1}
    %w = aicc.dequantize %qw {scale = array<f64: s0, s1, ...>, zero_point = array<i64: 0, 0, ...>, axis = 1}
    %y = aicc.matmul %a, %w [bias %b] : tensor<MxKxf32>, tensor<KxNxf32> -> tensor<MxNxf32>
  ==>
    %t = aicc.transpose %qw {permutation = array<i64: 1, 0>}          // (N, K): K contiguous
    %i = aicc.matmul_integer %qa, %t {lhs_zero_point = za, transpose_rhs} : ... -> tensor<MxNxi32>
    %f = aicc.cast %i : tensor<MxNxi32> -> tensor<MxNxf32>
    %y = aicc.mul %f, dense<[sa*s0, sa*s1, ...]> [+ %b]

since sum_k (qa - za) sa (qw - 0) s_n = sa s_n sum_k (qa - za) qw. The lhs must be quantized
per tensor and the rhs (2-D) per output column with zero point 0, as `compiler.quantize`
writes them and as symmetric per-channel weights are. A following quantize (the next
layer's input) stays an elementwise op, which fuse-elementwise folds into the loop that reads
the accumulators: the requantization epilogue. The pass runs before fold-constants, which
would otherwise turn a dequantized constant weight back into floats; it folds the transpose
of a constant weight instead, so the (N, K) int8 copy is made at compile time.
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

from compiler.dialects import aicc
from compiler.dialects.aicc_quant import DequantizeOp, MatmulIntegerOp

from compiler.lowering.quantize_conv import QUANTIZED_ATTR, Int8MaxPool, IntegerConv, SinkNHWCTranspose


def _per_tensor(d: DequantizeOp) -> bool:
    return d.axis.value.data == -1


class IntegerMatmul(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: aicc.MatmulOp, rewriter: PatternRewriter) -> None:
        da, dw = op.lhs.owner, op.rhs.owner
        trans = op.trans_rhs
        if isinstance(dw, aicc.TransposeOp) and list(dw.permutation.get_values()) == [1, 0]:
            dw, trans = dw.input.owner, not trans  # an ONNX Gemm's transB: the weight read as (N, K)
        if not (isinstance(da, DequantizeOp) and isinstance(dw, DequantizeOp)) or op.trans_lhs:
            return
        if aicc.element_type_of(op.result) != f32 or not _per_tensor(da):
            return
        w_shape = aicc.shape_of(dw.input)
        if len(w_shape) != 2:
            return
        n_axis = 0 if trans else 1
        w_scale, w_zp, w_axis = dw.params()
        if w_axis not in (-1, n_axis) or np.any(w_zp != 0):
            return
        a_scale, a_zp, _ = da.params()
        n = w_shape[n_axis]
        scale = (float(a_scale.reshape(-1)[0]) * np.broadcast_to(w_scale.reshape(-1), (n,))).astype(np.float32)
        qw = dw.input
        if not trans:
            t = aicc.TransposeOp(qw, [1, 0])
            rewriter.insert(t)
            qw = t.result
        mm = MatmulIntegerOp(da.input, qw, int(a_zp.reshape(-1)[0]), transpose_rhs=True)
        mm.attributes[QUANTIZED_ATTR] = aicc.StringAttr("matmul")
        f = aicc.CastOp(mm.result, f32)
        c = aicc.ConstantOp.from_array(scale)
        y = aicc.MulOp(f.result, c.result)
        new = [mm, f, c, y]
        if op.bias is not None:
            new.append(aicc.AddOp(y.result, op.bias))
        rewriter.insert(new[:-1])
        rewriter.replace(op, new[-1])


@dataclass(frozen=True)
class QuantizeMatmul(ModulePass):
    """Rewrite matmuls and convolutions of dequantized int8 operands into integer ones (a conv
    followed by a quantize requantizes as ONNX Runtime does), then move the int8 convs' NHWC
    results' transposes back to NCHW past the layout-free ops after them, and run QDQ max pools
    on the int8 values (quantize_conv.py)."""

    name = "quantize-matmul"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([IntegerMatmul(), IntegerConv()])).rewrite_module(op)
        PatternRewriteWalker(GreedyRewritePatternApplier([SinkNHWCTranspose(), Int8MaxPool()])).rewrite_module(op)
