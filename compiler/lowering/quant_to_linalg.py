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

dynamic_quant_params is one pass over x: a linalg.generic with two 0-d outputs, its minimum and
maximum (LLVM vectorizes the loop: both are reassociable), then the scalar formula as aicc ops on 0-d tensors. dynamic_matmul_integer is matmul_integer's generic with
the quantization of the float lhs in its body, clamp(rne(x / scale) + zp) - zp, and the
params read through constant maps; marked `aicc.qgemm` too, with `aicc.qgemm_dynamic`, a CPU
with AVX2 runs it as the int8 GEMM kernel quantizing each row once as it packs it (lower-qgemm).
fuse-elementwise leaves marked generics' operands alone.
"""

from __future__ import annotations

import numpy as np
from xdsl.builder import Builder
from xdsl.dialects import arith
from xdsl.dialects import math as xmath
from xdsl.dialects.builtin import IntegerAttr, TensorType, UnitAttr, f32, i64
from xdsl.ir import SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineMap
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern, op_type_rewrite_pattern

from compiler.dialects import aicc, aicc_nn
from compiler.dialects.aicc_quant import (
    I32,
    QMAX,
    QMIN,
    DequantizeOp,
    DynamicMatmulIntegerOp,
    DynamicQuantParamsOp,
    MatmulIntegerOp,
    QuantizeOp,
)
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
QGEMM_DYNAMIC_ATTR = "aicc.qgemm_dynamic"  # ... of a float lhs quantized with run-time params


class LowerDynamicQuantParams(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: DynamicQuantParamsOp, rewriter: PatternRewriter) -> None:
        scalar = TensorType(f32, [])
        rank = len(aicc.shape_of(op.input))
        lo_init = filled_tensor(rewriter, op, scalar, float("inf"))
        hi_init = filled_tensor(rewriter, op, scalar, float("-inf"))
        none = AffineMap(rank, 0, ())
        minmax = build_generic(
            [op.input], [lo_init, hi_init], [AffineMap.identity(rank), none, none], [REDUCTION] * rank,
            lambda b, a: [insert_result(b, arith.MinimumfOp(a[1], a[0])),
                          insert_result(b, arith.MaximumfOp(a[2], a[0]))],
            [scalar, scalar])
        rewriter.insert(minmax)
        emit = LowerQuantize._emit

        def c(v: float) -> SSAValue:
            return _const(rewriter, np.float32(v), np.float32)

        zero = c(0.0)
        lo = emit(rewriter, aicc.MinimumOp(minmax.res[0], zero))
        hi = emit(rewriter, aicc.MaximumOp(minmax.res[1], zero))
        same = emit(rewriter, aicc.CompareOp("eq", hi, lo))
        scale = emit(rewriter, aicc.SelectOp(same, c(1.0), emit(rewriter, aicc.DivOp(
            emit(rewriter, aicc.SubOp(hi, lo)), c(255.0)))))
        zp = emit(rewriter, aicc.SubOp(zero, emit(rewriter, aicc.DivOp(lo, scale))))
        zp = emit(rewriter, aicc.MinimumOp(emit(rewriter, aicc.MaximumOp(zp, zero)), c(255.0)))
        zp = emit(rewriter, aicc.SubOp(emit(rewriter, aicc.RoundOp(zp)), c(128.0)))
        parts = [emit(rewriter, aicc.ReshapeOp(v, (1,))) for v in (scale, zp)]
        rewriter.replace(op, aicc_nn.ConcatOp(parts, 0))


class LowerDynamicMatmulInteger(RewritePattern):
    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: DynamicMatmulIntegerOp, rewriter: PatternRewriter) -> None:
        out_t = op.result.type
        assert isinstance(out_t, TensorType)
        rank = len(out_t.get_shape())  # loops: the result's dims, then k
        k = AffineDimExpr(rank)
        d = [AffineDimExpr(i) for i in range(rank)]
        maps = [AffineMap(rank + 1, 0, (*d[:-1], k)), AffineMap(rank + 1, 0, (d[-1], k)),
                AffineMap(rank + 1, 0, (AffineConstantExpr(0),)), AffineMap(rank + 1, 0, (AffineConstantExpr(1),)),
                AffineMap(rank + 1, 0, tuple(d))]
        acc = filled_tensor(rewriter, op, out_t, 0)

        def body(b: Builder, args):
            x, w, scale, zp, c = args
            q = insert_result(b, xmath.RoundEvenOp(insert_result(b, arith.DivfOp(x, scale))))
            q = insert_result(b, arith.AddfOp(q, zp))
            q = insert_result(b, arith.MaximumfOp(q, scalar_constant(b, QMIN, f32)))
            q = insert_result(b, arith.MinimumfOp(q, scalar_constant(b, QMAX, f32)))
            a = insert_result(b, arith.FPToSIOp(insert_result(b, arith.SubfOp(q, zp)), I32))
            w32 = insert_result(b, arith.ExtSIOp(w, I32))
            return [insert_result(b, arith.AddiOp(c, insert_result(b, arith.MuliOp(a, w32))))]

        generic = build_generic([op.lhs, op.rhs, op.params, op.params], [acc], maps,
                                [PARALLEL] * rank + [REDUCTION], body, [out_t])
        generic.attributes[QGEMM_ATTR] = IntegerAttr(0, i64)
        generic.attributes[QGEMM_DYNAMIC_ATTR] = UnitAttr()
        rewriter.replace(op, generic)


QUANT_PATTERNS = [LowerQuantize(), LowerDequantize(), LowerMatmulInteger(), LowerDynamicQuantParams(),
                  LowerDynamicMatmulInteger()]
