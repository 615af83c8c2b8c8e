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
layer's input) after a constant bias and a relu (`aicc.relu` or maximum(x, 0.0)) fuses with
that epilogue (`RequantizeInTheGemm`: the bias in int32 units of sa * s_n, the rescale
sa * s_n / s, relu, a quantize of scale 1), the form whose int8 result lower-qgemm's kernel
stores; any other quantize stays an elementwise op, which fuse-elementwise folds into the
loop that reads the accumulators. The pass runs before fold-constants, which
would otherwise turn a dequantized constant weight back into floats; it folds the transpose
of a constant weight instead, so the (N, K) int8 copy is made at compile time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, f32
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from compiler.dialects import aicc
from compiler.dialects.aicc_quant import DequantizeOp, MatmulIntegerOp, QuantizeOp

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


def _max_with_zero(op: aicc.MaximumOp) -> SSAValue | None:
    """x of maximum(x, 0) or maximum(0, x), the zero a constant that does not broadcast x
    (np.maximum(h, 0.0), as a NumPy model writes a relu); else None."""
    for x, c in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
        if isinstance(c.owner, aicc.ConstantOp) and aicc.shape_of(x) == aicc.shape_of(op.result) \
                and not np.any(aicc.numpy_from_dense(c.owner.value)):
            return x
    return None


class RequantizeInTheGemm(RewritePattern):
    """An int8 conv's (or matmul's) float epilogue and the quantize of the next layer's input
    after it,

        quantize{s, zp}([relu]([add %bias]([reshape](mul(cast(%acc), m)))))   %acc: its matmul_integer

    (bias a constant per output channel; relu also as maximum(x, 0.0), a NumPy model's),
    becomes ONNX Runtime's requantization, the form that lower-qgemm's kernel stores directly
    (C in int8; neither the int32 nor the float32 result is written):

        [reshape](quantize{1, zp}([relu](mul(cast(%acc [+ rne(bias / m)]), m / s))))

    relu(v) / s = relu(v / s) for s > 0; the bias becomes int32 in units of m = x_scale *
    w_scale[o] (as ONNX Runtime's quantizer writes it: off by at most half of such a unit), and
    m / s is rounded once in float32."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: QuantizeOp, rewriter: PatternRewriter) -> None:
        params = op.per_tensor()
        if params is None or params[0] == 1.0:  # none, or already the requantization
            return
        chain: list[Operation] = []

        def step(kind, v):
            o = v.owner
            if isinstance(o, kind) and o.results[0].has_one_use():
                chain.append(o)
                return o
            return None

        v = op.input
        relu = step(aicc.ReluOp, v) or step(aicc.MaximumOp, v)
        if isinstance(relu, aicc.MaximumOp):  # np.maximum(x, 0.0): a relu when 0 is a constant
            v = _max_with_zero(relu)
            if v is None:
                return
        else:
            v = relu.input if relu else v
        add = step(aicc.AddOp, v)
        bias = None
        if add is not None:
            const = add.rhs.owner
            if not isinstance(const, aicc.ConstantOp):
                return
            bias = aicc.numpy_from_dense(const.value)
            v = add.lhs
        reshape = step(aicc.ReshapeOp, v)
        v = reshape.operands[0] if reshape else v
        mul = step(aicc.MulOp, v)
        cast = step(aicc.CastOp, mul.lhs) if mul else None
        acc = cast.operands[0].owner if cast else None
        if not (isinstance(acc, MatmulIntegerOp) and QUANTIZED_ATTR in acc.attributes
                and isinstance(mul.rhs.owner, aicc.ConstantOp)):
            return
        m = aicc.numpy_from_dense(mul.rhs.owner.value)
        o = aicc.shape_of(acc.result)[-1]
        if m.dtype != np.float32 or m.shape != (o,) or np.any(m <= 0):
            return
        new: list[Operation] = []
        acc_v = acc.result
        if bias is not None:
            if bias.size != o or bias.shape[-1] != o or bias.dtype != np.float32:
                return
            bias_i32 = np.rint(bias.reshape(o).astype(np.float64) / m)
            if np.any(np.abs(bias_i32) >= 2 ** 31):
                return
            bi = aicc.ConstantOp.from_array(bias_i32.astype(np.int32))
            new += [bi, aicc.AddOp(acc_v, bi.result)]
            acc_v = new[-1].result
        new.append(aicc.CastOp(acc_v, f32))
        ms = aicc.ConstantOp.from_array((m / np.float32(params[0])).astype(np.float32))
        new += [ms, aicc.MulOp(new[-1].result, ms.result)]
        if relu is not None:
            new.append(aicc.ReluOp(new[-1].result))
        new.append(QuantizeOp(new[-1].result, [1.0], [params[1]]))
        if reshape is not None:
            new.append(aicc.ReshapeOp(new[-1].result, aicc.shape_of(op.result)))
        rewriter.replace(op, new)
        for dead in chain:  # the float epilogue, outermost first
            rewriter.erase(dead)


@dataclass(frozen=True)
class QuantizeMatmul(ModulePass):
    """Rewrite matmuls and convolutions of dequantized int8 operands into integer ones (a conv
    followed by a quantize requantizes as ONNX Runtime does), then move the int8 convs' NHWC
    results' transposes back to NCHW past the layout-free ops after them, and run QDQ max pools
    on the int8 values (quantize_conv.py)."""

    name = "quantize-matmul"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(GreedyRewritePatternApplier([IntegerMatmul(), IntegerConv()])).rewrite_module(op)
        PatternRewriteWalker(RequantizeInTheGemm()).rewrite_module(op)
        PatternRewriteWalker(GreedyRewritePatternApplier([SinkNHWCTranspose(), Int8MaxPool()])).rewrite_module(op)
