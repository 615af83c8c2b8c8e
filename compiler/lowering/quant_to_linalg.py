"""The quantization ops in tensor-to-linalg (patterns added to TensorToLinalg).

quantize and dequantize are rewritten into aicc elementwise ops, which the same walk lowers
and fuse-elementwise fuses with their neighbours (a requantization becomes part of the loop
that reads the integer matmul's accumulators):

    quantize(x)   = cast<i8>(min(max(round_half_even(x / scale) + zp, -128), 127))
    dequantize(q) = (cast<f32>(q) - zp) * scale

(the division, not a multiplication by 1 / scale, rounds exactly as ONNX Runtime does).
matmul_integer becomes one linalg.generic accumulating sext(lhs) - zp times sext(rhs) in i32,
its reduction loop innermost when the rhs is read as (N, K), so both operands are contiguous
along K and LLVM vectorizes the dot product.
"""

from __future__ import annotations

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, TensorType, f32, i64
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineDimExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from compiler.dialects import aicc
from compiler.dialects.aicc_quant import I32, QMAX, QMIN, DequantizeOp, MatmulIntegerOp, QuantizeOp
from compiler.lowering.utils import PARALLEL, REDUCTION, build_generic, filled_tensor, insert_result, scalar_constant


def _const(rewriter: PatternRewriter, values: np.ndarray, dtype) -> SSAValue:
    op = aicc.ConstantOp.from_array(np.ascontiguousarray(values, dtype=dtype))
    rewriter.insert(op)
    return op.result


def _params(rewriter: PatternRewriter, op) -> tuple[SSAValue, SSAValue]:
    scale, zp, _ = op.params()
    return _const(rewriter, scale, np.float32), _const(rewriter, zp, np.float32)


class LowerQuantize(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: QuantizeOp, rewriter: PatternRewriter) -> None:
        scale, zp = _params(rewriter, op)
        x = op.input
        if aicc.element_type_of(x) != f32:
            x = self._emit(rewriter, aicc.CastOp(x, f32))
        q = self._emit(rewriter, aicc.DivOp(x, scale))
        q = self._emit(rewriter, aicc.RoundOp(q))
        q = self._emit(rewriter, aicc.AddOp(q, zp))
        q = self._emit(rewriter, aicc.MaximumOp(q, _const(rewriter, np.float32(QMIN), np.float32)))
        q = self._emit(rewriter, aicc.MinimumOp(q, _const(rewriter, np.float32(QMAX), np.float32)))
        rewriter.replace(op, aicc.CastOp(q, aicc.element_type_of(op.result)))

    @staticmethod
    def _emit(rewriter: PatternRewriter, op) -> SSAValue:
        rewriter.insert(op)
        return op.results[0]


class LowerDequantize(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: DequantizeOp, rewriter: PatternRewriter) -> None:
        scale, zp = _params(rewriter, op)
        elem = aicc.element_type_of(op.result)
        x = aicc.CastOp(op.input, f32)
        shifted = aicc.SubOp(x.result, zp)
        scaled = aicc.MulOp(shifted.result, scale)
        rewriter.insert([x, shifted, scaled])
        if elem != f32:
            rewriter.replace(op, aicc.CastOp(scaled.result, elem))
        else:
            rewriter.replace_op(op, [], [scaled.result])


class LowerMatmulInteger(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: MatmulIntegerOp, rewriter: PatternRewriter) -> None:
        out_t = op.result.type
        assert isinstance(out_t, TensorType)
        shape = tuple(out_t.get_shape())
        rank = len(shape)  # loops: the result's dims, then k
        k = AffineDimExpr(rank)
        d = [AffineDimExpr(i) for i in range(rank)]
        lhs_map = AffineMap(rank + 1, 0, (*d[:-1], k))
        rhs_map = AffineMap(rank + 1, 0, (d[-1], k) if op.trans_rhs else (k, d[-1]))
        out_map = AffineMap(rank + 1, 0, tuple(d))
        zp = op.lhs_zero_point.value.data
        acc = filled_tensor(rewriter, op, out_t, 0)

        def body(b: Builder, args):
            a = insert_result(b, arith.ExtSIOp(args[0], I32))
            if zp:
                a = insert_result(b, arith.SubiOp(a, scalar_constant(b, zp, I32)))
            w = insert_result(b, arith.ExtSIOp(args[1], I32))
            return [insert_result(b, arith.AddiOp(args[2], insert_result(b, arith.MuliOp(a, w))))]

        generic = build_generic([op.lhs, op.rhs], [acc], [lhs_map, rhs_map, out_map],
                                [PARALLEL] * rank + [REDUCTION], body, [out_t])
        if op.trans_rhs:  # a target may run it as an int8 GEMM kernel (cpu: lower-qgemm)
            generic.attributes[QGEMM_ATTR] = IntegerAttr(zp, i64)
        rewriter.replace(op, generic)


QGEMM_ATTR = "aicc.qgemm"  # the lhs zero point: the generic is an (M, K) x (N, K)^T int8 GEMM

QUANT_PATTERNS = [LowerQuantize(), LowerDequantize(), LowerMatmulInteger()]
